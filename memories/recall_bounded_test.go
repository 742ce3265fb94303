package memories_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
)

// Issue 17, item 4: Recall bounds every embedder and vector store call as
// Summary and Facts bound their model calls — a call that ignores its
// context is abandoned, a panic is an index failure — and an abandoned
// call neither holds the identity nor commits anything when it ends.

// rbTimeout is the WithRecallTimeout of these tests; a bounded call
// returns within it plus the quarter second of grace it is given.
const rbTimeout = 50 * time.Millisecond

// rbBound is how long a save, load or Clear may take here: the timeout,
// the grace, and room for a slow (race-detector) machine. Without the
// bound the calls below never return.
const rbBound = 3 * time.Second

// rbWithin runs f and returns its result, failing the test when f does not
// return within d (f then stays blocked in its goroutine).
func rbWithin[T any](t *testing.T, d time.Duration, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
	panic("unreachable")
}

// rbDeafEmbedder answers as rcEmbedder does, but once deaf is set it
// ignores its context: every call blocks until release, then answers — a
// model client without context support stuck on a dead connection.
type rbDeafEmbedder struct {
	inner   *rcEmbedder
	deaf    atomic.Bool
	gate    chan struct{}
	once    sync.Once
	calls   atomic.Int64
	waiting atomic.Int64
}

func newRBDeafEmbedder() *rbDeafEmbedder {
	return &rbDeafEmbedder{inner: newRCEmbedder(), gate: make(chan struct{})}
}

func (e *rbDeafEmbedder) release() { e.once.Do(func() { close(e.gate) }) }

func (e *rbDeafEmbedder) block() {
	if !e.deaf.Load() {
		return
	}
	e.calls.Add(1)
	e.waiting.Add(1)
	defer e.waiting.Add(-1)
	<-e.gate
}

func (e *rbDeafEmbedder) EmbedDocuments(_ context.Context, texts []string) ([][]float32, error) {
	e.block()
	return e.inner.EmbedDocuments(context.Background(), texts)
}

func (e *rbDeafEmbedder) EmbedQuery(_ context.Context, text string) ([]float32, error) {
	e.block()
	return e.inner.EmbedQuery(context.Background(), text)
}

// rbPanickyEmbedder panics on every call once on is set, and otherwise
// answers as rcEmbedder does.
type rbPanickyEmbedder struct {
	inner *rcEmbedder
	on    *atomic.Bool
}

func (e rbPanickyEmbedder) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	if e.on.Load() {
		panic("embedding client bug")
	}
	return e.inner.EmbedDocuments(ctx, texts)
}

func (e rbPanickyEmbedder) EmbedQuery(ctx context.Context, text string) ([]float32, error) {
	if e.on.Load() {
		panic("embedding client bug")
	}
	return e.inner.EmbedQuery(ctx, text)
}

var (
	_ embeddings.Embedder = (*rbDeafEmbedder)(nil)
	_ embeddings.Embedder = rbPanickyEmbedder{}
)

// rbStore wraps a Chromem: its deletes can be made to ignore their context
// (blocking until released), its adds to ignore it (landing whenever they
// are called), and its adds and searches to panic.
type rbStore struct {
	*retrieval.Chromem
	hangDeletes atomic.Bool
	deafAdds    atomic.Bool
	panics      *atomic.Bool // adds and searches panic while set
	gate        chan struct{}
	once        sync.Once
	deletes     atomic.Int64 // deletes that returned
}

func newRBStore(t *testing.T) *rbStore {
	t.Helper()
	ch, err := retrieval.NewChromem(nil, "recall", nil)
	require.NoError(t, err)
	s := &rbStore{Chromem: ch, gate: make(chan struct{}), panics: &atomic.Bool{}}
	t.Cleanup(s.release)
	return s
}

func (s *rbStore) release() { s.once.Do(func() { close(s.gate) }) }

func (s *rbStore) AddDocuments(ctx context.Context, docs []schema.Document, opts ...vectorstores.Option) ([]string, error) {
	if s.panics.Load() {
		panic("vector store bug")
	}
	if s.deafAdds.Load() {
		ctx = context.WithoutCancel(ctx)
	}
	return s.Chromem.AddDocuments(ctx, docs, opts...)
}

func (s *rbStore) SimilaritySearch(ctx context.Context, query string, n int, opts ...vectorstores.Option) ([]schema.Document, error) {
	if s.panics.Load() {
		panic("vector store bug")
	}
	return s.Chromem.SimilaritySearch(ctx, query, n, opts...)
}

func (s *rbStore) DeleteDocuments(ctx context.Context, filter any) error {
	if s.hangDeletes.Load() {
		<-s.gate
		ctx = context.Background() // deaf: the caller's deadline was ignored
	}
	defer s.deletes.Add(1)
	return s.Chromem.DeleteDocuments(ctx, filter)
}

// rbPanickyIndex is a retrieval.Index (WithIndex): a BM25 that panics on
// every operation once on is set.
type rbPanickyIndex struct {
	*retrieval.BM25
	on *atomic.Bool
}

func (x rbPanickyIndex) Add(ctx context.Context, scope string, docs []retrieval.Doc) error {
	if x.on.Load() {
		panic("index bug")
	}
	return x.BM25.Add(ctx, scope, docs)
}

func (x rbPanickyIndex) Search(ctx context.Context, scope, query string, k int) ([]retrieval.Hit, error) {
	if x.on.Load() {
		panic("index bug")
	}
	return x.BM25.Search(ctx, scope, query, k)
}

func (x rbPanickyIndex) Remove(ctx context.Context, scope string, seqs []int64) error {
	if x.on.Load() {
		panic("index bug")
	}
	return x.BM25.Remove(ctx, scope, seqs)
}

func (x rbPanickyIndex) Delete(ctx context.Context, scope string) error {
	if x.on.Load() {
		panic("index bug")
	}
	return x.BM25.Delete(ctx, scope)
}

// rbLastFailure returns the last event of hook with an error.
func rbLastFailure(hook *rcHook) memories.RecallEvent {
	hook.mu.Lock()
	defer hook.mu.Unlock()
	for i := len(hook.events) - 1; i >= 0; i-- {
		if hook.events[i].Err != nil {
			return hook.events[i]
		}
	}
	return memories.RecallEvent{}
}

func rbSave(m *memories.Recall, ctx context.Context, human, ai string) func() error {
	return func() error { return m.SaveContext(ctx, map[string]any{"input": human}, map[string]any{"output": ai}) }
}

type rbLoaded struct {
	text string
	err  error
}

func rbLoad(m *memories.Recall, ctx context.Context, query string) func() rbLoaded {
	return func() rbLoaded {
		vars, err := m.LoadMemoryVariables(ctx, map[string]any{"input": query})
		if err != nil {
			return rbLoaded{err: err}
		}
		s, _ := vars[m.GetMemoryKey(ctx)].(string)
		return rbLoaded{text: s}
	}
}

// An embedder that ignores its context: the save returns within the
// timeout (plus the grace) — the turn stored, the failure reported as a
// timeout —, a load and a Clear of the same identity return too, and
// when the abandoned calls finally end, after the Clear, nothing they
// computed is kept: neither vectors of the cleared turn in the vector
// store nor a recorded state.
func TestRecall_AbandonsAnEmbedderThatIgnoresItsContext(t *testing.T) {
	for _, hybrid := range []bool{false, true} {
		name := "vector"
		if hybrid {
			name = "hybrid"
		}
		t.Run(name, func(t *testing.T) {
			e := newRBDeafEmbedder()
			t.Cleanup(e.release)
			vs := newRBStore(t)
			vs.deafAdds.Store(true)
			st := store.NewInMemory()
			hook := &rcHook{}
			index := memories.WithVector(e, vs, retrieval.WithEmbedderName("hash"))
			if hybrid {
				index = memories.WithHybrid(e, vs, retrieval.WithEmbedderName("hash"))
			}
			m := rcNew(t, memories.WithStore(st), index, memories.WithRecallHook(hook.hook),
				memories.WithRecallTimeout(rbTimeout), memories.WithK(1))
			id := memstack.Identity{User: "ana"}
			ctx := ctIDCtx(id)
			require.NoError(t, rbSave(m, ctx, "Which database should we use?", "We settled on PostgreSQL.")())
			require.Equal(t, 1, vs.Count())

			e.deaf.Store(true)
			start := time.Now()
			err := rbWithin(t, rbBound, "SaveContext", rbSave(m, ctx, "Where is the offsite?", "Lisbon, in June."))
			require.NoError(t, err, "a transient indexing failure never fails a save")
			assert.Less(t, time.Since(start), 2*time.Second)
			assert.Len(t, ctStored(t, st, id), 4, "the turn is stored")
			fails := hook.failures(memories.RecallOpIndex)
			require.Len(t, fails, 1)
			assert.ErrorIs(t, fails[0], context.DeadlineExceeded, "reported as a timeout: %v", fails[0])

			got := rbWithin(t, rbBound, "LoadMemoryVariables", rbLoad(m, ctx, "offsite"))
			require.NoError(t, got.err)
			if hybrid {
				assert.Equal(t, "Human: Where is the offsite?\nAI: Lisbon, in June.", got.text,
					"the lexical part answers while the vector part hangs")
			} else {
				assert.Equal(t, "", got.text, "a failed search shows nothing")
			}
			require.NotEmpty(t, hook.failures(memories.RecallOpSearch))

			require.NoError(t, rbWithin(t, rbBound, "Clear", func() error { return m.Clear(ctx) }))
			assert.Empty(t, ctStored(t, st, id))

			// The abandoned calls end now: their vectors are computed
			// and land in the vector store after the Clear; the Recall
			// takes them back, and records nothing.
			require.Positive(t, e.waiting.Load(), "abandoned calls are still running")
			e.release()
			require.Eventually(t, func() bool { return e.waiting.Load() == 0 && vs.Count() == 0 }, 5*time.Second, 10*time.Millisecond,
				"the cleared turn's vectors are not kept")
			state, err := st.GetState(context.Background(), id, memories.RecallStateName)
			require.NoError(t, err)
			assert.False(t, state.Exists(), "the abandoned calls recorded no state: %s", state.Value)

			// The identity works normally again.
			require.NoError(t, rbSave(m, ctx, "What is the budget?", "The budget is 40k euros.")())
			got = rbLoad(m, ctx, "budget")()
			require.NoError(t, got.err)
			assert.Equal(t, "Human: What is the budget?\nAI: The budget is 40k euros.", got.text)
			// The late removal ran before the new turn was indexed, so
			// (Seqs never being reused) only the new turn's vector is
			// kept.
			time.Sleep(50 * time.Millisecond)
			assert.Equal(t, 1, vs.Count())
		})
	}
}

// A Clear whose vector store delete ignores its context returns within the
// timeout with an error saying the messages are cleared; while that
// delete runs, nothing is indexed for the identity (the late delete would
// remove it), and once it ends the turns saved after the Clear are indexed
// and found.
func TestRecall_ClearAbandonsADeleteThatIgnoresItsContext(t *testing.T) {
	vs := newRBStore(t)
	st := store.NewInMemory()
	hook := &rcHook{}
	m := rcNew(t, memories.WithStore(st), memories.WithVector(newRCEmbedder(), vs, retrieval.WithEmbedderName("hash")),
		memories.WithRecallHook(hook.hook), memories.WithRecallTimeout(rbTimeout), memories.WithK(1))
	id := memstack.Identity{User: "ana"}
	ctx := ctIDCtx(id)
	require.NoError(t, rbSave(m, ctx, "Which database should we use?", "We settled on PostgreSQL.")())
	require.Equal(t, 1, vs.Count())

	vs.hangDeletes.Store(true)
	start := time.Now()
	err := rbWithin(t, rbBound, "Clear", func() error { return m.Clear(ctx) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "messages cleared")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Empty(t, ctStored(t, st, id), "the messages are cleared")

	require.NoError(t, rbWithin(t, rbBound, "SaveContext", rbSave(m, ctx, "Where is the offsite?", "Lisbon, in June.")))
	got := rbWithin(t, rbBound, "LoadMemoryVariables", rbLoad(m, ctx, "offsite"))
	require.NoError(t, got.err)
	assert.Equal(t, 1, vs.Count(), "nothing indexed while the abandoned delete runs")

	vs.hangDeletes.Store(false)
	vs.release()
	require.Eventually(t, func() bool { return vs.deletes.Load() >= 1 }, 5*time.Second, 10*time.Millisecond)
	// The store's delete has returned; the Recall learns it an instant
	// later, on the delete's goroutine (a save or load in between is not
	// indexed yet, and retries). Within that instant, a load indexes the
	// turn saved during the delete.
	const offsite = "Human: Where is the offsite?\nAI: Lisbon, in June."
	require.Eventually(t, func() bool {
		got := rbLoad(m, ctx, "offsite")()
		return got.err == nil && got.text == offsite
	}, 5*time.Second, 10*time.Millisecond, "the turn saved during the delete is indexed after it")
	require.NoError(t, rbSave(m, ctx, "What is the budget?", "The budget is 40k euros.")())
	got = rbLoad(m, ctx, "offsite")()
	require.NoError(t, got.err)
	assert.Equal(t, offsite, got.text)
	got = rbLoad(m, ctx, "budget")()
	require.NoError(t, got.err)
	assert.Equal(t, "Human: What is the budget?\nAI: The budget is 40k euros.", got.text)
	assert.Equal(t, 2, vs.Count(), "the cleared turn's vector is gone, the two new ones are kept")
}

// A panic in the embedder, the vector store or the index is an index
// failure — reported, the save succeeding and a load showing what is
// indexed (nothing from a failed search; with a hybrid, the lexical
// part's hits) — never a crash.
func TestRecall_PanicsAreIndexFailures(t *testing.T) {
	const first = "Human: Which database should we use?\nAI: We settled on PostgreSQL."
	const second = "Human: Where is the offsite?\nAI: Lisbon, in June."
	for _, tc := range []struct {
		name   string
		index  func(t *testing.T, on *atomic.Bool) memories.RecallOption
		hybrid bool
		panics string
	}{
		{"embedder, vector", func(_ *testing.T, on *atomic.Bool) memories.RecallOption {
			return memories.WithVector(rbPanickyEmbedder{newRCEmbedder(), on}, nil, retrieval.WithEmbedderName("hash"))
		}, false, "embedding client bug"},
		{"embedder, hybrid", func(_ *testing.T, on *atomic.Bool) memories.RecallOption {
			return memories.WithHybrid(rbPanickyEmbedder{newRCEmbedder(), on}, nil, retrieval.WithEmbedderName("hash"))
		}, true, "embedding client bug"},
		{"vector store", func(t *testing.T, on *atomic.Bool) memories.RecallOption {
			vs := newRBStore(t)
			vs.panics = on
			return memories.WithVector(newRCEmbedder(), vs, retrieval.WithEmbedderName("hash"))
		}, false, "vector store bug"},
		{"index", func(t *testing.T, on *atomic.Bool) memories.RecallOption {
			x, err := retrieval.NewBM25()
			require.NoError(t, err)
			return memories.WithIndex(rbPanickyIndex{x, on})
		}, false, "index bug"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on := &atomic.Bool{}
			st := store.NewInMemory()
			hook := &rcHook{}
			m := rcNew(t, memories.WithStore(st), tc.index(t, on), memories.WithRecallHook(hook.hook), memories.WithK(1))
			id := memstack.Identity{User: "ana"}
			ctx := ctIDCtx(id)
			require.NoError(t, rbSave(m, ctx, "Which database should we use?", "We settled on PostgreSQL.")())

			on.Store(true)
			require.NoError(t, rbSave(m, ctx, "Where is the offsite?", "Lisbon, in June.")())
			assert.Len(t, ctStored(t, st, id), 4, "the turn is stored")
			fails := hook.failures(memories.RecallOpIndex)
			require.NotEmpty(t, fails)
			assert.Contains(t, fails[0].Error(), "panicked")
			assert.Contains(t, fails[0].Error(), tc.panics)
			assert.False(t, retrieval.Permanent(fails[0]), "a panic is transient: retried at the next save or load")

			got := rbLoad(m, ctx, "offsite")()
			require.NoError(t, got.err, "a failed search does not fail the load")
			if tc.hybrid {
				assert.Equal(t, second, got.text, "the lexical part answers")
			} else {
				assert.Equal(t, "", got.text, "a failed search shows nothing")
			}
			// The load's failure is reported: its search's (with a
			// WithIndex index, which is in process memory, the reset of
			// the identity's entries before it, which fails first).
			ev := rbLastFailure(hook)
			require.Error(t, ev.Err)
			assert.Contains(t, ev.Err.Error(), "panicked")
			assert.Contains(t, ev.Err.Error(), tc.panics)
			if tc.hybrid {
				assert.Equal(t, memories.RecallOpSearch, ev.Op)
				assert.ErrorIs(t, ev.Err, retrieval.ErrDegraded)
			}

			on.Store(false)
			got = rbLoad(m, ctx, "offsite")()
			require.NoError(t, got.err)
			assert.Equal(t, second, got.text, "the turn is indexed once the panics stop")
			got = rbLoad(m, ctx, "database")()
			require.NoError(t, got.err)
			assert.Equal(t, first, got.text)

			on.Store(true)
			err := m.Clear(ctx)
			if tc.name == "index" {
				require.Error(t, err, "the index's delete panicked")
				assert.Contains(t, err.Error(), "messages cleared")
				assert.Contains(t, err.Error(), "panicked")
			} else {
				require.NoError(t, err)
			}
			assert.Empty(t, ctStored(t, st, id))
		})
	}
}
