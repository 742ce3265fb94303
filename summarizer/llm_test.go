package summarizer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/memstack/memstack/summarizer"
	"github.com/memstack/memstack/tokens"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/prompts"
)

// toolConversation has every kind of message a memory folds.
func toolConversation() []llms.ChatMessage {
	return []llms.ChatMessage{
		llms.HumanChatMessage{Content: "What's the weather in Paris on 3 May?"},
		llms.AIChatMessage{ToolCalls: []llms.ToolCall{{
			ID: "call_1", Type: "function",
			FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: `{"city":"Paris"}`},
		}}},
		llms.ToolChatMessage{ID: "call_1", Content: `{"temp_c":18}`},
		llms.AIChatMessage{Content: "18°C and mild. We agreed to meet at the Louvre at 10:00."},
	}
}

const toolTranscript = "Human: What's the weather in Paris on 3 May?\n" +
	`AI:  {"name":"weather","arguments":"{\"city\":\"Paris\"}"}` + "\n" +
	`tool: {"temp_c":18}` + "\n" +
	"AI: 18°C and mild. We agreed to meet at the Louvre at 10:00."

func TestLLMSendsRoleSeparatedMessages(t *testing.T) {
	tests := []struct {
		name      string
		previous  string
		wantHuman string
	}{
		{"first summary", "", "New lines of conversation:\n" + toolTranscript},
		{"with a previous summary", "The user is Ana.", "Summary so far:\nThe user is Ana.\n\nNew lines of conversation:\n" + toolTranscript},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := scripted("  Ana will meet the assistant at the Louvre at 10:00 on 3 May.\n")
			s := summarizer.New(model)
			require.NoError(t, s.Validate())

			got, err := s.Summarize(context.Background(), tt.previous, toolConversation())
			require.NoError(t, err)
			assert.Equal(t, "Ana will meet the assistant at the Louvre at 10:00 on 3 May.", got, "the answer is trimmed")

			calls := model.Calls()
			require.Len(t, calls, 1, "one GenerateContent call per Summarize")
			msgs := calls[0].Messages
			require.Len(t, msgs, 2)
			assert.Equal(t, llms.ChatMessageTypeSystem, msgs[0].Role)
			assert.Equal(t, llms.ChatMessageTypeHuman, msgs[1].Role)
			require.Len(t, msgs[0].Parts, 1)
			require.Len(t, msgs[1].Parts, 1)
			assert.IsType(t, llms.TextContent{}, msgs[0].Parts[0])
			assert.IsType(t, llms.TextContent{}, msgs[1].Parts[0])

			system := text(msgs[0])
			assert.NotContains(t, system, "Paris", "the transcript goes in the human message, not the instruction")
			assert.Equal(t, tt.wantHuman, text(msgs[1]))
			assert.Zero(t, calls[0].Options.MaxTokens, "no max tokens requested unless WithMaxTokens is set")
		})
	}
}

func TestLLMDefaultInstruction(t *testing.T) {
	model := scripted("Ana asked about Paris.")
	_, err := summarizer.New(model).Summarize(context.Background(), "", toolConversation())
	require.NoError(t, err)
	system := text(model.Calls()[0].Messages[0])
	for _, want := range []string{
		"third person",
		"Keep every name, number, date and decision",
		"Return only the summary",
		"objectively",
		"folds the new lines into the summary so far",
	} {
		assert.Contains(t, system, want)
	}
	assert.NotContains(t, system, "at most", "no token limit is mentioned without WithMaxTokens")
	assert.NotContains(t, system, "{{", "the template is formatted")
}

func TestLLMCallOptionsPassThrough(t *testing.T) {
	model := scripted("Ana asked about Paris.")
	s := summarizer.New(model,
		summarizer.WithCallOptions(llms.WithModel("tiny-summarizer"), llms.WithTemperature(0.2), llms.WithMaxTokens(999)),
		summarizer.WithMaxTokens(40))
	_, err := s.Summarize(context.Background(), "", toolConversation())
	require.NoError(t, err)
	opts := model.Calls()[0].Options
	assert.Equal(t, "tiny-summarizer", opts.Model)
	assert.InDelta(t, 0.2, opts.Temperature, 1e-9)
	assert.Equal(t, 40, opts.MaxTokens, "WithMaxTokens wins over a max tokens call option")
	assert.Contains(t, text(model.Calls()[0].Messages[0]), "Use at most 40 tokens.")
}

func TestLLMCustomInstruction(t *testing.T) {
	model := scripted("Short.")
	tmpl := prompts.NewPromptTemplate("Fold it. Before: [{{.previous}}] Limit: {{.max_tokens}} Lines: {{.transcript}}", []string{"previous", "transcript"})
	s := summarizer.New(model, summarizer.WithInstruction(tmpl), summarizer.WithMaxTokens(30))
	require.NoError(t, s.Validate())
	_, err := s.Summarize(context.Background(), "Ana.", toolConversation()[:1])
	require.NoError(t, err)
	assert.Equal(t, "Fold it. Before: [Ana.] Limit: 30 Lines: Human: What's the weather in Paris on 3 May?",
		text(model.Calls()[0].Messages[0]))
}

// wordCounter counts whitespace-separated words: easy to reason about.
var wordCounter = tokens.CounterFunc(func(s string) int { return len(strings.Fields(s)) })

func TestLLMEnforcement(t *testing.T) {
	modelErr := errors.New("model is down")
	// The transcript of the first message is 9 words ("Human: What's the
	// weather in Paris on 3 May?"), so with no previous summary a summary
	// must have at most 8.
	msgs := toolConversation()[:1]
	tests := []struct {
		name    string
		answer  string
		err     error
		opts    []summarizer.Option
		want    string
		wantErr error
	}{
		{name: "good", answer: "Ana asked about Paris.", want: "Ana asked about Paris."},
		{name: "empty", answer: "", wantErr: summarizer.ErrEmptySummary},
		{name: "whitespace", answer: " \n\t ", wantErr: summarizer.ErrEmptySummary},
		{name: "over the maximum", answer: "one two three four five six", opts: []summarizer.Option{summarizer.WithMaxTokens(5)}, wantErr: summarizer.ErrSummaryTooLong},
		{name: "at the maximum", answer: "one two three four five", opts: []summarizer.Option{summarizer.WithMaxTokens(5)}, want: "one two three four five"},
		{name: "as long as the input", answer: "w w w w w w w w w", wantErr: summarizer.ErrNotShorter},
		{name: "longer than the input", answer: strings.Repeat("w ", 40), wantErr: summarizer.ErrNotShorter},
		{name: "one shorter than the input", answer: "w w w w w w w w", want: "w w w w w w w w"},
		{name: "model error", err: modelErr, wantErr: modelErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := &modelDouble{answer: func(int, []llms.MessageContent) (string, error) { return tt.answer, tt.err }}
			opts := append([]summarizer.Option{summarizer.WithTokenCounter(wordCounter)}, tt.opts...)
			got, err := summarizer.New(model, opts...).Summarize(context.Background(), "", msgs)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Empty(t, got)
				assert.NotContains(t, err.Error(), "Paris", "errors never quote the conversation")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestLLMNotShorterCountsThePreviousSummary(t *testing.T) {
	// previous (3 words) + transcript (9 words) = 12: 11 words pass, 12 fail.
	for _, tc := range []struct {
		words int
		ok    bool
	}{{11, true}, {12, false}} {
		model := scripted(strings.TrimSpace(strings.Repeat("w ", tc.words)))
		_, err := summarizer.New(model, summarizer.WithTokenCounter(wordCounter)).
			Summarize(context.Background(), "Ana is here.", toolConversation()[:1])
		if tc.ok {
			assert.NoError(t, err, "%d words", tc.words)
		} else {
			assert.ErrorIs(t, err, summarizer.ErrNotShorter, "%d words", tc.words)
		}
	}
}

func TestLLMNoChoices(t *testing.T) {
	model := modelFunc(func(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error) {
		return &llms.ContentResponse{}, nil
	})
	_, err := summarizer.New(model).Summarize(context.Background(), "", toolConversation())
	require.ErrorIs(t, err, summarizer.ErrEmptySummary)
	assert.Contains(t, err.Error(), "no choices")
}

type modelFunc func(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error)

func (f modelFunc) GenerateContent(ctx context.Context, m []llms.MessageContent, o ...llms.CallOption) (*llms.ContentResponse, error) {
	return f(ctx, m, o...)
}

func (f modelFunc) Call(ctx context.Context, prompt string, o ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, f, prompt, o...)
}

func TestLLMBadConfiguration(t *testing.T) {
	var nilDouble *modelDouble
	tests := []struct {
		name    string
		s       *summarizer.LLM
		wantErr error
		wantMsg string
	}{
		{"nil model", summarizer.New(nil), summarizer.ErrNilModel, "New(nil)"},
		{"typed nil model", summarizer.New(nilDouble), summarizer.ErrNilModel, "model"},
		{"max tokens 0", summarizer.New(scripted("x"), summarizer.WithMaxTokens(0)), summarizer.ErrInvalidOption, "WithMaxTokens(0)"},
		{"max tokens negative", summarizer.New(scripted("x"), summarizer.WithMaxTokens(-3)), summarizer.ErrInvalidOption, "WithMaxTokens(-3)"},
		{"nil counter", summarizer.New(scripted("x"), summarizer.WithTokenCounter(nil)), summarizer.ErrInvalidOption, "WithTokenCounter(nil)"},
		{"empty instruction", summarizer.New(scripted("x"), summarizer.WithInstruction(prompts.PromptTemplate{})), summarizer.ErrInvalidOption, "WithInstruction"},
		{"unknown template variable", summarizer.New(scripted("x"), summarizer.WithInstruction(prompts.NewPromptTemplate("{{.summary}}", nil))), summarizer.ErrInvalidOption, "WithInstruction"},
		{"nil option", summarizer.New(scripted("x"), nil), summarizer.ErrInvalidOption, "option 1 of 1 is nil"},
		{"nil call option", summarizer.New(scripted("x"), summarizer.WithCallOptions(llms.WithModel("m"), nil)), summarizer.ErrInvalidOption, "WithCallOptions: option 2 of 2"},
		{"nil *LLM", nil, summarizer.ErrNilModel, "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			require.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.wantMsg)
			got, err := tt.s.Summarize(context.Background(), "prev", toolConversation())
			require.ErrorIs(t, err, tt.wantErr, "every Summarize call reports the configuration error")
			assert.Empty(t, got)
		})
	}
}

func TestLLMContext(t *testing.T) {
	t.Run("cancelled before the call", func(t *testing.T) {
		model := scripted("x")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := summarizer.New(model).Summarize(ctx, "", toolConversation())
		require.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, model.Calls(), "no model call with a done context")
	})
	t.Run("cancelled during the call", func(t *testing.T) {
		model := &modelDouble{block: true}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := summarizer.New(model).Summarize(ctx, "", toolConversation())
			done <- err
		}()
		require.Eventually(t, func() bool { return len(model.Calls()) == 1 }, 5e9, 1e6)
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	t.Run("nil context", func(t *testing.T) {
		model := scripted("x")
		//nolint:staticcheck // a nil context is the bad input under test
		_, err := summarizer.New(model).Summarize(nil, "", toolConversation())
		require.Error(t, err)
		assert.Empty(t, model.Calls())
	})
}

func TestLLMInputEdgeCases(t *testing.T) {
	model := scripted("x")
	s := summarizer.New(model)
	got, err := s.Summarize(context.Background(), "The user is Ana.", nil)
	require.NoError(t, err)
	assert.Equal(t, "The user is Ana.", got, "no messages: the summary is unchanged")

	_, err = s.Summarize(context.Background(), "", []llms.ChatMessage{llms.HumanChatMessage{Content: "hi"}, nil})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 2 of 2")
	assert.Empty(t, model.Calls(), "bad input makes no model call")
}

func TestLLMConcurrentUse(t *testing.T) {
	model := &modelDouble{answer: func(call int, _ []llms.MessageContent) (string, error) {
		return fmt.Sprintf("Summary %d.", call), nil
	}}
	s := summarizer.New(model)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Summarize(context.Background(), fmt.Sprintf("prev %d", i), toolConversation())
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	assert.Len(t, model.Calls(), 16)
}
