package memories_test

import (
	"context"
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
	buf := memories.NewBuffer(memories.WithStore(st))
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
