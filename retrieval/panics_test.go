package retrieval_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memstack/memstack/retrieval"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
)

// Issue 17, item 4: embedders and vector stores are other people's code; a
// panic in one fails the operation, and a hybrid search does not wait for
// a part that ignores its context.

// panickyEmbedder panics on every call.
type panickyEmbedder struct{}

func (panickyEmbedder) EmbedDocuments(context.Context, []string) ([][]float32, error) {
	panic("embedding client bug")
}

func (panickyEmbedder) EmbedQuery(context.Context, string) ([]float32, error) {
	panic("embedding client bug")
}

// panickyStore panics on every call.
type panickyStore struct{}

func (panickyStore) AddDocuments(context.Context, []schema.Document, ...vectorstores.Option) ([]string, error) {
	panic("vector store bug")
}

func (panickyStore) SimilaritySearch(context.Context, string, int, ...vectorstores.Option) ([]schema.Document, error) {
	panic("vector store bug")
}

func (panickyStore) DeleteDocuments(context.Context, any) error { panic("vector store bug") }

// deafIndex is a retrieval.Index whose Search ignores its context: it
// blocks until gate is closed.
type deafIndex struct {
	fixedIndex
	gate chan struct{}
}

func (d *deafIndex) Search(_ context.Context, _, _ string, _ int) ([]retrieval.Hit, error) {
	<-d.gate
	return nil, nil
}

func TestVector_PanicsAreErrors(t *testing.T) {
	ctx := context.Background()
	docs := []retrieval.Doc{{Seq: 1, Through: 1, Text: "We settled on PostgreSQL."}}

	v, err := retrieval.NewVector(panickyEmbedder{}, &sliceStore{}, retrieval.WithEmbedderName("e"))
	require.NoError(t, err)
	err = v.Add(ctx, "s", docs)
	require.Error(t, err)
	assert.ErrorIs(t, err, retrieval.ErrEmbedding, "a panicking embedder is an embedding failure")
	assert.Contains(t, err.Error(), "panicked: embedding client bug")
	_, err = v.Search(ctx, "s", "database", 3)
	require.ErrorIs(t, err, retrieval.ErrEmbedding)
	assert.Contains(t, err.Error(), "panicked")

	v, err = retrieval.NewVector(newHashEmbedder(64), panickyStore{}, retrieval.WithEmbedderName("e"))
	require.NoError(t, err)
	for op, call := range map[string]func() error{
		"add":    func() error { return v.Add(ctx, "s", docs) },
		"search": func() error { _, err := v.Search(ctx, "s", "database", 3); return err },
		"delete": func() error { return v.Delete(ctx, "s") },
		"remove": func() error { return v.Remove(ctx, "s", []int64{1}) },
	} {
		err := call()
		require.Error(t, err, op)
		assert.Contains(t, err.Error(), "panicked: vector store bug", op)
	}
}

func TestHybrid_PartThatPanicsIsAFailure(t *testing.T) {
	ctx := context.Background()
	v, err := retrieval.NewVector(panickyEmbedder{}, &sliceStore{}, retrieval.WithEmbedderName("e"))
	require.NoError(t, err)
	h, err := retrieval.NewHybrid(newBM25(t), v)
	require.NoError(t, err)
	err = h.Add(ctx, "s", []retrieval.Doc{{Seq: 1, Through: 1, Text: "We settled on PostgreSQL."}})
	require.ErrorIs(t, err, retrieval.ErrDegraded, "the lexical part took the doc")
	assert.Contains(t, err.Error(), "panicked")
	hits, err := h.Search(ctx, "s", "PostgreSQL", 3)
	require.ErrorIs(t, err, retrieval.ErrDegraded)
	assert.Contains(t, err.Error(), "panicked")
	require.Len(t, hits, 1, "the lexical part's ranking")
	assert.Equal(t, int64(1), hits[0].Seq)

	// A part whose own code panics (not a wrapped embedder) too.
	h, err = retrieval.NewHybrid(newBM25(t), panickyIndex{})
	require.NoError(t, err)
	require.ErrorIs(t, h.Add(ctx, "s", []retrieval.Doc{{Seq: 1, Through: 1, Text: "PostgreSQL"}}), retrieval.ErrDegraded)
	hits, err = h.Search(ctx, "s", "PostgreSQL", 3)
	require.ErrorIs(t, err, retrieval.ErrDegraded)
	assert.Len(t, hits, 1)
	err = h.Delete(ctx, "s")
	require.ErrorIs(t, err, retrieval.ErrDegraded)
	assert.Contains(t, err.Error(), "index bug")
}

// panickyIndex panics on every operation.
type panickyIndex struct{}

func (panickyIndex) Add(context.Context, string, []retrieval.Doc) error { panic("index bug") }
func (panickyIndex) Search(context.Context, string, string, int) ([]retrieval.Hit, error) {
	panic("index bug")
}
func (panickyIndex) Delete(context.Context, string) error { panic("index bug") }
func (panickyIndex) Range() retrieval.Range               { return retrieval.CosineRange }

func TestHybrid_SearchDoesNotWaitForAPartThatIgnoresItsContext(t *testing.T) {
	deaf := &deafIndex{fixedIndex: fixedIndex{rng: retrieval.CosineRange}, gate: make(chan struct{})}
	defer close(deaf.gate)
	h, err := retrieval.NewHybrid(newBM25(t), deaf)
	require.NoError(t, err)
	require.NoError(t, h.Add(context.Background(), "s", []retrieval.Doc{{Seq: 1, Through: 1, Text: "We settled on PostgreSQL."}}))

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	hits, err := h.Search(ctx, "s", "PostgreSQL", 3)
	took := time.Since(start)
	assert.Less(t, took, 50*time.Millisecond+retrieval.HybridSearchGrace+time.Second, "bounded by the context and the grace")
	require.ErrorIs(t, err, retrieval.ErrDegraded)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "the late part failed with its context: %v", err)
	require.Len(t, hits, 1, "the lexical part's ranking")
	assert.Equal(t, int64(1), hits[0].Seq)
}
