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
	recall, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(3), memories.WithContextWeight(0), memories.WithRecallDates(false))
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

	// Unbudgeted: the three best exchanges (1, 3 and 5 share the query's
	// words), in conversation order.
	full, err := recall.LoadMemoryVariables(ctx, query)
	require.NoError(t, err)
	fullText := full["relevant_history"].(string)
	assert.Equal(t, 3, strings.Count(fullText, "Human: "), fullText)
	assert.NotContains(t, fullText, "Weather")

	// A budget is offered the hits and their neighbours: every exchange
	// here, the hits with Priority = score, the neighbours (2 and 4) with
	// 0.8 of the best hit beside them.
	items, err := recall.LoadItems(ctx, query)
	require.NoError(t, err)
	require.Len(t, items.List, 5)
	hits := []bool{true, false, true, false, true}
	best := 0
	for i, it := range items.List {
		if hits[i] {
			assert.Equal(t, it.Score, it.Priority, "hit %d", i)
			assert.Positive(t, it.Score)
		} else {
			assert.Zero(t, it.Score, "a neighbour is no hit")
			want := memories.DefaultRecallNeighbourShare * max(items.List[i-1].Score, items.List[i+1].Score)
			assert.InDelta(t, want, it.Priority, 1e-12, "neighbour %d", i)
		}
		if it.Priority > items.List[best].Priority {
			best = i
		}
	}
	rendered, err := items.Render(hits)
	require.NoError(t, err)
	assert.Equal(t, fullText, rendered, "rendering the hits is the unbudgeted load")
	none, err := items.Render(make([]bool, 5))
	require.NoError(t, err)
	assert.Equal(t, "", none)

	// A budget that holds one exchange keeps the most relevant one.
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
	require.Len(t, trim.Dropped, 4)
	for _, d := range trim.Dropped {
		assert.Equal(t, "exchange", d.Item.Kind)
		assert.Less(t, d.Item.Score, items.List[best].Score)
	}

	// A budget with room for everything fills it: more than the
	// unbudgeted load's three exchanges.
	roomy, err := combined.New([]schema.Memory{recall}, combined.WithTokenBudget(10000, combined.WithTokenCounter(words)))
	require.NoError(t, err)
	vars, err = roomy.LoadMemoryVariables(ctx, query)
	require.NoError(t, err)
	assert.Equal(t, 5, strings.Count(vars["relevant_history"].(string), "Human: "), "the budget's room is used")
	assert.Contains(t, vars["relevant_history"], "Weather")

	// Messages mode: whole exchanges too.
	rm, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(3), memories.WithContextWeight(0), memories.WithReturnMessages(true))
	require.NoError(t, err)
	for _, tt := range turns {
		require.NoError(t, rm.SaveContext(ctx, map[string]any{"input": tt[0]}, map[string]any{"output": tt[1]}))
	}
	mi, err := rm.LoadItems(ctx, query)
	require.NoError(t, err)
	v, err := mi.Render([]bool{false, true, false, false, false})
	require.NoError(t, err)
	msgs := v.([]llms.ChatMessage)
	require.Len(t, msgs, 2, "one whole exchange: the human message and its answer")
	assert.Equal(t, llms.ChatMessageTypeHuman, msgs[0].GetType())
	assert.Equal(t, llms.ChatMessageTypeAI, msgs[1].GetType())
}
