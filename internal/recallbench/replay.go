package recallbench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/tokens"
)

// Clock is the time of the replay: Replay sets it to each turn's time
// before saving the turn, and to Conversation.AskedAt before the
// questions, so memories that date what they keep (memories.WithClock)
// are reproducible. The zero Clock reads Start. It is safe for concurrent
// use.
type Clock struct{ unixNano atomic.Int64 }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	if n := c.unixNano.Load(); n != 0 {
		return time.Unix(0, n).UTC()
	}
	return Start
}

// Set sets the clock's time.
func (c *Clock) Set(t time.Time) { c.unixNano.Store(t.UnixNano()) }

// ReplayOption configures Replay.
type ReplayOption func(*replayConfig) error

type replayConfig struct {
	clock   *Clock
	counter tokens.Counter
}

// WithClock makes Replay set clock as the conversation advances (see
// Clock). A nil clock is an error.
func WithClock(clock *Clock) ReplayOption {
	return func(c *replayConfig) error {
		if clock == nil {
			return errors.New("recallbench: WithClock(nil): the clock must not be nil")
		}
		c.clock = clock
		return nil
	}
}

// WithTokenCounter sets how Replay counts context tokens (default: offline
// cl100k_base, tokens.CL100K). A nil counter is an error.
func WithTokenCounter(counter tokens.Counter) ReplayOption {
	return func(c *replayConfig) error {
		if counter == nil {
			return errors.New("recallbench: WithTokenCounter(nil): the counter must not be nil")
		}
		c.counter = counter
		return nil
	}
}

// QuestionResult is what one question found.
type QuestionResult struct {
	// Question is the question asked.
	Question Question
	// Found tells, per evidence turn (in Question.Evidence order), whether
	// the loaded context held it.
	Found []bool
	// FoundIn lists, per evidence turn, the loaded variables that held it
	// (sorted; empty when not found).
	FoundIn [][]string
	// Tokens is the size of the loaded context (see Replay).
	Tokens int
}

// Result is what one memory achieved over a conversation.
type Result struct {
	// Name names the memory.
	Name string
	// Questions is the number of questions asked; Evidence the number of
	// evidence turns over all of them, and Found how many of those the
	// loaded contexts held.
	Questions, Evidence, Found int
	// MeanTokens and MaxTokens are the mean and the largest context size
	// over the questions, in tokens.
	MeanTokens float64
	MaxTokens  int
	// PerQuestion has one entry per question, in the order asked.
	PerQuestion []QuestionResult
}

// Recall is the evidence recall: the share of evidence turns the loaded
// contexts held (0 when there is no evidence).
func (r Result) Recall() float64 {
	if r.Evidence == 0 {
		return 0
	}
	return float64(r.Found) / float64(r.Evidence)
}

// Replay feeds conv's turns through mem, one SaveContext per turn (inputs
// {"input": human}, outputs {"output": ai}), then asks every question: one
// LoadMemoryVariables with {"input": question} per question, in order. The
// questions are not saved, so each question sees the same memory and none
// is helped by an earlier one. It scores each load with Score. name names
// the memory in the result.
//
// Context tokens are the sum, over the loaded variables, of each one's
// tokens (a string as is, a []llms.ChatMessage as llms.GetBufferString
// renders it with the prefixes "Human" and "AI", anything else as
// fmt.Sprint renders it) — the way combined.WithTokenBudget counts.
//
// Replay stops at the first error, naming the turn or the question; it
// honours ctx between calls.
func Replay(ctx context.Context, name string, conv *Conversation, mem schema.Memory, opts ...ReplayOption) (Result, error) {
	var cfg replayConfig
	for i, o := range opts {
		if o == nil {
			return Result{}, fmt.Errorf("recallbench: Replay: option %d of %d is nil", i+1, len(opts))
		}
		if err := o(&cfg); err != nil {
			return Result{}, err
		}
	}
	if conv == nil {
		return Result{}, errors.New("recallbench: Replay: the conversation is nil")
	}
	if mem == nil {
		return Result{}, fmt.Errorf("recallbench: Replay %s: the memory is nil", name)
	}
	if cfg.counter == nil {
		c, err := tokens.CL100K()
		if err != nil {
			return Result{}, fmt.Errorf("recallbench: Replay: %w", err)
		}
		cfg.counter = c
	}
	for _, t := range conv.Turns {
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("recallbench: replaying %s: %w", name, err)
		}
		if cfg.clock != nil {
			cfg.clock.Set(t.Time)
		}
		if err := mem.SaveContext(ctx, map[string]any{"input": t.Human}, map[string]any{"output": t.AI}); err != nil {
			return Result{}, fmt.Errorf("recallbench: replaying %s: saving turn %d: %w", name, t.Index, err)
		}
	}
	if cfg.clock != nil {
		cfg.clock.Set(conv.AskedAt)
	}
	res := Result{Name: name, PerQuestion: make([]QuestionResult, 0, len(conv.Questions))}
	total := 0
	for i, q := range conv.Questions {
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("recallbench: replaying %s: %w", name, err)
		}
		vars, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": q.Text})
		if err != nil {
			return Result{}, fmt.Errorf("recallbench: replaying %s: loading for question %d: %w", name, i+1, err)
		}
		qr, err := Score(conv, q, vars, cfg.counter)
		if err != nil {
			return Result{}, fmt.Errorf("recallbench: replaying %s: question %d: %w", name, i+1, err)
		}
		res.PerQuestion = append(res.PerQuestion, qr)
		res.Questions++
		res.Evidence += len(qr.Found)
		for _, f := range qr.Found {
			if f {
				res.Found++
			}
		}
		total += qr.Tokens
		res.MaxTokens = max(res.MaxTokens, qr.Tokens)
	}
	if res.Questions > 0 {
		res.MeanTokens = float64(total) / float64(res.Questions)
	}
	return res, nil
}

// Score scores one load: for each evidence turn of q, whether the loaded
// variables vars hold it — some variable contains the turn's human message
// verbatim, or contains the fact's value as a whole word in any case (see
// ContainsWord; a fact layer shows values, not messages) — and the
// context's size in tokens, counted with counter (see Replay).
func Score(conv *Conversation, q Question, vars map[string]any, counter tokens.Counter) (QuestionResult, error) {
	if conv == nil || counter == nil {
		return QuestionResult{}, errors.New("recallbench: Score: the conversation and the counter must not be nil")
	}
	qr := QuestionResult{Question: q, Found: make([]bool, len(q.Evidence)), FoundIn: make([][]string, len(q.Evidence))}
	keys := slices.Sorted(maps.Keys(vars))
	texts := make([]string, len(keys))
	for i, k := range keys {
		s, err := Text(vars[k])
		if err != nil {
			return QuestionResult{}, fmt.Errorf("rendering variable %q: %w", k, err)
		}
		texts[i] = s
		qr.Tokens += counter.CountTokens(s)
	}
	for e, ev := range q.Evidence {
		if ev.Turn < 0 || ev.Turn >= len(conv.Turns) {
			return QuestionResult{}, fmt.Errorf("evidence turn %d is outside the conversation's %d turns", ev.Turn, len(conv.Turns))
		}
		human := conv.Turns[ev.Turn].Human
		for i, s := range texts {
			if strings.Contains(s, human) || ContainsWord(s, ev.Value) {
				qr.Found[e] = true
				qr.FoundIn[e] = append(qr.FoundIn[e], keys[i])
			}
		}
	}
	return qr, nil
}

// Text renders a loaded variable as a prompt would show it: a string as
// is, a []llms.ChatMessage as llms.GetBufferString renders it with the
// prefixes "Human" and "AI", nil as "", anything else as fmt.Sprint
// renders it.
func Text(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case []llms.ChatMessage:
		return llms.GetBufferString(x, "Human", "AI")
	default:
		return fmt.Sprint(x), nil
	}
}
