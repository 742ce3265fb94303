package retrieval_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/retrieval"
	"github.com/philippgille/chromem-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
)

var vectorCorpus = []retrieval.Doc{
	{Seq: 10, Through: 11, Text: "Which database should we use?\nWe settled on PostgreSQL for the database."},
	{Seq: 12, Through: 13, Text: "What is the budget?\nThe budget is 40k euros."},
	{Seq: 14, Through: 15, Text: "Where is the offsite?\nThe offsite is in Lisbon in June."},
}

// vectorStores returns the stores every Vector test runs against: the
// embedded Chromem and a plain appending store.
func vectorStores(t *testing.T) map[string]func() vectorstores.VectorStore {
	return map[string]func() vectorstores.VectorStore{
		"chromem": func() vectorstores.VectorStore {
			c, err := retrieval.NewChromem(nil, "test", nil)
			require.NoError(t, err)
			return c
		},
		"slice": func() vectorstores.VectorStore { return &sliceStore{} },
	}
}

func TestVector_RanksBySimilarityWithinScope(t *testing.T) {
	for name, mk := range vectorStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := newHashEmbedder(64)
			v, err := retrieval.NewVector(e, mk(), retrieval.WithEmbedderName("hash64"))
			require.NoError(t, err)
			assert.Equal(t, retrieval.CosineRange, v.Range())
			require.NoError(t, v.Add(ctx, "alice", vectorCorpus))
			require.NoError(t, v.Add(ctx, "bob", []retrieval.Doc{{Seq: 20, Through: 21, Text: "The database budget offsite: all of bob's secrets."}}))

			hits, err := v.Search(ctx, "alice", "which database did we settle on?", 3)
			require.NoError(t, err)
			require.Len(t, hits, 3)
			assert.Equal(t, int64(10), hits[0].Seq)
			for i, h := range hits {
				assert.True(t, retrieval.CosineRange.Contains(h.Score), "score %v", h.Score)
				if i > 0 {
					assert.GreaterOrEqual(t, hits[i-1].Score, h.Score, "best first")
				}
				assert.NotEqual(t, int64(20), h.Seq, "never bob's")
			}
			hits, err = v.Search(ctx, "bob", "database", 3)
			require.NoError(t, err)
			assert.Equal(t, []int64{20}, seqs(hits))

			hits, err = v.Search(ctx, "nobody", "database", 3)
			require.NoError(t, err)
			assert.Empty(t, hits)
		})
	}
}

func TestVector_CountsEmbeddingCallsAndCaches(t *testing.T) {
	for name, mk := range vectorStores(t) {
		t.Run(name, func(t *testing.T) {
			e := newHashEmbedder(64)
			v, err := retrieval.NewVector(e, mk())
			require.NoError(t, err)
			rec := observe.NewRecorder(observe.OpSave, "recall", "h")
			ctx := observe.WithRecorder(context.Background(), rec)

			require.NoError(t, v.Add(ctx, "s", vectorCorpus))
			assert.Equal(t, int64(1), e.docCalls.Load(), "one batch call: the store reuses the vectors")
			assert.Equal(t, int64(3), e.texts.Load())
			_, err = v.Search(ctx, "s", "budget", 2)
			require.NoError(t, err)
			assert.Equal(t, int64(1), e.queryCalls.Load())
			assert.Equal(t, 2, rec.Finish(0, nil).EmbeddingCalls)

			// Empty queries and empty docs never reach the embedder.
			before := e.calls()
			for _, q := range []string{"", " \n\t "} {
				hits, err := v.Search(ctx, "s", q, 2)
				require.NoError(t, err)
				assert.Empty(t, hits)
			}
			require.NoError(t, v.Add(ctx, "s", []retrieval.Doc{{Seq: 99, Through: 99, Text: "   "}}))
			assert.Equal(t, before, e.calls())

			// AddSince skips what an earlier run stored.
			require.NoError(t, v.AddSince(ctx, "s", vectorCorpus, 13))
			assert.Equal(t, int64(4), e.texts.Load(), "only the doc with Through 15 is embedded")
		})
	}
}

func TestVector_DimensionAndSpace(t *testing.T) {
	ctx := context.Background()
	t.Run("dimension change", func(t *testing.T) {
		e := newHashEmbedder(64)
		v, err := retrieval.NewVector(e, &sliceStore{})
		require.NoError(t, err)
		require.NoError(t, v.Add(ctx, "s", vectorCorpus[:1]))
		e.dim.Store(32)
		err = v.Add(ctx, "s", vectorCorpus[1:2])
		require.ErrorIs(t, err, retrieval.ErrDimensionChanged)
		assert.True(t, retrieval.Permanent(err))
		assert.ErrorContains(t, err, "dimension 32")
		assert.ErrorContains(t, err, "dimension 64")
		_, err = v.Search(ctx, "s", "database", 1)
		assert.ErrorIs(t, err, retrieval.ErrDimensionChanged)
	})
	t.Run("declared dimension", func(t *testing.T) {
		v, err := retrieval.NewVector(newHashEmbedder(64), &sliceStore{}, retrieval.WithDimension(128))
		require.NoError(t, err)
		assert.ErrorIs(t, v.Add(ctx, "s", vectorCorpus), retrieval.ErrDimensionChanged)
	})
	t.Run("another embedder's vectors in the store", func(t *testing.T) {
		store, err := retrieval.NewChromem(nil, "shared", nil)
		require.NoError(t, err)
		first, err := retrieval.NewVector(newHashEmbedder(64), store, retrieval.WithEmbedderName("model-a"))
		require.NoError(t, err)
		require.NoError(t, first.Add(ctx, "s", vectorCorpus))
		second, err := retrieval.NewVector(newHashEmbedder(64), store, retrieval.WithEmbedderName("model-b"))
		require.NoError(t, err)
		_, err = second.Search(ctx, "s", "database", 2)
		require.ErrorIs(t, err, retrieval.ErrSpaceMismatch)
		assert.ErrorContains(t, err, "model-a")
		assert.ErrorContains(t, err, "model-b")

		// Same name, other dimension: Chromem refuses to compare.
		third, err := retrieval.NewVector(newHashEmbedder(32), store, retrieval.WithEmbedderName("model-a"))
		require.NoError(t, err)
		_, err = third.Search(ctx, "s", "database", 2)
		assert.ErrorIs(t, err, retrieval.ErrSpaceMismatch)
	})
	t.Run("CheckSpaces", func(t *testing.T) {
		e := newHashEmbedder(64)
		v, err := retrieval.NewVector(e, &sliceStore{}, retrieval.WithEmbedderName("m"))
		require.NoError(t, err)
		assert.Equal(t, []retrieval.Space{{Embedder: "m"}}, v.Spaces(), "dimension unknown before the first vector")
		assert.ErrorIs(t, v.CheckSpaces([]retrieval.Space{{Embedder: "other", Dim: 64}}), retrieval.ErrSpaceMismatch)
		require.NoError(t, v.CheckSpaces([]retrieval.Space{{Embedder: "m", Dim: 32}}), "an unknown dimension is adopted")
		assert.Equal(t, []retrieval.Space{{Embedder: "m", Dim: 32}}, v.Spaces())
		assert.ErrorIs(t, v.Add(ctx, "s", vectorCorpus), retrieval.ErrDimensionChanged, "the adopted dimension is enforced")
		assert.ErrorIs(t, v.CheckSpaces([]retrieval.Space{{Embedder: "m", Dim: 64}}), retrieval.ErrSpaceMismatch)
		assert.ErrorIs(t, v.CheckSpaces([]retrieval.Space{{Embedder: "m"}, {Embedder: "m"}}), retrieval.ErrSpaceMismatch)
	})
}

func TestVector_EmbedderFailure(t *testing.T) {
	for name, mk := range vectorStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := newHashEmbedder(64)
			v, err := retrieval.NewVector(e, mk())
			require.NoError(t, err)
			require.NoError(t, v.Add(ctx, "s", vectorCorpus[:1]))
			e.fail.Store(true)
			err = v.Add(ctx, "s", vectorCorpus[1:])
			require.ErrorIs(t, err, retrieval.ErrEmbedding)
			assert.ErrorIs(t, err, errEmbedderDown)
			assert.False(t, retrieval.Permanent(err))
			_, err = v.Search(ctx, "s", "database", 1)
			assert.ErrorIs(t, err, retrieval.ErrEmbedding)

			e.fail.Store(false)
			e.delay = time.Second
			tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			_, err = v.Search(tctx, "s", "database", 1)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.ErrorIs(t, err, retrieval.ErrEmbedding)
		})
	}
}

func TestVector_IsolationWithALeakyStore(t *testing.T) {
	ctx := context.Background()
	vs := &sliceStore{leaky: true}
	v, err := retrieval.NewVector(newHashEmbedder(64), vs)
	require.NoError(t, err)
	scopes := []string{"a", "a:", "a:b", "", "A", "a%3A"}
	for i, s := range scopes {
		require.NoError(t, v.Add(ctx, s, []retrieval.Doc{{Seq: int64(i + 1), Through: int64(i + 1), Text: "the shared secret " + fmt.Sprint(i)}}))
	}
	for i, s := range scopes {
		hits, err := v.Search(ctx, s, "shared secret", 10)
		require.NoError(t, err)
		assert.Equal(t, []int64{int64(i + 1)}, seqs(hits), "scope %q: a store ignoring filters still leaks nothing", s)
	}
}

func TestVector_ReindexedDocsAreDeduplicated(t *testing.T) {
	ctx := context.Background()
	vs := &sliceStore{}
	v, err := retrieval.NewVector(newHashEmbedder(64), vs)
	require.NoError(t, err)
	require.NoError(t, v.Add(ctx, "s", []retrieval.Doc{{Seq: 1, Through: 1, Text: "budget question"}}))
	require.NoError(t, v.Add(ctx, "s", []retrieval.Doc{{Seq: 1, Through: 2, Text: "budget question\nbudget answer budget"}}))
	require.Equal(t, 2, vs.len(), "an appending store keeps both versions")
	hits, err := v.Search(ctx, "s", "budget", 5)
	require.NoError(t, err)
	require.Len(t, hits, 1, "one hit per exchange")

	// Chromem replaces by ID instead.
	ch, err := retrieval.NewChromem(nil, "c", nil)
	require.NoError(t, err)
	cv, err := retrieval.NewVector(newHashEmbedder(64), ch)
	require.NoError(t, err)
	require.NoError(t, cv.Add(ctx, "s", []retrieval.Doc{{Seq: 1, Through: 1, Text: "budget question"}}))
	require.NoError(t, cv.Add(ctx, "s", []retrieval.Doc{{Seq: 1, Through: 2, Text: "budget question\nbudget answer"}}))
	assert.Equal(t, 1, ch.Count())
}

func TestVector_Delete(t *testing.T) {
	ctx := context.Background()
	ch, err := retrieval.NewChromem(nil, "c", nil)
	require.NoError(t, err)
	v, err := retrieval.NewVector(newHashEmbedder(64), ch)
	require.NoError(t, err)
	require.NoError(t, v.Add(ctx, "a", vectorCorpus))
	require.NoError(t, v.Add(ctx, "b", vectorCorpus))
	require.NoError(t, v.Delete(ctx, "a"))
	assert.Equal(t, 3, ch.Count())
	hits, err := v.Search(ctx, "a", "budget", 3)
	require.NoError(t, err)
	assert.Empty(t, hits)
	hits, err = v.Search(ctx, "b", "budget", 3)
	require.NoError(t, err)
	assert.NotEmpty(t, hits)

	// A store that cannot delete: Delete is a no-op, not an error.
	sv, err := retrieval.NewVector(newHashEmbedder(64), &sliceStore{})
	require.NoError(t, err)
	assert.NoError(t, sv.Delete(ctx, "a"))
}

func TestNewVector_BadArguments(t *testing.T) {
	e := newHashEmbedder(8)
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"nil embedder", func() error { _, err := retrieval.NewVector(nil, &sliceStore{}); return err }, "embedder is nil"},
		{"typed nil embedder", func() error { _, err := retrieval.NewVector((*hashEmbedder)(nil), &sliceStore{}); return err }, "embedder is nil"},
		{"nil store", func() error { _, err := retrieval.NewVector(e, nil); return err }, "vector store is nil"},
		{"typed nil store", func() error { _, err := retrieval.NewVector(e, (*retrieval.Chromem)(nil)); return err }, "vector store is nil"},
		{"empty name", func() error {
			_, err := retrieval.NewVector(e, &sliceStore{}, retrieval.WithEmbedderName(" "))
			return err
		}, "WithEmbedderName"},
		{"zero dimension", func() error { _, err := retrieval.NewVector(e, &sliceStore{}, retrieval.WithDimension(0)); return err }, "WithDimension(0)"},
		{"nil filter", func() error {
			_, err := retrieval.NewVector(e, &sliceStore{}, retrieval.WithScopeFilter(nil))
			return err
		}, "WithScopeFilter"},
		{"nil option", func() error { _, err := retrieval.NewVector(e, &sliceStore{}, nil); return err }, "option 1 of 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			require.ErrorIs(t, err, retrieval.ErrInvalidArgument)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	v, err := retrieval.NewVector(e, &sliceStore{})
	require.NoError(t, err)
	_, err = v.Search(context.Background(), "s", "x", 0)
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
	assert.Contains(t, v.String(), "*retrieval_test.hashEmbedder", "the default name is the embedder's type")
}

func TestVector_StoreEmbedderAndCustomFilter(t *testing.T) {
	ctx := context.Background()
	own := newHashEmbedder(64)
	ch, err := retrieval.NewChromem(nil, "c", own) // the store's own embedder
	require.NoError(t, err)
	unused := newHashEmbedder(64)
	var filters []any
	v, err := retrieval.NewVector(unused, ch, retrieval.WithStoreEmbedder(), retrieval.WithDimension(64),
		retrieval.WithScopeFilter(func(scope string) any {
			f := map[string]string{retrieval.MetaScope: scope}
			filters = append(filters, f)
			return f
		}))
	require.NoError(t, err)
	require.NoError(t, v.Add(ctx, "s", vectorCorpus))
	hits, err := v.Search(ctx, "s", "budget", 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{12}, seqs(hits))
	assert.Zero(t, unused.calls(), "the store embeds with its own embedder")
	assert.Equal(t, int64(2), own.calls())
	assert.Len(t, filters, 1)
}

func TestChromem_Adapter(t *testing.T) {
	ctx := context.Background()
	e := newHashEmbedder(16)
	c, err := retrieval.NewChromem(nil, "c", nil)
	require.NoError(t, err)

	_, err = c.AddDocuments(ctx, nil)
	assert.NoError(t, err, "adding nothing is a no-op")
	_, err = c.AddDocuments(ctx, docsOf("x"))
	assert.ErrorContains(t, err, "no embedder")
	_, err = c.AddDocuments(ctx, docsOf("x"), vectorstores.WithEmbedder(e), vectorstores.WithNameSpace("n"))
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
	_, err = c.AddDocuments(ctx, docsOf("x"), vectorstores.WithEmbedder(e), vectorstores.WithFilters(map[string]any{"a": "b"}))
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)

	ids, err := c.AddDocuments(ctx, docsOf("red apple", "green apple", "blue sky"), vectorstores.WithEmbedder(e))
	require.NoError(t, err)
	assert.Len(t, ids, 3)
	assert.Equal(t, 3, c.Count())

	// More results than documents asked: clamped, not an error.
	res, err := c.SimilaritySearch(ctx, "apple", 10, vectorstores.WithEmbedder(e))
	require.NoError(t, err)
	require.Len(t, res, 3)
	assert.Equal(t, "blue sky", res[2].PageContent)
	for _, d := range res {
		n, ok := d.Metadata["n"].(string)
		assert.True(t, ok, "metadata comes back as strings: %T", d.Metadata["n"])
		assert.Contains(t, []string{"0", "1", "2"}, n)
	}

	for _, f := range []any{map[string]string{"colour": "green"}, map[string]any{"colour": "green"}} {
		res, err = c.SimilaritySearch(ctx, "apple", 10, vectorstores.WithEmbedder(e), vectorstores.WithFilters(f))
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, "green apple", res[0].PageContent)
	}
	_, err = c.SimilaritySearch(ctx, "apple", 1, vectorstores.WithEmbedder(e), vectorstores.WithFilters([]string{"x"}))
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
	_, err = c.SimilaritySearch(ctx, "apple", 0, vectorstores.WithEmbedder(e))
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
	_, err = c.SimilaritySearch(ctx, "apple", 1, vectorstores.WithEmbedder(e), vectorstores.WithScoreThreshold(2))
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
	res, err = c.SimilaritySearch(ctx, "apple", 3, vectorstores.WithEmbedder(e), vectorstores.WithScoreThreshold(0.3))
	require.NoError(t, err)
	assert.Len(t, res, 2, "the score threshold drops the unrelated document")

	require.NoError(t, c.DeleteDocuments(ctx, map[string]any{"colour": "red"}))
	assert.Equal(t, 2, c.Count())
	assert.ErrorIs(t, c.DeleteDocuments(ctx, nil), retrieval.ErrInvalidArgument)

	_, err = retrieval.NewChromem(nil, "", nil)
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
}

func TestChromem_Persistence(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := newHashEmbedder(64)
	open := func() *retrieval.Vector {
		db, err := chromem.NewPersistentDB(dir, false)
		require.NoError(t, err)
		c, err := retrieval.NewChromem(db, "recall", nil)
		require.NoError(t, err)
		v, err := retrieval.NewVector(e, c, retrieval.WithEmbedderName("hash64"))
		require.NoError(t, err)
		return v
	}
	v := open()
	require.NoError(t, v.Add(ctx, "s", vectorCorpus))
	require.Equal(t, int64(1), e.docCalls.Load())

	// A new process: the vectors are on disk, nothing is embedded again.
	v2 := open()
	hits, err := v2.Search(ctx, "s", "where is the offsite", 1)
	require.NoError(t, err)
	assert.Equal(t, []int64{14}, seqs(hits))
	assert.Equal(t, int64(1), e.docCalls.Load())
	assert.Equal(t, int64(1), e.queryCalls.Load())
}

func docsOf(texts ...string) []schema.Document {
	colours := []string{"red", "green", "blue"}
	out := make([]schema.Document, len(texts))
	for i, t := range texts {
		out[i] = schema.Document{PageContent: t, Metadata: map[string]any{"n": i, "colour": colours[i%3]}}
	}
	return out
}

// RemoveSource deletes the docs of one source in one scope, whatever
// their Seqs, and nothing of another source or scope; a hybrid removes
// its vector part's; a store that cannot delete is ErrCannotRemove.
func TestVector_RemoveSource(t *testing.T) {
	ctx := context.Background()
	ch, err := retrieval.NewChromem(nil, "c", nil)
	require.NoError(t, err)
	v, err := retrieval.NewVector(newHashEmbedder(64), ch)
	require.NoError(t, err)
	docs := func(source string, from int64) []retrieval.Doc {
		return []retrieval.Doc{
			{Seq: from, Through: from, Text: "budget question of " + source, Source: source},
			{Seq: from + 1, Through: from + 1, Text: "budget answer of " + source, Source: source},
		}
	}
	require.NoError(t, v.Add(ctx, "user", docs("conv-a", 1)))
	require.NoError(t, v.Add(ctx, "user", docs("conv-b", 3)))
	require.NoError(t, v.Add(ctx, "other-user", docs("conv-a", 10)))
	require.Equal(t, 6, ch.Count())
	require.NoError(t, v.RemoveSource(ctx, "user", "conv-a"))
	assert.Equal(t, 4, ch.Count())
	got, err := ch.SimilaritySearch(ctx, "budget", 10, vectorstores.WithEmbedder(newHashEmbedder(64)))
	require.NoError(t, err)
	for _, d := range got {
		if d.Metadata[retrieval.MetaScope] == "user" {
			assert.Equal(t, "conv-b", d.Metadata[retrieval.MetaSource], "only conv-a of the scope is gone")
		}
	}

	bm, err := retrieval.NewBM25()
	require.NoError(t, err)
	h, err := retrieval.NewHybrid(bm, v)
	require.NoError(t, err)
	require.NoError(t, h.(retrieval.SourceRemover).RemoveSource(ctx, "user", "conv-b"))
	assert.Equal(t, 2, ch.Count(), "the hybrid removed its vector part's")

	av, err := retrieval.NewVector(newHashEmbedder(64), &sliceStore{})
	require.NoError(t, err)
	require.ErrorIs(t, av.RemoveSource(ctx, "user", "conv-a"), retrieval.ErrCannotRemove)
}
