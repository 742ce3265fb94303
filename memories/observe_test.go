package memories_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
	"github.com/memstack/memstack/tokens"
)

func TestObserve_ResolveIdentity(t *testing.T) {
	def := memstack.Identity{User: "default"}
	given := memstack.Identity{User: "given"}
	m := mustBuffer(memories.WithDefaultIdentity(def))
	id, err := m.ResolveIdentity(context.Background())
	require.NoError(t, err)
	assert.Equal(t, def, id)
	id, err = m.ResolveIdentity(memstack.WithIdentity(context.Background(), given))
	require.NoError(t, err)
	assert.Equal(t, given, id)

	strict, err := memories.NewRecentN(2, memories.WithRequireIdentity())
	require.NoError(t, err)
	_, err = strict.ResolveIdentity(context.Background())
	assert.ErrorIs(t, err, memstack.ErrNoIdentity)

	bad, err := memories.NewRecentN(2, memories.WithMemoryKey(""))
	assert.Nil(t, bad)
	assert.ErrorIs(t, err, memories.ErrInvalidOption)

	var _ observe.IdentityResolver = m
	assert.Equal(t, given.Hash(), observe.IdentityHash(memstack.WithIdentity(context.Background(), given), m))
	assert.Equal(t, def.Hash(), observe.IdentityHash(context.Background(), m))
}

// recorded loads m with a Recorder in the context and returns the report.
func recorded(t *testing.T, ctx context.Context, m interface {
	LoadMemoryVariables(context.Context, map[string]any) (map[string]any, error)
}) observe.Report {
	t.Helper()
	rec := observe.StartRecorder(observe.OpLoad, "layer", "")
	_, err := m.LoadMemoryVariables(observe.WithRecorder(ctx, rec), nil)
	require.NoError(t, err)
	return rec.FinishNow(nil)
}

func seqIDs(t *testing.T, st store.Store, recs ...int) []string {
	t.Helper()
	all, err := st.All(context.Background(), memstack.Identity{})
	require.NoError(t, err)
	if recs == nil {
		out := make([]string, len(all))
		for i, r := range all {
			out[i] = fmt.Sprint(r.Seq)
		}
		return out
	}
	out := make([]string, len(recs))
	for i, k := range recs {
		out[i] = fmt.Sprint(all[k].Seq)
	}
	return out
}

func itemIDs(items []observe.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func TestObserve_BufferRecordsEveryPath(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []memories.BufferOption
	}{
		{"cached string", nil},
		{"uncached string", []memories.BufferOption{memories.WithCacheSize(0)}},
		{"messages", []memories.BufferOption{memories.WithReturnMessages(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := store.NewInMemory()
			b := mustBuffer(append(tc.opts, memories.WithStore(st))...)
			ctSaveTurn(t, b, ctx, "one", "two")
			r := recorded(t, ctx, b)
			assert.Equal(t, seqIDs(t, st), itemIDs(r.Injected))
			// Appends render incrementally; the report follows.
			ctSaveTurn(t, b, ctx, "three", "four\nfive")
			r = recorded(t, ctx, b)
			assert.Equal(t, seqIDs(t, st), itemIDs(r.Injected))
			require.Len(t, r.Injected, 4)
			assert.Equal(t, "message", r.Injected[0].Kind)
			// A cache hit reports the same.
			r = recorded(t, ctx, b)
			assert.Equal(t, seqIDs(t, st), itemIDs(r.Injected))
			assert.Empty(t, r.Dropped)
		})
	}
}

func TestObserve_WindowsRecordTheWindowAndWhatIsOutside(t *testing.T) {
	ctx := context.Background()
	st := store.NewInMemory()
	r, err := memories.NewRecentN(2, memories.WithStore(st))
	require.NoError(t, err)
	require.NoError(t, r.AddMessage(ctx, llms.SystemChatMessage{Content: "sys"}))
	ctSaveTurn(t, r, ctx, "a", "b")
	ctSaveTurn(t, r, ctx, "c", "d")
	rep := recorded(t, ctx, r)
	assert.Equal(t, seqIDs(t, st, 0, 3, 4), itemIDs(rep.Injected))
	assert.Equal(t, seqIDs(t, st, 1, 2), itemIDs(rep.Dropped))
	for _, d := range rep.Dropped {
		assert.Equal(t, observe.ReasonWindow, d.Reason)
	}
	assert.Zero(t, rep.Tokens, "RecentN does not count tokens")

	twStore := store.NewInMemory()
	c := cl100kCounter(t)
	line := func(s string) int { return c.CountTokens(s) + 1 }
	budget := line("Human: c") + line("AI: d")
	tw, err := memories.NewTokenWindow(budget, memories.WithStore(twStore))
	require.NoError(t, err)
	ctSaveTurn(t, tw, ctx, "a", "b")
	ctSaveTurn(t, tw, ctx, "c", "d")
	rep = recorded(t, ctx, tw)
	assert.Equal(t, seqIDs(t, twStore, 2, 3), itemIDs(rep.Injected))
	assert.Equal(t, budget, rep.Tokens)
	assert.Equal(t, line("Human: c"), rep.Injected[0].Tokens)
	require.Len(t, rep.Dropped, 2)
	twAll, err := twStore.All(ctx, memstack.Identity{})
	require.NoError(t, err)
	assert.Equal(t, observe.Item{Kind: "message", ID: seqIDs(t, twStore, 0)[0], Tokens: line("Human: a"), Reason: observe.ReasonWindow,
		Time: twAll[0].Time}, rep.Dropped[0])
	assert.False(t, rep.Dropped[0].Time.IsZero(), "a dropped message carries its stored time")

	// LoadItems reports the outside too (the combined budget reports the rest).
	rec := observe.StartRecorder(observe.OpLoad, "tw", "")
	_, err = tw.LoadItems(observe.WithRecorder(ctx, rec), nil)
	require.NoError(t, err)
	got := rec.FinishNow(nil)
	assert.Empty(t, got.Injected)
	assert.Len(t, got.Dropped, 2)
}

func TestObserve_SummaryRecordsTheSummaryAndModelCalls(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		sum       summarizer.Summarizer
		wantCalls int
	}{
		{"llm", summarizer.New(&fixedModel{answer: "They greeted."}), 1},
		{"extractive (offline)", summarizer.NewExtractive(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := store.NewInMemory()
			s, err := memories.NewSummary(tc.sum, memories.WithStore(st), memories.WithMaxMessages(2), memories.WithBatchSize(2))
			require.NoError(t, err)
			ctSaveTurn(t, s, ctx, "Hello there, how are you today?", "Very well, thank you for asking.")
			rec := observe.StartRecorder(observe.OpSave, "sum", "")
			require.NoError(t, s.SaveContext(observe.WithRecorder(ctx, rec), map[string]any{"input": "Fine"}, map[string]any{"output": "Good"}))
			assert.Equal(t, tc.wantCalls, rec.FinishNow(nil).LLMCalls)
			require.Equal(t, int64(1), s.Stats().Calls)

			rep := recorded(t, ctx, s)
			require.NotEmpty(t, rep.Injected)
			assert.Equal(t, "summary", rep.Injected[0].Kind)
			stored := seqIDs(t, st)
			require.Len(t, stored, 4, "a fold removes no message from the store")
			assert.Equal(t, stored[1], rep.Injected[0].ID, "the summary covers the first turn")
			assert.Equal(t, stored[2:], itemIDs(rep.Injected[1:]), "the messages it does not cover are shown raw")
		})
	}
}

// fixedModel is an llms.Model test double that answers every call with
// the same text.
type fixedModel struct{ answer string }

func (f *fixedModel) GenerateContent(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error) {
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: f.answer}}}, nil
}

func (f *fixedModel) Call(ctx context.Context, prompt string, _ ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, f, prompt)
}

func cl100kCounter(t *testing.T) tokens.Counter {
	t.Helper()
	c, err := tokens.CL100K()
	require.NoError(t, err)
	return c
}
