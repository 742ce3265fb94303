package combined_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
)

// TestBudgetRestoresWhatFitsPastAnOversizedUnit: one oversized newest
// message in the README's stack (RecentN(6) + Facts + Recall, budget 1000)
// must not empty the other layers: the take-back goes on past a unit that
// does not fit.
func TestBudgetRestoresWhatFitsPastAnOversizedUnit(t *testing.T) {
	ctx := context.Background()
	recent := newRecent(t, 6)
	patterns, err := extract.NewPatterns()
	require.NoError(t, err)
	facts, err := memories.NewFacts(patterns)
	require.NoError(t, err)
	recall, err := memories.NewRecall(memories.WithExcludeRecent(6))
	require.NoError(t, err)
	mem, err := combined.New([]schema.Memory{recent, facts, recall}, combined.WithTokenBudget(1000))
	require.NoError(t, err)
	save := func(in, out string) {
		require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}))
	}
	save("My name is Ana and I live in Porto.", "Nice to meet you, Ana.")
	save("The cabin booking is for Friday.", "Booked the cabin for Friday.")
	for i := 0; i < 5; i++ {
		save("Anything else on the agenda?", "Not yet.")
	}
	save(strings.Repeat("a very long pasted log line ", 400), "That is a long log.") // ~2,400 tokens
	vars, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": "when is the cabin booked?"})
	require.NoError(t, err)
	assert.Contains(t, vars["facts"], "Ana", "facts fit and are loaded")
	assert.Contains(t, vars["relevant_history"], "cabin", "recall fits and is loaded")
	assert.NotContains(t, vars["history"], "pasted log", "the oversized message does not fit")
	assert.Contains(t, vars["history"], "That is a long log.", "the window's newest message that fits")
}

// TestBudgetSummaryRawMessagesFitWithoutTheSummary: a summary line larger
// than the budget is dropped, but the raw messages that fit are loaded.
func TestBudgetSummaryRawMessagesFitWithoutTheSummary(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("the customer talked about many things at length ", 60)
	s, err := memories.NewSummary(fixedSummary(long), memories.WithMaxMessages(4), memories.WithBatchSize(2))
	require.NoError(t, err)
	mem, err := combined.New([]schema.Memory{s}, combined.WithTokenBudget(300))
	require.NoError(t, err)
	for i := 0; i < 6; i++ {
		require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": "short question"}, map[string]any{"output": "short answer"}))
	}
	vars, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": "?"})
	require.NoError(t, err)
	h := vars["history"].(string)
	assert.NotContains(t, h, "many things", "the summary line does not fit")
	assert.Contains(t, h, "short answer", "the raw messages do")
}

// fixedSummary is a summarizer double: it always answers the same text.
type fixedSummary string

func (f fixedSummary) Summarize(context.Context, string, []llms.ChatMessage) (string, error) {
	return string(f), nil
}
