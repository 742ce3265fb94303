package memories_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/tokens"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

var (
	_ schema.Memory     = (*memories.Facts)(nil)
	_ fmt.Stringer      = (*memories.Facts)(nil)
	_ combined.Itemizer = (*memories.Facts)(nil)
)

// ---------------------------------------------------------------------------
// Helpers.

// fcClock is a fake clock: it returns the time it is set to.
type fcClock struct {
	mu  sync.Mutex
	now time.Time
}

func fcNewClock() *fcClock {
	return &fcClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
}

func (c *fcClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fcClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

func fcPatterns(t testing.TB) *extract.Patterns {
	t.Helper()
	p, err := extract.NewPatterns()
	require.NoError(t, err)
	return p
}

func fcNew(t testing.TB, ext extract.Extractor, opts ...memories.FactsOption) *memories.Facts {
	t.Helper()
	m, err := memories.NewFacts(ext, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func fcSave(t testing.TB, m schema.Memory, ctx context.Context, human, ai string) {
	t.Helper()
	require.NoError(t, m.SaveContext(ctx, map[string]any{"input": human}, map[string]any{"output": ai}))
}

func fcLoad(t testing.TB, m schema.Memory, ctx context.Context) string {
	t.Helper()
	vars, err := m.LoadMemoryVariables(ctx, map[string]any{})
	require.NoError(t, err)
	require.Len(t, vars, 1)
	s, ok := vars[m.GetMemoryKey(ctx)].(string)
	require.True(t, ok, "string mode loads a string, got %T", vars[m.GetMemoryKey(ctx)])
	return s
}

func fcID(user, conv string) context.Context {
	return memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: user, Conversation: conv})
}

// fcKeys returns the keys and values of facts as "key=value".
func fcKeys(fs []memories.Fact) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Key + "=" + f.Value
	}
	return out
}

// fcEvents collects hook events.
type fcEvents struct {
	mu  sync.Mutex
	evs []memories.FactsEvent
}

func (e *fcEvents) Hook(ev memories.FactsEvent) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

func (e *fcEvents) All() []memories.FactsEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]memories.FactsEvent(nil), e.evs...)
}

// fcFixed is an extractor that returns the same candidates for every
// call and counts its calls.
func fcFixed(calls *atomic.Int64, cands ...extract.Candidate) extract.Extractor {
	return extract.ExtractorFunc(func(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
		calls.Add(1)
		return append([]extract.Candidate(nil), cands...), nil
	})
}

// fcCounting wraps an extractor and counts calls and the messages seen.
type fcCounting struct {
	ext   extract.Extractor
	calls atomic.Int64
	mu    sync.Mutex
	seen  []string
}

func (c *fcCounting) Extract(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
	c.calls.Add(1)
	c.mu.Lock()
	for _, m := range msgs {
		c.seen = append(c.seen, string(m.GetType())+":"+m.GetContent())
	}
	c.mu.Unlock()
	return c.ext.Extract(ctx, msgs)
}

func (c *fcCounting) Seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

// ---------------------------------------------------------------------------
// Construction.

func TestNewFacts_Invalid(t *testing.T) {
	var nilPatterns *extract.Patterns
	var nilFunc extract.ExtractorFunc
	p := fcPatterns(t)
	cases := []struct {
		name string
		ext  extract.Extractor
		opts []memories.FactsOption
		want string
	}{
		{"nil extractor", nil, nil, "NewFacts: the extractor is nil"},
		{"typed nil extractor", nilPatterns, nil, "the extractor is a nil *extract.Patterns"},
		{"nil extractor func", nilFunc, nil, "the extractor is a nil extract.ExtractorFunc"},
		{"nil option", p, []memories.FactsOption{memories.WithMaxFacts(3), nil}, "option 2 of 2 is nil"},
		{"max per turn 0", p, []memories.FactsOption{memories.WithMaxPerTurn(0)}, "WithMaxPerTurn(0)"},
		{"max per turn negative", p, []memories.FactsOption{memories.WithMaxPerTurn(-2)}, "WithMaxPerTurn(-2)"},
		{"max facts 0", p, []memories.FactsOption{memories.WithMaxFacts(0)}, "WithMaxFacts(0)"},
		{"fact tokens 0", p, []memories.FactsOption{memories.WithFactTokens(0)}, "WithFactTokens(0)"},
		{"nil clock", p, []memories.FactsOption{memories.WithClock(nil)}, "WithClock(nil)"},
		{"nil hook", p, []memories.FactsOption{memories.WithFactsHook(nil)}, "WithFactsHook(nil)"},
		{"negative timeout", p, []memories.FactsOption{memories.WithExtractTimeout(-time.Second)}, "WithExtractTimeout(-1s)"},
		{"shared option", p, []memories.FactsOption{memories.WithMemoryKey("")}, "WithMemoryKey"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := memories.NewFacts(tc.ext, tc.opts...)
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, memories.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestFacts_KeyAndStringer(t *testing.T) {
	ctx := context.Background()
	m := fcNew(t, fcPatterns(t))
	assert.Equal(t, "facts", m.GetMemoryKey(ctx))
	assert.Equal(t, []string{"facts"}, m.MemoryVariables(ctx))
	assert.Equal(t, `Facts(extractor=*extract.Patterns, max_per_turn=5, max_facts=20, fact_tokens=300, per_user=false, background=false, memory_key="facts", mode=string, store=*store.InMemory)`, m.String())

	k := fcNew(t, fcPatterns(t), memories.WithMemoryKey("known"), memories.WithReturnMessages(true), memories.WithMaxPerTurn(2))
	assert.Equal(t, "known", k.GetMemoryKey(ctx))
	assert.Contains(t, k.String(), "max_per_turn=2")
	assert.Contains(t, k.String(), "mode=messages")
}

// ---------------------------------------------------------------------------
// Extraction, rendering, supersession.

func TestFacts_ExtractsAndRenders(t *testing.T) {
	clock := fcNewClock()
	ctx := context.Background()
	m := fcNew(t, fcPatterns(t), memories.WithClock(clock.Now))

	assert.Equal(t, "", fcLoad(t, m, ctx), "no facts: an empty variable")
	fcSave(t, m, ctx, "Hi, I'm Ana and I live in Lisbon.", "Nice to meet you, Ana!")
	clock.Advance(48 * time.Hour)
	fcSave(t, m, ctx, "I love hiking. Which database should we use?", "Let's go with Postgres.")

	assert.Equal(t, ""+
		"- we decision: Postgres (since 2026-12-02)\n"+
		"- user preference: loves hiking (since 2026-12-02)\n"+
		"- user location: Lisbon (since 2026-11-30)\n"+
		"- user name: Ana (since 2026-11-30)",
		fcLoad(t, m, ctx))

	t.Run("messages mode", func(t *testing.T) {
		mm := fcNew(t, fcPatterns(t), memories.WithClock(clock.Now), memories.WithReturnMessages(true))
		vars, err := mm.LoadMemoryVariables(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, []llms.ChatMessage{}, vars["facts"], "no facts: no message")
		fcSave(t, mm, ctx, "Call me Bruno.", "Sure, Bruno.")
		vars, err = mm.LoadMemoryVariables(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, []llms.ChatMessage{llms.SystemChatMessage{Content: "Known facts:\n- user name: Bruno (since 2026-12-02)"}}, vars["facts"])
	})
}

func TestFacts_SupersessionKeepsHistory(t *testing.T) {
	clock := fcNewClock()
	st := store.NewInMemory()
	ctx := fcID("ana", "c1")
	m := fcNew(t, fcPatterns(t), memories.WithClock(clock.Now), memories.WithStore(st))

	t0 := clock.Now()
	fcSave(t, m, ctx, "I live in Lisbon.", "Lovely city.")
	t1 := clock.Advance(24 * time.Hour)
	fcSave(t, m, ctx, "I moved to Porto last month.", "Porto it is.")
	t2 := clock.Advance(24 * time.Hour)
	fcSave(t, m, ctx, "I live in Porto, by the river.", "Noted.") // restated: no change
	fcSave(t, m, ctx, "I moved to Berlin", "Wow.")

	hist, err := m.History(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"user location=Lisbon", "user location=Porto", "user location=Berlin"}, fcKeys(hist))
	assert.True(t, hist[0].ValidFrom.Equal(t0))
	assert.True(t, hist[0].ValidTo.Equal(t1), "the superseded fact keeps its end time")
	assert.True(t, hist[1].ValidFrom.Equal(t1))
	assert.True(t, hist[1].ValidTo.Equal(t2), "restating Porto did not restart it")
	assert.True(t, hist[2].ValidFrom.Equal(t2))
	assert.True(t, hist[2].ValidTo.IsZero())
	assert.True(t, hist[2].Current())
	assert.False(t, hist[0].Current())

	// Sources are the Seqs of the human messages the facts came from.
	recs, err := st.All(ctx, memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"})
	require.NoError(t, err)
	require.Len(t, recs, 8)
	assert.Equal(t, []int64{recs[0].Seq}, hist[0].Sources)
	assert.Equal(t, []int64{recs[2].Seq}, hist[1].Sources)
	assert.Equal(t, []int64{recs[6].Seq}, hist[2].Sources)
	assert.Equal(t, "c1", hist[2].Conversation)
	assert.Equal(t, "location/moved-to", hist[2].Rule)

	cur, err := m.Current(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"user location=Berlin"}, fcKeys(cur))
	assert.Equal(t, "- user location: Berlin (since 2026-12-02)", fcLoad(t, m, ctx))

	// The returned slices are copies.
	hist[0].Sources[0] = -1
	again, err := m.History(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int64{recs[0].Seq}, again[0].Sources)

	assert.Equal(t, memories.FactsStats{Extractions: 4, FactsStored: 3, Superseded: 2}, m.Stats())
}

func TestFacts_MaxPerTurn(t *testing.T) {
	cands := make([]extract.Candidate, 0, 9)
	for i := range 8 {
		cands = append(cands, extract.Candidate{Subject: "user", Attribute: fmt.Sprintf("a%d", i), Value: fmt.Sprintf("v%d", i)})
	}
	cands = append(cands, extract.Candidate{Subject: "user", Attribute: "a0", Value: "restated"})
	cases := []struct {
		name    string
		opts    []memories.FactsOption
		want    []string
		dropped int
	}{
		{"default 5", nil, []string{"user a0=restated", "user a1=v1", "user a2=v2", "user a3=v3", "user a4=v4"}, 4},
		{"2", []memories.FactsOption{memories.WithMaxPerTurn(2)}, []string{"user a0=restated", "user a1=v1"}, 7},
		{"20", []memories.FactsOption{memories.WithMaxPerTurn(20)}, []string{"user a0=restated", "user a1=v1", "user a2=v2", "user a3=v3", "user a4=v4", "user a5=v5", "user a6=v6", "user a7=v7"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			var evs fcEvents
			m := fcNew(t, fcFixed(&calls, cands...), append(tc.opts, memories.WithFactsHook(evs.Hook))...)
			ctx := context.Background()
			fcSave(t, m, ctx, "hello", "hi")
			hist, err := m.History(ctx)
			require.NoError(t, err)
			assert.Equal(t, tc.want, fcKeys(hist))
			require.Len(t, evs.All(), 1)
			ev := evs.All()[0]
			assert.NoError(t, ev.Err)
			assert.Equal(t, 2, ev.Messages)
			assert.Equal(t, 9, ev.Candidates)
			assert.Equal(t, len(tc.want), ev.Stored)
			assert.Equal(t, tc.dropped, ev.Dropped)
			assert.Equal(t, (memstack.Identity{}).Hash(), ev.IdentityHash)
		})
	}
}

func TestFacts_InvalidCandidatesAndSources(t *testing.T) {
	var calls atomic.Int64
	ext := fcFixed(&calls,
		extract.Candidate{Subject: " ", Attribute: "name", Value: "x"},
		extract.Candidate{Subject: "user", Attribute: "name", Value: "  \n"},
		extract.Candidate{Subject: "user", Attribute: strings.Repeat("a", 200), Value: "x"},
		extract.Candidate{Subject: "User", Attribute: " Job ", Value: " nurse\n at night ", Sources: []int{1, 7, -1, 1}},
		extract.Candidate{Subject: "user", Attribute: "city", Value: "Porto"},
	)
	var evs fcEvents
	st := store.NewInMemory()
	m := fcNew(t, ext, memories.WithFactsHook(evs.Hook), memories.WithStore(st))
	ctx := context.Background()
	fcSave(t, m, ctx, "q", "a")
	hist, err := m.History(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"user job=nurse at night", "user city=Porto"}, fcKeys(hist))
	recs, err := st.All(ctx, memstack.Identity{})
	require.NoError(t, err)
	assert.Equal(t, []int64{recs[1].Seq}, hist[0].Sources, "invalid indices are ignored")
	assert.Equal(t, []int64{recs[0].Seq, recs[1].Seq}, hist[1].Sources, "no sources: the whole turn")
	assert.Equal(t, 3, evs.All()[0].Dropped)
}

func TestFacts_TurnsAndMessageTypes(t *testing.T) {
	c := &fcCounting{ext: fcPatterns(t)}
	m := fcNew(t, c)
	ctx := context.Background()
	require.NoError(t, m.AddMessage(ctx, llms.SystemChatMessage{Content: "I'm a support agent. My name is Bot."}))
	fcSave(t, m, ctx, "My name is Ana", "Hi Ana")
	require.NoError(t, m.AddMessage(ctx, llms.AIChatMessage{Content: "   "}))
	require.NoError(t, m.AddMessage(ctx, llms.ToolChatMessage{ID: "t1", Content: "I live in Paris"}))
	fcSave(t, m, ctx, "  ", "\t")
	fcSave(t, m, ctx, "Je m'appelle Marie et j'habite à Paris.", "Enchanté !")
	fcSave(t, m, ctx, "¿Dónde vivo?", "No lo sé.")

	// System, tool and blank messages are never given to the extractor.
	assert.Equal(t, []string{
		"human:My name is Ana", "ai:Hi Ana",
		"human:Je m'appelle Marie et j'habite à Paris.", "ai:Enchanté !",
		"human:¿Dónde vivo?", "ai:No lo sé.",
	}, c.Seen())
	assert.EqualValues(t, 3, c.calls.Load())
	cur, err := m.Current(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"user name=Ana"}, fcKeys(cur), "languages the rules do not cover give no facts")
}

// ---------------------------------------------------------------------------
// Caps and observe reports.

func TestFacts_CapsByCountAndTokens(t *testing.T) {
	clock := fcNewClock()
	words := tokens.CounterFunc(func(s string) int { return len(strings.Fields(s)) })
	seed := func(t *testing.T, opts ...memories.FactsOption) *memories.Facts {
		m := fcNew(t, fcPatterns(t), append([]memories.FactsOption{memories.WithClock(clock.Now), memories.WithTokenCounter(words)}, opts...)...)
		ctx := context.Background()
		for _, topic := range []string{"tea", "jazz", "chess", "rain", "maps"} {
			clock.Advance(time.Hour)
			fcSave(t, m, ctx, "I like "+topic, "ok")
		}
		return m
	}
	// Each line "- user preference: likes tea (since 2026-11-30)" is 7
	// words; with its line break 8 tokens.
	cases := []struct {
		name    string
		opts    []memories.FactsOption
		shown   []string
		dropped []string
		tokens  int
	}{
		{"all", nil, []string{"maps", "rain", "chess", "jazz", "tea"}, nil, 40},
		{"count", []memories.FactsOption{memories.WithMaxFacts(3)}, []string{"maps", "rain", "chess"}, []string{"jazz", "tea"}, 24},
		{"tokens", []memories.FactsOption{memories.WithFactTokens(17)}, []string{"maps", "rain"}, []string{"chess", "jazz", "tea"}, 16},
		{"tokens exact fit", []memories.FactsOption{memories.WithFactTokens(16)}, []string{"maps", "rain"}, []string{"chess", "jazz", "tea"}, 16},
		{"nothing fits", []memories.FactsOption{memories.WithFactTokens(7)}, nil, []string{"maps", "rain", "chess", "jazz", "tea"}, 0},
		{"both", []memories.FactsOption{memories.WithFactTokens(100), memories.WithMaxFacts(1)}, []string{"maps"}, []string{"rain", "chess", "jazz", "tea"}, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := seed(t, tc.opts...)
			rec := observe.NewRecorder(observe.OpLoad, "facts", "")
			loaded := fcLoad(t, m, observe.WithRecorder(context.Background(), rec))
			var shown []string
			for _, line := range strings.Split(loaded, "\n") {
				if line != "" {
					shown = append(shown, strings.Fields(line)[4])
				}
			}
			assert.Equal(t, tc.shown, shown)
			rep := rec.Finish(0, nil)
			var injected, dropped []string
			for _, it := range rep.Injected {
				assert.Equal(t, "fact", it.Kind)
				assert.Equal(t, 8, it.Tokens)
				injected = append(injected, strings.TrimPrefix(it.ID, "user preference:"))
			}
			for _, it := range rep.Dropped {
				assert.Equal(t, "fact", it.Kind)
				assert.Equal(t, observe.ReasonBudget, it.Reason)
				dropped = append(dropped, strings.TrimPrefix(it.ID, "user preference:"))
			}
			assert.Equal(t, tc.shown, injected)
			assert.Equal(t, tc.dropped, dropped)
			assert.Equal(t, tc.tokens, rep.Tokens)
		})
	}
}

func TestFacts_ObserveSkipsSupersededFacts(t *testing.T) {
	m := fcNew(t, fcPatterns(t))
	ctx := context.Background()
	fcSave(t, m, ctx, "I live in Lisbon", "ok")
	fcSave(t, m, ctx, "I moved to Porto", "ok")
	rec := observe.NewRecorder(observe.OpLoad, "facts", "")
	_ = fcLoad(t, m, observe.WithRecorder(ctx, rec))
	rep := rec.Finish(0, nil)
	cur, err := m.Current(ctx)
	require.NoError(t, err)
	require.Len(t, cur, 1)
	assert.Equal(t, []observe.Item{{Kind: "fact", ID: "user location", Tokens: rep.Injected[0].Tokens, Time: cur[0].ValidFrom}}, rep.Injected)
	assert.False(t, rep.Injected[0].Time.IsZero(), "a fact item carries the time it became valid")
	assert.Greater(t, rep.Injected[0].Tokens, 5)
	assert.Empty(t, rep.Dropped, "superseded facts are not items")
}

// ---------------------------------------------------------------------------
// Identities and persistence.

func TestFacts_IdentityIsolation(t *testing.T) {
	m := fcNew(t, fcPatterns(t))
	ana, bob := fcID("ana", "c1"), fcID("bob", "c1")
	anaOther := fcID("ana", "c2")
	fcSave(t, m, ana, "I'm Ana", "hi")
	fcSave(t, m, bob, "I'm Bob", "hi")
	assert.Contains(t, fcLoad(t, m, ana), "user name: Ana")
	assert.NotContains(t, fcLoad(t, m, ana), "Bob")
	assert.Contains(t, fcLoad(t, m, bob), "user name: Bob")
	assert.Equal(t, "", fcLoad(t, m, anaOther), "facts are per conversation by default")

	require.NoError(t, m.Clear(ana))
	assert.Equal(t, "", fcLoad(t, m, ana))
	hist, err := m.History(ana)
	require.NoError(t, err)
	assert.Empty(t, hist)
	assert.Contains(t, fcLoad(t, m, bob), "user name: Bob", "Clear touches only its identity")

	req := fcNew(t, fcPatterns(t), memories.WithRequireIdentity())
	_, err = req.LoadMemoryVariables(context.Background(), nil)
	assert.ErrorIs(t, err, memstack.ErrNoIdentity)
	assert.ErrorIs(t, req.SaveContext(context.Background(), map[string]any{"in": "I'm Ana"}, map[string]any{"out": "hi"}), memstack.ErrNoIdentity)
}

func TestFacts_PerUser(t *testing.T) {
	st := store.NewInMemory()
	m := fcNew(t, fcPatterns(t), memories.WithFactsPerUser(true), memories.WithStore(st))
	c1, c2, bob := fcID("ana", "c1"), fcID("ana", "c2"), fcID("bob", "c1")
	fcSave(t, m, c1, "I'm Ana", "hi")
	fcSave(t, m, c2, "I live in Porto", "ok")
	fcSave(t, m, bob, "I'm Bob", "hi")
	for _, ctx := range []context.Context{c1, c2} {
		cur, err := m.Current(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{"user location=Porto", "user name=Ana"}, fcKeys(cur))
	}
	hist, err := m.History(c2)
	require.NoError(t, err)
	assert.Equal(t, "c1", hist[0].Conversation)
	assert.Equal(t, "c2", hist[1].Conversation)
	assert.Contains(t, m.String(), "per_user=true")

	// Messages stay per conversation.
	recs, err := st.All(c1, memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"})
	require.NoError(t, err)
	assert.Len(t, recs, 2)

	require.NoError(t, m.Clear(c2))
	assert.Equal(t, "", fcLoad(t, m, c1), "Clear removes the user's facts")
	assert.Contains(t, fcLoad(t, m, bob), "Bob")
	recs, err = st.All(c1, memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"})
	require.NoError(t, err)
	assert.Len(t, recs, 2, "and only this conversation's messages")

	// The other conversation's old turns are not extracted again.
	fcSave(t, m, c1, "I love tea", "ok")
	cur, err := m.Current(c1)
	require.NoError(t, err)
	assert.Equal(t, []string{"user preference:tea=loves tea"}, fcKeys(cur))
}

func TestFacts_PersistsAcrossInstances(t *testing.T) {
	backends := []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		// A real SQLite file: internal/proof's TestRestart_FactsOverSQLite
		// (this module has no database driver).
		{"InMemory", func(t *testing.T) store.Store { return store.NewInMemory() }},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			clock := fcNewClock()
			st := b.open(t)
			ctx := fcID("ana", "c1")
			first := &fcCounting{ext: fcPatterns(t)}
			m1 := fcNew(t, first, memories.WithStore(st), memories.WithClock(clock.Now))
			fcSave(t, m1, ctx, "I'm Ana and I live in Lisbon", "hi")
			clock.Advance(time.Hour)
			fcSave(t, m1, ctx, "I moved to Porto", "ok")
			want := fcLoad(t, m1, ctx)
			hist1, err := m1.History(ctx)
			require.NoError(t, err)
			require.NoError(t, m1.Close())

			// A restart: a new Facts over the same store shows the same
			// facts, with no extraction, and extracts only new turns.
			second := &fcCounting{ext: fcPatterns(t)}
			m2 := fcNew(t, second, memories.WithStore(st), memories.WithClock(clock.Now))
			assert.Equal(t, want, fcLoad(t, m2, ctx))
			assert.Equal(t, "- user location: Porto (since 2026-11-30)\n- user name: Ana (since 2026-11-30)", want)
			hist2, err := m2.History(ctx)
			require.NoError(t, err)
			require.Len(t, hist2, len(hist1))
			for i := range hist1 {
				assert.Equal(t, hist1[i].Key, hist2[i].Key)
				assert.Equal(t, hist1[i].Sources, hist2[i].Sources)
				assert.True(t, hist1[i].ValidFrom.Equal(hist2[i].ValidFrom))
				assert.True(t, hist1[i].ValidTo.Equal(hist2[i].ValidTo))
			}
			fcSave(t, m2, ctx, "I love jazz", "ok")
			assert.Equal(t, []string{"human:I love jazz", "ai:ok"}, second.Seen(), "old turns are not extracted again")
			cur, err := m2.Current(ctx)
			require.NoError(t, err)
			assert.Equal(t, []string{"user preference:jazz=loves jazz", "user location=Porto", "user name=Ana"}, fcKeys(cur))
		})
	}
}

// fcConflictStore fails the first PutState calls of the facts state with
// store.ErrConflict, as if another process had written first.
type fcConflictStore struct {
	store.Store
	conflicts atomic.Int64
}

func (s *fcConflictStore) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	if s.conflicts.Add(-1) >= 0 {
		// Another writer's update: bump the version with the same value.
		cur, err := s.Store.GetState(ctx, id, name)
		if err != nil {
			return 0, err
		}
		v := cur.Value
		if cur.Version == 0 {
			v = []byte(`{"facts":[]}`)
		}
		if _, err := s.Store.PutState(ctx, id, name, v, cur.Version); err != nil {
			return 0, err
		}
	}
	return s.Store.PutState(ctx, id, name, value, expect)
}

func TestFacts_StateConflictIsRetried(t *testing.T) {
	st := &fcConflictStore{Store: store.NewInMemory()}
	st.conflicts.Store(3)
	var evs fcEvents
	m := fcNew(t, fcPatterns(t), memories.WithStore(st), memories.WithFactsHook(evs.Hook))
	fcSave(t, m, context.Background(), "I'm Ana", "hi")
	cur, err := m.Current(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"user name=Ana"}, fcKeys(cur))
	require.Len(t, evs.All(), 1)
	assert.NoError(t, evs.All()[0].Err)
}

// ---------------------------------------------------------------------------
// Failures.

func TestFacts_FailuresAreReportedAndTheTurnIsSaved(t *testing.T) {
	boom := errors.New("model unavailable")
	malformedModel := &fcModel{answer: func(int, []llms.MessageContent) string { return "Sure! Ana lives in Porto." }}
	llmExt, err := extract.NewLLM(malformedModel)
	require.NoError(t, err)
	cases := []struct {
		name string
		ext  extract.Extractor
		opts []memories.FactsOption
		is   error
		text string
	}{
		{"error", extract.ExtractorFunc(func(context.Context, []llms.ChatMessage) ([]extract.Candidate, error) {
			return nil, boom
		}), nil, boom, "model unavailable"},
		{"malformed LLM output", llmExt, nil, extract.ErrMalformed, "malformed"},
		{"timeout", extract.ExtractorFunc(func(ctx context.Context, _ []llms.ChatMessage) ([]extract.Candidate, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}), []memories.FactsOption{memories.WithExtractTimeout(20 * time.Millisecond)}, context.DeadlineExceeded, "deadline"},
		{"late answer past the timeout", extract.ExtractorFunc(func(ctx context.Context, _ []llms.ChatMessage) ([]extract.Candidate, error) {
			<-ctx.Done()
			return []extract.Candidate{{Subject: "user", Attribute: "name", Value: "Late"}}, nil
		}), []memories.FactsOption{memories.WithExtractTimeout(20 * time.Millisecond)}, context.DeadlineExceeded, "deadline"},
		{"panic", extract.ExtractorFunc(func(context.Context, []llms.ChatMessage) ([]extract.Candidate, error) {
			panic("bug")
		}), nil, nil, "panicked: bug"},
	}
	for _, tc := range cases {
		for _, background := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/background=%t", tc.name, background), func(t *testing.T) {
				var evs fcEvents
				st := store.NewInMemory()
				m := fcNew(t, tc.ext, append(tc.opts, memories.WithStore(st), memories.WithFactsHook(evs.Hook), memories.WithBackground(background))...)
				ctx := context.Background()
				require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "I'm Ana"}, map[string]any{"output": "hi"}),
					"an extraction failure is never an error for the turn")
				require.NoError(t, m.Flush(ctx))
				recs, err := st.All(ctx, memstack.Identity{})
				require.NoError(t, err)
				assert.Len(t, recs, 2, "the turn is stored")
				require.Len(t, evs.All(), 1)
				ev := evs.All()[0]
				require.Error(t, ev.Err)
				if tc.is != nil {
					assert.ErrorIs(t, ev.Err, tc.is)
				}
				assert.Contains(t, ev.Err.Error(), tc.text)
				assert.NotContains(t, ev.Err.Error(), "I'm Ana", "errors never quote messages")
				assert.Equal(t, memories.FactsStats{Extractions: 1, Failures: 1}, m.Stats())
				assert.Equal(t, "", fcLoad(t, m, ctx))

				// The failed turn is skipped; later turns are extracted.
				require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "I live in Porto"}, map[string]any{"output": "ok"}))
				require.NoError(t, m.Flush(ctx))
				assert.EqualValues(t, 2, m.Stats().Extractions)
			})
		}
	}
}

// fcFailingStore fails PutState with err.
type fcFailingStore struct {
	store.Store
	err error
}

func (s *fcFailingStore) PutState(context.Context, memstack.Identity, string, []byte, int64) (int64, error) {
	return 0, s.err
}

func TestFacts_StoreFailureWhileCommitting(t *testing.T) {
	disk := errors.New("disk full")
	var evs fcEvents
	m := fcNew(t, fcPatterns(t), memories.WithStore(&fcFailingStore{Store: store.NewInMemory(), err: disk}), memories.WithFactsHook(evs.Hook))
	require.NoError(t, m.SaveContext(context.Background(), map[string]any{"input": "I'm Ana"}, map[string]any{"output": "hi"}))
	require.Len(t, evs.All(), 1)
	assert.ErrorIs(t, evs.All()[0].Err, disk)
	assert.EqualValues(t, 1, m.Stats().Failures)
}

func TestFacts_CorruptState(t *testing.T) {
	st := store.NewInMemory()
	_, err := st.PutState(context.Background(), memstack.Identity{}, memories.FactsStateName, []byte("{not json"), 0)
	require.NoError(t, err)
	m := fcNew(t, fcPatterns(t), memories.WithStore(st))
	_, err = m.LoadMemoryVariables(context.Background(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `state "facts"`)
	_, err = m.History(context.Background())
	require.Error(t, err)
}

func TestFacts_CancelledContext(t *testing.T) {
	m := fcNew(t, fcPatterns(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := m.LoadMemoryVariables(ctx, nil)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, m.SaveContext(ctx, map[string]any{"input": "I'm Ana"}, map[string]any{"output": "hi"}), context.Canceled)
	assert.ErrorIs(t, m.Clear(ctx), context.Canceled)
	_, err = m.Current(ctx)
	assert.ErrorIs(t, err, context.Canceled)
}

// ---------------------------------------------------------------------------
// Concurrency, background mode, Close.

// fcGate is an extractor that blocks until released and records how many
// calls run at once, overall and per identity.
type fcGate struct {
	release chan struct{}
	started chan string

	mu      sync.Mutex
	running map[string]int
	peakID  int
	peakAll int
	total   int
	calls   int
}

func fcNewGate() *fcGate {
	return &fcGate{release: make(chan struct{}), started: make(chan string, 100), running: map[string]int{}}
}

func (g *fcGate) Extract(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
	id, _ := memstack.IdentityFrom(ctx)
	k := id.Key()
	g.mu.Lock()
	g.running[k]++
	g.total++
	g.calls++
	g.peakID = max(g.peakID, g.running[k])
	g.peakAll = max(g.peakAll, g.total)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running[k]--
		g.total--
		g.mu.Unlock()
	}()
	g.started <- k
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return []extract.Candidate{{Subject: "user", Attribute: "said", Value: msgs[0].GetContent()}}, nil
}

func (g *fcGate) Peaks() (perID, all, calls int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peakID, g.peakAll, g.calls
}

func TestFacts_BackgroundOneExtractionPerIdentity(t *testing.T) {
	g := fcNewGate()
	clock := fcNewClock()
	m := fcNew(t, g, memories.WithBackground(true), memories.WithClock(clock.Now))
	ana, bob := fcID("ana", "c1"), fcID("bob", "c1")

	start := time.Now()
	for i := range 5 {
		fcSave(t, m, ana, fmt.Sprintf("ana %d", i), "ok")
		fcSave(t, m, bob, fmt.Sprintf("bob %d", i), "ok")
	}
	assert.Less(t, time.Since(start), 2*time.Second, "saves do not wait for the extractor")
	// Both identities' workers start; neither finishes while the gate is
	// closed.
	<-g.started
	<-g.started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, m.Flush(ctx), context.DeadlineExceeded, "Flush waits for pending work")
	assert.Equal(t, "", fcLoad(t, m, ana), "a load never waits for extraction")

	close(g.release)
	require.NoError(t, m.Flush(context.Background()))
	perID, all, calls := g.Peaks()
	assert.Equal(t, 1, perID, "at most one extraction per identity at a time")
	assert.Equal(t, 2, all, "identities are extracted in parallel")
	assert.Equal(t, 10, calls, "one extraction per turn")
	hist, err := m.History(ana)
	require.NoError(t, err)
	// Every turn was extracted, in order; each superseded the previous one.
	assert.Equal(t, []string{"user said=ana 0", "user said=ana 1", "user said=ana 2", "user said=ana 3", "user said=ana 4"}, fcKeys(hist))
	assert.Equal(t, "- user said: ana 4 (since 2026-11-30)", fcLoad(t, m, ana))
}

func TestFacts_SyncConcurrentSavesCoverEveryTurn(t *testing.T) {
	var peak, running atomic.Int64
	ext := extract.ExtractorFunc(func(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		return []extract.Candidate{{Subject: "user", Attribute: "topic:" + msgs[0].GetContent(), Value: "x"}}, nil
	})
	m := fcNew(t, ext)
	ctx := fcID("ana", "c1")
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8 {
				if !assert.NoError(t, m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("w%d-%d", w, i)}, map[string]any{"output": "ok"})) {
					return
				}
			}
		}()
	}
	wg.Wait()
	hist, err := m.History(ctx)
	require.NoError(t, err)
	assert.Len(t, hist, 48, "every turn is extracted by the time every save returned")
	assert.EqualValues(t, 1, peak.Load(), "one extraction per identity at a time")
	assert.EqualValues(t, 48, m.Stats().Extractions)
}

func TestFacts_CloseCancelsAndRejects(t *testing.T) {
	g := fcNewGate()
	var evs fcEvents
	st := store.NewInMemory()
	m, err := memories.NewFacts(g, memories.WithBackground(true), memories.WithStore(st), memories.WithFactsHook(evs.Hook))
	require.NoError(t, err)
	ctx := context.Background()
	fcSave(t, m, ctx, "I'm Ana", "hi")
	<-g.started
	done := make(chan struct{})
	go func() {
		assert.NoError(t, m.Close())
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not cancel the running extraction")
	}
	require.NoError(t, m.Close(), "closing twice is a no-op")
	assert.ErrorIs(t, m.SaveContext(ctx, map[string]any{"input": "x"}, map[string]any{"output": "y"}), memories.ErrClosed)
	assert.ErrorIs(t, m.AddMessage(ctx, llms.HumanChatMessage{Content: "x"}), memories.ErrClosed)
	assert.ErrorIs(t, m.Flush(ctx), memories.ErrClosed)
	assert.ErrorIs(t, m.Clear(ctx), memories.ErrClosed)
	assert.Equal(t, "memories: the facts memory is closed", m.Flush(ctx).Error())
	_, err = m.LoadMemoryVariables(ctx, nil)
	assert.NoError(t, err, "loads keep working")
	require.Len(t, evs.All(), 1)
	assert.ErrorIs(t, evs.All()[0].Err, context.Canceled)

	// The cancelled turn was left for the next Facts over the store.
	next := fcNew(t, fcPatterns(t), memories.WithStore(st))
	fcSave(t, next, ctx, "I live in Porto", "ok")
	cur, err := next.Current(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"user location=Porto", "user name=Ana"}, fcKeys(cur))
}

func TestFacts_ClearCancelsExtraction(t *testing.T) {
	g := fcNewGate()
	m := fcNew(t, g, memories.WithBackground(true))
	ctx := fcID("ana", "c1")
	fcSave(t, m, ctx, "I'm Ana", "hi")
	<-g.started
	require.NoError(t, m.Clear(ctx))
	require.NoError(t, m.Flush(context.Background()))
	hist, err := m.History(ctx)
	require.NoError(t, err)
	assert.Empty(t, hist, "a cancelled extraction commits nothing after Clear")
}

// ---------------------------------------------------------------------------
// Inside langchaingo chains and a combined memory.

// fcModel is an llms.Model test double: it records the prompts it gets
// and answers with answer(call, messages).
type fcModel struct {
	answer func(call int, msgs []llms.MessageContent) string

	mu    sync.Mutex
	calls []fcCall
}

type fcCall struct {
	Msgs []llms.MessageContent
	Opts llms.CallOptions
}

func (d *fcModel) GenerateContent(ctx context.Context, msgs []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var o llms.CallOptions
	for _, opt := range options {
		opt(&o)
	}
	d.mu.Lock()
	n := len(d.calls)
	d.calls = append(d.calls, fcCall{Msgs: msgs, Opts: o})
	d.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: d.answer(n, msgs)}}}, nil
}

func (d *fcModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, d, prompt, options...)
}

func (d *fcModel) Calls() []fcCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]fcCall(nil), d.calls...)
}

func fcText(mc llms.MessageContent) string {
	var b strings.Builder
	for _, p := range mc.Parts {
		if t, ok := p.(llms.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func TestFacts_InConversationChain(t *testing.T) {
	clock := fcNewClock()
	model := &fcModel{answer: func(call int, _ []llms.MessageContent) string { return fmt.Sprintf("answer %d", call) }}
	mem := fcNew(t, fcPatterns(t), memories.WithMemoryKey("history"), memories.WithClock(clock.Now))
	chain := chains.NewConversation(model, mem)
	ctx := context.Background()
	for _, q := range []string{"Hi, I'm Ana and I live in Lisbon.", "I moved to Porto.", "Where do I live?"} {
		_, err := chains.Run(ctx, chain, q)
		require.NoError(t, err)
	}
	calls := model.Calls()
	require.Len(t, calls, 3)
	prompt := func(i int) string { return fcText(calls[i].Msgs[0]) }
	assert.Contains(t, prompt(0), "Current conversation:\n\nHuman: Hi, I'm Ana")
	assert.Contains(t, prompt(1), "Current conversation:\n- user location: Lisbon (since 2026-11-30)\n- user name: Ana (since 2026-11-30)\nHuman: I moved to Porto.")
	assert.Contains(t, prompt(2), "- user location: Porto (since 2026-11-30)\n- user name: Ana (since 2026-11-30)\nHuman: Where do I live?")
	assert.NotContains(t, prompt(2), "Lisbon", "the superseded location is not shown")
}

func TestFacts_LLMExtractorInMemory(t *testing.T) {
	model := &fcModel{answer: func(call int, _ []llms.MessageContent) string {
		return `{"facts":[{"subject":"user","attribute":"preference:coffee","value":"black, no sugar","sources":[0]}]}`
	}}
	ext, err := extract.NewLLM(model)
	require.NoError(t, err)
	st := store.NewInMemory()
	m := fcNew(t, ext, memories.WithStore(st))
	rec := observe.NewRecorder(observe.OpSave, "facts", "")
	ctx := observe.WithRecorder(context.Background(), rec)
	fcSave(t, m, ctx, "Coffee? Black, no sugar.", "Got it.")
	assert.Equal(t, 1, rec.Finish(0, nil).LLMCalls, "the extractor's model call is reported")
	calls := model.Calls()
	require.Len(t, calls, 1)
	assert.True(t, calls[0].Opts.JSONMode)
	assert.Equal(t, llms.ChatMessageTypeSystem, calls[0].Msgs[0].Role)
	assert.Equal(t, "Messages:\n[0] user: Coffee? Black, no sugar.\n[1] assistant: Got it.\n", fcText(calls[0].Msgs[1]))
	hist, err := m.History(ctx)
	require.NoError(t, err)
	require.Len(t, hist, 1)
	recs, err := st.All(ctx, memstack.Identity{})
	require.NoError(t, err)
	assert.Equal(t, []int64{recs[0].Seq}, hist[0].Sources)
	assert.Equal(t, "llm", hist[0].Rule)
	assert.Contains(t, fcLoad(t, m, ctx), "- user preference:coffee: black, no sugar (since ")
}

func TestFacts_CombinedBudgetDropsOldestFactsFirst(t *testing.T) {
	clock := fcNewClock()
	words := tokens.CounterFunc(func(s string) int { return len(strings.Fields(s)) })
	facts := fcNew(t, fcPatterns(t), memories.WithClock(clock.Now))
	ctx := context.Background()
	for _, topic := range []string{"tea", "jazz", "chess"} {
		clock.Advance(time.Hour)
		fcSave(t, facts, ctx, "I like "+topic, "ok")
	}
	mem, err := combined.New([]schema.Memory{facts}, combined.WithTokenBudget(16, combined.WithTokenCounter(words)))
	require.NoError(t, err)
	vars, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": "hi"})
	require.NoError(t, err)
	got, _ := vars["facts"].(string)
	assert.Contains(t, got, "likes chess")
	assert.Contains(t, got, "likes jazz")
	assert.NotContains(t, got, "likes tea", "the oldest fact is dropped first")
}
