package retrieval

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/memstack/memstack/internal/benchcorpus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exhaustive is the reference the pruned search is held to: BM25 with
// neighbour weights computed for every doc of the scope, term by term,
// from the docs alone (the search this package had before pruning, over
// postings). It returns every hit, best first.
func (s *bm25Scope) exhaustive(terms []string, near [2]float64) []Hit {
	// The live docs only, by their own positions: a removed doc leaves
	// no place behind.
	order, olen, docs := s.order[s.dead:], s.olen[s.dead:], s.docs[s.dead:]
	n := len(order)
	if n == 0 {
		return nil
	}
	nearLen := func(i int) float64 {
		l := olen[i]
		for dist := 1; dist <= 2; dist++ {
			for _, j := range [2]int{i - dist, i + dist} {
				if j >= 0 && j < n {
					l += near[dist-1] * olen[j]
				}
			}
		}
		return l
	}
	avg := s.ctotal / float64(n)
	if avg == 0 {
		avg = 1
	}
	weight := [5]float64{near[1], near[0], 1, near[0], near[1]}
	score, tf := make([]float64, n), make([]float64, n)
	var reached []int
	var norm float64
	for _, t := range terms {
		reached = reached[:0]
		id, ok := s.ids[t]
		for p := range n {
			for _, dt := range docs[p] {
				if !ok || dt.term != id {
					continue
				}
				for off := -2; off <= 2; off++ {
					d, w := p+off, weight[off+2]
					if d < 0 || d >= n || w*dt.tf == 0 {
						continue
					}
					if tf[d] == 0 {
						reached = append(reached, d)
					}
					tf[d] += w * dt.tf
				}
			}
		}
		df := float64(len(reached))
		idf := math.Log(1 + (float64(n)-df+0.5)/(df+0.5))
		norm += idf * (BM25K1 + 1)
		for _, d := range reached {
			f := tf[d]
			tf[d] = 0
			kn := BM25K1 * (1 - BM25B + BM25B*nearLen(d)/avg)
			score[d] += idf * f * (BM25K1 + 1) / (f + kn)
		}
	}
	var hits []Hit
	for d, sc := range score {
		if sc > 0 {
			hits = append(hits, Hit{Seq: order[d], Score: sc / norm})
		}
	}
	sortHits(hits)
	return hits
}

// checkBounds checks the pruning data against the live docs: the sum of the
// lengths with neighbours (which the mean length divides), the mean within
// maxDrift of the bounds' reference, every term's count is the number of
// positions its words reach, no position's impact (its weighted frequency
// saturated at its length with neighbours) exceeds its block's bound, and
// each term's superblocks are in order.
func checkBounds(t *testing.T, x *BM25, scope string, what string) {
	t.Helper()
	s := x.scope(scope, false)
	if s == nil {
		return // nothing added yet
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	require.True(t, s.boundsOK, what)
	n := len(s.order)
	weight := nearWeights(x.near)
	total := 0.0
	for q := s.dead; q < n; q++ {
		total += s.nearLen(q, x.near)
	}
	require.InDelta(t, total, s.ctotal, 1e-9*max(1, total), "%s: the sum of lengths with neighbours", what)
	if m := s.mean(); m > s.avgRef*maxDrift || m*maxDrift < s.avgRef {
		t.Fatalf("%s: the mean length %v drifted from the bounds' %v", what, m, s.avgRef)
	}
	// Each term's weighted frequency at every position, summed by
	// position as a search sums it: one pass over the docs.
	f := make([]float64, n*len(s.terms))
	for p := range n {
		for _, dt := range s.docs[p] {
			for off := -2; off <= 2; off++ {
				if d := p + off; d >= 0 && d < n {
					f[int(dt.term)*n+d] += weight[off+2] * dt.tf
				}
			}
		}
	}
	for id := range s.terms {
		reached, bi := 0, 0
		bm := s.bmax[id]
		if len(bm.u) != len(bm.super) {
			t.Fatalf("%s: term %q: %d superblocks, %d blocks' bounds", what, s.terms[id], len(bm.super), len(bm.u))
		}
		for i := range bm.super {
			if i > 0 && bm.super[i-1] >= bm.super[i] {
				t.Fatalf("%s: term %q: superblocks out of order (%v)", what, s.terms[id], bm.super)
			}
		}
		for q, fq := range f[id*n : (id+1)*n] {
			if fq == 0 || q < s.dead {
				continue // tombstones reach nothing
			}
			reached++
			sb := q / blockSize / superSize
			for bi < len(bm.super) && int(bm.super[bi]) < sb {
				bi++
			}
			u := s.impact(fq, s.nearLen(q, x.near))
			if bi == len(bm.super) || int(bm.super[bi]) != sb || u > float64(bm.u[bi][q/blockSize%superSize])/maxImpact {
				t.Fatalf("%s: term %q at %d: impact %v (frequency %v) above its block's bound (%v)", what, s.terms[id], q, u, fq, bm)
			}
		}
		if int32(reached) != s.cdf[id] {
			t.Fatalf("%s: term %q reaches %d positions, its count is %d", what, s.terms[id], reached, s.cdf[id])
		}
	}
}

// checkPruned compares x's search of scope with the exhaustive reference
// for each query and k: the same docs in the same order, the same scores.
func checkPruned(t *testing.T, x *BM25, scope string, queries []string, ks []int, what string) {
	t.Helper()
	s := x.scope(scope, false)
	require.NotNil(t, s)
	for _, q := range queries {
		terms := slices.Clone(x.tokenize(q))
		slices.Sort(terms)
		terms = slices.Compact(terms)
		s.mu.RLock()
		want := s.exhaustive(terms, x.near)
		s.mu.RUnlock()
		for _, k := range ks {
			got, err := x.Search(context.Background(), scope, q, k)
			require.NoError(t, err)
			w := want[:min(k, len(want))]
			require.Len(t, got, len(w), "%s: %q k=%d", what, q, k)
			for i := range w {
				require.Equal(t, w[i].Seq, got[i].Seq, "%s: %q k=%d hit %d", what, q, k, i)
				require.InDelta(t, w[i].Score, got[i].Score, 1e-12, "%s: %q k=%d hit %d", what, q, k, i)
			}
		}
	}
}

// The pruned search returns exactly the exhaustive search's top k, for
// every weighting, as docs are appended one by one and in batches,
// replaced at the end and in the middle, inserted out of order and
// removed, with terms that come and go (and so compaction).
func TestPrunedSearchEqualsExhaustive(t *testing.T) {
	ctx := context.Background()
	for _, near := range [][2]float64{{0.5, 0.25}, {0, 0}, {1, 1}, {0, 0.5}, {0.5, 0}, {1e-300, 1e-300}} {
		t.Run(fmt.Sprint(near), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(near[0]*100)+1, uint64(near[1]*100)+2))
			common := strings.Fields("lake cabin sauna key trip budget offsite lisbon june hiring engineers monday paint fence dog walk")
			text := func() string {
				var b strings.Builder
				for j := 0; j < rng.IntN(9); j++ {
					if rng.IntN(5) == 0 {
						fmt.Fprintf(&b, "rare%d ", rng.IntN(400)) // words that come and go
					} else {
						b.WriteString(common[rng.IntN(len(common))] + " ")
					}
				}
				return b.String()
			}
			x, err := NewBM25(WithNeighbourWeights(near[0], near[1]))
			require.NoError(t, err)
			queries := []string{"lake cabin", "hiring engineers monday dog walk paint", "dog", "budget lisbon june rare7 rare9", "rare3", "nothing"}
			ks := []int{1, 2, 3, 5, 10, 1000}
			var seqs []int64
			next := int64(1000)
			for step := 0; step < 900; step++ {
				r := rng.IntN(100)
				switch {
				case r < 60: // append one
					next += 1 + rng.Int64N(3)
					seqs = append(seqs, next)
					require.NoError(t, x.Add(ctx, "s", []Doc{{Seq: next, Text: text()}}))
				case r < 66: // a batch
					var docs []Doc
					for range 1 + rng.IntN(40) {
						next += 1 + rng.Int64N(3)
						seqs = append(seqs, next)
						docs = append(docs, Doc{Seq: next, Text: text()})
					}
					require.NoError(t, x.Add(ctx, "s", docs))
				case r < 80 && len(seqs) > 0: // replace the last
					require.NoError(t, x.Add(ctx, "s", []Doc{{Seq: seqs[len(seqs)-1], Text: text()}}))
				case r < 85 && len(seqs) > 0: // replace one anywhere
					require.NoError(t, x.Add(ctx, "s", []Doc{{Seq: seqs[rng.IntN(len(seqs))], Text: text()}}))
				case r < 88 && len(seqs) > 0: // insert before the end
					seq := seqs[rng.IntN(len(seqs))] - 1
					if !slices.Contains(seqs, seq) {
						seqs = append(seqs, seq)
						slices.Sort(seqs)
						require.NoError(t, x.Add(ctx, "s", []Doc{{Seq: seq, Text: text()}}))
					}
				case r < 91 && len(seqs) > 0: // remove the first ones, one call each (retention)
					m := 1 + rng.IntN(min(3, len(seqs)))
					for _, seq := range seqs[:m] {
						require.NoError(t, x.Remove(ctx, "s", []int64{seq}))
					}
					seqs = slices.Delete(seqs, 0, m)
				case r < 95 && len(seqs) > 0: // remove the last ones
					m := 1 + rng.IntN(min(3, len(seqs)))
					require.NoError(t, x.Remove(ctx, "s", seqs[len(seqs)-m:]))
					seqs = seqs[:len(seqs)-m]
				case r < 98 && len(seqs) > 0: // remove one anywhere
					i := rng.IntN(len(seqs))
					require.NoError(t, x.Remove(ctx, "s", []int64{seqs[i]}))
					seqs = slices.Delete(seqs, i, i+1)
				case len(seqs) > 0: // remove many, anywhere, with Seqs it never held
					var gone []int64
					kept := seqs[:0]
					for _, seq := range seqs {
						if rng.IntN(4) == 0 {
							gone = append(gone, seq)
						} else {
							kept = append(kept, seq)
						}
					}
					seqs = kept
					require.NoError(t, x.Remove(ctx, "s", append(gone, -5, next+100)))
				}
				if r >= 66 || step%4 == 0 { // after every change but an append (most steps)
					checkBounds(t, x, "s", fmt.Sprintf("step %d", step))
				}
				if step%25 == 0 && len(seqs) > 0 {
					checkPruned(t, x, "s", queries, ks, fmt.Sprintf("step %d, %d docs", step, len(seqs)))
				}
			}
			if len(seqs) > 0 {
				checkPruned(t, x, "s", queries, ks, "end")
			}
		})
	}
}

// What a conversation does to its index — append a turn, replace the last
// one as it grows, drop the oldest as retention trims it — keeps the
// bounds up to date in place: no rebuild, whose cost grows with the scope
// (the oldest's removal used to rebuild them every time).
func TestConversationChangesRebuildNothing(t *testing.T) {
	ctx := context.Background()
	x, err := NewBM25(WithNeighbourWeights(0.5, 0.25))
	require.NoError(t, err)
	text := func(i int) string { return fmt.Sprintf("ferry timetable word%d harbour%d", i%13, i%7) }
	var docs []Doc
	for i := range 1000 {
		docs = append(docs, Doc{Seq: int64(i + 1), Text: text(i)})
	}
	require.NoError(t, x.Add(ctx, "s", docs))
	s := x.scope("s", false)
	built := s.rebuilds
	for i := 1000; i < 1600; i++ {
		require.NoError(t, x.Add(ctx, "s", []Doc{{Seq: int64(i + 1), Text: text(i)}}))
		require.NoError(t, x.Add(ctx, "s", []Doc{{Seq: int64(i + 1), Text: text(i) + " grown"}}))
		require.NoError(t, x.Remove(ctx, "s", []int64{int64(i - 999)}))
	}
	assert.Equal(t, built, s.rebuilds, "rebuilds after appends, replacements and removals of the oldest")
	checkBounds(t, x, "s", "after 600 turns")
	checkPruned(t, x, "s", []string{"ferry word3", "harbour2 grown", "word12"}, []int{1, 10, 2000}, "after 600 turns")
}

// A search allocates what it returns: its top-k heap and hits, whatever
// the size of the scope.
func TestSearchAllocatesWhatItReturns(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{100, 10000} {
		x, err := NewBM25(WithNeighbourWeights(0.5, 0.25))
		require.NoError(t, err)
		var docs []Doc
		for i := range n {
			docs = append(docs, Doc{Seq: int64(i + 1), Text: fmt.Sprintf("lake w%d", i)})
		}
		require.NoError(t, x.Add(ctx, "s", docs))
		s := x.scope("s", false)
		for _, terms := range [][]string{{"w50"}, {"lake"}} {
			require.NotEmpty(t, s.searchNear(terms, 1, x.near))
			allocs := testing.AllocsPerRun(50, func() { s.searchNear(terms, 1, x.near) })
			assert.LessOrEqual(t, allocs, 3.0, "n=%d %v: the top-k, its array and a boxed hit", n, terms)
		}
	}
}

// The pruned search on a corpus where every turn shares the query's words
// (the benchmark's: every term reaches most blocks, so a query bounds
// every block and scores a few), and on rare words (a query bounds only
// the blocks they reach), equals the exhaustive one, for small and large
// k: as built, once the mean length has grown since the bounds were built
// (stored impacts are stretched), after removals from the front
// (tombstones part of a superblock) and at the end (superblocks the order
// no longer reaches).
func TestPrunedSearchOnCommonWords(t *testing.T) {
	ctx := context.Background()
	x, err := NewBM25(WithNeighbourWeights(0.5, 0.25))
	require.NoError(t, err)
	var docs []Doc
	for i := range 1500 {
		docs = append(docs,
			Doc{Seq: int64(2 * i), Text: benchcorpus.Human(i) + fmt.Sprintf(" rare%d", i%97)},
			Doc{Seq: int64(2*i + 1), Text: benchcorpus.AI(i)})
	}
	require.NoError(t, x.Add(ctx, "s", docs))
	s := x.scope("s", false)
	queries := []string{"rare5", "rare17 rare40 zzz", "rare3 invoice"}
	for i := range 25 {
		queries = append(queries, benchcorpus.Human(1_000_000+i))
	}
	ks := []int{1, 3, 6, 50, 400, 5000}
	// A query's terms reach every superblock (searchNear's dense case),
	// or few (rare words).
	dense := func(q string) bool {
		total := 0
		for _, t := range x.tokenize(q) {
			if id, ok := s.ids[t]; ok {
				total += len(s.bmax[id].super)
			}
		}
		return total >= (len(s.order)+blockSize*superSize-1)/(blockSize*superSize)-s.dead/blockSize/superSize
	}
	require.True(t, dense(queries[3]))
	require.False(t, dense(queries[0]))
	checkBounds(t, x, "s", "built")
	checkPruned(t, x, "s", queries, ks, "built")

	// Longer docs: the mean grows, less than maxDrift.
	next := int64(3000)
	for i := range 300 {
		require.NoError(t, x.Add(ctx, "s", []Doc{{Seq: next, Text: benchcorpus.AI(5000+i) + " " + benchcorpus.AI(9000+i)}}))
		next++
	}
	require.Less(t, s.avgRef, s.mean(), "the mean grew since the bounds were built")
	checkBounds(t, x, "s", "grown")
	checkPruned(t, x, "s", queries, ks, "grown")

	// The oldest 701 removed one by one (tombstones), the newest 37.
	for seq := range int64(701) {
		require.NoError(t, x.Remove(ctx, "s", []int64{seq}))
	}
	require.Positive(t, s.dead%(blockSize*superSize), "tombstones fill part of a superblock")
	for range 37 {
		next--
		require.NoError(t, x.Remove(ctx, "s", []int64{next}))
	}
	checkBounds(t, x, "s", "trimmed")
	checkPruned(t, x, "s", queries, ks, "trimmed")
	assert.Equal(t, 1, s.rebuilds, "nothing rebuilt the bounds after the first Add")
}

// A stored impact is rounded up, by less than a unit.
func TestQuantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		u := rng.Float64()
		q := quantize(u)
		require.GreaterOrEqual(t, float64(q)/maxImpact, u)
		require.Less(t, float64(q)-1, u*maxImpact)
	}
	assert.Equal(t, uint16(0), quantize(0))
	assert.Equal(t, uint16(maxImpact), quantize(1))
	assert.Equal(t, uint16(1), quantize(1e-300))
}

// Docs replaced and removed leave garbage in the arena; once it outweighs
// the docs held, repack copies them into a fresh one, and the index
// searches as one built from the same docs.
func TestArenaRepacks(t *testing.T) {
	ctx := context.Background()
	x, err := NewBM25(WithNeighbourWeights(0.5, 0.25))
	require.NoError(t, err)
	text := func(i, v int) string { return fmt.Sprintf("ferry timetable word%d harbour%d version%d", i%13, i%7, v) }
	var docs []Doc
	for i := range 300 {
		docs = append(docs, Doc{Seq: int64(i), Text: text(i, 0)})
	}
	require.NoError(t, x.Add(ctx, "s", docs))
	s := x.scope("s", false)
	for v := 1; v <= 3000; v++ { // the last doc grows, as a unit does
		docs[len(docs)-1].Text = text(len(docs)-1, v)
		require.NoError(t, x.Add(ctx, "s", docs[len(docs)-1:]))
		if v%500 == 0 { // and the oldest goes
			require.NoError(t, x.Remove(ctx, "s", []int64{docs[0].Seq}))
			docs = docs[1:]
		}
	}
	assert.Positive(t, s.repacks, "the arena was repacked")
	assert.LessOrEqual(t, s.garbage, max(s.held, maxChunk))
	held := 0
	for _, d := range s.docs {
		held += len(d)
	}
	assert.Equal(t, held, s.held)
	fresh, err := NewBM25(WithNeighbourWeights(0.5, 0.25))
	require.NoError(t, err)
	require.NoError(t, fresh.Add(ctx, "s", docs))
	for _, q := range []string{"ferry word3", "version3000 harbour2", "version1", "word12 timetable"} {
		want, err := fresh.Search(ctx, "s", q, 20)
		require.NoError(t, err)
		got, err := x.Search(ctx, "s", q, 20)
		require.NoError(t, err)
		assert.Equal(t, want, got, "query %q", q)
	}
	checkBounds(t, x, "s", "after repacks")
	checkPruned(t, x, "s", []string{"ferry word3", "version3000 harbour2"}, []int{1, 5, 1000}, "after repacks")
}

// The bounds are kept at a reference mean length: a mean that moves by
// less than maxDrift keeps them, one that moves by more rebuilds them
// around it.
func TestMeanDriftRebuildsBounds(t *testing.T) {
	ctx := context.Background()
	x, err := NewBM25(WithNeighbourWeights(0.5, 0.25))
	require.NoError(t, err)
	var docs []Doc
	for i := range 1000 {
		docs = append(docs, Doc{Seq: int64(i), Text: fmt.Sprintf("lake cabin w%d", i)})
	}
	require.NoError(t, x.Add(ctx, "s", docs))
	s := x.scope("s", false)
	ref, built := s.avgRef, s.rebuilds
	long := "lake cabin sauna key trip budget offsite lisbon june hiring engineers monday"
	seq := int64(1000)
	for s.mean() < ref*maxDrift {
		require.NoError(t, x.Add(ctx, "s", []Doc{{Seq: seq, Text: long}}))
		seq++
		if s.mean() <= ref*maxDrift {
			require.Equal(t, built, s.rebuilds, "the mean moved by less than maxDrift")
			require.Equal(t, ref, s.avgRef)
		}
	}
	assert.Equal(t, built+1, s.rebuilds, "the mean moved by more than maxDrift")
	assert.Equal(t, s.mean(), s.avgRef)
	checkBounds(t, x, "s", "rebuilt")
	checkPruned(t, x, "s", []string{"lake", "sauna w3", "w999 cabin"}, []int{1, 10, 5000}, "rebuilt")
}
