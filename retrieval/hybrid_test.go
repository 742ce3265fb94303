package retrieval_test

import (
	"context"
	"errors"
	"testing"

	"github.com/memstack/memstack/retrieval"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHybrid_RRFMath(t *testing.T) {
	ctx := context.Background()
	a := &fixedIndex{rng: retrieval.LexicalRange, hits: []retrieval.Hit{{Seq: 1, Score: .9}, {Seq: 2, Score: .5}, {Seq: 3, Score: .1}}}
	b := &fixedIndex{rng: retrieval.CosineRange, hits: []retrieval.Hit{{Seq: 3, Score: .8}, {Seq: 1, Score: .7}, {Seq: 4, Score: -.2}}}
	h, err := retrieval.NewHybrid(a, b)
	require.NoError(t, err)
	assert.Equal(t, retrieval.FusedRange, h.Range())

	// Fused = Σ 1/(60+rank), normalised by 2/(60+1).
	norm := 2.0 / 61
	want := []retrieval.Hit{
		{Seq: 1, Score: (1.0/61 + 1.0/62) / norm}, // ranks 1 and 2
		{Seq: 3, Score: (1.0/63 + 1.0/61) / norm}, // ranks 3 and 1
		{Seq: 2, Score: (1.0 / 62) / norm},        // rank 2 in a only
		{Seq: 4, Score: (1.0 / 63) / norm},        // rank 3 in b only
	}
	got, err := h.Search(ctx, "s", "q", 10)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].Seq, got[i].Seq, "rank %d", i+1)
		assert.InDelta(t, want[i].Score, got[i].Score, 1e-12, "rank %d", i+1)
	}
	assert.InDelta(t, 0.9919, got[0].Score, 1e-4, "hand-computed: (1/61+1/62)·61/2 = (1+61/62)/2")

	got, err = h.Search(ctx, "s", "q", 2)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 3}, seqs(got), "k cuts the fused ranking")

	// Top of both rankings scores exactly 1.
	same, err := retrieval.NewHybrid(a, &fixedIndex{rng: retrieval.LexicalRange, hits: a.hits})
	require.NoError(t, err)
	got, err = same.Search(ctx, "s", "q", 1)
	require.NoError(t, err)
	assert.InDelta(t, 1.0, got[0].Score, 1e-12)

	_, err = h.Search(ctx, "s", "q", 0)
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
}

func TestHybrid_MinScores(t *testing.T) {
	a := &fixedIndex{rng: retrieval.LexicalRange, hits: []retrieval.Hit{{Seq: 1, Score: .9}, {Seq: 2, Score: .05}}}
	b := &fixedIndex{rng: retrieval.CosineRange, hits: []retrieval.Hit{{Seq: 2, Score: .8}, {Seq: 3, Score: -.5}}}
	h, err := retrieval.NewHybrid(a, b, retrieval.WithMinScores(0.1, 0))
	require.NoError(t, err)
	got, err := h.Search(context.Background(), "s", "q", 10)
	require.NoError(t, err)
	// a keeps only seq 1 (rank 1), b only seq 2 (rank 1): a tie, newer first.
	assert.Equal(t, []int64{2, 1}, seqs(got))
	assert.InDelta(t, 0.5, got[0].Score, 1e-12)

	for _, tc := range []struct {
		name       string
		minA, minB float64
	}{
		{"lexical above 1", 1.5, 0},
		{"lexical negative", -0.1, 0},
		{"cosine below -1", 0, -1.01},
	} {
		_, err := retrieval.NewHybrid(a, b, retrieval.WithMinScores(tc.minA, tc.minB))
		assert.ErrorIs(t, err, retrieval.ErrInvalidArgument, tc.name)
		assert.ErrorContains(t, err, "WithMinScores", tc.name)
	}
}

func TestHybrid_Degraded(t *testing.T) {
	ctx := context.Background()
	good := &fixedIndex{rng: retrieval.LexicalRange, hits: []retrieval.Hit{{Seq: 1, Score: .9}, {Seq: 2, Score: .5}}}
	down := &fixedIndex{rng: retrieval.CosineRange, err: errEmbedderDown}
	h, err := retrieval.NewHybrid(good, down)
	require.NoError(t, err)

	got, err := h.Search(ctx, "s", "q", 5)
	require.Error(t, err)
	assert.ErrorIs(t, err, retrieval.ErrDegraded)
	assert.ErrorIs(t, err, errEmbedderDown)
	assert.False(t, retrieval.Permanent(err))
	require.Equal(t, []int64{1, 2}, seqs(got), "the working part's ranking")
	assert.InDelta(t, 1.0, got[0].Score, 1e-12, "normalised over the one part that answered")
	assert.InDelta(t, 61.0/62, got[1].Score, 1e-12)

	err = h.Add(ctx, "s", []retrieval.Doc{{Seq: 7, Through: 7, Text: "x"}})
	assert.ErrorIs(t, err, retrieval.ErrDegraded)
	assert.Equal(t, []int64{7}, good.addedSeqs(), "the working part still gets the doc")

	both, err := retrieval.NewHybrid(&fixedIndex{err: errors.New("a down")}, down)
	require.NoError(t, err)
	got, err = both.Search(ctx, "s", "q", 5)
	assert.Empty(t, got)
	require.Error(t, err)
	assert.NotErrorIs(t, err, retrieval.ErrDegraded)
	assert.ErrorIs(t, err, errEmbedderDown)
	assert.ErrorContains(t, err, "a down")

	perm, err := retrieval.NewHybrid(good, &fixedIndex{err: retrieval.ErrDimensionChanged})
	require.NoError(t, err)
	_, err = perm.Search(ctx, "s", "q", 5)
	assert.True(t, retrieval.Permanent(err), "a permanent failure of one part stays recognisable")
}

func TestHybrid_DurabilityAndRelease(t *testing.T) {
	ctx := context.Background()
	e := newHashEmbedder(16)
	vs := &sliceStore{}
	v, err := retrieval.NewVector(e, vs, retrieval.WithEmbedderName("hash"))
	require.NoError(t, err)
	lex := &fixedIndex{rng: retrieval.LexicalRange}

	plain, err := retrieval.NewHybrid(newBM25(t), lex)
	require.NoError(t, err)
	_, ok := plain.(retrieval.Durable)
	assert.False(t, ok, "no durable part: not Durable")
	_, ok = plain.(retrieval.Releaser)
	assert.True(t, ok)

	h, err := retrieval.NewHybrid(lex, v)
	require.NoError(t, err)
	d, ok := h.(retrieval.Durable)
	require.True(t, ok, "a durable part makes the hybrid Durable")
	assert.Contains(t, h.(interface{ String() string }).String(), "RRF k=60")

	docs := []retrieval.Doc{{Seq: 1, Through: 2, Text: "old budget"}, {Seq: 3, Through: 4, Text: "new budget"}}
	require.NoError(t, d.AddSince(ctx, "s", docs, 2))
	assert.Equal(t, []int64{1, 3}, lex.addedSeqs(), "the in-process part gets every doc")
	assert.Equal(t, 1, vs.len(), "the durable part skips what is at or below since")

	assert.Equal(t, []retrieval.Space{{Embedder: "hash", Dim: 16}}, d.Spaces())
	assert.NoError(t, d.CheckSpaces(nil))
	assert.NoError(t, d.CheckSpaces([]retrieval.Space{{Embedder: "hash", Dim: 16}}))
	assert.ErrorIs(t, d.CheckSpaces([]retrieval.Space{{Embedder: "other", Dim: 16}}), retrieval.ErrSpaceMismatch)
	assert.ErrorIs(t, d.CheckSpaces([]retrieval.Space{{Embedder: "hash", Dim: 16}, {Embedder: "hash", Dim: 16}}), retrieval.ErrSpaceMismatch)

	h.(retrieval.Releaser).Release("s")
	assert.Equal(t, []string{"s"}, lex.released)

	_, err = retrieval.NewHybrid(nil, lex)
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
	_, err = retrieval.NewHybrid(lex, (*retrieval.BM25)(nil))
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
	_, err = retrieval.NewHybrid(lex, lex, nil)
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
}

func seqs(hits []retrieval.Hit) []int64 {
	out := make([]int64, len(hits))
	for i, h := range hits {
		out[i] = h.Seq
	}
	return out
}
