package memories_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// A long-lived Recall keeps its exchanges incrementally; whatever happens
// to the store (appends through it or through another writer, messages
// added one by one, a prefix removed, a clear), it must load exactly what a
// fresh Recall reading the whole store loads.
func TestRecall_IncrementalLoadsMatchAFreshRecall(t *testing.T) {
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: "inc"})
	id, _ := memstack.IdentityFrom(ctx)
	s := store.NewInMemory()
	opts := []memories.RecallOption{memories.WithStore(s), memories.WithK(4), memories.WithNeighbours(1), memories.WithExcludeRecent(2)}
	long, err := memories.NewRecall(opts...)
	require.NoError(t, err)
	topics := []string{"budget", "venue", "lisbon", "dinner", "flight", "hotel"}
	rng := rand.New(rand.NewPCG(1, 2))
	query := map[string]any{"input": "what about the budget and the venue"}
	for step := range 300 {
		topic := topics[rng.IntN(len(topics))]
		switch r := rng.IntN(10); {
		case r < 5:
			require.NoError(t, long.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("step %d: the %s?", step, topic)},
				map[string]any{"output": fmt.Sprintf("the %s is settled (%d)", topic, step)}))
		case r < 7: // another writer appends behind the long-lived value's back
			require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: fmt.Sprintf("other %d %s", step, topic)},
				llms.AIChatMessage{Content: "ok " + topic}))
		case r < 9: // single messages, some extending the last exchange
			msg := llms.ChatMessage(llms.AIChatMessage{Content: "more on the " + topic})
			if rng.IntN(2) == 0 {
				msg = llms.HumanChatMessage{Content: "and the " + topic + "?"}
			}
			require.NoError(t, long.AddMessage(ctx, msg))
		default:
			if rng.IntN(4) == 0 {
				require.NoError(t, s.Clear(ctx, id))
			} else if recs, err := s.All(ctx, id); err == nil && len(recs) > 6 {
				_, err := s.RemovePrefix(ctx, id, recs[len(recs)/2].Seq)
				require.NoError(t, err)
			}
		}
		if step%7 != 0 {
			continue
		}
		got, err := long.LoadMemoryVariables(ctx, query)
		require.NoError(t, err)
		fresh, err := memories.NewRecall(opts...)
		require.NoError(t, err)
		want, err := fresh.LoadMemoryVariables(ctx, query)
		require.NoError(t, err)
		require.Equal(t, want, got, "step %d", step)
	}
}

// Rendering a selection (LoadItems' Render, called after the load returns)
// while saves extend the same conversation is race-free and stable.
func TestRecall_RenderWhileSaving(t *testing.T) {
	ctx := context.Background()
	m, err := memories.NewRecall(memories.WithK(3))
	require.NoError(t, err)
	for i := range 20 {
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("budget item %d", i)}, map[string]any{"output": "noted"}))
	}
	items, err := m.LoadItems(ctx, map[string]any{"input": "budget"})
	require.NoError(t, err)
	keep := make([]bool, len(items.List))
	for i := range keep {
		keep[i] = true
	}
	before, err := items.Render(keep)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 50 {
			assert.NoError(t, m.AddMessage(ctx, llms.AIChatMessage{Content: fmt.Sprintf("budget addendum %d", i)}))
			_, err := m.LoadMemoryVariables(ctx, map[string]any{"input": "budget"})
			assert.NoError(t, err)
		}
	}()
	for range 50 {
		again, err := items.Render(keep)
		require.NoError(t, err)
		assert.Equal(t, before, again)
	}
	wg.Wait()
}
