package memories_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/vectorstores"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
)

// TestRecall_OtherWriterClears: two Recall values on one store stand in
// for two replicas. When one clears the conversation, the other's index
// must not keep the cleared turns: they would take the places of real
// hits, and a new matching turn would not be found.
func TestRecall_OtherWriterClears(t *testing.T) {
	ctx := context.Background()
	for _, loadFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("loaded before the clear: %v", loadFirst), func(t *testing.T) {
			st := store.NewInMemory()
			a, err := memories.NewRecall(memories.WithStore(st), memories.WithK(2), memories.WithRecallDates(false))
			require.NoError(t, err)
			b, err := memories.NewRecall(memories.WithStore(st), memories.WithK(2), memories.WithRecallDates(false))
			require.NoError(t, err)
			for i := 0; i < 20; i++ {
				require.NoError(t, a.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("the card number is 4111 %d", i)}, map[string]any{"output": "noted the card number"}))
			}
			if loadFirst {
				assert.Contains(t, rcAsk(t, a, ctx, "card number"), "4111")
			}
			require.NoError(t, b.Clear(ctx))
			require.NoError(t, b.SaveContext(ctx, map[string]any{"input": "my new card number ends in 0005"}, map[string]any{"output": "ok"}))
			got := rcAsk(t, a, ctx, "card number")
			assert.Contains(t, got, "0005", "the new turn is found")
			assert.NotContains(t, got, "4111", "nothing cleared comes back")
		})
	}
}

// TestRecall_MessagesModeHandsOutCopies: a caller that edits the messages
// a load returned (a tool call's arguments) changes nothing for the next
// load.
func TestRecall_MessagesModeHandsOutCopies(t *testing.T) {
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: "u"})
	m, err := memories.NewRecall(memories.WithReturnMessages(true), memories.WithK(1))
	require.NoError(t, err)
	require.NoError(t, m.AddMessage(ctx, llms.HumanChatMessage{Content: "weather in Porto?"}))
	require.NoError(t, m.AddMessage(ctx, llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function",
		FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: `{"city":"Porto"}`}}}}))
	require.NoError(t, m.AddMessage(ctx, llms.ToolChatMessage{ID: "c1", Content: "Porto: drizzle"}))
	load := func() []llms.ChatMessage {
		vars, err := m.LoadMemoryVariables(ctx, map[string]any{"input": "Porto drizzle"})
		require.NoError(t, err)
		return vars["relevant_history"].([]llms.ChatMessage)
	}
	first := load()
	var call llms.AIChatMessage
	for _, msg := range first {
		if ai, ok := msg.(llms.AIChatMessage); ok && len(ai.ToolCalls) > 0 {
			call = ai
		}
	}
	require.NotEmpty(t, call.ToolCalls, "%v", first)
	call.ToolCalls[0].ID = "edited"
	call.ToolCalls[0].FunctionCall.Arguments = "{}"
	for _, msg := range load() {
		if ai, ok := msg.(llms.AIChatMessage); ok && len(ai.ToolCalls) > 0 {
			assert.Equal(t, "c1", ai.ToolCalls[0].ID)
			assert.Equal(t, `{"city":"Porto"}`, ai.ToolCalls[0].FunctionCall.Arguments)
		}
	}
}

// keepAll is a vector store that cannot delete (it hides chromem's
// DocumentDeleter): what is cleared stays in it, as in many hosted stores.
type keepAll struct{ vectorstores.VectorStore }

// TestRecall_OtherWriterClearsDurableIndex: two replicas share a vector
// store that cannot delete; after one clears the conversation the stale
// vectors are still there. Their hits are skipped and the search asks for
// more, so the new matching turn is still found.
func TestRecall_OtherWriterClearsDurableIndex(t *testing.T) {
	ctx := context.Background()
	st := store.NewInMemory()
	ch, err := retrieval.NewChromem(nil, "shared", nil)
	require.NoError(t, err)
	shared := keepAll{ch}
	newReplica := func() *memories.Recall {
		m, err := memories.NewRecall(memories.WithStore(st), memories.WithK(1), memories.WithRecallDates(false),
			memories.WithVector(newRCEmbedder(), shared, retrieval.WithEmbedderName("hash")))
		require.NoError(t, err)
		return m
	}
	a, b := newReplica(), newReplica()
	for i := 0; i < 20; i++ {
		require.NoError(t, a.SaveContext(ctx, map[string]any{"input": "card number"}, map[string]any{"output": fmt.Sprintf("card number %d", i)}))
	}
	require.NoError(t, b.Clear(ctx))
	require.Equal(t, 40, ch.Count(), "the store kept the cleared vectors")
	require.NoError(t, b.SaveContext(ctx, map[string]any{"input": "card number please"}, map[string]any{"output": "the new one"}))
	got := rcAsk(t, a, ctx, "card number")
	assert.Contains(t, got, "card number please", "the new turn is found past the stale hits")
	assert.NotContains(t, got, "card number 1", "nothing cleared comes back")
}
