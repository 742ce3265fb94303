package proof_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
)

// deafEmbedder is hashEmbedder until deaf is set; then every call ignores
// its context and blocks until release is closed (a client stuck on a dead
// connection), or panics when panics is set.
type deafEmbedder struct {
	hashEmbedder
	deaf, panics atomic.Bool
	release      chan struct{}
}

func (e *deafEmbedder) stall() {
	if e.panics.Load() {
		panic("embedder: nil map")
	}
	if e.deaf.Load() {
		<-e.release
	}
}

func (e *deafEmbedder) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	e.stall()
	return e.hashEmbedder.EmbedDocuments(ctx, texts)
}

func (e *deafEmbedder) EmbedQuery(ctx context.Context, text string) ([]float32, error) {
	e.stall()
	return e.hashEmbedder.EmbedQuery(ctx, text)
}

// within fails the test if f does not return within d.
func within(t *testing.T, d time.Duration, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		return nil
	}
}

// TestRecallFaults: a Recall with a hybrid index over every backend, whose
// embedder stops answering (ignoring its context) and then panics: saves,
// loads and Clear return within WithRecallTimeout and its grace, the
// lexical half keeps answering, nothing crashes, and the turns stay
// stored (issue 17, item 4).
func TestRecallFaults(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.space(t)("recall")
			e := &deafEmbedder{release: make(chan struct{})}
			defer close(e.release)
			vs, err := retrieval.NewChromem(nil, "recall-"+b.name, nil)
			require.NoError(t, err)
			m, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallTimeout(100*time.Millisecond),
				memories.WithHybrid(e, vs, retrieval.WithEmbedderName("hash")))
			require.NoError(t, err)
			id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "faults"}
			ctx := memstack.WithIdentity(context.Background(), id)
			save := func(i int) error {
				return m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("question %d about the offsite in Lisbon", i)},
					map[string]any{"output": fmt.Sprintf("answer %d", i)})
			}
			require.NoError(t, save(0))
			const bound = 3 * time.Second
			for _, mode := range []string{"deaf", "panics"} {
				e.deaf.Store(mode == "deaf")
				e.panics.Store(mode == "panics")
				for i := 1; i <= 2; i++ {
					require.NoError(t, within(t, bound, mode+" save", func() error { return save(i) }), "a failing index never fails a save")
				}
				var vars map[string]any
				require.NoError(t, within(t, bound, mode+" load", func() error {
					var err error
					vars, err = m.LoadMemoryVariables(ctx, map[string]any{"input": "offsite Lisbon"})
					return err
				}))
				assert.Contains(t, vars["relevant_history"], "offsite in Lisbon", "%s: the lexical half still answers", mode)
			}
			all, err := st.All(context.Background(), id)
			require.NoError(t, err)
			assert.Len(t, all, 10, "every turn is stored")
			e.panics.Store(false)
			_ = within(t, bound, "Clear", func() error { return m.Clear(ctx) })
			all, err = st.All(context.Background(), id)
			require.NoError(t, err)
			assert.Empty(t, all, "Clear removed the turns")
		})
	}
}
