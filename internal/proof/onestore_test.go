package proof_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/fake"
	"github.com/tmc/langchaingo/prompts"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

// The one-store suite (issue 16): a user passes one store value to every
// layer of a stack — the first thing a user writes — and no layer
// destroys what another reads, and every turn is stored once.

// oneStoreTurns is the conversation: a fact in the first turn, 40 turns
// of other talk.
func oneStoreTurns() [][2]string {
	turns := [][2]string{{"My cat is called Zorro.", "What a fine name for a cat."}}
	topics := []string{"the weather in Lisbon", "a recipe for soup", "train timetables", "the football match",
		"a book about rivers", "my sister's wedding", "a new laptop", "the garden fence"}
	for i := 1; i <= 40; i++ {
		topic := topics[i%len(topics)]
		turns = append(turns, [2]string{
			fmt.Sprintf("Question %d: tell me something about %s.", i, topic),
			fmt.Sprintf("Answer %d: here is something about %s.", i, topic),
		})
	}
	return turns
}

// assertStoredOnce checks that s holds exactly the messages of turns for
// id, each once, in order.
func assertStoredOnce(t *testing.T, ctx context.Context, s store.Store, id memstack.Identity, turns [][2]string) {
	t.Helper()
	all, err := s.All(ctx, id)
	require.NoError(t, err)
	var want, got []string
	for _, tr := range turns {
		want = append(want, tr[0], tr[1])
	}
	for _, r := range all {
		got = append(got, r.Message.GetContent())
	}
	assert.Equal(t, want, got, "the store holds every message of the conversation, once, in order")
}

func TestOneStore_RecentNAndRecallRecallTheFirstTurn(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.space(t)("stack") // one store value for the whole stack
			id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}
			ctx := memstack.WithIdentity(context.Background(), id)

			recent, err := memories.NewRecentN(6, memories.WithStore(st))
			require.NoError(t, err)
			recall, err := memories.NewRecall(memories.WithStore(st))
			require.NoError(t, err)
			mem, err := combined.New([]schema.Memory{recent, recall}, combined.WithTokenBudget(1000))
			require.NoError(t, err)

			// The stack runs in a real langchaingo chain, as a user's
			// program would run it; only the model's answers are canned.
			turns := oneStoreTurns()
			answers := make([]string, len(turns))
			for i, tr := range turns {
				answers[i] = tr[1]
			}
			prompt := prompts.NewPromptTemplate("{{.history}}\n{{.relevant_history}}\nHuman: {{.input}}\nAI:",
				[]string{"history", "relevant_history", "input"})
			chain := chains.NewLLMChain(fake.NewFakeLLM(answers), prompt)
			chain.Memory = mem
			for _, tr := range turns {
				_, err := chains.Call(ctx, chain, map[string]any{"input": tr[0]})
				require.NoError(t, err)
			}

			assertStoredOnce(t, ctx, st, id, turns)
			stat, err := st.Stat(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, 82, stat.Count)

			vars, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": "What is my cat called?"})
			require.NoError(t, err)
			assert.Contains(t, vars["relevant_history"], "My cat is called Zorro.", "Recall finds the first turn in the shared store")
			history := vars["history"].(string)
			assert.Equal(t, 6, strings.Count(history, "\n")+1, "RecentN shows its six newest messages, none twice:\n%s", history)
			assert.Contains(t, history, "Answer 40:")
			assert.Equal(t, 1, strings.Count(history, "Answer 40:"))
		})
	}
}

func TestOneStore_SummaryRecallBufferKeepTheTranscript(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.space(t)("stack")
			id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c2"}
			ctx := memstack.WithIdentity(context.Background(), id)

			sum, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(st),
				memories.WithMaxMessages(6), memories.WithBatchSize(2), memories.WithMemoryKey("summary"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = sum.Close() })
			recall, err := memories.NewRecall(memories.WithStore(st))
			require.NoError(t, err)
			buf := mustBuffer(memories.WithStore(st))
			mem, err := combined.New([]schema.Memory{sum, recall, buf})
			require.NoError(t, err)

			turns := oneStoreTurns()
			for _, tr := range turns {
				require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": tr[0]}, map[string]any{"output": tr[1]}))
			}
			assert.Positive(t, sum.Stats().MessagesFolded, "the Summary folded")
			assertStoredOnce(t, ctx, st, id, turns)

			vars, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": "What is my cat called?"})
			require.NoError(t, err)
			history := vars["history"].(string)
			assert.Equal(t, 82, strings.Count(history, "\n")+1, "the Buffer shows the whole transcript")
			assert.True(t, strings.HasPrefix(history, "Human: My cat is called Zorro."))
			assert.Contains(t, vars["relevant_history"], "My cat is called Zorro.")
			summary := vars["summary"].(string)
			assert.True(t, strings.HasPrefix(summary, memories.SummaryPrefix))
			assert.Contains(t, summary, "Answer 40:", "the Summary shows what it has not folded")
			assert.NotContains(t, summary, "Human: My cat is called Zorro.", "and not, raw, what it has")
		})
	}
}

// TestOneStore_RetriedSaveStoresOnce: a save that failed after its turn
// was stored (a synchronous Summary whose model fails), made again with
// the same save key, stores the turn once.
func TestOneStore_RetriedSaveStoresOnce(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.space(t)("stack")
			id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c3"}
			ctx := memstack.WithIdentity(context.Background(), id)
			failing := summarizerFunc(func(context.Context, string, []llms.ChatMessage) (string, error) {
				return "", errors.New("model down")
			})
			sum, err := memories.NewSummary(failing, memories.WithStore(st), memories.WithMaxMessages(2), memories.WithBatchSize(2),
				memories.WithMemoryKey("summary"), memories.WithRetryBackoff(0, 0))
			require.NoError(t, err)
			recent, err := memories.NewRecentN(4, memories.WithStore(st))
			require.NoError(t, err)
			mem, err := combined.New([]schema.Memory{recent, sum})
			require.NoError(t, err)

			turns := oneStoreTurns()[:3]
			for i, tr := range turns {
				sctx := memstack.WithSaveKey(ctx, fmt.Sprintf("request-%d", i))
				in, out := map[string]any{"input": tr[0]}, map[string]any{"output": tr[1]}
				err := mem.SaveContext(sctx, in, out)
				if i > 0 { // from the second turn on the Summary folds, and its model fails
					require.ErrorContains(t, err, "model down")
					require.ErrorContains(t, mem.SaveContext(sctx, in, out), "model down", "the retry")
				} else {
					require.NoError(t, err)
				}
			}
			assertStoredOnce(t, ctx, st, id, turns)
		})
	}
}

func TestOneStore_RetentionThatWouldLoseDataIsRefused(t *testing.T) {
	st := store.NewInMemory()
	recent, err := memories.NewRecentN(6, memories.WithStore(st), memories.WithRetention(memories.KeepLast(20)))
	require.NoError(t, err)
	recall, err := memories.NewRecall(memories.WithStore(st))
	require.NoError(t, err)
	_, err = combined.New([]schema.Memory{recent, recall})
	require.ErrorIs(t, err, combined.ErrInvalid)
	assert.ErrorContains(t, err, `layer "1:RecentN" (*memories.RecentN) removes messages from the store it shares with layer "2:Recall" (*memories.Recall) (*store.InMemory)`)

	// A retention that keeps what every other layer reads is fine, and so
	// is the same stack on separate stores.
	wide, err := memories.NewRecentN(6, memories.WithStore(st))
	require.NoError(t, err)
	_, err = combined.New([]schema.Memory{recent, wide})
	require.NoError(t, err)
	recall2, err := memories.NewRecall(memories.WithStore(store.NewInMemory()))
	require.NoError(t, err)
	_, err = combined.New([]schema.Memory{recent, recall2})
	require.NoError(t, err)
}

// summarizerFunc adapts a function to summarizer.Summarizer.
type summarizerFunc func(ctx context.Context, prev string, msgs []llms.ChatMessage) (string, error)

func (f summarizerFunc) Summarize(ctx context.Context, prev string, msgs []llms.ChatMessage) (string, error) {
	return f(ctx, prev, msgs)
}
