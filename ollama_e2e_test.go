package memstack_test

// End-to-end tests of local summarization with Ollama: a real `ollama serve`
// (testsvc.Ollama) with the tiny generated model, langchaingo's real
// llms/ollama client and real conversation chain, and memstack's Summary
// memory with summarizer.New over that client. No test double anywhere.
//
// The tiny model answers tinymodel.Answer ("Hello from tiny model!", 5
// cl100k tokens) to every prompt, so every chain answer and every summary is
// that exact text. The human turns are long, so that answer is always
// shorter than what it replaces and the summarizer's length rule accepts
// it. The model is created with num_ctx 512 and the tiny vocabulary spends
// one token per character, so the server truncates the longer prompts
// (logging "truncating input prompt") before generating; that is Ollama's
// normal behaviour and does not change the tiny model's answer.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/ollama"

	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/internal/tinymodel"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
)

// ollamaCalls records, through langchaingo's callbacks, every
// GenerateContent call the Ollama client makes: 'S' for a summarizer call
// (a system instruction, then the human message with the transcript), 'C'
// for a chain call (one human message, the formatted prompt).
type ollamaCalls struct {
	callbacks.SimpleHandler

	mu      sync.Mutex
	kinds   []byte
	prompts []string // the text of the last message of each call
}

func (h *ollamaCalls) HandleLLMGenerateContentStart(_ context.Context, ms []llms.MessageContent) {
	kind := byte('C')
	if len(ms) == 2 && ms[0].Role == llms.ChatMessageTypeSystem && ms[1].Role == llms.ChatMessageTypeHuman {
		kind = 'S'
	}
	var last string
	if len(ms) > 0 {
		for _, p := range ms[len(ms)-1].Parts {
			if tp, ok := p.(llms.TextContent); ok {
				last += tp.Text
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kinds = append(h.kinds, kind)
	h.prompts = append(h.prompts, last)
}

func (h *ollamaCalls) snapshot() (string, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.kinds), append([]string(nil), h.prompts...)
}

// newTinyLLM returns langchaingo's Ollama client for the tiny model on the
// test server, with its calls recorded. Never ollama.WithPullModel: the
// server must not try to reach the internet.
func newTinyLLM(t *testing.T, base string) (*ollama.LLM, *ollamaCalls) {
	t.Helper()
	llm, err := ollama.New(ollama.WithServerURL(base), ollama.WithModel(testsvc.OllamaModel))
	require.NoError(t, err)
	calls := &ollamaCalls{}
	llm.CallbacksHandler = calls
	return llm, calls
}

// humanTurn is the long human message of turn i (about 300 characters, 60
// cl100k tokens), so a 5-token summary is always shorter.
func humanTurn(i int) string {
	return fmt.Sprintf("Turn %d: Maria Lopez asks about the team offsite in Lisbon for 12 people from Wednesday 14 May "+
		"to Friday 16 May 2025, with a budget of 18,000 euros, the LX Factory loft as the venue, the Hotel Ribeira "+
		"for three nights, a sailing trip on Friday morning and a team dinner on Wednesday at 20:00.", i)
}

func TestOllamaDirectCall(t *testing.T) {
	base := testsvc.Ollama(t)
	llm, calls := newTinyLLM(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	out, err := llms.GenerateFromSinglePrompt(ctx, llm, "Say hi")
	require.NoError(t, err)
	assert.Equal(t, tinymodel.Answer, out)
	assert.Equal(t, "Hello from tiny model!", out)

	resp, err := llm.GenerateContent(ctx, []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, "You are terse."),
		llms.TextParts(llms.ChatMessageTypeHuman, "Hello?"),
	})
	require.NoError(t, err)
	require.Len(t, resp.Choices, 1)
	assert.Equal(t, tinymodel.Answer, resp.Choices[0].Content)
	assert.Equal(t, 5, resp.Choices[0].GenerationInfo["CompletionTokens"], "the answer is 5 tokens of the tiny model")

	kinds, _ := calls.snapshot()
	assert.Equal(t, "CS", kinds, "two calls: a single prompt, then a system+human conversation")
}

func TestOllamaSummaryInConversationChain(t *testing.T) {
	base := testsvc.Ollama(t)
	llm, calls := newTinyLLM(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var events []memories.SummaryEvent
	// 4 raw messages at most, batches of 2 (one turn): from turn 3 on, each
	// turn folds its oldest raw turn in one summarizer call.
	mem, err := memories.NewSummary(summarizer.New(llm),
		memories.WithMaxMessages(4), memories.WithBatchSize(2),
		memories.WithSummaryHook(func(e memories.SummaryEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}))
	require.NoError(t, err)
	defer mem.Close()
	chain := chains.NewConversation(llm, mem)

	const turns = 8
	for i := 1; i <= turns; i++ {
		out, err := chains.Run(ctx, chain, humanTurn(i))
		require.NoError(t, err, "turn %d", i)
		require.Equal(t, tinymodel.Answer, out, "turn %d: the chain's answer", i)
	}

	// Model calls: one per chain turn, and one summarizer call per turn
	// from turn 3 on (after that turn's chain call): 8 + 6 = 14.
	kinds, prompts := calls.snapshot()
	assert.Equal(t, "CCCSCSCSCSCSCS", kinds, "the sequence of model calls")
	st := mem.Stats()
	assert.Equal(t, memories.SummaryStats{Calls: turns - 2, Failures: 0, MessagesFolded: 2 * (turns - 2)}, st)
	require.Len(t, events, turns-2)
	for i, e := range events {
		assert.NoError(t, e.Err, "summary %d", i+1)
		assert.Equal(t, 2, e.Messages, "summary %d folds one turn", i+1)
	}

	// What each summarizer call was given: the previous summary (the model's
	// own answer, after the first) and the oldest raw turn.
	var sumPrompts []string
	for i, k := range kinds {
		if k == 'S' {
			sumPrompts = append(sumPrompts, prompts[i])
		}
	}
	for j, p := range sumPrompts {
		want := "New lines of conversation:\nHuman: " + humanTurn(j+1) + "\nAI: " + tinymodel.Answer
		if j > 0 {
			want = "Summary so far:\n" + tinymodel.Answer + "\n\n" + want
		}
		assert.Equal(t, want, p, "summarizer call %d", j+1)
	}
	// The chain sees the summary from turn 4 on (the first fold is at the
	// end of turn 3).
	chainPrompt := func(turn int) string {
		n := 0
		for i, k := range kinds {
			if k == 'C' {
				if n++; n == turn {
					return prompts[i]
				}
			}
		}
		return ""
	}
	assert.NotContains(t, chainPrompt(3), memories.SummaryPrefix)
	assert.Contains(t, chainPrompt(4), "Current conversation:\n"+memories.SummaryPrefix+tinymodel.Answer+"\nHuman: "+humanTurn(2)+"\n")

	// The loaded memory: the exact summary the model returned, then the two
	// newest turns raw.
	vars, err := mem.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	want := "Summary of earlier conversation: Hello from tiny model!\n" +
		"Human: " + humanTurn(turns-1) + "\nAI: Hello from tiny model!\n" +
		"Human: " + humanTurn(turns) + "\nAI: Hello from tiny model!"
	assert.Equal(t, want, vars["history"])

	// Nothing lost: folded + raw == sent.
	raw := strings.Count(vars["history"].(string), "\nHuman: ") + strings.Count(vars["history"].(string), "\nAI: ")
	assert.Equal(t, 4, raw)
	assert.Equal(t, int64(2*turns), st.MessagesFolded+int64(raw), "every message sent is folded or raw")
}

func TestOllamaSummaryBackground(t *testing.T) {
	base := testsvc.Ollama(t)
	llm, calls := newTinyLLM(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	mem, err := memories.NewSummary(summarizer.New(llm),
		memories.WithMaxMessages(4), memories.WithBatchSize(2), memories.WithBackground(true))
	require.NoError(t, err)
	defer mem.Close()
	chain := chains.NewConversation(llm, mem)

	const turns = 8
	for i := 1; i <= turns; i++ {
		out, err := chains.Run(ctx, chain, humanTurn(i))
		require.NoError(t, err, "turn %d", i)
		require.Equal(t, tinymodel.Answer, out, "turn %d", i)
	}
	require.NoError(t, mem.Flush(ctx))

	// Background folds may coalesce (a fold covers every message beyond the
	// 4 kept raw), so the number of calls lies between 1 and one per turn
	// from turn 3; it must match what the server was asked.
	kinds, _ := calls.snapshot()
	st := mem.Stats()
	assert.Equal(t, int64(0), st.Failures)
	assert.Equal(t, int64(strings.Count(kinds, "S")), st.Calls, "Stats().Calls counts the summarizer calls made")
	assert.Equal(t, turns, strings.Count(kinds, "C"), "one chain call per turn")
	assert.GreaterOrEqual(t, st.Calls, int64(1))
	assert.LessOrEqual(t, st.Calls, int64(turns-2))

	vars, err := mem.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	want := "Summary of earlier conversation: Hello from tiny model!\n" +
		"Human: " + humanTurn(turns-1) + "\nAI: Hello from tiny model!\n" +
		"Human: " + humanTurn(turns) + "\nAI: Hello from tiny model!"
	assert.Equal(t, want, vars["history"])
	assert.Equal(t, int64(2*turns-4), st.MessagesFolded, "12 folded + 4 raw = 16 sent")

	require.NoError(t, mem.Close())
	assert.ErrorIs(t, mem.Flush(ctx), memories.ErrClosed)
}

func TestOllamaSummaryMaxTokensIsSentToTheServer(t *testing.T) {
	base := testsvc.Ollama(t)
	llm, _ := newTinyLLM(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// WithMaxTokens(3) reaches the server as num_predict 3: the tiny model
	// stops after three of its tokens, "Hello", " from", " tiny".
	s := summarizer.New(llm, summarizer.WithMaxTokens(3))
	got, err := s.Summarize(ctx, "", []llms.ChatMessage{
		llms.HumanChatMessage{Content: humanTurn(1)},
		llms.AIChatMessage{Content: "Noted."},
	})
	require.NoError(t, err)
	assert.Equal(t, "Hello from tiny", got)
}

func TestOllamaSummaryModelMissingKeepsMessages(t *testing.T) {
	base := testsvc.Ollama(t)
	missing, err := ollama.New(ollama.WithServerURL(base), ollama.WithModel("no-such-model"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	mem, err := memories.NewSummary(summarizer.New(missing),
		memories.WithMaxMessages(2), memories.WithBatchSize(2))
	require.NoError(t, err)
	defer mem.Close()

	require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": humanTurn(1)}, map[string]any{"output": "One."}))
	err = mem.SaveContext(ctx, map[string]any{"input": humanTurn(2)}, map[string]any{"output": "Two."})
	require.Error(t, err, "the failed summarization is reported by the synchronous save")
	assert.Contains(t, err.Error(), "not found", "the server's answer: the model is missing")
	assert.Equal(t, memories.SummaryStats{Calls: 1, Failures: 1, MessagesFolded: 0}, mem.Stats())

	// The turn was stored and nothing was folded: all four messages are raw.
	vars, err := mem.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "Human: "+humanTurn(1)+"\nAI: One.\nHuman: "+humanTurn(2)+"\nAI: Two.", vars["history"])
}
