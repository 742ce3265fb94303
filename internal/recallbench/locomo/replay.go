package locomo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime/metrics"
	"slices"
	"strings"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/tokens"
)

// Answer is what one question's load gave.
type Answer struct {
	// Conversation is the conversation's ID (the sample_id).
	Conversation string
	// Question is the question's index in Conversation.Questions.
	Question int
	// Category is the question's category.
	Category int
	// Evidence is the number of the question's evidence turns, and Found
	// how many of them the loaded variables held.
	Evidence, Found int
	// Tokens is the size of the loaded variables (see Score).
	Tokens int
	// Load is how long LoadMemoryVariables took, and Alloc how many bytes
	// the process allocated meanwhile (runtime/metrics'
	// /gc/heap/allocs:bytes: the load's own allocations, and any of
	// background work running at the same time).
	Load  time.Duration
	Alloc uint64
}

// allocated returns the bytes the process has allocated on the heap so
// far (cheap: no stop of the world).
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// Recall is the answer's evidence recall: Found / Evidence (0 with no
// evidence).
func (a Answer) Recall() float64 {
	if a.Evidence == 0 {
		return 0
	}
	return float64(a.Found) / float64(a.Evidence)
}

// Run is what one replay of a conversation measured.
type Run struct {
	// Saves are the durations of the SaveContext calls, in order.
	Saves []time.Duration
	// Answers has one entry per question with evidence, in order.
	Answers []Answer
}

// Replay saves conv's exchanges into mem (Save) and then asks its questions
// (Ask), counting tokens with counter.
func Replay(ctx context.Context, mem schema.Memory, conv *Conversation, counter tokens.Counter) (Run, error) {
	saves, err := Save(ctx, mem, conv.Exchanges())
	if err != nil {
		return Run{}, fmt.Errorf("conversation %s: %w", conv.ID, err)
	}
	answers, err := Ask(ctx, mem, conv, counter)
	if err != nil {
		return Run{}, fmt.Errorf("conversation %s: %w", conv.ID, err)
	}
	return Run{Saves: saves, Answers: answers}, nil
}

// Save saves the exchanges into mem in order, one SaveContext per exchange
// with inputs {"input": e.Input} and outputs {"output": e.Output}, each
// with memstack.WithTime(ctx, e.Time), and returns how long each call
// took. It stops at the first error, naming the exchange, and honours ctx
// between calls.
func Save(ctx context.Context, mem schema.Memory, exchanges []Exchange) ([]time.Duration, error) {
	if mem == nil {
		return nil, errors.New("locomo: Save: the memory is nil")
	}
	out := make([]time.Duration, 0, len(exchanges))
	for i, e := range exchanges {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("locomo: saving: %w", err)
		}
		at := memstack.WithTime(ctx, e.Time)
		start := time.Now()
		err := mem.SaveContext(at, map[string]any{"input": e.Input}, map[string]any{"output": e.Output})
		out = append(out, time.Since(start))
		if err != nil {
			return nil, fmt.Errorf("locomo: saving exchange %d (%s): %w", i+1, e.describe(), err)
		}
	}
	return out, nil
}

func (e Exchange) describe() string {
	switch {
	case e.InputID == "":
		return e.OutputID
	case e.OutputID == "":
		return e.InputID
	}
	return e.InputID + "+" + e.OutputID
}

// Ask asks mem every question of conv that has evidence, in order: one
// LoadMemoryVariables with {"input": question} each, scored with Score.
// Questions are not saved. It stops at the first error, naming the
// question by its number, and honours ctx between calls.
func Ask(ctx context.Context, mem schema.Memory, conv *Conversation, counter tokens.Counter) ([]Answer, error) {
	if mem == nil || conv == nil || counter == nil {
		return nil, errors.New("locomo: Ask: the memory, the conversation and the counter must not be nil")
	}
	memo := &memoCounter{Counter: counter}
	var out []Answer
	for i, q := range conv.Questions {
		if len(q.Evidence) == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("locomo: asking: %w", err)
		}
		before, start := allocated(), time.Now()
		vars, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": q.Text})
		took, alloc := time.Since(start), allocated()-before
		if err != nil {
			return nil, fmt.Errorf("locomo: loading for question %d: %w", i+1, err)
		}
		texts := make([]string, len(q.Evidence))
		for e, id := range q.Evidence {
			t, ok := conv.Turn(id)
			if !ok {
				return nil, fmt.Errorf("locomo: question %d: evidence %q names no turn of conversation %s", i+1, id, conv.ID)
			}
			texts[e] = t.Text
		}
		found, n, err := Score(vars, texts, memo)
		if err != nil {
			return nil, fmt.Errorf("locomo: question %d: %w", i+1, err)
		}
		a := Answer{Conversation: conv.ID, Question: i, Category: q.Category, Evidence: len(texts), Tokens: n, Load: took, Alloc: alloc}
		for _, f := range found {
			if f {
				a.Found++
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// memoCounter remembers the counts of the last few texts: most memories
// load the same text for every question of a conversation.
type memoCounter struct {
	tokens.Counter
	counts map[string]int
}

func (m *memoCounter) CountTokens(s string) int {
	if n, ok := m.counts[s]; ok {
		return n
	}
	if len(m.counts) >= 16 || m.counts == nil {
		m.counts = make(map[string]int, 16)
	}
	n := m.Counter.CountTokens(s)
	m.counts[s] = n
	return n
}

// Score scores one load. found tells, for each text, whether the loaded
// variables vars hold it verbatim: a string variable contains it, or a
// message of a []llms.ChatMessage variable does (in its content). size is
// the variables' tokens, counted with counter the way
// combined.WithTokenBudget counts them: the sum over the variables of a
// string as is, a []llms.ChatMessage as llms.GetBufferString renders it
// with the prefixes "Human" and "AI", anything else as fmt.Sprint renders
// it (nil: nothing).
func Score(vars map[string]any, texts []string, counter tokens.Counter) (found []bool, size int, err error) {
	found = make([]bool, len(texts))
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		rendered, contents, err := render(vars[k])
		if err != nil {
			return nil, 0, fmt.Errorf("variable %q: %w", k, err)
		}
		size += counter.CountTokens(rendered)
		for i, t := range texts {
			if found[i] {
				continue
			}
			for _, c := range contents {
				if strings.Contains(c, t) {
					found[i] = true
					break
				}
			}
		}
	}
	return found, size, nil
}

// render returns a variable as counted and the texts it is matched on.
func render(v any) (string, []string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil, nil
	case string:
		return x, []string{x}, nil
	case []llms.ChatMessage:
		s, err := llms.GetBufferString(x, "Human", "AI")
		if err != nil {
			return "", nil, err
		}
		contents := make([]string, len(x))
		for i, m := range x {
			contents[i] = m.GetContent()
		}
		return s, contents, nil
	default:
		s := fmt.Sprint(x)
		return s, []string{s}, nil
	}
}

// Summary aggregates answers.
type Summary struct {
	// Questions is the number of answers.
	Questions int
	// Recall is the evidence recall averaged over the questions.
	Recall float64
	// MeanTokens and MaxTokens are the mean and largest load size.
	MeanTokens float64
	MaxTokens  int
	// LoadP50 and LoadP95 are percentiles of the load durations, AllocP50
	// and AllocP95 of the bytes allocated per load.
	LoadP50, LoadP95   time.Duration
	AllocP50, AllocP95 uint64
}

// Summarise aggregates answers (the zero Summary for none).
func Summarise(answers []Answer) Summary {
	s := Summary{Questions: len(answers)}
	if len(answers) == 0 {
		return s
	}
	loads := make([]time.Duration, len(answers))
	allocs := make([]time.Duration, len(answers)) // bytes, ranked as durations
	recall, total := 0.0, 0
	for i, a := range answers {
		recall += a.Recall()
		total += a.Tokens
		s.MaxTokens = max(s.MaxTokens, a.Tokens)
		loads[i], allocs[i] = a.Load, time.Duration(min(a.Alloc, math.MaxInt64))
	}
	n := float64(len(answers))
	s.Recall, s.MeanTokens = recall/n, float64(total)/n
	s.LoadP50, s.LoadP95 = Percentile(loads, 50), Percentile(loads, 95)
	s.AllocP50, s.AllocP95 = uint64(Percentile(allocs, 50)), uint64(Percentile(allocs, 95))
	return s
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of ds by the
// nearest-rank method: the smallest duration that at least p% of ds do
// not exceed. It returns 0 for no durations; ds is not changed.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(float64(len(s)) * p / 100))
	return s[min(max(rank, 1), len(s))-1]
}

// ReplaySessions is Replay with every session of conv saved as a
// conversation of its own of one user, and every question asked in a new
// conversation of that user: what a returning user sees. Each session's
// exchanges are saved with the identity {User: conv.ID, Conversation:
// "session-N"}, the questions asked with {User: conv.ID, Conversation:
// "questions"}; the identity in ctx, if any, gives the Tenant.
func ReplaySessions(ctx context.Context, mem schema.Memory, conv *Conversation, counter tokens.Counter) (Run, error) {
	base, _ := memstack.IdentityFrom(ctx)
	base.User = conv.ID
	var saves []time.Duration
	exs := conv.Exchanges()
	for start := 0; start < len(exs); {
		end := start + 1
		for end < len(exs) && exs[end].Session == exs[start].Session {
			end++
		}
		id := base
		id.Conversation = fmt.Sprintf("session-%d", exs[start].Session)
		s, err := Save(memstack.WithIdentity(ctx, id), mem, exs[start:end])
		if err != nil {
			return Run{}, fmt.Errorf("conversation %s, session %d: %w", conv.ID, exs[start].Session, err)
		}
		saves = append(saves, s...)
		start = end
	}
	ask := base
	ask.Conversation = "questions"
	answers, err := Ask(memstack.WithIdentity(ctx, ask), mem, conv, counter)
	if err != nil {
		return Run{}, fmt.Errorf("conversation %s: %w", conv.ID, err)
	}
	return Run{Saves: saves, Answers: answers}, nil
}
