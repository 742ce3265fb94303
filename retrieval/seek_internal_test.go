package retrieval

import (
	"math/rand/v2"
	"slices"
	"testing"

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
