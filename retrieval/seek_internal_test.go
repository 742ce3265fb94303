package retrieval

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
