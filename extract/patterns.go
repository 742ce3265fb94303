package extract

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
)

// DefaultMaxValueLength is the longest value, in characters (runes), that a
// Patterns extractor keeps unless WithMaxValueLength sets another; longer
// values are cut at a word boundary.
const DefaultMaxValueLength = 80

// DefaultMaxScanBytes is how much of each message's text, in bytes, a
// Patterns extractor reads unless WithMaxScanBytes sets another: 16 KiB,
// some 4,000 tokens of English, far more than a conversational message
// and enough for the facts a long message states at its start. The rest
// of a longer message (a pasted document, a log) is not scanned: its facts
// are not found, and it costs nothing. The scanned part ends at the last
// sentence end or line break before the limit (else at the last space), so
// a fact is not cut in half. At this limit the built-in rules take at most
// some tens of milliseconds per message.
const DefaultMaxScanBytes = 16 << 10

// Rule is one pattern rule of a Patterns extractor.
//
// A rule matches when Pattern matches a message's text (every
// non-overlapping match counts). The text of the group named "value" is
// then cleaned: cut at the first clause break (", but", " because", " and
// I ..." and the like), trimmed of white space, quotes and trailing
// punctuation, and cut to the extractor's maximum value length at a word
// boundary. Filter, when set, post-processes the cleaned value or rejects
// the match. A match inside a question (the sentence it is in ends with
// '?') is ignored: "Do I like jazz?" states nothing.
//
// Attribute and Value are templates expanded with os.Expand syntax: $name
// or ${name} is the text of the pattern's group called name — for "value",
// the cleaned value; for other groups, the group's text trimmed. The
// expanded Attribute and the Subject are normalized (see Normalize), so
// "preference:${value}" gives one key per topic.
type Rule struct {
	// Name identifies the rule (Candidate.Rule); it must be unique within
	// an extractor. The built-in rules are named "category/variant".
	Name string
	// Pattern finds the fact; it must have a group named "value". Use
	// (?i) for case-insensitive matching: none is added.
	Pattern *regexp.Regexp
	// Subject is whom the fact is about (default SubjectUser).
	Subject string
	// Attribute is the attribute template; it must not be empty.
	Attribute string
	// Value is the value template (default "${value}").
	Value string
	// Roles are the message types the rule reads (default: human
	// messages only, so that "I'm ..." in an AI answer is never taken for
	// a fact about the user).
	Roles []llms.ChatMessageType
	// Filter, when set, is given the cleaned value and returns the value
	// to keep and whether to keep the match at all. The built-in rules use
	// it for precision: "I'm Tired" is not a name.
	Filter func(value string) (string, bool)
}

// PatternOption configures a Patterns extractor.
type PatternOption func(*patternConfig) error

type patternConfig struct {
	rules     []Rule
	noDefault bool
	maxLen    int
	maxScan   int
}

// WithRules adds rules, after the built-in ones (unless WithoutDefaultRules).
// A rule with no name, a duplicate name, no pattern, a pattern without a
// "value" group or an empty attribute makes NewPatterns fail with an error
// naming the rule.
func WithRules(rules ...Rule) PatternOption {
	return func(c *patternConfig) error {
		c.rules = append(c.rules, rules...)
		return nil
	}
}

// WithoutDefaultRules leaves the built-in rules out: only WithRules's rules
// are used.
func WithoutDefaultRules() PatternOption {
	return func(c *patternConfig) error {
		c.noDefault = true
		return nil
	}
}

// WithMaxValueLength sets the longest value kept, in runes (default
// DefaultMaxValueLength); longer values are cut at a word boundary. n < 8
// is an error.
func WithMaxValueLength(n int) PatternOption {
	return func(c *patternConfig) error {
		if n < 8 {
			return fmt.Errorf("%w: WithMaxValueLength(%d): the length must be at least 8", ErrInvalidOption, n)
		}
		c.maxLen = n
		return nil
	}
}

// WithMaxScanBytes sets how much of each message's text, in bytes, the
// rules read (default DefaultMaxScanBytes); the rest of a longer message is
// not scanned. The cost of an extraction grows with this limit — about a
// millisecond per KiB of scanned text with the built-in rules, several
// times that under the race detector — and so does the time a deadline
// may take to end it (one rule's scan of one message). n < 1 is an error.
func WithMaxScanBytes(n int) PatternOption {
	return func(c *patternConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: WithMaxScanBytes(%d): the limit must be at least 1 byte", ErrInvalidOption, n)
		}
		c.maxScan = n
		return nil
	}
}

// Patterns is an Extractor made of regular-expression rules. It needs no
// model and is deterministic: the same messages always give the same
// candidates, in the order they appear (by message, then by position in
// the message). Identical candidates (same key and value) found by several
// rules or in several messages are merged, their sources joined. Build it
// with NewPatterns; it is safe for concurrent use.
//
// Its work is bounded: each message is read up to WithMaxScanBytes
// (DefaultMaxScanBytes), the cost is linear in what is read, and ctx is
// checked before every rule on every message, so a deadline ends an
// extraction within one rule's scan of one message (a few milliseconds at
// the default limit).
type Patterns struct {
	rules   []compiledRule
	maxLen  int
	maxScan int
}

type compiledRule struct {
	Rule
	valueIdx int
	roles    map[llms.ChatMessageType]bool
}

var _ Extractor = (*Patterns)(nil)

// NewPatterns returns a Patterns extractor with the built-in rules
// (DefaultRules) followed by any WithRules rules. It returns an error
// wrapping ErrInvalidOption that names the option or the rule for a bad
// one.
func NewPatterns(opts ...PatternOption) (*Patterns, error) {
	c := patternConfig{maxLen: DefaultMaxValueLength, maxScan: DefaultMaxScanBytes}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: NewPatterns: option %d of %d is nil", ErrInvalidOption, i+1, len(opts))
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	var rules []Rule
	if !c.noDefault {
		rules = DefaultRules()
	}
	builtIn := len(rules)
	rules = append(rules, c.rules...)
	p := &Patterns{maxLen: c.maxLen, maxScan: c.maxScan, rules: make([]compiledRule, 0, len(rules))}
	seen := make(map[string]bool, len(rules))
	for i, r := range rules {
		if strings.TrimSpace(r.Name) == "" {
			return nil, fmt.Errorf("%w: WithRules: rule %d has no name", ErrInvalidOption, i-builtIn+1)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("%w: WithRules: rule %q: the name is used twice", ErrInvalidOption, r.Name)
		}
		seen[r.Name] = true
		if r.Pattern == nil {
			return nil, fmt.Errorf("%w: WithRules: rule %q has no pattern", ErrInvalidOption, r.Name)
		}
		vi := r.Pattern.SubexpIndex("value")
		if vi < 0 {
			return nil, fmt.Errorf("%w: WithRules: rule %q: the pattern has no group named \"value\"", ErrInvalidOption, r.Name)
		}
		if strings.TrimSpace(r.Attribute) == "" {
			return nil, fmt.Errorf("%w: WithRules: rule %q has no attribute", ErrInvalidOption, r.Name)
		}
		if r.Subject == "" {
			r.Subject = SubjectUser
		}
		if s, _ := Normalize(r.Subject, ""); s == "" {
			return nil, fmt.Errorf("%w: WithRules: rule %q: the subject is blank", ErrInvalidOption, r.Name)
		}
		if r.Value == "" {
			r.Value = "${value}"
		}
		roles := r.Roles
		if len(roles) == 0 {
			roles = []llms.ChatMessageType{llms.ChatMessageTypeHuman}
		}
		cr := compiledRule{Rule: r, valueIdx: vi, roles: make(map[llms.ChatMessageType]bool, len(roles))}
		cr.Roles = slices.Clone(roles)
		for _, role := range roles {
			cr.roles[role] = true
		}
		p.rules = append(p.rules, cr)
	}
	return p, nil
}

// Rules returns a copy of the extractor's rules, built-in ones first.
func (p *Patterns) Rules() []Rule {
	out := make([]Rule, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.Rule
		out[i].Roles = slices.Clone(r.Roles)
	}
	return out
}

// String describes the extractor.
func (p *Patterns) String() string {
	return fmt.Sprintf("extract.Patterns(rules=%d, max_value_length=%d, max_scan_bytes=%d)", len(p.rules), p.maxLen, p.maxScan)
}

// hit is one accepted match, for ordering.
type hit struct {
	msg, pos, rule int
	c              Candidate
}

// Extract implements Extractor. It reads each message up to the scan
// limit (WithMaxScanBytes). It returns an error wrapping ctx's error
// (context.DeadlineExceeded, context.Canceled) and no candidates if ctx is
// done before it starts or ends while it works — it checks ctx before
// every rule on every message — and never any other error: messages no
// rule matches (blank ones, questions, languages the rules do not cover)
// give no candidates.
func (p *Patterns) Extract(ctx context.Context, msgs []llms.ChatMessage) ([]Candidate, error) {
	var hits []hit
	for mi, m := range msgs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("extract: %w", err)
		}
		if m == nil {
			continue
		}
		text := scanned(m.GetContent(), p.maxScan)
		if strings.TrimSpace(text) == "" {
			continue
		}
		role := m.GetType()
		q := questions{text: text, at: -1}
		for ri := range p.rules {
			r := &p.rules[ri]
			if !r.roles[role] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("extract: %w", err)
			}
			for _, loc := range r.Pattern.FindAllStringSubmatchIndex(text, -1) {
				c, ok := p.apply(r, text, &q, loc)
				if !ok {
					continue
				}
				c.Sources = []int{mi}
				hits = append(hits, hit{msg: mi, pos: loc[0], rule: ri, c: c})
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("extract: %w", err)
	}
	sort.SliceStable(hits, func(i, j int) bool {
		a, b := hits[i], hits[j]
		if a.msg != b.msg {
			return a.msg < b.msg
		}
		if a.pos != b.pos {
			return a.pos < b.pos
		}
		return a.rule < b.rule
	})
	out := make([]Candidate, 0, len(hits))
	index := make(map[string]int, len(hits))
	for _, h := range hits {
		k := h.c.Key() + "\x00" + strings.ToLower(h.c.Value)
		if i, ok := index[k]; ok {
			if !slices.Contains(out[i].Sources, h.msg) {
				out[i].Sources = append(out[i].Sources, h.msg)
			}
			continue
		}
		index[k] = len(out)
		out = append(out, h.c)
	}
	return out, nil
}

// apply turns one match into a candidate, or reports that it is rejected.
func (p *Patterns) apply(r *compiledRule, text string, q *questions, loc []int) (Candidate, bool) {
	vs, ve := loc[2*r.valueIdx], loc[2*r.valueIdx+1]
	if vs < 0 {
		return Candidate{}, false
	}
	if q.in(ve) {
		return Candidate{}, false
	}
	value := cleanValue(text[vs:ve], p.maxLen)
	if value == "" {
		return Candidate{}, false
	}
	if r.Filter != nil {
		var ok bool
		if value, ok = r.Filter(value); !ok {
			return Candidate{}, false
		}
		value = cleanValue(value, p.maxLen)
		if value == "" {
			return Candidate{}, false
		}
	}
	names := r.Pattern.SubexpNames()
	group := func(name string) string {
		if name == "value" {
			return value
		}
		for i, n := range names {
			if n == name && loc[2*i] >= 0 {
				return strings.TrimSpace(text[loc[2*i]:loc[2*i+1]])
			}
		}
		return ""
	}
	attr := os.Expand(r.Attribute, group)
	val := truncate(collapse(os.Expand(r.Value, group)), p.maxLen)
	subject, attr := Normalize(r.Subject, attr)
	if attr == "" || val == "" {
		return Candidate{}, false
	}
	return Candidate{Subject: subject, Attribute: attr, Value: val, Rule: r.Name}, true
}

// questions tells whether a match is in a question, for the matches of
// one message, in time linear in the message's length per rule: it
// remembers the span it last scanned, so that the matches of a rule (whose
// ends grow) never scan the same text twice.
type questions struct {
	text string
	// text[from:at] holds no sentence end; at is the index of the first
	// one at or after from, or len(text) when there is none. at < 0:
	// nothing scanned yet.
	from, at int
}

// in reports whether the sentence that goes on at offset end of the text
// ends with a question mark.
func (q *questions) in(end int) bool {
	if q.at < 0 || end < q.from || end > q.at {
		q.from, q.at = end, len(q.text)
		if i := strings.IndexAny(q.text[end:], ".!?\n"); i >= 0 {
			q.at = end + i
		}
	}
	return q.at < len(q.text) && q.text[q.at] == '?'
}

// scanned returns the part of text the rules read: all of it up to max
// bytes; else its head, cut after the last sentence end or line break in
// the head's second half, else at the last white space there, else at a
// character boundary.
func scanned(text string, max int) string {
	if len(text) <= max {
		return text
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	head := text[:cut]
	if i := strings.LastIndexAny(head, ".!?\n"); i >= 0 && i >= len(head)/2 {
		return head[:i+1]
	}
	if i := strings.LastIndexFunc(head, unicode.IsSpace); i >= 0 && i >= len(head)/2 {
		return head[:i]
	}
	return head
}

// clauseBreak finds where a value stops being the value: a subordinate
// clause, or a coordinate clause with a new subject.
var clauseBreak = regexp.MustCompile(`(?i)(?:\s+(?:but|because|since|though|although|while|whereas|unless|so\s+that|which|btw|anyway)\b|\s+[-–—]\s+|\s+(?:and|or|so|when|if|where|then|as)\s+(?:i|i'm|i’m|i've|i’ve|i'd|i’d|i'll|i’ll|we|we're|we’re|we've|we’ve|my|our|you|your|it|it's|it’s|he|she|they|that|this|there)\b)`)

// cleanValue cuts raw at the first clause break, trims it and bounds its
// length.
func cleanValue(raw string, maxLen int) string {
	if loc := clauseBreak.FindStringIndex(raw); loc != nil {
		raw = raw[:loc[0]]
	}
	v := collapse(raw)
	v = strings.TrimLeftFunc(v, isQuoteOrSpace)
	v = strings.TrimRightFunc(v, isTrailing)
	for {
		sp := strings.LastIndexByte(v, ' ')
		if sp < 0 || !fillers[strings.ToLower(v[sp+1:])] {
			break
		}
		v = strings.TrimRightFunc(v[:sp], isTrailing)
	}
	return truncate(v, maxLen)
}

// fillers are words that end a sentence without belonging to the value:
// "we decided on Postgres then".
var fillers = map[string]bool{
	"then": true, "too": true, "instead": true, "anyway": true, "please": true,
	"thanks": true, "now": true, "though": true, "lol": true, "haha": true, "again": true,
}

func isQuoteOrSpace(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune("\"'“”‘’«»([{", r)
}

func isTrailing(r rune) bool {
	return unicode.IsSpace(r) || strings.ContainsRune(".,;:!?\"'“”‘’«»)]}…-–—", r)
}

// truncate cuts v to at most n runes, at the last word boundary when there
// is one in the second half.
func truncate(v string, n int) string {
	if utf8.RuneCountInString(v) <= n {
		return v
	}
	cut := 0
	for i := range v {
		if n == 0 {
			cut = i
			break
		}
		n--
	}
	v = v[:cut]
	if sp := strings.LastIndexByte(v, ' '); sp > len(v)/2 {
		v = v[:sp]
	}
	return strings.TrimRightFunc(v, isTrailing)
}
