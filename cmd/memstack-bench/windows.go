package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

// windowResult is the load latency of one memory over one conversation
// of a backend holding messages messages.
type windowResult struct {
	memory   string
	messages int
	p50, p95 time.Duration
}

// The memories whose loads must cost what they show, as the table names
// them.
var windowMemories = []struct {
	name string
	make func(s store.Store) (schema.Memory, error)
}{
	{"RecentN(6)", func(s store.Store) (schema.Memory, error) { return memories.NewRecentN(6, memories.WithStore(s)) }},
	{"TokenWindow(1000)", func(s store.Store) (schema.Memory, error) {
		return memories.NewTokenWindow(1000, memories.WithStore(s))
	}},
	{"Summary (extractive)", func(s store.Store) (schema.Memory, error) {
		return memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(s))
	}},
}

// measureWindows fills one fresh conversation of s with a system prompt
// and messages-1 messages of the bench corpus (Appends of up to 1,000,
// what SaveContext stores), saves one more turn through each memory —
// RecentN and TokenWindow store it; Summary folds all but its raw
// messages into its summary in one summarizer call — and then times
// samples loads of each (LoadMemoryVariables, string mode) after three
// untimed ones. The conversation is forgotten afterwards.
func measureWindows(ctx context.Context, s store.Store, messages, samples int) ([]windowResult, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := memstack.Identity{Tenant: "bench-windows", User: hex.EncodeToString(b[:]), Conversation: "long"}
	defer func() { _ = s.Forget(context.WithoutCancel(ctx), id) }()
	ctx = memstack.WithIdentity(ctx, id)
	if err := s.Append(ctx, id, llms.SystemChatMessage{Content: "You are a helpful assistant. Be brief."}); err != nil {
		return nil, fmt.Errorf("filling the conversation: %w", err)
	}
	batch := make([]llms.ChatMessage, 0, 1000)
	for n := 1; n < messages; {
		batch = batch[:0]
		for len(batch) < cap(batch) && n < messages {
			if n%2 == 1 {
				batch = append(batch, llms.HumanChatMessage{Content: humanText(n / 2)})
			} else {
				batch = append(batch, llms.AIChatMessage{Content: aiText(n / 2)})
			}
			n++
		}
		if err := s.Append(ctx, id, batch...); err != nil {
			return nil, fmt.Errorf("filling the conversation: %w", err)
		}
	}
	var out []windowResult
	for _, wm := range windowMemories {
		m, err := wm.make(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", wm.name, err)
		}
		t := newTurn(messages)
		if err := m.SaveContext(ctx, t.in, t.out); err != nil {
			return nil, fmt.Errorf("%s: saving a turn: %w", wm.name, err)
		}
		times := make([]time.Duration, 0, samples)
		for i := range samples + 3 {
			t0 := time.Now()
			if _, err := m.LoadMemoryVariables(ctx, nil); err != nil {
				return nil, fmt.Errorf("%s: loading: %w", wm.name, err)
			}
			if i >= 3 {
				times = append(times, time.Since(t0))
			}
		}
		if c, ok := m.(interface{ Close() error }); ok {
			_ = c.Close()
		}
		slices.Sort(times)
		out = append(out, windowResult{memory: wm.name, messages: messages,
			p50: times[len(times)/2], p95: times[min(len(times)-1, len(times)*95/100)]})
	}
	return out, nil
}
