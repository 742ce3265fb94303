package memories_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// TestBuffer_HistoryReplacedAtTheSameLength: another writer replaces a
// langchaingo history with as many different messages; a Buffer over it
// shows the new messages, not its cache of the old ones (issue 10, item 2).
func TestBuffer_HistoryReplacedAtTheSameLength(t *testing.T) {
	ctx := context.Background()
	h := memory.NewChatMessageHistory()
	st, err := store.FromHistory(h, memstack.Identity{})
	require.NoError(t, err)
	buf := mustBuffer(memories.WithStore(st))
	require.NoError(t, buf.SaveContext(ctx, map[string]any{"input": "card 4111"}, map[string]any{"output": "noted"}))
	vars, err := buf.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	require.Contains(t, vars["history"], "4111")

	require.NoError(t, h.SetMessages(ctx, []llms.ChatMessage{
		llms.HumanChatMessage{Content: "card removed"}, llms.AIChatMessage{Content: "ok"},
	}))
	vars, err = buf.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "Human: card removed\nAI: ok", vars["history"])
}

// TestSummary_RefusesAStoreThatKeepsStateInProcess: over a langchaingo
// history, under a retention, the summary would live in process memory
// while the folded messages are removed from the history: after a
// restart both would be gone. NewSummary refuses it, naming the problem
// (issue 10, item 2). Without a retention nothing is removed, so a
// restart loses only the summary (the messages are summarized again):
// that is accepted.
func TestSummary_RefusesAStoreThatKeepsStateInProcess(t *testing.T) {
	st, err := store.FromHistory(memory.NewChatMessageHistory(), memstack.Identity{})
	require.NoError(t, err)
	sum := smSummarizerFunc(func(context.Context, string, []llms.ChatMessage) (string, error) { return "s", nil })
	_, err = memories.NewSummary(sum, memories.WithStore(st), memories.WithRetention(memories.KeepLast(0)))
	require.ErrorIs(t, err, memories.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithStore(*store.History)")
	assert.Contains(t, err.Error(), "folded messages would be gone")

	m, err := memories.NewSummary(sum, memories.WithStore(st), memories.WithMaxMessages(2), memories.WithBatchSize(2))
	require.NoError(t, err, "without a retention no message is removed")
	ctx := context.Background()
	for i := range 4 {
		ctSaveTurn(t, m, ctx, fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
	}
	all, err := st.All(ctx, memstack.Identity{})
	require.NoError(t, err)
	assert.Len(t, all, 8, "the history keeps every message after folds")
}
