package summarizer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/memstack/memstack/summarizer"
	"github.com/memstack/memstack/tokens"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

func bakery() []llms.ChatMessage {
	return []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Hi there! My name is Ana Lopez and I run a bakery in Porto."},
		llms.AIChatMessage{Content: "Hello Ana! Nice to meet you. How can I help?"},
		llms.HumanChatMessage{Content: "I need 40 boxes of flour delivered every Monday. The budget is 900 euros a month."},
		llms.AIChatMessage{Content: "Understood. I found two suppliers. Moinhos Lda charges 850 euros and Farinha SA charges 950 euros."},
		llms.HumanChatMessage{Content: "Let's go with Moinhos. Thanks!"},
		llms.AIChatMessage{Content: "Great choice. We agreed on Moinhos Lda, first delivery on 6 May. Anything else?"},
	}
}

func cl100k(t testing.TB) tokens.Counter {
	t.Helper()
	c, err := tokens.CL100K()
	require.NoError(t, err)
	return c
}

func TestExtractiveKeepsTheInformativeSentences(t *testing.T) {
	got, err := summarizer.NewExtractive(summarizer.WithBudget(60)).Summarize(context.Background(), "", bakery())
	require.NoError(t, err)
	assert.Equal(t, "Human: I need 40 boxes of flour delivered every Monday. The budget is 900 euros a month. "+
		"AI: Moinhos Lda charges 850 euros and Farinha SA charges 950 euros. We agreed on Moinhos Lda, first delivery on 6 May.", got)
	for _, filler := range []string{"Hi there", "Hello", "Thanks", "Great choice", "Anything else", "Nice to meet"} {
		assert.NotContains(t, got, filler)
	}
}

func TestExtractiveBudget(t *testing.T) {
	counter := cl100k(t)
	long := append(bakery(), bakery()...)
	for _, budget := range []int{3, 5, 10, 20, 30, 60, 120, 200, 1000} {
		s := summarizer.NewExtractive(summarizer.WithBudget(budget))
		got, err := s.Summarize(context.Background(), "", long)
		require.NoError(t, err, "budget %d", budget)
		assert.NotEmpty(t, got)
		assert.LessOrEqual(t, counter.CountTokens(got), budget, "budget %d: %q", budget, got)
	}
	got, err := summarizer.NewExtractive(summarizer.WithBudget(10)).Summarize(context.Background(), "", bakery())
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(got, "…"), "when no sentence fits, the best one is cut: %q", got)

	_, err = summarizer.NewExtractive(summarizer.WithBudget(1)).Summarize(context.Background(), "", bakery())
	require.ErrorIs(t, err, summarizer.ErrSummaryTooLong, "a budget too small for one word is reported")
}

func TestExtractiveIsDeterministic(t *testing.T) {
	prev := "Human: My name is Ana Lopez. AI: The budget is 900 euros a month."
	first, err := summarizer.NewExtractive(summarizer.WithBudget(50)).Summarize(context.Background(), prev, bakery())
	require.NoError(t, err)
	for range 30 {
		got, err := summarizer.NewExtractive(summarizer.WithBudget(50)).Summarize(context.Background(), prev, bakery())
		require.NoError(t, err)
		require.Equal(t, first, got)
	}
}

func TestExtractiveKeepsOriginalOrderAndSpeakers(t *testing.T) {
	msgs := []llms.ChatMessage{
		llms.HumanChatMessage{Content: "The deadline is Friday 14 June."},
		llms.AIChatMessage{Content: "Noted: Friday 14 June."},
		llms.HumanChatMessage{Content: "We decided on the blue logo by Marta Silva."},
	}
	got, err := summarizer.NewExtractive().Summarize(context.Background(), "", msgs)
	require.NoError(t, err)
	assert.Equal(t, "Human: The deadline is Friday 14 June. AI: Noted: Friday 14 June. Human: We decided on the blue logo by Marta Silva.", got)
}

func TestExtractiveFoldsThePreviousSummary(t *testing.T) {
	s := summarizer.NewExtractive(summarizer.WithBudget(45))
	first, err := s.Summarize(context.Background(), "", bakery()[:4])
	require.NoError(t, err)
	require.Contains(t, first, "900 euros")

	second, err := s.Summarize(context.Background(), first, bakery()[4:])
	require.NoError(t, err)
	assert.Contains(t, second, "We agreed on Moinhos Lda, first delivery on 6 May.", "the new decision is kept")
	assert.Contains(t, second, "euros", "facts of the previous summary survive")
	assert.Equal(t, 1, strings.Count(second, "AI: "), "a speaker is written only where it changes: %q", second)
	assert.LessOrEqual(t, cl100k(t).CountTokens(second), 45)
}

func TestExtractiveToolCalls(t *testing.T) {
	got, err := summarizer.NewExtractive().Summarize(context.Background(), "", toolConversation())
	require.NoError(t, err)
	assert.Contains(t, got, `called weather({"city":"Paris"})`)
	assert.Contains(t, got, "Louvre at 10:00")
}

func TestExtractiveEdgeCases(t *testing.T) {
	s := summarizer.NewExtractive()
	got, err := s.Summarize(context.Background(), "Ana runs a bakery.", nil)
	require.NoError(t, err)
	assert.Equal(t, "Ana runs a bakery.", got, "no messages: the summary is unchanged")

	_, err = s.Summarize(context.Background(), "", []llms.ChatMessage{llms.HumanChatMessage{Content: "  "}, llms.AIChatMessage{}})
	require.ErrorIs(t, err, summarizer.ErrEmptySummary)

	got, err = s.Summarize(context.Background(), "", []llms.ChatMessage{llms.HumanChatMessage{Content: "hello there"}})
	require.NoError(t, err)
	assert.Equal(t, "Human: hello there.", got, "with nothing informative the sentences are kept anyway")

	_, err = s.Summarize(context.Background(), "", []llms.ChatMessage{nil})
	require.Error(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Summarize(ctx, "", bakery())
	require.ErrorIs(t, err, context.Canceled)
}

func TestExtractiveBadConfiguration(t *testing.T) {
	tests := []struct {
		name string
		s    *summarizer.Extractive
		msg  string
	}{
		{"budget 0", summarizer.NewExtractive(summarizer.WithBudget(0)), "WithBudget(0)"},
		{"negative budget", summarizer.NewExtractive(summarizer.WithBudget(-1)), "WithBudget(-1)"},
		{"nil counter", summarizer.NewExtractive(summarizer.WithExtractiveTokenCounter(nil)), "WithExtractiveTokenCounter(nil)"},
		{"nil option", summarizer.NewExtractive(nil), "nil"},
		{"nil *Extractive", nil, "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.s.Validate(), summarizer.ErrInvalidOption)
			assert.Contains(t, tt.s.Validate().Error(), tt.msg)
			_, err := tt.s.Summarize(context.Background(), "", bakery())
			require.ErrorIs(t, err, summarizer.ErrInvalidOption)
		})
	}
}

func TestExtractiveCustomCounter(t *testing.T) {
	s := summarizer.NewExtractive(summarizer.WithBudget(12), summarizer.WithExtractiveTokenCounter(wordCounter))
	got, err := s.Summarize(context.Background(), "", bakery())
	require.NoError(t, err)
	assert.LessOrEqual(t, len(strings.Fields(got)), 12)
	assert.Equal(t, "AI: We agreed on Moinhos Lda, first delivery on 6 May.", got)
}
