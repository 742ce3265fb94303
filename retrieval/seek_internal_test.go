package retrieval

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seekSeq finds what a binary search of the rest of the order finds, from
// any start, for Seqs present, absent, before and after every doc.
func TestSeekSeqIsABinarySearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		var order []int64
		for seq := int64(1); len(order) < rng.IntN(200); seq += 1 + rng.Int64N(3) {
			order = append(order, seq)
		}
		for range 50 {
			from := 0
			if len(order) > 0 {
				from = rng.IntN(len(order) + 1)
			}
			seq := rng.Int64N(500)
			if from < len(order) && seq < order[from] {
				continue // seekSeq's contract: seq is not before order[from]
			}
			i, ok := slices.BinarySearch(order[from:], seq)
			gi, gok := seekSeq(order, from, seq)
			require.Equal(t, from+i, gi, "order %v from %d seq %d", order, from, seq)
			require.Equal(t, ok, gok)
		}
	}
}

// A scope whose words come and go renumbers its terms once most are
// unused (compact), and searches exactly as an index built from the docs
// it still holds.
func TestBM25CompactsItsTerms(t *testing.T) {
	ctx := t.Context()
	x, err := NewBM25(WithNeighbourWeights(0.5, 0.25))
	require.NoError(t, err)
	doc := func(i int) Doc {
		return Doc{Seq: int64(i + 1), Text: fmt.Sprintf("ferry timetable word%d unique%d harbour", i%7, i)}
	}
	var all []Doc
	for i := range 3000 {
		all = append(all, doc(i))
	}
	require.NoError(t, x.Add(ctx, "s", all))
	var gone []int64
	for i := range 2500 {
		gone = append(gone, int64(i+1))
	}
	require.NoError(t, x.Remove(ctx, "s", gone))
	s := x.scope("s", false)
	assert.Less(t, len(s.terms), 1024, "the terms of removed docs were dropped")
	assert.Zero(t, s.unused)

	fresh, err := NewBM25(WithNeighbourWeights(0.5, 0.25))
	require.NoError(t, err)
	require.NoError(t, fresh.Add(ctx, "s", all[2500:]))
	require.NoError(t, x.Add(ctx, "s", []Doc{doc(5000)}))
	require.NoError(t, fresh.Add(ctx, "s", []Doc{doc(5000)}))
	for _, q := range []string{"ferry word3", "unique2999 harbour", "unique5000", "unique10 word1"} {
		want, err := fresh.Search(ctx, "s", q, 10)
		require.NoError(t, err)
		got, err := x.Search(ctx, "s", q, 10)
		require.NoError(t, err)
		assert.Equal(t, want, got, "query %q", q)
	}
}
