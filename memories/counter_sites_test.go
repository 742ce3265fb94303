package memories_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
	"github.com/memstack/memstack/tokens"
)

// badCounters return a negative count or panic (issue 17, item 10).
var badCounters = map[string]tokens.Counter{
	"negative": tokens.CounterFunc(func(string) int { return -1 }),
	"panics":   tokens.CounterFunc(func(string) int { panic("counter: nil table") }),
}

// TestFacts_BadCounterFailsTheLoad: a Facts load whose counter returns a
// negative count or panics fails with an error wrapping tokens.ErrBadCount
// instead of showing every fact for free or crashing.
func TestFacts_BadCounterFailsTheLoad(t *testing.T) {
	ctx := context.Background()
	ext := extract.ExtractorFunc(func(context.Context, []llms.ChatMessage) ([]extract.Candidate, error) {
		return []extract.Candidate{{Subject: "user", Attribute: "name", Value: "Ana"}}, nil
	})
	for name, c := range badCounters {
		for _, msgs := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/messages=%t", name, msgs), func(t *testing.T) {
				m, err := memories.NewFacts(ext, memories.WithTokenCounter(c), memories.WithFactTokens(5), memories.WithReturnMessages(msgs))
				require.NoError(t, err)
				require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "I'm Ana"}, map[string]any{"output": "hi"}))
				_, err = m.LoadMemoryVariables(ctx, nil)
				require.ErrorIs(t, err, tokens.ErrBadCount)
			})
		}
	}
}

// TestSummary_BadCounterFoldsNothing: a token-mode Summary whose counter
// returns a negative count or panics folds nothing, reports the error and
// keeps every message raw; it never crashes.
func TestSummary_BadCounterFoldsNothing(t *testing.T) {
	ctx := context.Background()
	for name, c := range badCounters {
		t.Run(name, func(t *testing.T) {
			var events []memories.SummaryEvent
			m, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithTokenCounter(c), memories.WithMaxTokens(10),
				memories.WithSummaryHook(func(e memories.SummaryEvent) { events = append(events, e) }), memories.WithRetryBackoff(0, 0))
			require.NoError(t, err)
			var saveErr error
			for i := range 5 {
				saveErr = m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("question %d with some words", i)}, map[string]any{"output": "answer"})
			}
			require.ErrorIs(t, saveErr, tokens.ErrBadCount, "the turn is stored; the summarization failed")
			assert.Zero(t, m.Stats().MessagesFolded)
			require.NotEmpty(t, events)
			assert.ErrorIs(t, events[len(events)-1].Err, tokens.ErrBadCount)
			vars, err := m.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			assert.Contains(t, vars["history"], "question 4 with some words")
			assert.Contains(t, vars["history"], "question 0 with some words", "every message stays raw")
		})
	}
}
