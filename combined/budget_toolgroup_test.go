package combined_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/memories"
)

// TestBudgetToolGroupAcrossASystemMessage: a system message between a tool
// call and its result does not split them (an API rejects a result without
// its call), for memstack windows and langchaingo message lists.
func TestBudgetToolGroupAcrossASystemMessage(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	call := llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: `{"city":"Paris"}`}}}}
	result := llms.ToolChatMessage{ID: "c1", Content: "Sunny, 21 degrees, light wind from the west"}
	msgs := []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Weather in Paris?"}, call,
		llms.SystemChatMessage{Content: "Tools may be slow today."},
		result, llms.AIChatMessage{Content: "Sunny."},
	}
	buffer := mustBuffer(memories.WithReturnMessages(true))
	for _, msg := range msgs {
		require.NoError(t, buffer.AddMessage(ctx, msg))
	}
	foreign := staticMessages{key: "history", msgs: msgs}
	for _, child := range []schema.Memory{buffer, foreign} {
		for budget := 1; budget < 90; budget++ {
			m := newBudgeted(t, []schema.Memory{child}, budget, nil)
			got := loadKey(t, ctx, m, "history").([]llms.ChatMessage)
			require.LessOrEqual(t, sizeOf(t, c, got), budget)
			hasCall, hasResult := false, false
			for _, g := range got {
				hasCall = hasCall || assert.ObjectsAreEqual(call, g)
				hasResult = hasResult || assert.ObjectsAreEqual(result, g)
			}
			require.Equalf(t, hasCall, hasResult, "%T, budget %d: a tool call and its result are kept or dropped together: %v", child, budget, got)
		}
	}
}

// staticMessages is a foreign (non-Itemizer) memory loading fixed messages.
type staticMessages struct {
	key  string
	msgs []llms.ChatMessage
}

func (s staticMessages) GetMemoryKey(context.Context) string      { return s.key }
func (s staticMessages) MemoryVariables(context.Context) []string { return []string{s.key} }
func (s staticMessages) LoadMemoryVariables(context.Context, map[string]any) (map[string]any, error) {
	return map[string]any{s.key: append([]llms.ChatMessage(nil), s.msgs...)}, nil
}
func (s staticMessages) SaveContext(context.Context, map[string]any, map[string]any) error {
	return nil
}
func (s staticMessages) Clear(context.Context) error { return nil }
