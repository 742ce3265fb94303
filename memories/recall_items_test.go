package memories_test

import (
	"context"
	"strings"
	"testing"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/tokens"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// Under a combined token budget Recall is trimmed exchange by exchange, the
// least relevant first, and never half an exchange.
func TestRecall_TrimmedByBudgetLeastRelevantFirst(t *testing.T) {
	ctx := context.Background()
	words := tokens.CounterFunc(func(s string) int { return len(strings.Fields(s)) })
	recall, err := memories.NewRecall(memories.WithK(3))
	require.NoError(t, err)
	turns := [][2]string{
		{"The budget for the offsite is 4,200 euros.", "Noted, budget 4,200 euros."},
		{"Weather looks fine this week.", "Sunny all week."},
		{"We settled the offsite budget after the budget review.", "Great, the budget review is done."},
		{"Lunch was good.", "Glad to hear."},
		{"Is the offsite budget final?", "Yes."},
	}
	for _, tt := range turns {
		require.NoError(t, recall.SaveContext(ctx, map[string]any{"input": tt[0]}, map[string]any{"output": tt[1]}))
	}
	query := map[string]any{"input": "what offsite budget did we settle"}

	// Unbudgeted: the three best exchanges, in conversation order.
	full, err := recall.LoadMemoryVariables(ctx, query)
	require.NoError(t, err)
	fullText := full["relevant_history"].(string)
	items, err := recall.LoadItems(ctx, query)
	require.NoError(t, err)
	require.Len(t, items.List, 3)
	all := []bool{true, true, true}
	rendered, err := items.Render(all)
	require.NoError(t, err)
	assert.Equal(t, fullText, rendered, "rendering every item is the unbudgeted load")
	none, err := items.Render([]bool{false, false, false})
	require.NoError(t, err)
	assert.Equal(t, "", none)

	// The item with the highest score is the one a budget keeps last.
	best := 0
	for i, it := range items.List {
		assert.Equal(t, it.Score, it.Priority)
		if it.Score > items.List[best].Score {
			best = i
		}
	}
	budget := words.CountTokens(items.List[best].Text)
	var trim combined.Trim
	mem, err := combined.New([]schema.Memory{recall}, combined.WithTokenBudget(budget,
		combined.WithTokenCounter(words),
		combined.WithTrimHook(func(_ context.Context, tr combined.Trim) { trim = tr })))
	require.NoError(t, err)
	vars, err := mem.LoadMemoryVariables(ctx, query)
	require.NoError(t, err)
	assert.Equal(t, items.List[best].Text, vars["relevant_history"], "only the most relevant exchange, whole")
	assert.LessOrEqual(t, trim.Tokens, budget)
	require.Len(t, trim.Dropped, 2)
	for _, d := range trim.Dropped {
		assert.Equal(t, "exchange", d.Item.Kind)
		assert.Less(t, d.Item.Score, items.List[best].Score)
	}
	// Messages mode: whole exchanges too.
	rm, err := memories.NewRecall(memories.WithK(3), memories.WithReturnMessages(true))
	require.NoError(t, err)
	for _, tt := range turns {
		require.NoError(t, rm.SaveContext(ctx, map[string]any{"input": tt[0]}, map[string]any{"output": tt[1]}))
	}
	mi, err := rm.LoadItems(ctx, query)
	require.NoError(t, err)
	v, err := mi.Render([]bool{false, true, false})
	require.NoError(t, err)
	msgs := v.([]llms.ChatMessage)
	require.Len(t, msgs, 2, "one whole exchange: the human message and its answer")
	assert.Equal(t, llms.ChatMessageTypeHuman, msgs[0].GetType())
	assert.Equal(t, llms.ChatMessageTypeAI, msgs[1].GetType())
}
