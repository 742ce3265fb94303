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

// measureWindows fills one fresh conversation of s per size in sizes, each
// with a system prompt and size-1 messages of the bench corpus (Appends of
// up to 1,000, what SaveContext stores), saves one more turn through each
// memory — RecentN and TokenWindow store it; Summary folds all but its raw
// messages into its summary in one summarizer call — and then times
// samples loads of each memory in each conversation (LoadMemoryVariables,
// string mode), after three untimed ones. The loads of the conversations
// alternate, one of each per round, so the sizes are compared under the
// same machine load. The conversations are forgotten afterwards.
func measureWindows(ctx context.Context, s store.Store, sizes []int, samples int) ([]windowResult, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	user := hex.EncodeToString(b[:])
	ids := make([]memstack.Identity, len(sizes))
	for i, size := range sizes {
		ids[i] = memstack.Identity{Tenant: "bench-windows", User: user, Conversation: fmt.Sprintf("long-%d", size)}
		defer func() { _ = s.Forget(context.WithoutCancel(ctx), ids[i]) }()
		if err := fillConversation(ctx, s, ids[i], size); err != nil {
			return nil, err
		}
	}
	var out []windowResult
	for _, wm := range windowMemories {
		m, err := wm.make(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", wm.name, err)
		}
		res, err := timeLoads(ctx, m, ids, sizes, samples)
		if c, ok := m.(interface{ Close() error }); ok {
			_ = c.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", wm.name, err)
		}
		for i := range res {
			res[i].memory = wm.name
		}
		out = append(out, res...)
	}
	return out, nil
}

// fillConversation appends a system prompt and size-1 messages to id.
func fillConversation(ctx context.Context, s store.Store, id memstack.Identity, size int) error {
	if err := s.Append(ctx, id, llms.SystemChatMessage{Content: "You are a helpful assistant. Be brief."}); err != nil {
		return fmt.Errorf("filling the conversation: %w", err)
	}
	batch := make([]llms.ChatMessage, 0, 1000)
	for n := 1; n < size; {
		batch = batch[:0]
		for len(batch) < cap(batch) && n < size {
			if n%2 == 1 {
				batch = append(batch, llms.HumanChatMessage{Content: humanText(n / 2)})
			} else {
				batch = append(batch, llms.AIChatMessage{Content: aiText(n / 2)})
			}
			n++
		}
		if err := s.Append(ctx, id, batch...); err != nil {
			return fmt.Errorf("filling the conversation: %w", err)
		}
	}
	return nil
}

// timeLoads saves one turn of m in every conversation of ids, then times
// samples loads of each, alternating between the conversations (the first
// three rounds untimed), and returns p50 and p95 per conversation.
func timeLoads(ctx context.Context, m schema.Memory, ids []memstack.Identity, sizes []int, samples int) ([]windowResult, error) {
	for i, id := range ids {
		t := newTurn(sizes[i])
		if err := m.SaveContext(memstack.WithIdentity(ctx, id), t.in, t.out); err != nil {
			return nil, fmt.Errorf("saving a turn: %w", err)
		}
	}
	times := make([][]time.Duration, len(ids))
	for round := range samples + 3 {
		for k := range ids {
			i := (k + round) % len(ids) // alternate which size goes first
			lctx := memstack.WithIdentity(ctx, ids[i])
			t0 := time.Now()
			if _, err := m.LoadMemoryVariables(lctx, nil); err != nil {
				return nil, fmt.Errorf("loading: %w", err)
			}
			if round >= 3 {
				times[i] = append(times[i], time.Since(t0))
			}
		}
	}
	out := make([]windowResult, len(ids))
	for i, ts := range times {
		slices.Sort(ts)
		out[i] = windowResult{messages: sizes[i], p50: ts[len(ts)/2], p95: ts[min(len(ts)-1, len(ts)*95/100)]}
	}
	return out, nil
}
