package memories_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/philippgille/chromem-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

var (
	_ schema.Memory = (*memories.Recall)(nil)
	_ fmt.Stringer  = (*memories.Recall)(nil)
	_ ctMemory      = (*memories.Recall)(nil)
)

// ---------------------------------------------------------------------------
// Test doubles and helpers.

// rcEmbedder is the embeddings.Embedder test double: a deterministic bag
// of words — each token (retrieval.Tokenize) adds 1 to the component its
// FNV hash picks — in 256 dimensions unless changed (few enough
// collisions that a text's own words rank it first). It counts calls and
// embedded texts, and can fail, be slow or change its dimension.
type rcEmbedder struct {
	dim   atomic.Int32
	fail  atomic.Bool
	delay atomic.Int64 // nanoseconds

	docCalls, queryCalls, texts atomic.Int64
}

var _ embeddings.Embedder = (*rcEmbedder)(nil)

var rcErrDown = errors.New("embedding service unavailable")

func newRCEmbedder() *rcEmbedder {
	e := &rcEmbedder{}
	e.dim.Store(256)
	return e
}

func (e *rcEmbedder) vector(text string) []float32 {
	v := make([]float32, e.dim.Load())
	toks := retrieval.Tokenize(text)
	for _, tok := range toks {
		h := fnv.New32a()
		h.Write([]byte(tok))
		v[int(h.Sum32()%uint32(len(v)))]++
	}
	if len(toks) == 0 {
		v[0] = 1
	}
	return v
}

func (e *rcEmbedder) wait(ctx context.Context) error {
	if d := time.Duration(e.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if e.fail.Load() {
		return rcErrDown
	}
	return nil
}

func (e *rcEmbedder) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	e.docCalls.Add(1)
	e.texts.Add(int64(len(texts)))
	if err := e.wait(ctx); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e.vector(t)
	}
	return out, nil
}

func (e *rcEmbedder) EmbedQuery(ctx context.Context, text string) ([]float32, error) {
	e.queryCalls.Add(1)
	if err := e.wait(ctx); err != nil {
		return nil, err
	}
	return e.vector(text), nil
}

// rcHook collects RecallEvents.
type rcHook struct {
	mu     sync.Mutex
	events []memories.RecallEvent
}

func (h *rcHook) hook(ev memories.RecallEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
}

func (h *rcHook) failures(op string) []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []error
	for _, ev := range h.events {
		if ev.Op == op && ev.Err != nil {
			out = append(out, ev.Err)
		}
	}
	return out
}

func (h *rcHook) count(op string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, ev := range h.events {
		if ev.Op == op {
			n++
		}
	}
	return n
}

// rcCountingStore counts the reads a memory makes of a store.
type rcCountingStore struct {
	store.Store
	all, last atomic.Int64
}

func (s *rcCountingStore) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	s.all.Add(1)
	return s.Store.All(ctx, id)
}

func (s *rcCountingStore) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	s.last.Add(1)
	return s.Store.Last(ctx, id, n)
}

// rcTurns is the test conversation. With a fresh store, turn i's human
// message has Seq 2i+1: the exchanges are 1, 3, 5, 7, 9, 11.
var rcTurns = [][2]string{
	{"Which database should we use?", "We settled on PostgreSQL."},
	{"What is the budget?", "The budget is 40k euros."},
	{"Where is the offsite?", "Lisbon, in June."},
	{"Who leads the database migration?", "Maria leads the database migration."},
	{"Any news on hiring?", "Two engineers start in May."},
	{"Which logo colour?", "Blue."},
}

func rcExchange(i int) string {
	return "Human: " + rcTurns[i][0] + "\nAI: " + rcTurns[i][1]
}

// rcNew builds a Recall in exchange units (WithRecallUnit(RecallExchanges))
// that indexes each exchange alone (WithContextWeight(0)), so the
// hand-computed BM25 scores over exchanges of the tests below hold, and
// shows no dates (WithRecallDates(false)), so their expected renderings
// are the exchanges alone; options may override all three
// (recall_dates_test.go and recall_turns_test.go test dates, turns and
// context).
func rcNew(t testing.TB, opts ...memories.RecallOption) *memories.Recall {
	t.Helper()
	m, err := memories.NewRecall(append([]memories.RecallOption{
		memories.WithRecallUnit(memories.RecallExchanges), memories.WithContextWeight(0), memories.WithRecallDates(false),
	}, opts...)...)
	require.NoError(t, err)
	return m
}

func rcSaveAll(t testing.TB, m schema.Memory, ctx context.Context) {
	t.Helper()
	for _, turn := range rcTurns {
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": turn[0]}, map[string]any{"output": turn[1]}))
	}
}

func rcAsk(t testing.TB, m schema.Memory, ctx context.Context, query string) string {
	t.Helper()
	vars, err := m.LoadMemoryVariables(ctx, map[string]any{"input": query})
	require.NoError(t, err)
	require.Len(t, vars, 1)
	s, ok := vars[m.GetMemoryKey(ctx)].(string)
	require.True(t, ok, "string mode loads a string, got %T", vars[m.GetMemoryKey(ctx)])
	return s
}

func rcChromemAt(t testing.TB, dir string) *retrieval.Chromem {
	t.Helper()
	db, err := chromem.NewPersistentDB(dir, false)
	require.NoError(t, err)
	c, err := retrieval.NewChromem(db, "recall", nil)
	require.NoError(t, err)
	return c
}

// ---------------------------------------------------------------------------
// Construction.

func TestNewRecall_Defaults(t *testing.T) {
	ctx := context.Background()
	m := rcNew(t)
	assert.Equal(t, "relevant_history", m.GetMemoryKey(ctx))
	assert.Equal(t, []string{"relevant_history"}, m.MemoryVariables(ctx))
	s := m.String()
	assert.True(t, strings.HasPrefix(s, "Recall("), s)
	for _, want := range []string{"BM25(k1=1.2, b=0.75)", "k=3", "threshold=0", "neighbours=0", "exclude_recent=0", `"relevant_history"`, "mode=string"} {
		assert.Contains(t, s, want)
	}
	custom := rcNew(t, memories.WithMemoryKey("history"), memories.WithK(5), memories.WithReturnMessages(true),
		memories.WithVector(newRCEmbedder(), nil, retrieval.WithEmbedderName("hash")))
	assert.Equal(t, "history", custom.GetMemoryKey(ctx))
	for _, want := range []string{"Vector(", `"hash"`, "k=5", "threshold=-1", "mode=messages"} {
		assert.Contains(t, custom.String(), want)
	}
}

func TestNewRecall_RejectsBadOptions(t *testing.T) {
	e := newRCEmbedder()
	bm25, err := retrieval.NewBM25()
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		opts []memories.RecallOption
		want []string // substrings of the error
	}{
		{"k zero", []memories.RecallOption{memories.WithK(0)}, []string{"WithK(0)"}},
		{"k negative", []memories.RecallOption{memories.WithK(-2)}, []string{"WithK(-2)"}},
		{"lexical threshold above 1", []memories.RecallOption{memories.WithThreshold(1.5)}, []string{"WithThreshold(1.5)", "[0, 1]", "BM25"}},
		{"lexical threshold negative", []memories.RecallOption{memories.WithThreshold(-0.1)}, []string{"WithThreshold(-0.1)", "[0, 1]"}},
		{"cosine threshold below -1", []memories.RecallOption{memories.WithVector(e, nil), memories.WithThreshold(-1.5)}, []string{"WithThreshold(-1.5)", "[-1, 1]", "Vector"}},
		{"cosine threshold above 1", []memories.RecallOption{memories.WithThreshold(1.01), memories.WithVector(e, nil)}, []string{"WithThreshold(1.01)", "[-1, 1]"}},
		{"hybrid threshold above 1", []memories.RecallOption{memories.WithHybrid(e, nil), memories.WithThreshold(2)}, []string{"WithThreshold(2)", "[0, 1]", "Hybrid"}},
		{"NaN threshold", []memories.RecallOption{memories.WithThreshold(math.NaN())}, []string{"WithThreshold(NaN)"}},
		{"negative neighbours", []memories.RecallOption{memories.WithNeighbours(-1)}, []string{"WithNeighbours(-1)"}},
		{"negative exclude", []memories.RecallOption{memories.WithExcludeRecent(-3)}, []string{"WithExcludeRecent(-3)"}},
		{"nil index", []memories.RecallOption{memories.WithIndex(nil)}, []string{"WithIndex(nil)"}},
		{"nil embedder", []memories.RecallOption{memories.WithVector(nil, nil)}, []string{"WithVector", "embedder is nil"}},
		{"nil embedder in hybrid", []memories.RecallOption{memories.WithHybrid(nil, nil)}, []string{"WithHybrid", "embedder is nil"}},
		{"bad vector option", []memories.RecallOption{memories.WithVector(e, nil, retrieval.WithDimension(0))}, []string{"WithVector", "WithDimension(0)"}},
		{"index chosen twice", []memories.RecallOption{memories.WithIndex(bm25), memories.WithVector(e, nil)}, []string{"chosen 2 times", "WithIndex, WithVector"}},
		{"negative timeout", []memories.RecallOption{memories.WithRecallTimeout(-time.Second)}, []string{"WithRecallTimeout(-1s)"}},
		{"nil hook", []memories.RecallOption{memories.WithRecallHook(nil)}, []string{"WithRecallHook(nil)"}},
		{"empty memory key", []memories.RecallOption{memories.WithMemoryKey("")}, []string{"WithMemoryKey"}},
		{"nil option", []memories.RecallOption{nil}, []string{"option 1 of 1 is nil"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := memories.NewRecall(tc.opts...)
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, memories.ErrInvalidOption)
			for _, w := range tc.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
	// In range: the ends are allowed.
	for _, opts := range [][]memories.RecallOption{
		{memories.WithThreshold(0)}, {memories.WithThreshold(1)},
		{memories.WithVector(e, nil), memories.WithThreshold(-1)},
		{memories.WithHybrid(e, nil), memories.WithThreshold(0.5)},
	} {
		_, err := memories.NewRecall(opts...)
		assert.NoError(t, err)
	}
}

// ---------------------------------------------------------------------------
// Loading: what is shown.

func TestRecall_Selection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []memories.RecallOption
		query string
		want  string
	}{
		{"best k=3, in conversation order", nil, "What did we settle on for the database?",
			rcExchange(0) + "\n\n" + rcExchange(3)},
		{"k=1 keeps the best", []memories.RecallOption{memories.WithK(1)}, "database", rcExchange(3)},
		// Hand-computed BM25 (see TestRecall_ObserveReports): exchange 7
		// scores 0.5405, exchange 1 0.4762 for "database".
		{"threshold between them", []memories.RecallOption{memories.WithThreshold(0.5)}, "database", rcExchange(3)},
		{"threshold above all", []memories.RecallOption{memories.WithThreshold(0.9)}, "database", ""},
		{"neighbours join into one run", []memories.RecallOption{memories.WithK(1), memories.WithNeighbours(1)}, "database",
			rcExchange(2) + "\n" + rcExchange(3) + "\n" + rcExchange(4)},
		{"neighbours clipped at the start", []memories.RecallOption{memories.WithNeighbours(2)}, "PostgreSQL",
			rcExchange(0) + "\n" + rcExchange(1) + "\n" + rcExchange(2)},
		{"separate runs with neighbours", []memories.RecallOption{memories.WithNeighbours(1)}, "PostgreSQL colour",
			rcExchange(0) + "\n" + rcExchange(1) + "\n\n" + rcExchange(4) + "\n" + rcExchange(5)},
		{"neighbours merge runs", []memories.RecallOption{memories.WithNeighbours(1)}, "budget hiring",
			rcExchange(0) + "\n" + rcExchange(1) + "\n" + rcExchange(2) + "\n" + rcExchange(3) + "\n" + rcExchange(4) + "\n" + rcExchange(5)},
		{"exclude the last 3 turns", []memories.RecallOption{memories.WithExcludeRecent(6)}, "database", rcExchange(0)},
		{"a partly shown exchange is excluded", []memories.RecallOption{memories.WithExcludeRecent(5)}, "database", rcExchange(0)},
		{"exclude less", []memories.RecallOption{memories.WithExcludeRecent(4)}, "database", rcExchange(0) + "\n\n" + rcExchange(3)},
		{"neighbours skip what is excluded", []memories.RecallOption{memories.WithK(1), memories.WithNeighbours(1), memories.WithExcludeRecent(4)}, "database",
			rcExchange(2) + "\n" + rcExchange(3)},
		{"everything excluded", []memories.RecallOption{memories.WithExcludeRecent(100)}, "database", ""},
		{"no match", nil, "zebra giraffe", ""},
		{"stop words only", nil, "what did we do?", ""},
		{"custom prefixes", []memories.RecallOption{memories.WithK(1), memories.WithHumanPrefix("User"), memories.WithAIPrefix("Bot")}, "budget",
			"User: What is the budget?\nBot: The budget is 40k euros."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := rcNew(t, tc.opts...)
			rcSaveAll(t, m, ctx)
			assert.Equal(t, tc.want, rcAsk(t, m, ctx, tc.query))
		})
	}
}

func TestRecall_ThresholdIsInclusive(t *testing.T) {
	m := rcNew(t)
	rcSaveAll(t, m, context.Background())
	rec := observe.NewRecorder(observe.OpLoad, "recall", "x")
	_ = rcAsk(t, m, observe.WithRecorder(context.Background(), rec), "database")
	r := rec.Finish(0, nil)
	require.Len(t, r.Injected, 2)
	require.Equal(t, "1", r.Injected[0].ID)
	lower := r.Injected[0].Score
	assert.InDelta(t, 1/2.1, lower, 1e-12, "hand-computed: tf 1, |d| 4, avgdl 4.5 → 1/(1+1.2·(0.25+0.75·4/4.5))")

	at := rcNew(t, memories.WithThreshold(lower))
	rcSaveAll(t, at, context.Background())
	assert.Equal(t, rcExchange(0)+"\n\n"+rcExchange(3), rcAsk(t, at, context.Background(), "database"), "a score equal to the threshold passes")
	above := rcNew(t, memories.WithThreshold(math.Nextafter(lower, 1)))
	rcSaveAll(t, above, context.Background())
	assert.Equal(t, rcExchange(3), rcAsk(t, above, context.Background(), "database"))
}

func TestRecall_Queries(t *testing.T) {
	ctx := context.Background()
	hook := &rcHook{}
	m := rcNew(t, memories.WithRecallHook(hook.hook))
	rcSaveAll(t, m, ctx)
	searches := hook.count(memories.RecallOpSearch)

	for _, tc := range []struct {
		name   string
		inputs map[string]any
	}{
		{"nil inputs", nil},
		{"empty inputs", map[string]any{}},
		{"empty query", map[string]any{"input": ""}},
		{"whitespace query", map[string]any{"input": " \n\t "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars, err := m.LoadMemoryVariables(ctx, tc.inputs)
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"relevant_history": ""}, vars)
		})
	}
	assert.Equal(t, searches, hook.count(memories.RecallOpSearch), "no query, no search")

	t.Run("several keys and no input key", func(t *testing.T) {
		_, err := m.LoadMemoryVariables(ctx, map[string]any{"input": "budget", "lang": "en"})
		require.Error(t, err)
		assert.ErrorIs(t, err, adapter.ErrInvalidValues)
		assert.ErrorContains(t, err, "WithInputKey")
		assert.NotContains(t, err.Error(), "budget", "errors never show values")
	})
	t.Run("non-string input", func(t *testing.T) {
		_, err := m.LoadMemoryVariables(ctx, map[string]any{"input": 42})
		require.Error(t, err)
		assert.ErrorContains(t, err, `"input"`)
	})
	t.Run("WithInputKey", func(t *testing.T) {
		k := rcNew(t, memories.WithInputKey("question"), memories.WithK(1))
		require.NoError(t, k.SaveContext(ctx, map[string]any{"question": "What is the budget?", "lang": "en"}, map[string]any{"text": "40k."}))
		vars, err := k.LoadMemoryVariables(ctx, map[string]any{"question": "budget?", "lang": "en"})
		require.NoError(t, err)
		assert.Equal(t, "Human: What is the budget?\nAI: 40k.", vars["relevant_history"])
		_, err = k.LoadMemoryVariables(ctx, map[string]any{"lang": "en"})
		assert.ErrorContains(t, err, `no key "question"`)
	})
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := m.LoadMemoryVariables(cctx, map[string]any{"input": "budget"})
		assert.ErrorIs(t, err, context.Canceled)
	})
}

func TestRecall_MessagesMode(t *testing.T) {
	ctx := context.Background()
	m := rcNew(t, memories.WithReturnMessages(true), memories.WithK(2))
	rcSaveAll(t, m, ctx)
	vars, err := m.LoadMemoryVariables(ctx, map[string]any{"input": "database"})
	require.NoError(t, err)
	msgs, ok := vars["relevant_history"].([]llms.ChatMessage)
	require.True(t, ok, "%T", vars["relevant_history"])
	assert.Equal(t, []llms.ChatMessage{
		llms.HumanChatMessage{Content: rcTurns[0][0]}, llms.AIChatMessage{Content: rcTurns[0][1]},
		llms.HumanChatMessage{Content: rcTurns[3][0]}, llms.AIChatMessage{Content: rcTurns[3][1]},
	}, msgs)
	msgs[0] = llms.HumanChatMessage{Content: "changed"}
	vars, err = m.LoadMemoryVariables(ctx, map[string]any{"input": "database"})
	require.NoError(t, err)
	assert.Equal(t, rcTurns[0][0], vars["relevant_history"].([]llms.ChatMessage)[0].GetContent(), "a fresh copy each load")

	vars, err = m.LoadMemoryVariables(ctx, map[string]any{"input": "zebra"})
	require.NoError(t, err)
	assert.Equal(t, []llms.ChatMessage{}, vars["relevant_history"])
}

func TestRecall_AddMessageExchanges(t *testing.T) {
	ctx := context.Background()
	m := rcNew(t, memories.WithReturnMessages(true))
	load := func(q string) []llms.ChatMessage {
		vars, err := m.LoadMemoryVariables(ctx, map[string]any{"input": q})
		require.NoError(t, err)
		return vars["relevant_history"].([]llms.ChatMessage)
	}
	conv := ctConversation() // system, human, AI tool call, tool result, AI, human, AI
	ctAddAll(t, m, ctx, conv)
	assert.Equal(t, conv[1:5], load("weather in Paris"), "a tool exchange is shown whole, the system prompt never")
	assert.Empty(t, load("terse assistant"), "system messages are not indexed")

	// An exchange that grows is indexed again.
	require.NoError(t, m.AddMessage(ctx, llms.HumanChatMessage{Content: "Is the museum open?"}))
	assert.Equal(t, []llms.ChatMessage{llms.HumanChatMessage{Content: "Is the museum open?"}}, load("museum"))
	require.NoError(t, m.AddMessage(ctx, &llms.AIChatMessage{Content: "Yes, until 6pm."}))
	assert.Equal(t, []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Is the museum open?"},
		llms.AIChatMessage{Content: "Yes, until 6pm."},
	}, load("6pm"))

	assert.Error(t, m.AddMessage(ctx, nil), "bad messages are rejected")
}

// ---------------------------------------------------------------------------
// Identities, restarts, caching, clearing.

func rcAdversarialIDs() []memstack.Identity {
	return []memstack.Identity{
		{},
		{Tenant: "a"},
		{Tenant: "a", User: "b"},
		{Tenant: "a:b"},
		{Tenant: "a", User: ":b"},
		{Tenant: "a%3Ab"},
		{User: "a"},
		{Conversation: "a"},
		{Tenant: "*", User: "*", Conversation: "*"},
		{Tenant: "a\x00", User: "b"},
		{Tenant: "ü", User: "{x}"},
	}
}

func TestRecall_IdentitiesAreIsolated(t *testing.T) {
	ids := rcAdversarialIDs()
	var all []string
	for i := range ids {
		all = append(all, fmt.Sprintf("zeta%d", i))
	}
	query := "secret code alpha " + strings.Join(all, " ")
	type index struct {
		name string
		opts []memories.RecallOption
	}
	type testCase struct {
		name  string
		opts  []memories.RecallOption
		scope memories.RecallScope
	}
	var cases []testCase
	for _, ix := range []index{
		{"lexical", nil},
		{"vector over chromem", []memories.RecallOption{memories.WithVector(newRCEmbedder(), nil)}},
		{"hybrid", []memories.RecallOption{memories.WithHybrid(newRCEmbedder(), nil)}},
	} {
		for _, sc := range []memories.RecallScope{memories.RecallScopeConversation, memories.RecallScopeUser, memories.RecallScopeTenant} {
			if sc != memories.RecallScopeConversation && ix.opts != nil {
				continue // a wider scope needs an in-process index (WithRecallScope)
			}
			cases = append(cases, testCase{ix.name + ", " + sc.String(), ix.opts, sc})
		}
	}
	// shares reports whether a Recall of scope shows a's turns to b: the
	// same conversation, or the same user (user scope) or tenant (tenant
	// scope).
	shares := func(scope memories.RecallScope, a, b memstack.Identity) bool {
		switch scope {
		case memories.RecallScopeUser:
			return a.Tenant == b.Tenant && a.User == b.User
		case memories.RecallScopeTenant:
			return a.Tenant == b.Tenant
		}
		return a == b
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := rcNew(t, append(tc.opts, memories.WithK(3*len(ids)+5), memories.WithRecallScope(tc.scope))...)
			var wg sync.WaitGroup
			for i, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := ctIDCtx(id)
					for j := range 3 {
						err := m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("What is the secret code %d?", j)},
							map[string]any{"output": fmt.Sprintf("The code is zeta%d alpha.", i)})
						if err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			for i, id := range ids {
				got := rcAsk(t, m, ctIDCtx(id), query)
				assert.Equal(t, 3, strings.Count(got, fmt.Sprintf("zeta%d alpha", i)), "identity %q sees its 3 exchanges", id.Key())
				for j := range ids {
					if j == i {
						continue
					}
					if shares(tc.scope, ids[j], id) {
						assert.Equal(t, 3, strings.Count(got, fmt.Sprintf("zeta%d alpha", j)), "identity %q sees %q's 3 exchanges (scope %s)", id.Key(), ids[j].Key(), tc.scope)
					} else {
						assert.NotContains(t, got, fmt.Sprintf("zeta%d ", j), "identity %q must not see %q's exchange (scope %s)", id.Key(), ids[j].Key(), tc.scope)
					}
				}
			}
		})
	}
}

func TestRecall_ConcurrentSameIdentity(t *testing.T) {
	e := newRCEmbedder()
	m := rcNew(t, memories.WithHybrid(e, nil), memories.WithK(1))
	ctx := ctIDCtx(memstack.Identity{User: "shared"})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				err := m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("topic%dx%d?", g, i)}, map[string]any{"output": "ok"})
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := m.LoadMemoryVariables(ctx, map[string]any{"input": fmt.Sprintf("topic%dx%d", g, i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for g := range 4 {
		for i := range 10 {
			want := fmt.Sprintf("Human: topic%dx%d?\nAI: ok", g, i)
			assert.Equal(t, want, rcAsk(t, m, ctx, fmt.Sprintf("topic%dx%d", g, i)))
		}
	}
	assert.Equal(t, int64(40), e.texts.Load(), "every exchange embedded exactly once despite the races")
}

func TestRecall_RestartRebuildsTheLexicalIndex(t *testing.T) {
	st := &rcCountingStore{Store: store.NewInMemory()}
	ctx := ctIDCtx(memstack.Identity{Tenant: "acme", User: "u1"})
	first := rcNew(t, memories.WithStore(st))
	rcSaveAll(t, first, ctx)
	assert.Equal(t, int64(1), st.all.Load(), "saves index incrementally after the first use: one full read")
	assert.GreaterOrEqual(t, st.last.Load(), int64(len(rcTurns)-1))

	// A new process: a new Recall over the same store.
	second := rcNew(t, memories.WithStore(st), memories.WithK(1))
	assert.Equal(t, rcExchange(1), rcAsk(t, second, ctx, "How much was the budget again?"))
	require.NoError(t, second.SaveContext(ctx, map[string]any{"input": "Budget update?"}, map[string]any{"output": "The budget rose to 50k."}))
	assert.Equal(t, "Human: Budget update?\nAI: The budget rose to 50k.", rcAsk(t, second, ctx, "50k"))
}

func TestRecall_CacheEviction(t *testing.T) {
	st := &rcCountingStore{Store: store.NewInMemory()}
	m := rcNew(t, memories.WithStore(st), memories.WithCacheSize(1), memories.WithK(1))
	a, b := ctIDCtx(memstack.Identity{User: "a"}), ctIDCtx(memstack.Identity{User: "b"})
	for i := range 3 {
		for _, ctx := range []context.Context{a, b} {
			who, _ := memstack.IdentityFrom(ctx)
			require.NoError(t, m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("note %d for %s", i, who.User)},
				map[string]any{"output": fmt.Sprintf("noted%d%s", i, who.User)}))
		}
	}
	assert.GreaterOrEqual(t, st.all.Load(), int64(5), "each switch of identity evicts the other and rebuilds it")
	assert.Equal(t, "Human: note 1 for a\nAI: noted1a", rcAsk(t, m, a, "noted1a"))
	assert.Equal(t, "Human: note 2 for b\nAI: noted2b", rcAsk(t, m, b, "noted2b"))
	assert.Equal(t, "", rcAsk(t, m, a, "noted2b"))

	off := rcNew(t, memories.WithCacheSize(0), memories.WithK(1))
	rcSaveAll(t, off, a)
	assert.Equal(t, rcExchange(2), rcAsk(t, off, a, "offsite"), "caching off still works")
}

func TestRecall_Clear(t *testing.T) {
	ch, err := retrieval.NewChromem(nil, "c", nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		opts []memories.RecallOption
	}{
		{"lexical", nil},
		{"vector", []memories.RecallOption{memories.WithVector(newRCEmbedder(), ch)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := store.NewInMemory()
			m := rcNew(t, append(tc.opts, memories.WithStore(st))...)
			a, b := ctIDCtx(memstack.Identity{User: "a"}), ctIDCtx(memstack.Identity{User: "b"})
			rcSaveAll(t, m, a)
			rcSaveAll(t, m, b)
			require.NoError(t, m.Clear(a))
			assert.Empty(t, ctStored(t, st, memstack.Identity{User: "a"}))
			assert.Equal(t, "", rcAsk(t, m, a, "budget"))
			assert.Contains(t, rcAsk(t, m, b, "budget"), "40k")
			require.NoError(t, m.SaveContext(a, map[string]any{"input": "New budget?"}, map[string]any{"output": "60k."}))
			assert.Equal(t, "Human: New budget?\nAI: 60k.", rcAsk(t, m, a, "budget"))
		})
	}
	assert.Equal(t, len(rcTurns)+1, ch.Count(), "Clear deleted a's vectors from chromem, b's stay")
}

// ---------------------------------------------------------------------------
// Vector index: embedding calls, persistence, vector spaces, failures.

func TestRecall_VectorEmbedsEachExchangeOnce(t *testing.T) {
	e := newRCEmbedder()
	m := rcNew(t, memories.WithVector(e, nil, retrieval.WithEmbedderName("hash")), memories.WithK(1))
	rec := observe.NewRecorder(observe.OpSave, "recall", "x")
	ctx := observe.WithRecorder(context.Background(), rec)
	rcSaveAll(t, m, ctx)
	assert.Equal(t, int64(len(rcTurns)), e.docCalls.Load(), "one embedding call per saved turn")
	assert.Equal(t, int64(len(rcTurns)), e.texts.Load(), "each exchange embedded once")
	assert.Equal(t, len(rcTurns), rec.Finish(0, nil).EmbeddingCalls)

	rec = observe.NewRecorder(observe.OpLoad, "recall", "x")
	ctx = observe.WithRecorder(context.Background(), rec)
	assert.Equal(t, rcExchange(2), rcAsk(t, m, ctx, "Where is the offsite?"))
	assert.Equal(t, int64(len(rcTurns)), e.texts.Load(), "a load embeds only the query")
	assert.Equal(t, 1, rec.Finish(0, nil).EmbeddingCalls)
}

func TestRecall_VectorRestartUsesPersistedEmbeddings(t *testing.T) {
	dir := t.TempDir()
	st := store.NewInMemory()
	id := memstack.Identity{Tenant: "acme", User: "u1"}
	ctx := ctIDCtx(id)
	e := newRCEmbedder()

	first := rcNew(t, memories.WithStore(st), memories.WithK(1),
		memories.WithVector(e, rcChromemAt(t, dir), retrieval.WithEmbedderName("hash")))
	rcSaveAll(t, first, ctx)
	require.Equal(t, int64(len(rcTurns)), e.texts.Load())

	raw, err := st.GetState(context.Background(), id, memories.RecallStateName)
	require.NoError(t, err)
	var state struct {
		Through int64             `json:"through"`
		Spaces  []retrieval.Space `json:"spaces"`
	}
	require.NoError(t, json.Unmarshal(raw.Value, &state))
	stat, err := st.Stat(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, stat.LastSeq, state.Through, "the watermark is the newest message's Seq")
	assert.Equal(t, []retrieval.Space{{Embedder: "hash", Dim: 256}}, state.Spaces, "the embedder's identity is stored")

	// A new process: new Recall, new chromem DB over the same directory.
	second := rcNew(t, memories.WithStore(st), memories.WithK(1),
		memories.WithVector(e, rcChromemAt(t, dir), retrieval.WithEmbedderName("hash")))
	assert.Equal(t, rcExchange(1), rcAsk(t, second, ctx, "How much money do we have, the budget?"))
	assert.Equal(t, int64(len(rcTurns)), e.texts.Load(), "nothing embedded again after the restart")

	// A hybrid over the same vectors rebuilds only its lexical part.
	third := rcNew(t, memories.WithStore(st), memories.WithK(1),
		memories.WithHybrid(e, rcChromemAt(t, dir), retrieval.WithEmbedderName("hash")))
	assert.Equal(t, rcExchange(2), rcAsk(t, third, ctx, "offsite Lisbon"))
	assert.Equal(t, int64(len(rcTurns)), e.texts.Load())
}

// The restart over SQLite and a persistent chromem directory is
// internal/proof's TestRestart_RecallOverSQLiteAndPersistentChromem (this
// module has no database driver).

func TestRecall_VectorSpaceMismatch(t *testing.T) {
	dir := t.TempDir()
	st := store.NewInMemory()
	ctx := context.Background()
	first := rcNew(t, memories.WithStore(st), memories.WithVector(newRCEmbedder(), rcChromemAt(t, dir), retrieval.WithEmbedderName("model-a")))
	rcSaveAll(t, first, ctx)

	small := newRCEmbedder()
	small.dim.Store(32)
	for _, tc := range []struct {
		name string
		e    *rcEmbedder
		vopt retrieval.VectorOption
		want string
	}{
		{"another embedder name", newRCEmbedder(), retrieval.WithEmbedderName("model-b"), "model-a"},
		{"another dimension", small, retrieval.WithEmbedderName("model-a"), "dimension"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := &rcHook{}
			m := rcNew(t, memories.WithStore(st), memories.WithRecallHook(hook.hook),
				memories.WithVector(tc.e, rcChromemAt(t, dir), tc.vopt))
			_, err := m.LoadMemoryVariables(ctx, map[string]any{"input": "budget"})
			require.Error(t, err, "a load never mixes vector spaces")
			assert.True(t, retrieval.Permanent(err), "%v", err)
			assert.ErrorContains(t, err, tc.want)

			before := len(ctStored(t, st, memstack.Identity{}))
			err = m.SaveContext(ctx, map[string]any{"input": "More?"}, map[string]any{"output": "No."})
			require.Error(t, err)
			assert.True(t, retrieval.Permanent(err))
			assert.ErrorContains(t, err, "turn stored; indexing failed")
			assert.Len(t, ctStored(t, st, memstack.Identity{}), before+2, "the turn is stored all the same")
			assert.NotEmpty(t, hook.failures(memories.RecallOpIndex), "and the failure is reported")
		})
	}
}

func TestRecall_EmbedderDimensionChanges(t *testing.T) {
	ctx := context.Background()
	e := newRCEmbedder()
	hook := &rcHook{}
	st := store.NewInMemory()
	m := rcNew(t, memories.WithStore(st), memories.WithVector(e, nil), memories.WithRecallHook(hook.hook))
	rcSaveAll(t, m, ctx)
	e.dim.Store(128)
	err := m.SaveContext(ctx, map[string]any{"input": "Anything else?"}, map[string]any{"output": "No."})
	require.ErrorIs(t, err, retrieval.ErrDimensionChanged)
	assert.ErrorContains(t, err, "dimension 128")
	assert.Len(t, ctStored(t, st, memstack.Identity{}), 2*len(rcTurns)+2)
	fails := hook.failures(memories.RecallOpIndex)
	require.Len(t, fails, 1)
	assert.ErrorIs(t, fails[0], retrieval.ErrDimensionChanged)

	_, err = m.LoadMemoryVariables(ctx, map[string]any{"input": "budget"})
	assert.ErrorIs(t, err, retrieval.ErrDimensionChanged)
}

func TestRecall_EmbedderFailures(t *testing.T) {
	t.Run("vector: saves succeed, loads return nothing, then catch up", func(t *testing.T) {
		ctx := context.Background()
		e := newRCEmbedder()
		hook := &rcHook{}
		st := store.NewInMemory()
		m := rcNew(t, memories.WithStore(st), memories.WithVector(e, nil), memories.WithRecallHook(hook.hook), memories.WithK(1))
		rcSaveAll(t, m, ctx)
		e.fail.Store(true)
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "Where do we host the wiki?"}, map[string]any{"output": "On Confluence."}),
			"an embedder outage never fails a save")
		assert.Len(t, ctStored(t, st, memstack.Identity{}), 2*len(rcTurns)+2, "the turn is stored")
		fails := hook.failures(memories.RecallOpIndex)
		require.Len(t, fails, 1)
		assert.ErrorIs(t, fails[0], retrieval.ErrEmbedding)
		assert.ErrorIs(t, fails[0], rcErrDown)

		assert.Equal(t, "", rcAsk(t, m, ctx, "wiki Confluence"), "a failed search returns nothing, no error")
		assert.NotEmpty(t, hook.failures(memories.RecallOpSearch))

		e.fail.Store(false)
		assert.Equal(t, "Human: Where do we host the wiki?\nAI: On Confluence.", rcAsk(t, m, ctx, "wiki Confluence"),
			"the exchange saved during the outage is indexed once the embedder is back")
	})
	t.Run("hybrid falls back to lexical", func(t *testing.T) {
		ctx := context.Background()
		e := newRCEmbedder()
		hook := &rcHook{}
		m := rcNew(t, memories.WithHybrid(e, nil), memories.WithRecallHook(hook.hook), memories.WithK(1))
		rcSaveAll(t, m, ctx)
		e.fail.Store(true)
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "Where do we host the wiki?"}, map[string]any{"output": "On Confluence."}))
		assert.Equal(t, "Human: Where do we host the wiki?\nAI: On Confluence.", rcAsk(t, m, ctx, "wiki"))
		fails := hook.failures(memories.RecallOpSearch)
		require.NotEmpty(t, fails)
		assert.ErrorIs(t, fails[len(fails)-1], retrieval.ErrDegraded)
	})
	t.Run("timeout", func(t *testing.T) {
		ctx := context.Background()
		e := newRCEmbedder()
		hook := &rcHook{}
		st := store.NewInMemory()
		m := rcNew(t, memories.WithStore(st), memories.WithVector(e, nil), memories.WithRecallHook(hook.hook),
			memories.WithRecallTimeout(30*time.Millisecond))
		e.delay.Store(int64(5 * time.Second))
		start := time.Now()
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "Hi"}, map[string]any{"output": "Hello"}))
		assert.Less(t, time.Since(start), 2*time.Second, "the timeout bounds the save")
		assert.Len(t, ctStored(t, st, memstack.Identity{}), 2)
		fails := hook.failures(memories.RecallOpIndex)
		require.Len(t, fails, 1)
		assert.ErrorIs(t, fails[0], context.DeadlineExceeded)

		start = time.Now()
		assert.Equal(t, "", rcAsk(t, m, ctx, "hello"))
		assert.Less(t, time.Since(start), 2*time.Second, "the timeout bounds the load")
	})
}

// ---------------------------------------------------------------------------
// Observability.

func TestRecall_ObserveReports(t *testing.T) {
	// One conversation: the Seqs below are the store's, with no recall
	// journal entries (a scoped Recall's) between them.
	m := rcNew(t, memories.WithK(1), memories.WithThreshold(0.13), memories.WithExcludeRecent(6), memories.WithRecallScope(memories.RecallScopeConversation))
	rcSaveAll(t, m, context.Background())
	rec := observe.NewRecorder(observe.OpLoad, "recall", "x")
	ctx := observe.WithRecorder(context.Background(), rec)
	assert.Equal(t, rcExchange(1), rcAsk(t, m, ctx, "database offsite budget"))
	r := rec.Finish(0, nil)

	// Hand-computed BM25 over the six exchanges (terms after Tokenize):
	// N = 6, avgdl = 27/6 = 4.5; idf(databas) = ln(1+4.5/2.5) = ln 2.8,
	// idf(budget) = idf(offsit) = ln(1+5.5/1.5); norm = 2.2·Σ idf.
	idfD, idfO := math.Log(2.8), math.Log(1+5.5/1.5)
	norm := 2.2 * (idfD + 2*idfO)
	score := func(idf, tf, dl float64) float64 {
		return idf * tf * 2.2 / (tf + 1.2*(0.25+0.75*dl/4.5)) / norm
	}
	want3 := score(idfO, 2, 4) // "budget" twice in 4 terms
	want5 := score(idfO, 1, 3) // "offsit" once in 3 terms
	want7 := score(idfD, 2, 7) // "databas" twice in 7 terms
	want1 := score(idfD, 1, 4) // "databas" once in 4 terms
	assert.InDelta(t, 0.2418, want3, 1e-3, "sanity check of the formula above")

	require.Len(t, r.Injected, 1)
	assert.Equal(t, "exchange", r.Injected[0].Kind)
	assert.Equal(t, "3", r.Injected[0].ID, "the Seq of the exchange's human message")
	assert.InDelta(t, want3, r.Injected[0].Score, 1e-9)
	assert.Positive(t, r.Injected[0].Tokens)
	assert.Equal(t, r.Injected[0].Tokens, r.Tokens)

	require.Len(t, r.Dropped, 3)
	for i, want := range []observe.Item{
		{Kind: "exchange", ID: "5", Score: want5, Reason: observe.ReasonRank},
		{Kind: "exchange", ID: "7", Score: want7, Reason: observe.ReasonShownElsewhere},
		{Kind: "exchange", ID: "1", Score: want1, Reason: observe.ReasonThreshold},
	} {
		got := r.Dropped[i]
		assert.Equal(t, want.ID, got.ID, "dropped %d", i)
		assert.Equal(t, want.Reason, got.Reason, "dropped %d", i)
		assert.Equal(t, want.Kind, got.Kind)
		assert.InDelta(t, want.Score, got.Score, 1e-9, "dropped %d", i)
	}
	for _, it := range append(r.Injected, r.Dropped...) {
		assert.NotContains(t, it.ID, "budget", "reports never carry message text")
	}

	// Neighbours are injected with score 0.
	n := rcNew(t, memories.WithK(1), memories.WithNeighbours(1), memories.WithRecallScope(memories.RecallScopeConversation))
	rcSaveAll(t, n, context.Background())
	rec = observe.NewRecorder(observe.OpLoad, "recall", "x")
	_ = rcAsk(t, n, observe.WithRecorder(context.Background(), rec), "offsite")
	r = rec.Finish(0, nil)
	require.Len(t, r.Injected, 3)
	assert.Equal(t, []string{"3", "5", "7"}, []string{r.Injected[0].ID, r.Injected[1].ID, r.Injected[2].ID})
	assert.Zero(t, r.Injected[0].Score)
	assert.Positive(t, r.Injected[1].Score)
	assert.Zero(t, r.Injected[2].Score)
}

// ---------------------------------------------------------------------------
// Inside langchaingo's conversation chain.

// rcModel is the llms.Model test double: it records every prompt and
// answers from a script, in order.
type rcModel struct {
	mu      sync.Mutex
	answers []string
	prompts []string
}

func (d *rcModel) GenerateContent(_ context.Context, messages []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	var b strings.Builder
	for _, mc := range messages {
		for _, p := range mc.Parts {
			if t, ok := p.(llms.TextContent); ok {
				b.WriteString(t.Text)
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.prompts = append(d.prompts, b.String())
	answer := "I don't know."
	if len(d.answers) > 0 {
		answer, d.answers = d.answers[0], d.answers[1:]
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: answer}}}, nil
}

func (d *rcModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, d, prompt, options...)
}

func (d *rcModel) lastPrompt() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.prompts[len(d.prompts)-1]
}

func TestRecall_InsideConversationChain(t *testing.T) {
	model := &rcModel{}
	for _, turn := range rcTurns {
		model.answers = append(model.answers, turn[1])
	}
	model.answers = append(model.answers, "PostgreSQL.")
	mem := rcNew(t, memories.WithMemoryKey("history"), memories.WithK(1))
	chain := chains.NewConversation(model, mem)
	ctx := ctIDCtx(memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c7"})
	for _, turn := range rcTurns {
		_, err := chains.Run(ctx, chain, turn[0])
		require.NoError(t, err)
	}
	answer, err := chains.Run(ctx, chain, "What did we settle on for the database?")
	require.NoError(t, err)
	assert.Equal(t, "PostgreSQL.", answer)
	prompt := model.lastPrompt()
	assert.Contains(t, prompt, "Current conversation:\n"+rcExchange(0)+"\nHuman: What did we settle on for the database?\nAI:",
		"the prompt shows the relevant old exchange")
	assert.NotContains(t, prompt, "Lisbon")
	assert.NotContains(t, prompt, "Blue.")

	// Another identity of the same chain sees nothing of it.
	other := ctIDCtx(memstack.Identity{Tenant: "acme", User: "u43"})
	_, err = chains.Run(other, chain, "What did we settle on for the database?")
	require.NoError(t, err)
	assert.Contains(t, model.lastPrompt(), "Current conversation:\n\nHuman: What did we settle on")
}
