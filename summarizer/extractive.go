package summarizer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/tokens"
	"github.com/tmc/langchaingo/llms"
)

// DefaultBudget is the token budget of an Extractive summary unless
// WithBudget sets another.
const DefaultBudget = 200

// Extractive is a Summarizer that needs no model: it keeps the most
// informative sentences of the previous summary and the new messages within
// a token budget. Build it with NewExtractive.
//
// The method, deterministic for a given input:
//
//  1. Split the previous summary and the content of every message into
//     sentences (at '.', '!' or '?' followed by a space, and at line
//     breaks). An AI message's tool calls become sentences of their own
//     ("called weather({"city":"Paris"})"). Each sentence remembers its
//     speaker ("Human", "AI", "tool", ...; sentences of the previous summary
//     keep the speaker they were written under, if any).
//  2. Score each sentence by its informative words: numbers (+2 each), month and weekday names (+2), decision
//     words such as decided, agreed, settled, booked, deadline (+3),
//     capitalised words that are not the first word, i.e. names (+1.5), and
//     words that recur across the conversation (+0.5·log2(1+other
//     sentences that use them)); the sum is divided by the square root of
//     the sentence's length in words (at least 5). Sentences scoring 0 or
//     less than 30% of the best sentence's score — greetings, thanks, small
//     talk — are left out, unless no sentence scores above 0.
//  3. Take sentences best first (ties: the more recent first) while the
//     rendered summary stays within the budget, counted with the token
//     counter (offline cl100k_base by default).
//  4. Render the kept sentences in their original order, on one line,
//     writing "Speaker: " where the speaker changes.
//
// If not even the best sentence fits, its first words are kept, ending in
// "…". An Extractive summary may be as long as its budget even when that is
// not shorter than its input; it never exceeds the budget. Extractive is safe
// for concurrent use.
type Extractive struct {
	budget  int
	counter tokens.Counter
	err     error
}

var _ Summarizer = (*Extractive)(nil)

// ExtractiveOption configures an Extractive summarizer.
type ExtractiveOption func(*Extractive) error

// NewExtractive returns an extractive summarizer. A bad option makes
// Validate and every Summarize call return an error naming it.
func NewExtractive(opts ...ExtractiveOption) *Extractive {
	e := &Extractive{budget: DefaultBudget}
	var errs []error
	for i, o := range opts {
		if o == nil {
			errs = append(errs, fmt.Errorf("%w: extractive option %d of %d is nil", ErrInvalidOption, i+1, len(opts)))
			continue
		}
		if err := o(e); err != nil {
			errs = append(errs, err)
		}
	}
	if e.counter == nil {
		c, err := tokens.CL100K()
		if err != nil {
			errs = append(errs, err)
		}
		e.counter = c
	}
	e.err = errors.Join(errs...)
	return e
}

// WithBudget sets the maximum length of an extractive summary in tokens
// (default DefaultBudget). n < 1 is an error.
func WithBudget(n int) ExtractiveOption {
	return func(e *Extractive) error {
		if n < 1 {
			return fmt.Errorf("%w: WithBudget(%d): the budget must be at least 1", ErrInvalidOption, n)
		}
		e.budget = n
		return nil
	}
}

// WithExtractiveTokenCounter sets how the budget is counted (default:
// offline cl100k_base, tokens.CL100K). A nil counter is an error.
func WithExtractiveTokenCounter(counter tokens.Counter) ExtractiveOption {
	return func(e *Extractive) error {
		if counter == nil {
			return fmt.Errorf("%w: WithExtractiveTokenCounter(nil): the counter must not be nil", ErrInvalidOption)
		}
		e.counter = counter
		return nil
	}
}

// Validate returns the configuration error of the summarizer, or nil.
func (e *Extractive) Validate() error {
	if e == nil {
		return fmt.Errorf("%w: the *summarizer.Extractive is nil", ErrInvalidOption)
	}
	return e.err
}

// String describes the summarizer's configuration.
func (e *Extractive) String() string {
	if e == nil {
		return "summarizer.Extractive(nil)"
	}
	return fmt.Sprintf("summarizer.Extractive(budget=%d)", e.budget)
}

// sentence is one unit an extractive summary is built from.
type sentence struct {
	speaker string
	text    string
	pos     int
	prev    bool // from the previous summary
	score   float64
}

// Summarize implements Summarizer. With no messages it returns previous
// unchanged. It returns an error wrapping ErrEmptySummary when there is no
// text at all to summarize.
func (e *Extractive) Summarize(ctx context.Context, previous string, messages []llms.ChatMessage) (string, error) {
	if err := e.Validate(); err != nil {
		return "", err
	}
	if err := checkCtx(ctx); err != nil {
		return "", err
	}
	if len(messages) == 0 {
		return previous, nil
	}
	units, err := e.units(previous, messages)
	if err != nil {
		return "", err
	}
	if len(units) == 0 {
		return "", fmt.Errorf("%w: the previous summary and the %d messages have no text", ErrEmptySummary, len(messages))
	}
	scoreAll(units)
	out := e.choose(ctx, units)
	if err := checkCtx(ctx); err != nil {
		return "", err
	}
	if out == "" {
		return "", fmt.Errorf("%w: the budget of %d tokens is too small for any sentence", ErrSummaryTooLong, e.budget)
	}
	return out, nil
}

func (e *Extractive) units(previous string, messages []llms.ChatMessage) ([]sentence, error) {
	var units []sentence
	add := func(speaker, text string, prev bool) {
		for _, s := range splitSentences(text) {
			sp := speaker
			if prev {
				if p, rest, ok := speakerPrefix(s); ok {
					speaker, sp, s = p, p, rest // later sentences inherit it
				}
			}
			if strings.TrimSpace(s) == "" {
				continue
			}
			units = append(units, sentence{speaker: sp, text: s, pos: len(units), prev: prev})
		}
	}
	add("", previous, true)
	for i, m := range messages {
		m, err := adapter.Normalize(m)
		if err != nil {
			return nil, fmt.Errorf("summarizer: message %d of %d: %w", i+1, len(messages), err)
		}
		speaker := roleOf(m)
		add(speaker, m.GetContent(), false)
		if ai, ok := m.(llms.AIChatMessage); ok {
			calls := ai.ToolCalls
			if ai.FunctionCall != nil {
				calls = append(calls, llms.ToolCall{FunctionCall: ai.FunctionCall})
			}
			for _, tc := range calls {
				if tc.FunctionCall == nil {
					continue
				}
				text := fmt.Sprintf("called %s(%s)", tc.FunctionCall.Name, strings.Join(strings.Fields(tc.FunctionCall.Arguments), " "))
				units = append(units, sentence{speaker: speaker, text: text, pos: len(units)})
			}
		}
	}
	return units, nil
}

// roleOf is the role name llms.GetBufferString writes for m with the default
// prefixes.
func roleOf(m llms.ChatMessage) string {
	switch m.GetType() {
	case llms.ChatMessageTypeHuman:
		return humanPrefix
	case llms.ChatMessageTypeAI:
		return aiPrefix
	case llms.ChatMessageTypeGeneric:
		if g, ok := m.(llms.GenericChatMessage); ok {
			return g.Role
		}
	}
	return string(m.GetType())
}

var knownSpeakers = []string{humanPrefix, aiPrefix, "system", "tool", "function"}

// speakerPrefix recognises a sentence of an earlier extractive summary that
// starts with "Speaker: ".
func speakerPrefix(s string) (speaker, rest string, ok bool) {
	for _, sp := range knownSpeakers {
		if strings.HasPrefix(s, sp+": ") {
			return sp, strings.TrimSpace(s[len(sp)+2:]), true
		}
	}
	return "", s, false
}

// splitSentences splits text at line breaks and after '.', '!' or '?' (and
// any closing quotes or brackets) followed by white space.
func splitSentences(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		start := 0
		for i := 0; i < len(line); {
			r, size := utf8.DecodeRuneInString(line[i:])
			i += size
			if r != '.' && r != '!' && r != '?' {
				continue
			}
			j := i
			for j < len(line) && strings.ContainsRune(`.!?"')]»”’`, rune(line[j])) {
				j++
			}
			if j == len(line) || line[j] == ' ' || line[j] == '\t' {
				if s := strings.TrimSpace(line[start:j]); s != "" {
					out = append(out, s)
				}
				start, i = j, j
			}
		}
		if s := strings.TrimSpace(line[start:]); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func wordsOf(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

var (
	dateWords = set("january", "february", "march", "april", "may", "june", "july", "august", "september",
		"october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept",
		"oct", "nov", "dec", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
		"today", "tomorrow", "yesterday", "tonight", "week", "weekend", "month", "year")
	decisionWords = set("decided", "decide", "decision", "agreed", "agree", "agreement", "settled", "settle",
		"chose", "chosen", "choose", "confirmed", "confirm", "approved", "approve", "booked", "book",
		"scheduled", "schedule", "deadline", "due", "budget", "plan", "planned", "will", "must", "need",
		"needs", "prefer", "prefers", "preferred", "cancelled", "canceled", "ordered", "paid", "promised",
		"deliver", "signed", "accepted", "rejected", "selected", "picked", "final")
	stopWords = set("a", "an", "the", "and", "or", "but", "if", "then", "so", "of", "to", "in", "on", "at",
		"by", "for", "with", "about", "as", "into", "from", "up", "down", "out", "over", "is", "are", "was",
		"were", "be", "been", "being", "am", "do", "does", "did", "have", "has", "had", "it", "its", "this",
		"that", "these", "those", "there", "here", "i", "me", "my", "we", "us", "our", "you", "your", "he",
		"him", "his", "she", "her", "they", "them", "their", "what", "which", "who", "whom", "when", "where",
		"why", "how", "can", "could", "would", "should", "shall", "may", "might", "not", "no", "yes", "just",
		"also", "very", "too", "all", "any", "some", "more", "most", "other", "such", "only", "own", "same",
		"than", "let", "lets", "s", "t", "m", "re", "ve", "ll", "d",
		// small talk
		"hi", "hello", "hey", "thanks", "thank", "ok", "okay", "sure", "great", "welcome", "please", "bye",
		"goodbye", "good", "nice", "cool", "sounds", "glad", "happy", "help", "anything", "else")
)

// scoreAll scores every sentence (see Extractive).
func scoreAll(units []sentence) {
	words := make([][]string, len(units))
	df := map[string]int{}
	for i, u := range units {
		words[i] = wordsOf(u.text)
		seen := map[string]bool{}
		for _, w := range words[i] {
			lw := strings.ToLower(w)
			if len(lw) >= 3 && !stopWords[lw] && !seen[lw] {
				seen[lw] = true
				df[lw]++
			}
		}
	}
	for i := range units {
		ws := words[i]
		if len(ws) == 0 {
			continue
		}
		var s float64
		seen := map[string]bool{}
		for j, w := range ws {
			lw := strings.ToLower(w)
			switch {
			case strings.IndexFunc(w, unicode.IsDigit) >= 0:
				s += 2
			case dateWords[lw] && !(lw == "may" && j == 0):
				s += 2
			case decisionWords[lw]:
				s += 3
			case j > 0 && unicode.IsUpper([]rune(w)[0]) && !stopWords[lw]:
				s += 1.5
			}
			if len(lw) >= 3 && !stopWords[lw] && !seen[lw] {
				seen[lw] = true
				s += 0.5 * math.Log2(float64(df[lw])) // 0 for a word no other sentence uses
			}
		}
		// Per square root of the length, with a floor, so that neither a
		// long sentence nor a two-word one wins by its length alone.
		units[i].score = s / math.Sqrt(float64(max(len(ws), 5)))
	}
}

// minShare is the least score, as a share of the best sentence's, that a
// sentence needs to be kept.
const minShare = 0.3

// choose keeps the best sentences within the budget and renders them.
func (e *Extractive) choose(ctx context.Context, units []sentence) string {
	best := 0.0
	for _, u := range units {
		best = max(best, u.score)
	}
	cands := make([]int, 0, len(units))
	for i, u := range units {
		if u.score > 0 && u.score >= minShare*best {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		for i := range units {
			cands = append(cands, i)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool {
		ua, ub := units[cands[a]], units[cands[b]]
		if ua.score != ub.score {
			return ua.score > ub.score
		}
		return ua.pos > ub.pos
	})
	keep := make([]bool, len(units))
	used := 0
	for n, i := range cands {
		if n%64 == 0 && ctx.Err() != nil {
			break
		}
		if used > 0 && e.budget-used < 2 {
			break
		}
		// Cheap rejection before rendering the whole summary.
		if e.counter.CountTokens(units[i].text) > e.budget-used {
			continue
		}
		keep[i] = true
		t := e.counter.CountTokens(render(units, keep))
		if t > e.budget {
			keep[i] = false
			continue
		}
		used = t
	}
	if used > 0 {
		return render(units, keep)
	}
	return e.truncated(units[cands[0]])
}

// truncated returns the longest prefix of u's words that fits the budget,
// ending in "…", or "" if not even one word fits.
func (e *Extractive) truncated(u sentence) string {
	ws := strings.Fields(u.text)
	fit := func(k int, speaker string) (string, bool) {
		s := strings.Join(ws[:k], " ") + "…"
		if speaker != "" {
			s = speaker + ": " + s
		}
		return s, e.counter.CountTokens(s) <= e.budget
	}
	for _, speaker := range []string{u.speaker, ""} {
		lo, hi, best := 1, len(ws), ""
		for lo <= hi {
			mid := (lo + hi) / 2
			if s, ok := fit(mid, speaker); ok {
				best, lo = s, mid+1
			} else {
				hi = mid - 1
			}
		}
		if best != "" {
			return best
		}
	}
	return ""
}

// render writes the kept sentences in their original order on one line,
// with "Speaker: " where the speaker changes.
func render(units []sentence, keep []bool) string {
	var b strings.Builder
	last := ""
	for i, u := range units {
		if !keep[i] {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if u.speaker != "" && u.speaker != last {
			b.WriteString(u.speaker)
			b.WriteString(": ")
		}
		last = u.speaker
		b.WriteString(u.text)
		if !strings.ContainsRune(".!?…", lastRune(strings.TrimRight(u.text, `"')]»”’`))) {
			b.WriteByte('.')
		}
	}
	return b.String()
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}
