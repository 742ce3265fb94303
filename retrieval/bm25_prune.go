package retrieval

import (
	"math"
	"slices"
)

// Pruned search.
//
// A query's top k are found without scoring every doc, with block-max
// bounds (as in Ding & Suel's block-max indexes and their successors,
// here over a document-ordered index whose docs reach their neighbours).
// The order of a scope's docs is cut into blocks of blockSize consecutive
// positions. A term's impact at a position is the saturation BM25 gives
// its weighted frequency f there (its own and its neighbours', weighted)
// at the position's length with neighbours l:
//
//	u = f / (f + k1 · (1 − b + b · l/avgRef))
//
// so that, when avgRef is the scope's mean length, the position's score
// is Σ idf(q) · (k1+1) · u over the query's terms. For each term the
// scope keeps, per block its words reach, the largest impact any position
// of the block has for it, rounded up to a multiple of 1/maxImpact: by
// superblock of superSize blocks, one entry of superSize bounds, so that
// a term that reaches most blocks (a common word of a long conversation)
// costs a few bytes a block, and a query reads each term's entries in
// order, once. A query then:
//
//  1. bounds each block its terms reach: the sum, over the query's terms,
//     of idf · (k1+1) times the block's impact — no doc of the block can
//     score more;
//  2. takes the best-bounded blocks, about a sixty-fourth of those its
//     terms reach (found with a histogram of the bounds), and scores
//     their positions, exactly, best bound first, until the best bound
//     left is below the k-th best score found, θ;
//  3. does the same with the other blocks whose bound reaches θ — none
//     when θ is above every bound left already, as it is on the
//     benchmark's corpus.
//
// The impacts are kept at a reference mean length, avgRef, set when the
// bounds are built; the mean moves as docs come and go. A query whose
// mean is avg stretches each stored impact u to u / (u + r·(1−u)), r =
// avgRef/avg, when the mean has grown (r < 1: the saturation of f at any
// length is then at most that), through a table by bucket of impacts,
// and takes it as it is otherwise (a smaller mean only lowers the
// impacts). When the mean moves by more than maxDrift either way, the
// bounds are rebuilt around it.
//
// A block is scored from the docs whose words reach it (its own and two
// on either side), which lie next to each other in the scope's arrays
// and, as docs are added in order, in memory (see alloc).
//
// The result is the exhaustive search's, hit for hit and score for score
// (a test holds the two equal): a block is skipped only when its bound,
// with a margin far above rounding, is below θ, and every position scored
// is scored with the same expression in the same order as before pruning.
// A bound sums, term by term, the best impact anywhere in its block, so it
// is loose where the query's words fall on different positions of a
// block; still, on the benchmark's corpus, where every turn shares the
// query's words and every term reaches most blocks, a few blocks in a
// thousand reach θ. A query costs one pass over its terms' entries and
// over the blocks they reach, and the few blocks it scores; on real
// conversations a query's rare words reach few blocks.
//
// Each term's df (the positions its words reach, which BM25's idf counts)
// is kept too, so a query needs no walk over the docs to know it. A
// change at one position that moves no other doc — an append at the end
// of the order (what a conversation does), a removal of the last doc, a
// doc replaced in place — changes only the positions within two of it:
// reweigh updates the counts and raises the bounds from the docs around
// it (the impacts of the terms whose frequency grew, and of every term at
// a position whose length shrank). Any other change (an insertion or a
// removal before the end, or a batch larger than a quarter of the scope)
// marks them stale, and the end of the call rebuilds them in one pass
// over the docs (rebound). Bounds may be too high (a removal or a
// replacement leaves them so; no change lowers them), never too low;
// counts are always exact.

// blockSize is how many consecutive positions of the order a block holds.
// Smaller blocks bound more tightly and cost more bounds per query.
const blockSize = 4

// superSize is how many consecutive blocks a superblock holds: how many
// bounds of a term one entry keeps. searchNear adds an entry's bounds one
// by one: it must be 4.
const superSize = 4

const _, _ uint = superSize - 4, 4 - superSize // superSize is 4

// boundMargin is the relative margin by which a bound must fall below θ
// to be skipped: far above the rounding of a sum of a few dozen terms
// (about 1e-15), far below any difference of scores that matters.
const boundMargin = 1e-9

// maxDrift is how far, as a factor, the scope's mean length may move from
// the bounds' reference (avgRef) before the bounds are rebuilt around it.
const maxDrift = 1.5

// termBounds are a term's bounds, by superblock its words reach, in
// order: super[i] is the superblock, and u[i] the largest impact the term
// has at each of its blocks' positions, in units of 1/maxImpact, rounded
// up (0 where it reaches none).
type termBounds struct {
	super []int32
	u     [][superSize]uint16
}

// span returns the range of t's superblocks within [from, to).
func (t *termBounds) span(from, to int) (lo, hi int) {
	hi = len(t.super)
	if hi > 0 && int(t.super[hi-1]) >= to { // (rare: removals at the end)
		hi, _ = slices.BinarySearch(t.super, int32(to))
	}
	if from > 0 {
		lo, _ = slices.BinarySearch(t.super[:hi], int32(from))
	}
	return lo, hi
}

// maxImpact is the unit of a stored impact: impacts lie in [0, 1), and a
// stored one is rounded up to a multiple of 1/maxImpact.
const maxImpact = math.MaxUint16

// quantize returns impact u (in [0, 1]) in units of 1/maxImpact, rounded
// up: q/maxImpact is never below u.
func quantize(u float64) uint16 {
	q := math.Ceil(u * maxImpact)
	if q/maxImpact < u { // the product rounded down
		q++
	}
	return uint16(min(maxImpact, q))
}

// winTF is one term's frequencies in the docs around a changed position p
// (reweigh's window): at p-4..p+4 (tf, with p's left 0), and at p before
// and after the change.
type winTF struct {
	term    int32
	tf      [9]float64
	was, is float64
}

// nearWeights returns the weights of a doc's words at offsets -2..2 from
// its position: 1 at its own, the neighbour weights at the others.
func nearWeights(near [2]float64) [5]float64 {
	return [5]float64{near[1], near[0], 1, near[0], near[1]}
}

// impact is a term's impact at a position where its weighted frequency
// is f and the length with neighbours l, at the bounds' reference mean
// length (see above).
func (s *bm25Scope) impact(f, l float64) float64 {
	return f / (f + BM25K1*(1-BM25B+BM25B*l/s.avgRef))
}

// stretch returns the largest impact at the mean length avg of a term
// whose impact at the reference mean is at most u, for r = avgRef/avg < 1
// (see above).
func stretch(u, r float64) float64 {
	return u / (u + r*(1-u))
}

// raise makes term t's bound at block b at least impact u. The caller
// holds s.mu for writing; b is at or near the end of t's blocks.
func (s *bm25Scope) raise(t int32, b int32, u float64) {
	v := quantize(u)
	sb := b / superSize
	e := &s.bmax[t]
	i := len(e.super)
	switch {
	case i > 0 && e.super[i-1] == sb: // the last superblock (an append's usual case)
		i--
	case i > 0 && e.super[i-1] > sb: // an earlier one (rare): search
		i, _ = slices.BinarySearch(e.super, sb)
	}
	if i == len(e.super) || e.super[i] != sb {
		e.super = slices.Insert(e.super, i, sb)
		e.u = slices.Insert(e.u, i, [superSize]uint16{})
	}
	e.u[i][b%superSize] = max(e.u[i][b%superSize], v)
}

// reweigh keeps the counts and bounds up to date when the doc at position
// p of the order changes from before (of length lb) to after (of length
// la) without moving any other doc: appended at the end (!was), about to
// be removed from the end (!is), or replaced in place. Only positions
// p-2..p+2 change, through the terms of the docs at p-4..p+4: a term's
// bound is raised where its frequency grew, and every term's where the
// length with neighbours shrank. It runs before the order loses a removed
// position and after it gains an appended one (p is in the order). A
// removal from the front (p the first live position, which becomes a
// tombstone) is a removal too: tombstones reach nothing. The caller holds
// s.mu for writing, with the bounds current before the change.
func (s *bm25Scope) reweigh(p int, before, after []docTF, was, is bool, lb, la float64, near [2]float64) {
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
	// The lengths with neighbours of p-2..p+2 after the change, and
	// where they shrank.
	var length [5]float64
	var shrank [5]bool
	anyShrank := false
	for q := max(s.dead, p-2); q <= min(n-1, p+2); q++ {
		length[q-p+2] = s.nearLenWith(q, p, la, near)
		shrank[q-p+2] = length[q-p+2] < s.nearLenWith(q, p, lb, near)
		anyShrank = anyShrank || shrank[q-p+2]
	}
	moved := was != is // position p itself comes or goes
	for i := range win {
		w := &win[i]
		s.win[w.term] = 0
		changed := w.was != w.is
		if !changed && !moved && !anyShrank {
			continue // a neighbour's term: nothing it reaches changes
		}
		for q := max(s.dead, p-2); q <= min(n-1, p+2); q++ {
			if q != p && !changed && !shrank[q-p+2] {
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
			if ca && (!cb || fa > fb || shrank[q-p+2]) {
				s.raise(w.term, int32(q/blockSize), s.impact(fa, length[q-p+2]))
			}
		}
	}
	s.wterms = win[:0]
}

// nearLenWith is nearLen(q) with the doc at position p of length lp.
func (s *bm25Scope) nearLenWith(q, p int, lp float64, near [2]float64) float64 {
	at := func(j int) float64 {
		if j == p {
			return lp
		}
		return s.olen[j]
	}
	l := at(q)
	for dist := 1; dist <= 2; dist++ {
		for _, j := range [2]int{q - dist, q + dist} {
			if j >= 0 && j < len(s.olen) {
				l += near[dist-1] * at(j)
			}
		}
	}
	return l
}

// rebound rebuilds every term's count and bounds, at the current mean
// length: a sweep over every doc from reset counts. The caller holds s.mu
// for writing, with the lengths' sum current.
func (s *bm25Scope) rebound(near [2]float64) {
	if s.boundsOK {
		return
	}
	s.dropDead()
	s.rebuilds++
	s.avgRef = s.mean()
	for t := range s.cdf {
		s.cdf[t], s.bmax[t] = 0, termBounds{}
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
		l := 0.0
		if len(ring[slot]) > 0 {
			l = s.nearLen(d, near)
		}
		for _, e := range ring[slot] {
			at[int(e.term)*5+slot] = 0
			if e.f <= 0 {
				continue
			}
			if d >= start || !before[d-start+2][e.term] {
				s.cdf[e.term]++
			}
			s.raise(e.term, int32(d/blockSize), s.impact(e.f, l))
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
}

// termF is a term's weighted frequency at a position.
type termF struct {
	term int32
	f    float64
}

// qterm is a query term the scope holds, with its idf and c = idf·(k1+1),
// the most it adds to a score.
type qterm struct {
	id     int32
	idf, c float64
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
			qs = append(qs, qterm{id: id, idf: idf, c: idf * (BM25K1 + 1)})
		}
	}
	nb := (n + blockSize - 1) / blockSize
	ns := (nb + superSize - 1) / superSize
	if cap(buf.seen) < ns {
		// With room to grow: a conversation's scope gains a block every
		// few turns.
		buf.bound = make([]float64, ns*superSize, (ns+ns/4)*superSize)
		buf.seen = make([]bool, ns, ns+ns/4)
	}
	bound, seen := buf.bound[:ns*superSize], buf.seen[:ns]
	// 1. Each block's bound, term by term, each term's entries read in
	// order. When the mean length has grown since the bounds were built
	// (r < 1), a stored impact is stretched (see above) through a table by
	// bucket of stretchBucket units, each bucket at its top.
	r := s.avgRef / avg
	var stretched *[stretchBuckets + 1]float64
	if r < 1 {
		stretched = &buf.stretched
		for i := range stretched {
			stretched[i] = stretch(min(1, float64(i*stretchBucket)/maxImpact), r)
		}
	}
	// The superblocks touched: all of them when the terms' bounds are
	// about as many (dense), else those they reach, noted in seen.
	firstSuper := s.dead / blockSize / superSize
	total := 0
	for _, q := range qs {
		total += len(s.bmax[q.id].super)
	}
	dense := total >= ns-firstSuper
	touched := buf.touched[:0]
	if dense {
		for sb := firstSuper; sb < ns; sb++ {
			touched = append(touched, int32(sb))
		}
	}
	for _, q := range qs {
		e := &s.bmax[q.id]
		lo, hi := e.span(firstSuper, ns) // not of tombstones only, nor emptied by removals at the end
		supers, us := e.super[lo:hi], e.u[lo:hi]
		us = us[:len(supers)]
		if !dense {
			for _, sb := range supers {
				if !seen[sb] {
					seen[sb] = true
					touched = append(touched, sb)
				}
			}
		}
		if stretched == nil {
			c := q.c / maxImpact
			for i, sb := range supers {
				b := bound[int(sb)*superSize:][:superSize]
				u := &us[i]
				b[0] += c * float64(u[0])
				b[1] += c * float64(u[1])
				b[2] += c * float64(u[2])
				b[3] += c * float64(u[3])
			}
			continue
		}
		for i, sb := range supers { // the same, through the table
			b := bound[int(sb)*superSize:][:superSize]
			for j, v := range us[i] {
				b[j] += q.c * stretched[(int(v)+stretchBucket-1)/stretchBucket]
			}
		}
	}
	// Blocks of tombstones only, or past the last position, hold no hit.
	for b := firstSuper * superSize; b < s.dead/blockSize; b++ {
		bound[b] = 0
	}
	for b := nb; b < ns*superSize; b++ {
		bound[b] = 0
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
	top := newTopK(k)
	// A block whose bound v has v·scale below θ, the k-th best score so
	// far (which only rises), holds none of the k best.
	scale := (1 + boundMargin) / norm
	below := func(v float64) bool { return len(top.h) == k && v*scale < top.h[0].Score }
	// scoreBest scores the candidates best bound first, until the best
	// left is below θ, and drops the others.
	cands := buf.cands[:0]
	scoreBest := func() {
		for len(cands) > 0 && !below(cands[0].v) {
			sc.score(int(cands.pop().b), top)
		}
		cands = cands[:0]
	}
	// 2. The best-bounded blocks, about a sixty-fourth of them (or enough
	// to hold k docs twice over), best bound first, for a first θ. They
	// are those whose bound reaches t, found with a histogram of the
	// bounds (a bound is at most norm) by histBins-th parts of norm.
	var hist [histBins]int32
	for _, sb := range touched {
		for _, v := range bound[int(sb)*superSize : int(sb)*superSize+superSize] {
			hist[min(histBins-1, int(v*float64(histBins)/norm))]++
		}
	}
	hist[0] = 0 // blocks no term reaches, and the lowest
	m := int32(max(2*(min(k, n)/blockSize+1), nb/64))
	t := math.Inf(1)
	for i, count := histBins-1, int32(0); i > 0 && count < m; i-- {
		count += hist[i]
		t = float64(i) * norm / histBins
	}
	for _, sb := range touched {
		for j, v := range bound[int(sb)*superSize : int(sb)*superSize+superSize] {
			if v >= t {
				cands = append(cands, cand{sb*superSize + int32(j), v})
			}
		}
	}
	cands.init()
	scoreBest()
	// 3. The other blocks whose bound reaches θ, best bound first: none
	// when θ is above t already (as on the benchmark's corpus, where the
	// seeds hold the k best).
	theta := -1.0 // no θ yet: every block is a candidate
	if len(top.h) == k {
		theta = top.h[0].Score
	}
	rest := t*scale >= theta // else every bound below t is below θ
	for _, sb := range touched {
		b := bound[int(sb)*superSize : int(sb)*superSize+superSize]
		if rest {
			for j, v := range b {
				if v > 0 && v < t && v*scale >= theta {
					cands.push(cand{sb*superSize + int32(j), v})
				}
			}
		}
		clear(b)         // the buffers go back zeroed
		seen[sb] = false // (never set when dense)
	}
	scoreBest()
	for _, q := range qs {
		qmark[q.id] = 0
	}
	buf.qs, buf.cands, buf.touched = qs, cands, touched
	buf.put()
	return top.hits()
}

// histBins is how many bins searchNear's histogram of block bounds has.
const histBins = 128

// A stretched impact is read from a table by bucket of stretchBucket
// units (see searchNear).
const (
	stretchBucket  = 256
	stretchBuckets = (maxImpact + stretchBucket - 1) / stretchBucket
)

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

// cand is a candidate block and its bound.
type cand struct {
	b int32
	v float64
}

// candHeap is a max-heap of candidate blocks by bound.
type candHeap []cand

// init makes h a heap: O(len(h)).
func (h candHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// down moves h[i] down to its place.
func (h candHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && h[r].v > h[l].v {
			l = r
		}
		if h[i].v >= h[l].v {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}

// push adds c.
func (h *candHeap) push(c cand) {
	*h = append(*h, c)
	a := *h
	i := len(a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if a[p].v >= a[i].v {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

// pop removes and returns the best candidate.
func (h *candHeap) pop() cand {
	a := *h
	top, last := a[0], len(a)-1
	a[0] = a[last]
	*h = a[:last]
	h.down(0)
	return top
}
