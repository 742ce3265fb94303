package retrieval

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
)

// Pruned search.
//
// A query's top k are found without scoring every doc, with block-max
// bounds (as in Ding & Suel's block-max indexes and their successors,
// here over a document-ordered index whose docs reach their neighbours).
// The order of a scope's docs is cut into blocks of blockSize consecutive
// positions. For each term the scope keeps, per block its words reach, the
// largest weighted frequency (its own and its neighbours', weighted) that
// any position of the block has for it, and per block the smallest length
// with neighbours of its positions. A query then:
//
//  1. bounds each block's best score: the sum, over the query's terms, of
//     the BM25 share a doc would get with the block's largest frequency and
//     its smallest length — no doc of the block can score more;
//  2. scores the positions of the best-bounded few blocks, exactly, which
//     gives a first k-th best score θ;
//  3. scores the other blocks whose bound reaches θ, best bound first,
//     raising θ as it goes, and stops at the first bound below θ.
//
// A block is scored from the docs whose words reach it (its own and two on
// either side), which lie next to each other in the scope's arrays.
//
// The result is the exhaustive search's, hit for hit and score for score
// (a test holds the two equal): a block is skipped only when its bound,
// with a margin far above rounding, is below θ, and every position scored
// is scored with the same expression in the same order as before pruning.
// On real conversations a query's rare words reach few blocks, and the
// rest fall below θ; where every turn shares the query's words (the
// benchmark's corpus) a bound still separates blocks that hold the
// query's words themselves from those their neighbours only touch.
//
// Each term's df (the positions its words reach, which BM25's idf counts)
// is kept too, so a query needs no walk over the docs to know it. A change at one position that moves no other doc — an append at the
// end of the order (what a conversation does), a removal of the last doc,
// a doc replaced in place — changes only the positions within two of it:
// reweigh updates the counts and raises the bounds from the docs around
// it. Any other change (an insertion or a removal before the end, or a
// batch larger than a quarter of the scope) marks them stale, and the end
// of the call rebuilds them in one pass over the docs (rebound).
// Bounds may be too high (a removal or a replacement leaves them so; no
// change lowers them), never too low; counts are always exact.

// blockSize is how many consecutive positions of the order a block holds.
// Smaller blocks bound more tightly and cost more bounds per query: at 4,
// a query of the benchmark's corpus at 50,000 docs scores 1–3% of them.
const blockSize = 4

// boundMargin is the relative margin by which a block's bound must fall
// below θ to be skipped: far above the rounding of a sum of a few dozen
// terms (about 1e-15), far below any difference of scores that matters.
const boundMargin = 1e-9

// blockMax is a term's largest weighted frequency at the positions of one
// block, rounded up to a float32.
type blockMax struct {
	block int32
	f     float32
}

// winTF is one term's frequencies in the docs around a changed position p
// (reweigh's window): at p-4..p+4 (tf, with p's left 0), and at p before
// and after the change.
type winTF struct {
	term    int32
	tf      [9]float64
	was, is float64
}

// roundUp32 returns the smallest float32 not below f.
func roundUp32(f float64) float32 {
	r := float32(f)
	if float64(r) < f {
		r = math.Nextafter32(r, float32(math.Inf(1)))
	}
	return r
}

// nearWeights returns the weights of a doc's words at offsets -2..2 from
// its position: 1 at its own, the neighbour weights at the others.
func nearWeights(near [2]float64) [5]float64 {
	return [5]float64{near[1], near[0], 1, near[0], near[1]}
}

// raise makes term t's bound at block b at least f. The caller holds s.mu
// for writing; b is at or near the end of t's blocks.
func (s *bm25Scope) raise(t int32, b int32, f float64) {
	v := roundUp32(f)
	e := s.bmax[t]
	i := len(e)
	switch {
	case i > 0 && e[i-1].block == b: // the last block (an append's usual case)
		i--
	case i > 0 && e[i-1].block > b: // an earlier block (rare): search
		i, _ = slices.BinarySearchFunc(e, b, func(x blockMax, b int32) int { return cmp.Compare(x.block, b) })
	}
	if i < len(e) && e[i].block == b {
		e[i].f = max(e[i].f, v)
		return
	}
	s.bmax[t] = slices.Insert(e, i, blockMax{b, v})
}

// lowerLen makes block q/blockSize's smallest length at most position q's
// length with neighbours, growing the blocks to hold q. The caller holds
// s.mu for writing.
func (s *bm25Scope) lowerLen(q int, near [2]float64) {
	b := q / blockSize
	for len(s.lmin) <= b {
		s.lmin = append(s.lmin, math.Inf(1))
	}
	s.lmin[b] = min(s.lmin[b], s.nearLen(q, near))
}

// reweigh keeps the counts and bounds up to date when the doc at position
// p of the order changes from before to after without moving any other
// doc: appended at the end (!was), about to be removed from the end (!is),
// or replaced in place. Only positions p-2..p+2 change, through the terms
// of the docs at p-4..p+4. It runs before the order loses a removed
// position and after it gains an appended one (p is in the order); the
// caller then lowers the blocks' lengths (lowerLens). A removal from the
// front (p the first live position, which becomes a tombstone) is a
// removal too: tombstones reach nothing. The caller holds s.mu for
// writing, with the bounds current before the change.
func (s *bm25Scope) reweigh(p int, before, after []docTF, was, is bool, near [2]float64) {
	n := len(s.order)
	weight := nearWeights(near)
	win := s.wterms[:0]
	slot := func(t int32) *winTF {
		j := s.win[t]
		if j == 0 {
			win = append(win, winTF{term: t})
			j = int32(len(win))
			s.win[t] = j
		}
		return &win[j-1]
	}
	for i := max(0, p-4); i <= min(n-1, p+4); i++ {
		if i != p {
			for _, d := range s.docs[i] {
				slot(d.term).tf[i-p+4] = d.tf
			}
		}
	}
	for _, d := range before {
		slot(d.term).was = d.tf
	}
	for _, d := range after {
		slot(d.term).is = d.tf
	}
	moved := was != is // position p itself comes or goes
	for i := range win {
		w := &win[i]
		s.win[w.term] = 0
		changed := w.was != w.is
		if !changed && !moved {
			continue // a neighbour's term: nothing it reaches changes
		}
		for q := max(s.dead, p-2); q <= min(n-1, p+2); q++ {
			if q != p && !changed {
				continue
			}
			// The weighted frequency at q before and after, summed in
			// the order a search sums it (by position).
			fb, fa := 0.0, 0.0
			for off := -2; off <= 2; off++ {
				j := q + off
				if j < 0 || j >= n {
					continue
				}
				vb, va := w.tf[j-p+4], w.tf[j-p+4]
				if j == p {
					vb, va = w.was, w.is
				}
				fb += weight[off+2] * vb
				fa += weight[off+2] * va
			}
			cb := fb > 0 && (q != p || was)
			ca := fa > 0 && (q != p || is)
			switch {
			case ca && !cb:
				s.cdf[w.term]++
			case cb && !ca:
				s.cdf[w.term]--
			}
			if ca && (!cb || fa > fb) {
				s.raise(w.term, int32(q/blockSize), fa)
			}
		}
	}
	s.wterms = win[:0]
}

// lowerLens lowers the blocks' smallest lengths for positions p-2..p+2,
// whose lengths with neighbours a change at p moved, and drops blocks the
// order no longer reaches. The caller holds s.mu for writing.
func (s *bm25Scope) lowerLens(p int, near [2]float64) {
	n := len(s.order)
	s.lmin = s.lmin[:min(len(s.lmin), (n+blockSize-1)/blockSize)]
	for q := max(0, p-2); q <= min(n-1, p+2); q++ {
		s.lowerLen(q, near)
	}
}

// rebound rebuilds every term's count and bounds, and the blocks'
// lengths: a sweep over every doc from reset counts. The caller holds s.mu
// for writing.
func (s *bm25Scope) rebound(near [2]float64) {
	if s.boundsOK {
		return
	}
	s.dropDead()
	s.rebuilds++
	s.lmin = s.lmin[:0]
	for t := range s.cdf {
		s.cdf[t], s.bmax[t] = 0, nil
	}
	s.sweepTail(0, near)
	s.boundsOK = true
}

// sweepTail brings the counts and bounds up to date after docs were
// appended at positions start.. of the order (all of them for rebound),
// the bounds being current for the docs before. The new positions are
// swept, and the two live positions before them, which the new docs reach
// too, gain the terms that reach them now and did not before. The caller
// holds s.mu for writing.
func (s *bm25Scope) sweepTail(start int, near [2]float64) {
	n := len(s.order)
	weight := nearWeights(near)
	from := max(s.dead, start-2) // the first position whose frequencies change
	// Before the batch, which terms reached positions from..start-1
	// (through the docs up to start-1).
	var before [2]map[int32]bool
	for d := from; d < start; d++ {
		m := make(map[int32]bool)
		for p := max(0, d-2); p <= start-1 && p <= d+2; p++ {
			for _, dt := range s.docs[p] {
				if weight[d-p+2]*dt.tf != 0 {
					m[dt.term] = true
				}
			}
		}
		before[d-start+2] = m
	}
	// While the doc at p is read, the weighted frequencies of positions
	// p-2..p+2 are open: ring[d%5] lists position d's terms with their
	// frequency so far, and at[term*5 + d%5] is a term's index+1 there
	// (s.ringAt, all zeros between sweeps). Position d is complete once
	// the doc at d+2 is read; the doc at p adds to d in the order a search
	// sums (by position).
	var ring [5][]termF
	if len(s.ringAt) < 5*len(s.terms) {
		s.ringAt = make([]int32, 5*len(s.terms))
	}
	at := s.ringAt
	done := func(d int) {
		slot := d % 5
		for _, e := range ring[slot] {
			at[int(e.term)*5+slot] = 0
			if e.f <= 0 {
				continue
			}
			if d >= start || !before[d-start+2][e.term] {
				s.cdf[e.term]++
			}
			s.raise(e.term, int32(d/blockSize), e.f)
		}
		ring[slot] = ring[slot][:0]
	}
	for p := max(0, from-2); p < n; p++ {
		for _, dt := range s.docs[p] {
			for off := -2; off <= 2; off++ {
				d, v := p+off, weight[off+2]*dt.tf
				if d < from || d >= n || v == 0 {
					continue
				}
				slot := d % 5
				j := &at[int(dt.term)*5+slot]
				if *j == 0 {
					ring[slot] = append(ring[slot], termF{term: dt.term})
					*j = int32(len(ring[slot]))
				}
				ring[slot][*j-1].f += v
			}
		}
		if p-2 >= from {
			done(p - 2)
		}
	}
	for d := max(from, n-2); d < n; d++ {
		done(d)
	}
	for q := from; q < n; q++ {
		s.lowerLen(q, near)
	}
}

// termF is a term's weighted frequency at a position.
type termF struct {
	term int32
	f    float64
}

// qterm is a query term the scope holds, with its idf.
type qterm struct {
	id  int32
	idf float64
}

// searchNear returns the k best docs for the query's distinct terms (see
// BM25, WithNeighbourWeights and the pruning above). It allocates what it
// returns: its working arrays (a few values a block) come from nearBufs.
// The caller holds s.mu for reading.
func (s *bm25Scope) searchNear(terms []string, k int, near [2]float64) []Hit {
	n := len(s.order)         // positions, tombstones included
	live := float64(s.live()) // docs
	avg := s.ctotal / live    // Add keeps ctotal up to date
	if avg == 0 {
		avg = 1
	}
	buf := getNearBuf()
	qs := buf.qs[:0]
	var norm float64
	for _, t := range terms {
		df := 0.0
		id, ok := s.ids[t]
		if ok {
			df = float64(s.cdf[id])
		}
		idf := math.Log(1 + (live-df+0.5)/(df+0.5))
		norm += idf * (BM25K1 + 1)
		if df > 0 {
			qs = append(qs, qterm{id: id, idf: idf})
		}
	}
	nb := (n + blockSize - 1) / blockSize
	if cap(buf.bound) < nb {
		// With room to grow: a conversation's scope gains a block every
		// few turns.
		buf.bound, buf.kmin = make([]float64, nb, nb+nb/4), make([]float64, nb, nb+nb/4)
	}
	bound, kmin := buf.bound[:nb], buf.kmin[:nb]
	// 1. Each block's bound, term by term, for the blocks the terms
	// reach (a block's smallest length term at its first).
	touched := buf.touched[:0]
	firstLive := int32(s.dead / blockSize)
	bPerAvg := BM25B / avg // (a bound may round otherwise than a score: see boundMargin)
	for _, q := range qs {
		c := q.idf * (BM25K1 + 1)
		for _, e := range s.bmax[q.id] {
			b := e.block
			if int(b) >= nb || b < firstLive {
				continue // a block emptied by removals at the end, or of tombstones
			}
			f := float64(e.f)
			if bound[b] == 0 {
				touched = append(touched, b)
				kmin[b] = BM25K1 * (1 - BM25B + s.lmin[b]*bPerAvg)
			}
			bound[b] += c * f / (f + kmin[b])
		}
	}
	// The query's terms by number, for reading the docs.
	if cap(buf.qmark) < len(s.terms) {
		buf.qmark = make([]int32, len(s.terms), len(s.terms)+len(s.terms)/4)
	}
	qmark := buf.qmark[:len(s.terms)]
	for i, q := range qs {
		qmark[q.id] = int32(i + 1)
	}
	if cap(buf.f) < len(qs)*blockSize {
		buf.f = make([]float64, len(qs)*blockSize)
	}
	sc := blockScorer{s: s, qs: qs, qmark: qmark, f: buf.f[:len(qs)*blockSize], near: near, avg: avg, norm: norm}
	// 2. The best-bounded blocks, enough to hold k docs twice over,
	// scored first for a first θ.
	top := newTopK(k)
	best := &buf.best
	best.b, best.bound, best.max = best.b[:0], bound, false
	m := min(len(touched), 2*(k/blockSize+1))
	for _, b := range touched {
		if len(best.b) < m {
			best.b = append(best.b, b)
			heap.Fix(best, len(best.b)-1) // a push that boxes nothing
		} else if bound[b] > bound[best.b[0]] {
			best.b[0] = b
			heap.Fix(best, 0)
		}
	}
	for _, b := range best.b {
		sc.score(int(b), top)
		bound[b] = -1 // scored
	}
	// 3. The other blocks that can hold one of the k best, best bound
	// first, until a bound falls below θ (which only rises).
	below := func(b int32) bool {
		return len(top.h) == k && bound[b]/norm*(1+boundMargin) < top.h[0].Score
	}
	cand := &buf.cand
	cand.b, cand.bound, cand.max = cand.b[:0], bound, true
	for _, b := range touched {
		if bound[b] >= 0 && !below(b) {
			cand.b = append(cand.b, b)
		}
	}
	heap.Init(cand) // O(blocks); only those scored pay O(log blocks)
	for len(cand.b) > 0 && !below(cand.b[0]) {
		sc.score(int(cand.b[0]), top)
		last := len(cand.b) - 1
		cand.b[0], cand.b = cand.b[last], cand.b[:last] // a pop that boxes nothing
		if last > 0 {
			heap.Fix(cand, 0)
		}
	}
	for _, b := range touched {
		bound[b] = 0 // the buffer goes back zeroed
	}
	for _, q := range qs {
		qmark[q.id] = 0
	}
	best.bound, cand.bound = nil, nil
	buf.qs, buf.touched = qs, touched
	buf.put()
	return top.hits()
}

// blockScorer scores blocks for one search.
type blockScorer struct {
	s         *bm25Scope
	qs        []qterm
	qmark     []int32   // term number → index+1 in qs
	f         []float64 // by query term and position in the block: zeros between blocks
	near      [2]float64
	avg, norm float64
}

// score scores the positions of block b and offers those that share a
// word with the query to top, with their scores divided by norm: the
// exhaustive search's expression, summed in its order. It reads the docs
// whose words reach the block, those at its positions and two on either
// side. The caller holds s.mu for reading.
func (c *blockScorer) score(b int, top *topK) {
	s := c.s
	n := len(s.order)
	lo, hi := max(b*blockSize, s.dead), min(n, (b+1)*blockSize)
	weight := nearWeights(c.near)
	for p := max(0, lo-2); p <= min(n-1, hi+1); p++ {
		for _, d := range s.docs[p] {
			qi := int(c.qmark[d.term]) - 1
			if qi < 0 {
				continue
			}
			f := c.f[qi*blockSize : (qi+1)*blockSize]
			for q := max(lo, p-2); q <= min(hi-1, p+2); q++ {
				f[q-lo] += weight[q-p+2] * d.tf
			}
		}
	}
	var kd, score [blockSize]float64
	for q := lo; q < hi; q++ {
		kd[q-lo] = BM25K1 * (1 - BM25B + BM25B*s.nearLen(q, c.near)/c.avg)
	}
	for qi, q := range c.qs {
		f := c.f[qi*blockSize : (qi+1)*blockSize]
		for j := range hi - lo {
			if fj := f[j]; fj > 0 {
				score[j] += q.idf * fj * (BM25K1 + 1) / (fj + kd[j])
				f[j] = 0
			}
		}
	}
	for j := range hi - lo {
		if score[j] > 0 {
			top.offer(Hit{Seq: s.order[lo+j], Score: score[j] / c.norm})
		}
	}
}

// blockHeap is a heap of blocks by bound: the lowest on top, or the
// highest with max.
type blockHeap struct {
	b     []int32
	bound []float64
	max   bool
}

func (h *blockHeap) Len() int { return len(h.b) }
func (h *blockHeap) Less(i, j int) bool {
	if h.max {
		return h.bound[h.b[i]] > h.bound[h.b[j]]
	}
	return h.bound[h.b[i]] < h.bound[h.b[j]]
}
func (h *blockHeap) Swap(i, j int) { h.b[i], h.b[j] = h.b[j], h.b[i] }

// Push and Pop are heap.Interface's; searchNear grows and shrinks b
// itself (heap.Push and heap.Pop would box each block).
func (h *blockHeap) Push(x any) { h.b = append(h.b, x.(int32)) }
func (h *blockHeap) Pop() any {
	x := h.b[len(h.b)-1]
	h.b = h.b[:len(h.b)-1]
	return x
}
