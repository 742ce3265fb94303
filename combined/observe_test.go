package combined_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

var memstackZero = memstack.Identity{}

// collect returns a sink that keeps every report, and the reports.
func collect() (observe.Sink, *[]observe.Report) {
	var mu sync.Mutex
	var out []observe.Report
	return observe.SinkFunc(func(_ context.Context, r observe.Report) {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, r)
	}), &out
}

func byLayer(rs []observe.Report) map[string]observe.Report {
	out := map[string]observe.Report{}
	for _, r := range rs {
		out[r.Layer] = r
	}
	return out
}

func ids(items []observe.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func seqs(t *testing.T, ctx context.Context, st store.Store, id memstack.Identity) []string {
	t.Helper()
	recs, err := st.All(ctx, id)
	require.NoError(t, err)
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprint(r.Seq)
	}
	return out
}

// llmDouble is an llms.Model test double that answers every call with a
// fixed text and counts the calls.
type llmDouble struct {
	mu    sync.Mutex
	calls int
}

func (d *llmDouble) GenerateContent(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error) {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "Greetings exchanged."}}}, nil
}

func (d *llmDouble) Call(ctx context.Context, prompt string, _ ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, d, prompt)
}

func (d *llmDouble) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

// observedStack is RecentN(2), TokenWindow, Buffer, Summary (an LLM
// summarizer folding from the second turn) and a user memory, each over a
// store the test can read.
type observedStack struct {
	recent, tw, buf, sum store.Store
	model                *llmDouble
	list                 []schema.Memory
	user                 *userMemory
}

// optsAs converts options of every type (memories.Option) to the option
// type O of one constructor.
func optsAs[O any](opts []memories.Option) []O {
	out := make([]O, len(opts))
	for i, o := range opts {
		out[i] = any(o).(O)
	}
	return out
}

func newObservedStack(t *testing.T, opts ...memories.Option) *observedStack {
	t.Helper()
	s := &observedStack{recent: store.NewInMemory(), tw: store.NewInMemory(), buf: store.NewInMemory(), sum: store.NewInMemory(), model: &llmDouble{}}
	r := newRecent(t, 2, append(optsAs[memories.RecentNOption](opts), memories.WithStore(s.recent), memories.WithMemoryKey("recent"))...)
	tw, err := memories.NewTokenWindow(1000, append(optsAs[memories.TokenWindowOption](opts), memories.WithStore(s.tw), memories.WithMemoryKey("tw"))...)
	require.NoError(t, err)
	buf := mustBuffer(append(optsAs[memories.BufferOption](opts), memories.WithStore(s.buf), memories.WithMemoryKey("buf"))...)
	sum, err := memories.NewSummary(summarizer.New(s.model), append(optsAs[memories.SummaryOption](opts), memories.WithStore(s.sum), memories.WithMemoryKey("sum"),
		memories.WithMaxMessages(2), memories.WithBatchSize(2))...)
	require.NoError(t, err)
	s.user = newUserMemory("user")
	s.list = []schema.Memory{r, tw, buf, sum, s.user}
	return s
}

var defaultLayers = []string{"1:RecentN", "2:TokenWindow", "3:Buffer", "4:Summary", "5:userMemory"}

func layersOf(rs []observe.Report) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Layer
	}
	return out
}

func TestObserverOneReportPerLayerPerOp(t *testing.T) {
	id := memstack.Identity{Tenant: "acme", User: "u1", Conversation: "c1"}
	ctx := memstack.WithIdentity(context.Background(), id)
	s := newObservedStack(t)
	sink, reports := collect()
	m := newCombined(t, s.list, combined.WithObserver(sink))
	c := cl100k(t)

	// AddMessage: the four memstack layers take it; the user memory does not.
	require.NoError(t, m.AddMessage(ctx, llms.SystemChatMessage{Content: "Be brief."}))
	assert.Equal(t, defaultLayers[:4], layersOf(*reports))
	for _, r := range *reports {
		assert.Equal(t, observe.OpAdd, r.Op)
		assert.Equal(t, id.Hash(), r.IdentityHash)
		assert.NoError(t, r.Err)
		assert.False(t, r.Start.IsZero())
		assert.Positive(t, int64(r.Duration))
		assert.False(t, r.At.IsZero(), "%s: an add reports the time its message was dated with", r.Layer)
	}

	// Two saves: the Summary's second save folds with one model call.
	for i := range 2 {
		*reports = nil
		in, out := turn(fmt.Sprintf("Hello %d", i), fmt.Sprintf("Hi %d\nHow can I help?", i))
		require.NoError(t, m.SaveContext(ctx, in, out))
		require.Equal(t, defaultLayers, layersOf(*reports))
		for _, r := range *reports {
			assert.Equal(t, observe.OpSave, r.Op)
			assert.Equal(t, id.Hash(), r.IdentityHash)
			assert.Empty(t, r.Injected)
			wantCalls := 0
			if i == 1 && r.Layer == "4:Summary" {
				wantCalls = 1
			}
			assert.Equal(t, wantCalls, r.LLMCalls, "save %d, %s", i, r.Layer)
			if r.Layer == "5:userMemory" {
				assert.True(t, r.At.IsZero(), "a foreign memory reports no save time")
			} else {
				assert.False(t, r.At.IsZero(), "%s: a save reports the time its messages were dated with", r.Layer)
			}
		}
	}
	require.Equal(t, 1, s.model.count())

	// Loads (twice: Buffer's first load renders, the second uses its cache).
	for range 2 {
		*reports = nil
		_, err := m.LoadMemoryVariables(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, defaultLayers, layersOf(*reports))
		rs := byLayer(*reports)
		for _, r := range rs {
			assert.Equal(t, observe.OpLoad, r.Op)
			assert.Equal(t, id.Hash(), r.IdentityHash)
			assert.Positive(t, int64(r.Duration))
		}
		// RecentN(2): the system message and the last two messages; the two
		// before them dropped as outside the window.
		recent := seqs(t, ctx, s.recent, id)
		require.Len(t, recent, 5)
		assert.Equal(t, []string{recent[0], recent[3], recent[4]}, ids(rs["1:RecentN"].Injected))
		assert.Equal(t, []string{recent[1], recent[2]}, ids(rs["1:RecentN"].Dropped))
		for _, d := range rs["1:RecentN"].Dropped {
			assert.Equal(t, observe.ReasonWindow, d.Reason)
			assert.Equal(t, "message", d.Kind)
		}
		// TokenWindow: everything, with tokens.
		recs, err := s.tw.All(ctx, id)
		require.NoError(t, err)
		wantTokens := 0
		for i, r := range recs {
			n := c.CountTokens(line(t, r.Message)) + 1
			wantTokens += n
			assert.Equal(t, observe.Item{Kind: "message", ID: fmt.Sprint(r.Seq), Tokens: n, Time: r.Time}, rs["2:TokenWindow"].Injected[i])
			assert.False(t, r.Time.IsZero(), "a reported message carries its stored time")
		}
		assert.Equal(t, wantTokens, rs["2:TokenWindow"].Tokens)
		assert.Empty(t, rs["2:TokenWindow"].Dropped)
		// Buffer: everything.
		assert.Equal(t, seqs(t, ctx, s.buf, id), ids(rs["3:Buffer"].Injected))
		// Summary: the summary (named by the Seq it covers through) and
		// what it does not cover.
		sumRecs, err := s.sum.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, sumRecs, 5, "a fold removes no message from the store")
		through := storedThrough(t, ctx, s.sum, id)
		var uncovered []string
		for _, r := range sumRecs {
			if r.Seq > through || r.Message.GetType() == llms.ChatMessageTypeSystem {
				uncovered = append(uncovered, fmt.Sprint(r.Seq))
			}
		}
		inj := rs["4:Summary"].Injected
		require.Len(t, inj, 1+len(uncovered))
		assert.Equal(t, "summary", inj[0].Kind)
		assert.Equal(t, fmt.Sprint(through), inj[0].ID)
		assert.Equal(t, uncovered, ids(inj[1:]))
		assert.Zero(t, rs["4:Summary"].LLMCalls, "a load never calls the model")
		// The user memory records nothing itself.
		assert.Empty(t, rs["5:userMemory"].Injected)
	}

	*reports = nil
	require.NoError(t, m.Clear(ctx))
	require.Equal(t, defaultLayers, layersOf(*reports))
	for _, r := range *reports {
		assert.Equal(t, observe.OpClear, r.Op)
	}
}

func TestObserverIdentityWithoutContextIdentity(t *testing.T) {
	ctx := context.Background()
	def := memstack.Identity{Tenant: "t", User: "default"}
	sink, reports := collect()
	r := newRecent(t, 2, memories.WithDefaultIdentity(def), memories.WithMemoryKey("r"))
	req := newRecent(t, 2, memories.WithRequireIdentity(), memories.WithMemoryKey("q"))
	m := newCombined(t, []schema.Memory{r, newUserMemory("user"), req}, combined.WithObserver(sink), combined.WithLayerNames("recent", "user", "strict"))
	_, err := m.LoadMemoryVariables(ctx, nil)
	require.ErrorIs(t, err, memstack.ErrNoIdentity)
	rs := byLayer(*reports)
	require.Len(t, rs, 3)
	assert.Equal(t, def.Hash(), rs["recent"].IdentityHash, "a memstack memory's default identity")
	assert.Equal(t, memstackZero.Hash(), rs["user"].IdentityHash, "a foreign memory: the zero identity")
	assert.Equal(t, "", rs["strict"].IdentityHash, "no identity at all")
	assert.ErrorIs(t, rs["strict"].Err, memstack.ErrNoIdentity)
	assert.NoError(t, rs["recent"].Err)
}

func TestObserverReportsFailuresAndPanics(t *testing.T) {
	ctx := context.Background()
	sink, reports := collect()
	u := newUserMemory("user")
	u.saveErr = fmt.Errorf("disk full")
	m := newCombined(t, []schema.Memory{u, panicky{newUserMemory("p")}}, combined.WithObserver(sink))
	in, out := turn("a", "b")
	err := m.SaveContext(ctx, in, out)
	require.Error(t, err)
	rs := byLayer(*reports)
	require.Len(t, rs, 2)
	assert.EqualError(t, rs["1:userMemory"].Err, "disk full", "the report carries the child's own error")
	require.Error(t, rs["2:panicky"].Err)
	assert.Contains(t, rs["2:panicky"].Err.Error(), "panic: save exploded")
	assert.Contains(t, err.Error(), "panic: save exploded")
}

type panicky struct{ *userMemory }

func (panicky) SaveContext(context.Context, map[string]any, map[string]any) error {
	panic("save exploded")
}

func TestObserverWithBudgetReportsKeptAndDropped(t *testing.T) {
	id := memstack.Identity{User: "u"}
	ctx := memstack.WithIdentity(context.Background(), id)
	c := cl100k(t)
	recentStore := store.NewInMemory()
	r := newRecent(t, 4, memories.WithStore(recentStore), memories.WithMemoryKey("recent"))
	full := bufferKey("full")
	sink, reports := collect()
	var log trimLog
	m := newCombined(t, []schema.Memory{full, r, newUserMemory("user")},
		combined.WithTokenBudget(60, combined.WithTrimHook(log.hook)),
		combined.WithObserver(sink), combined.WithLayerNames("full", "recent", "user"))
	fill(t, ctx, m, 6)
	*reports = nil
	vars, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	tr := log.last(t)
	require.NotEmpty(t, tr.Dropped)
	rs := byLayer(*reports)
	require.Len(t, rs, 3)

	// The hook and the reports agree on what the budget dropped.
	budgetDrops := map[string][]observe.Item{}
	for _, d := range tr.Dropped {
		budgetDrops[d.Layer] = append(budgetDrops[d.Layer], d.Item)
	}
	for layer, r := range rs {
		var got []observe.Item
		for _, it := range r.Dropped {
			if it.Reason == observe.ReasonBudget {
				got = append(got, it)
			}
		}
		assert.Equal(t, budgetDrops[layer], got, layer)
		// Tokens are the variable's final size.
		assert.Equal(t, sizeOf(t, c, vars[layer]), r.Tokens, layer)
	}
	// The user memory (lowest priority) is dropped whole.
	assert.Equal(t, "", vars["user"])
	assert.Empty(t, rs["user"].Injected)
	require.Len(t, rs["user"].Dropped, 1)
	// RecentN: the window's outside (the store keeps the older messages)
	// and the budget's drops; what it injected is what is in its variable.
	reasons := observe.CountReasons(rs["recent"].Dropped)
	assert.Positive(t, reasons[observe.ReasonWindow])
	recs, err := recentStore.All(ctx, id)
	require.NoError(t, err)
	var kept []llms.ChatMessage
	injected := map[string]bool{}
	for _, it := range rs["recent"].Injected {
		injected[it.ID] = true
		assert.Positive(t, it.Tokens)
	}
	for _, rec := range recs {
		if injected[fmt.Sprint(rec.Seq)] {
			kept = append(kept, rec.Message)
		}
	}
	want, err := llms.GetBufferString(kept, "Human", "AI")
	require.NoError(t, err)
	assert.Equal(t, want, vars["recent"])
	assert.LessOrEqual(t, totalSize(t, c, vars), 60)
}

func TestObserverBackgroundSummaryCallIsNotInTheSaveReport(t *testing.T) {
	ctx := context.Background()
	model := &llmDouble{}
	sum, err := memories.NewSummary(summarizer.New(model), memories.WithMaxMessages(2), memories.WithBatchSize(2), memories.WithBackground(true))
	require.NoError(t, err)
	defer sum.Close()
	sink, reports := collect()
	m := newCombined(t, []schema.Memory{sum}, combined.WithObserver(sink))
	fill(t, ctx, m, 3)
	require.NoError(t, sum.Flush(ctx))
	require.Positive(t, model.count())
	for _, r := range *reports {
		assert.Zero(t, r.LLMCalls, "the model is called after the save's report is sent")
	}
}

// ---------------------------------------------------------------------------
// Zero overhead when off
// ---------------------------------------------------------------------------

// fixedMemory loads a prebuilt map without allocating.
type fixedMemory struct{ vars map[string]any }

func (f fixedMemory) GetMemoryKey(context.Context) string                               { return "fixed" }
func (f fixedMemory) MemoryVariables(context.Context) []string                          { return []string{"fixed"} }
func (f fixedMemory) SaveContext(context.Context, map[string]any, map[string]any) error { return nil }
func (f fixedMemory) Clear(context.Context) error                                       { return nil }
func (f fixedMemory) LoadMemoryVariables(context.Context, map[string]any) (map[string]any, error) {
	return f.vars, nil
}

func TestObserverOffAddsNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; run without -race")
	}
	ctx := context.Background()
	s := newObservedStack(t)
	s.list = s.list[:4] // the memstack layers
	for _, c := range s.list {
		fill(t, ctx, c, 3)
	}
	// The combined machinery over children that allocate nothing...
	zeros := make([]schema.Memory, len(s.list))
	for i := range zeros {
		zeros[i] = fixedMemory{vars: map[string]any{fmt.Sprint("k", i): "v"}}
	}
	zm := newCombined(t, zeros)
	machinery := testing.AllocsPerRun(200, func() { _, _ = zm.LoadMemoryVariables(ctx, nil) })
	// ...plus each child's own load...
	children := 0.0
	for _, c := range s.list {
		children += testing.AllocsPerRun(200, func() { _, _ = c.LoadMemoryVariables(ctx, nil) })
	}
	// ...is what an unobserved, unbudgeted combined load costs.
	m := newCombined(t, s.list)
	got := testing.AllocsPerRun(200, func() { _, _ = m.LoadMemoryVariables(ctx, nil) })
	assert.Equal(t, machinery+children, got, "machinery %v, children %v", machinery, children)

	// Observed, it costs more (the check above can fail).
	sink, _ := collect()
	observed := newCombined(t, s.list, combined.WithObserver(sink))
	assert.Greater(t, testing.AllocsPerRun(50, func() { _, _ = observed.LoadMemoryVariables(ctx, nil) }), got)
}

func BenchmarkLoadObservation(b *testing.B) {
	ctx := context.Background()
	build := func(opts ...combined.Option) *combined.Memory {
		r, _ := memories.NewRecentN(10, memories.WithMemoryKey("recent"))
		tw, _ := memories.NewTokenWindow(500, memories.WithMemoryKey("tw"))
		m, err := combined.New([]schema.Memory{r, tw, mustBuffer(memories.WithMemoryKey("full"))}, opts...)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 20 {
			in, out := turn(fmt.Sprintf("question %d", i), fmt.Sprintf("answer %d\nsecond line", i))
			if err := m.SaveContext(ctx, in, out); err != nil {
				b.Fatal(err)
			}
		}
		return m
	}
	discard := observe.SinkFunc(func(context.Context, observe.Report) {})
	for _, bc := range []struct {
		name string
		opts []combined.Option
	}{
		{"off", nil},
		{"observed", []combined.Option{combined.WithObserver(discard)}},
		{"budget", []combined.Option{combined.WithTokenBudget(200)}},
		{"budget+observed", []combined.Option{combined.WithTokenBudget(200), combined.WithObserver(discard)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := build(bc.opts...)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.LoadMemoryVariables(ctx, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestObserverBudgetedMemoryObservedFromOutside(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	st := store.NewInMemory()
	recent := newRecent(t, 4, memories.WithStore(st))
	inner := newBudgeted(t, []schema.Memory{recent}, 12, nil)
	fill(t, ctx, inner, 3)
	for _, tc := range []struct {
		name string
		wrap func(observe.Sink) schema.Memory
	}{
		{"nested in an observed combined memory", func(s observe.Sink) schema.Memory {
			return newCombined(t, []schema.Memory{inner}, combined.WithObserver(s))
		}},
		{"wrapped", func(s observe.Sink) schema.Memory { return observe.Wrap(inner, "stack", s) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink, reports := collect()
			outer := tc.wrap(sink)
			vars, err := outer.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			require.Len(t, *reports, 1)
			r := (*reports)[0]
			got := vars["history"].(string)
			require.NotEmpty(t, got)
			assert.Equal(t, c.CountTokens(got), r.Tokens)
			reasons := observe.CountReasons(r.Dropped)
			assert.Equal(t, 2, reasons[observe.ReasonWindow], "RecentN(4) of six messages")
			assert.Positive(t, reasons[observe.ReasonBudget])
			// What was injected is what was loaded.
			recs, err := st.All(ctx, memstackZero)
			require.NoError(t, err)
			shown := map[string]bool{}
			for _, it := range r.Injected {
				shown[it.ID] = true
			}
			var kept []llms.ChatMessage
			for _, rec := range recs {
				if shown[fmt.Sprint(rec.Seq)] {
					kept = append(kept, rec.Message)
				}
			}
			assert.Equal(t, got, line(t, kept...))
			assert.Equal(t, 4, len(r.Injected)+reasons[observe.ReasonBudget])
		})
	}
}
