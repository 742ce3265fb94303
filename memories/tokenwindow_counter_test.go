package memories_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/tokens"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// Issue 17, item 10: a token counter's negative count or panic is an
// error, never a window that shows everything or a crash.

// twNegative returns -1 for every text.
type twNegative struct{}

func (twNegative) CountTokens(string) int { return -1 }

// twPanicking panics on every text.
type twPanicking struct{}

func (twPanicking) CountTokens(string) int { panic("tokenizer exploded") }

// twBadCounterWindow saves 200 turns (400 lines) into a TokenWindow(50)
// counting with c, and returns the memory and its store.
func twBadCounterWindow(t *testing.T, c tokens.Counter, opts ...memories.TokenWindowOption) (*memories.TokenWindow, store.Store) {
	t.Helper()
	st := store.NewInMemory()
	m, err := memories.NewTokenWindow(50, append([]memories.TokenWindowOption{memories.WithStore(st), memories.WithTokenCounter(c)}, opts...)...)
	require.NoError(t, err)
	for i := range 200 {
		ctSaveTurn(t, m, context.Background(), fmt.Sprintf("question %d", i), fmt.Sprintf("answer %d", i))
	}
	return m, st
}

func TestTokenWindow_BadCounterIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name    string
		counter tokens.Counter
		want    []string // in the error
	}{
		{"negative", twNegative{}, []string{"memories_test.twNegative", "returned -1"}},
		{"panicking", twPanicking{}, []string{"memories_test.twPanicking", "panicked", "tokenizer exploded"}},
	} {
		for _, cache := range []int{1024, 0} {
			t.Run(fmt.Sprintf("%s/cache=%d", tc.name, cache), func(t *testing.T) {
				ctx := context.Background()
				m, st := twBadCounterWindow(t, tc.counter, memories.WithCacheSize(cache))
				// Saving never counts: every turn is stored.
				assert.Len(t, ctStored(t, st, memstack.Identity{}), 400)

				vars, err := m.LoadMemoryVariables(ctx, nil)
				require.Error(t, err, "a bad count must fail the load, not show %d lines", strings.Count(fmt.Sprint(vars), "\n")+1)
				assert.Nil(t, vars)
				assert.ErrorIs(t, err, tokens.ErrBadCount)
				for _, w := range tc.want {
					assert.Contains(t, err.Error(), w)
				}
				_, err = m.LoadItems(ctx, nil)
				require.ErrorIs(t, err, tokens.ErrBadCount, "LoadItems")

				// Observed loads fail the same way.
				rec := observe.NewRecorder(observe.OpLoad, "tw", "")
				_, err = m.LoadMemoryVariables(observe.WithRecorder(ctx, rec), nil)
				require.ErrorIs(t, err, tokens.ErrBadCount, "observed load")

				// A save still stores its turn.
				ctSaveTurn(t, m, ctx, "one more", "turn")
				assert.Len(t, ctStored(t, st, memstack.Identity{}), 402)
			})
		}
	}
}

// TestTokenWindow_HugeCountNeverFits: a valid but enormous count (a
// counter's "too big to say") makes a message too big to show; it was
// added one to and wrapped around to a negative cost, so every message
// was shown.
func TestTokenWindow_HugeCountNeverFits(t *testing.T) {
	huge := tokens.CounterFunc(func(string) int { return math.MaxInt })
	m, _ := twBadCounterWindow(t, huge)
	got := ctLoadString(t, m, context.Background())
	assert.Empty(t, got, "no message fits in 50 tokens")
}

// TestTokenWindow_BadCountIsNotCached: a counter that fails once is asked
// again on the next load, which then succeeds.
func TestTokenWindow_BadCountIsNotCached(t *testing.T) {
	var calls atomic.Int64
	flaky := tokens.CounterFunc(func(s string) int {
		if calls.Add(1) == 1 {
			return -7
		}
		return len(strings.Fields(s))
	})
	st := store.NewInMemory()
	m, err := memories.NewTokenWindow(50, memories.WithStore(st), memories.WithTokenCounter(flaky))
	require.NoError(t, err)
	ctx := context.Background()
	ctSaveTurn(t, m, ctx, "hello there", "hi")
	_, err = m.LoadMemoryVariables(ctx, nil)
	require.ErrorIs(t, err, tokens.ErrBadCount)
	assert.Contains(t, err.Error(), "returned -7")
	assert.Equal(t, "Human: hello there\nAI: hi", ctLoadString(t, m, ctx))
}

// TestTokenWindow_HugeCountsNeverWrapAround: the costs of a tool call and
// its results are summed; five enormous costs wrapped around to a
// negative sum, so the group was shown (and so were the system messages'
// enormous costs subtracted from the budget).
func TestTokenWindow_HugeCountsNeverWrapAround(t *testing.T) {
	huge := tokens.CounterFunc(func(string) int { return math.MaxInt })
	ctx := context.Background()
	for _, system := range []int{0, 6} {
		m, err := memories.NewTokenWindow(50, memories.WithStore(store.NewInMemory()), memories.WithTokenCounter(huge), memories.WithReturnMessages(true))
		require.NoError(t, err)
		for i := range system {
			require.NoError(t, m.AddMessage(ctx, llms.SystemChatMessage{Content: fmt.Sprintf("rule %d", i)}))
		}
		ctSaveTurn(t, m, ctx, "look these up", "ok")
		calls := []llms.ToolCall{}
		for i := range 4 {
			calls = append(calls, llms.ToolCall{ID: fmt.Sprintf("c%d", i), Type: "function",
				FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: "{}"}})
		}
		require.NoError(t, m.AddMessage(ctx, llms.AIChatMessage{Content: "calling", ToolCalls: calls}))
		for i := range 4 {
			require.NoError(t, m.AddMessage(ctx, llms.ToolChatMessage{ID: fmt.Sprintf("c%d", i), Content: "found"}))
		}
		msgs := ctLoadMessages(t, m, ctx)
		require.Len(t, msgs, system, "with %d system messages, only they are shown", system)
		for _, msg := range msgs {
			assert.Equal(t, llms.ChatMessageTypeSystem, msg.GetType())
		}
	}
}
