package indexkit

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
	"sync"
)

// Query is one search.
type Query struct {
	// Terms are the query's distinct terms, sorted (QueryTerms).
	Terms []string
	// Kind is the unit searched.
	Kind Kind
	// Near are the neighbour weights (retrieval.WithNeighbourWeights),
	// each in [0, 1].
	Near [2]float64
	// K is how many hits at most.
	K int
	// Reach, when above 0, asks for each hit's stretch of its
	// conversation (Hit.From and To): the Reach units on either side of
	// it, with it.
	Reach int
}

// ConvData is what a store read for one conversation of the scope.
type ConvData struct {
	// ID names the conversation in the hits (a store's identity key).
	ID string
	// State is the conversation's Conv.
	State Conv
	// Units are its unit chunk rows, concatenated (in chunk order, or any
	// order: Search sorts what is not sorted); needed only when it has
	// postings.
	Units []byte
	// Postings[i] are its (Query.Terms[i], chunk) rows, concatenated.
	Postings [][]byte
}

// HasPostings reports whether any of d's postings rows were read.
func (d ConvData) HasPostings() bool {
	for _, p := range d.Postings {
		if len(p) > 0 {
			return true
		}
	}
	return false
}

// Hit is a unit found: its conversation (ConvData.ID), the Seq of its
// first message still stored, and its score in [0, 1).
type Hit struct {
	ID    string
	Seq   int64
	Score float64
	// From and To, with Query.Reach above 0, are the Seqs of the unit's
	// stretch of its conversation: From is the first Seq of the unit
	// Reach before it (of the conversation's first, if nearer), To that
	// of the unit Reach+1 after it, or math.MaxInt64 when there are not
	// so many after it. The messages with From <= Seq < To are the
	// units from Reach before the hit to Reach after it (fewer at the
	// conversation's ends), as stored when the search read the index,
	// with any system messages between them. Both are 0 without Reach,
	// and when a unit of the stretch has no entry (no stretch is known).
	From, To int64
}

// Search scores the units of convs (every conversation of the scope, each
// with its State; Units and Postings for those the query's terms reach)
// for q and returns the q.K best, best first: by score, then newest (the
// greater Seq), then by ID.
func Search(q Query, convs []ConvData) ([]Hit, error) {
	if !q.Kind.valid() {
		return nil, fmt.Errorf("indexkit: unknown unit kind %d", int(q.Kind))
	}
	for _, w := range q.Near {
		if math.IsNaN(w) || w < 0 || w > 1 {
			return nil, fmt.Errorf("indexkit: neighbour weights %v: each must lie in [0, 1]", q.Near)
		}
	}
	if q.K < 1 || len(q.Terms) == 0 {
		return nil, nil
	}
	if !slices.IsSorted(q.Terms) || len(slices.Compact(slices.Clone(q.Terms))) != len(q.Terms) {
		// A term given twice counts once, as retrieval.BM25 counts it
		// (Postings stay aligned with the terms as given: merged here).
		return searchDistinct(q, convs)
	}
	// The scope's unit count and mean length with neighbours.
	var live, total float64
	for _, c := range convs {
		s := c.State.K[q.Kind]
		if n := c.State.Units(q.Kind); n > 0 {
			live += float64(n)
			total += float64(s.P0) + q.Near[0]*float64(s.P1) + q.Near[1]*float64(s.P2)
		}
	}
	if live == 0 {
		return nil, nil
	}
	avg := total / live
	if avg == 0 {
		avg = 1
	}
	weight := [5]float64{q.Near[1], q.Near[0], 1, q.Near[0], q.Near[1]}
	nt := len(q.Terms)
	df := make([]float64, nt)
	// Each conversation with postings is decoded into one conversation's
	// scratch (sc.fill: dense, by term and ordinal, of the size of the
	// largest conversation, never of the scope); what scoring needs of it
	// is kept in slabs: its units' lengths, first Seqs and whether a term
	// reaches them, and each term's counts that are not zero (ordinal and
	// count: what was read, not the dense matrix).
	type cand struct {
		i     int     // in convs
		u0    int     // its units' offset in the unit slabs
		span  int     // its units
		t0    int     // its terms' offset in most, active and toff
		short float64 // the shortest unit's length
		bound float64 // no unit here scores more (see below)
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.put()
	var cands []cand
	most, active := sc.most[:0], sc.active[:0]                       // by candidate, then term
	toff := sc.toff[:0]                                              // by candidate, then term: its counts' end in ords and counts
	lens, first, reach := sc.klens[:0], sc.kfirst[:0], sc.kreach[:0] // by unit
	ords, counts := sc.ords[:0], sc.counts[:0]                       // the counts that are not zero
	defer func() {
		sc.most, sc.active, sc.toff = most, active, toff
		sc.klens, sc.kfirst, sc.kreach, sc.ords, sc.counts = lens, first, reach, ords, counts
	}()
	// The slabs' sizes at most: each conversation's units (no more than
	// its unit entries read: a corrupt state allocates nothing big) and
	// the postings read.
	nu, np, nc := 0, 0, 0
	for _, c := range convs {
		if c.HasPostings() && c.State.Units(q.Kind) > 0 {
			nu += int(min(c.State.Units(q.Kind), int64(len(c.Units)/unitEntrySize)))
			nc++
			for _, p := range c.Postings {
				np += len(p) / postingEntrySize
			}
		}
	}
	lens, first, reach = slices.Grow(lens, nu), slices.Grow(first, nu), slices.Grow(reach, nu)
	ords, counts = slices.Grow(ords, np), slices.Grow(counts, np)
	most, active, toff = slices.Grow(most, nc*nt), slices.Grow(active, nc*nt), slices.Grow(toff, nc*nt)
	for i, c := range convs {
		if !c.HasPostings() || c.State.Units(q.Kind) == 0 {
			continue
		}
		t0 := len(most)
		most, active = slices.Grow(most, nt)[:t0+nt], slices.Grow(active, nt)[:t0+nt]
		span, err := sc.fill(q, c, weight, active[t0:], most[t0:], df)
		if err != nil {
			return nil, err
		}
		if span == 0 || !slices.Contains(active[t0:], true) {
			most, active = most[:t0], active[:t0]
			continue
		}
		p := cand{i: i, u0: len(lens), span: span, t0: t0, short: slices.Min(sc.lens)}
		lens, first, reach = append(lens, sc.lens...), append(first, sc.first...), append(reach, sc.reach...)
		for ti := range nt {
			if active[t0+ti] {
				for o, f := range sc.own[ti*span : (ti+1)*span] {
					if f != 0 {
						ords, counts = append(ords, int32(o)), append(counts, f)
					}
				}
			}
			toff = append(toff, len(ords))
		}
		cands = append(cands, p)
	}
	idf := make([]float64, nt)
	var norm float64
	for ti := range nt {
		idf[ti] = math.Log(1 + (live-df[ti]+0.5)/(df[ti]+0.5))
		norm += idf[ti] * (k1 + 1)
	}
	// A conversation's bound: no unit of it scores more than the sum,
	// over its terms, of the term's part at its largest weighted count
	// (at most its largest own count times the weights' sum) and the
	// smallest length with neighbours (at least its shortest unit's).
	// Conversations are scored best bound first, and once K hits are
	// kept, one whose bound is below the worst of them is skipped: what
	// can rank is scored, the rest only counted (dynamic pruning, as
	// MaxScore; the result is the exhaustive one).
	wsum := 1 + 2*q.Near[0] + 2*q.Near[1]
	for ci := range cands {
		p := &cands[ci]
		kd := k1 * (1 - b + b*p.short/avg)
		for ti := range nt {
			if fj := most[p.t0+ti] * wsum; active[p.t0+ti] && fj > 0 {
				p.bound += idf[ti] * fj * (k1 + 1) / (fj + kd)
			}
		}
		p.bound = p.bound / norm * (1 + 1e-9) // above any rounding of a score
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(b.bound, a.bound) })
	top := &hitHeap{}
	f := make([]float64, nt)
	var near []float64 // by term, then ordinal: the weighted counts
	for _, p := range cands {
		if prune && top.Len() == q.K && p.bound < (*top)[0].Score {
			continue // none of its units can rank
		}
		id, span, act := convs[p.i].ID, p.span, active[p.t0:p.t0+nt]
		// Each term's weighted count at every ordinal, summed as
		// retrieval.BM25 sums (from two before to two after): each count
		// is added to the ordinals it reaches, in ordinal order, so every
		// sum adds the same products in the same order (a zero count adds
		// nothing to a sum of non-negatives).
		if cap(near) < span*nt {
			near = make([]float64, span*nt)
		}
		near = near[:span*nt]
		clear(near)
		c0 := 0
		if p.t0 > 0 {
			c0 = toff[p.t0-1]
		}
		for ti := range nt {
			c1 := toff[p.t0+ti]
			out := near[ti*span : (ti+1)*span]
			for k := c0; k < c1; k++ {
				o, f := int(ords[k]), counts[k]
				for off := -2; off <= 2; off++ {
					if d := o + off; d >= 0 && d < span {
						out[d] += weight[off+2] * f
					}
				}
			}
			c0 = c1
		}
		lens, first, reach := lens[p.u0:p.u0+span], first[p.u0:p.u0+span], reach[p.u0:p.u0+span]
		for d := range span {
			if !reach[d] {
				continue
			}
			for ti := range nt {
				f[ti] = 0
				if act[ti] {
					f[ti] = near[ti*span+d]
				}
			}
			l := lens[d]
			for dist := 1; dist <= 2; dist++ {
				for _, j := range [2]int{d - dist, d + dist} {
					if j >= 0 && j < span {
						l += q.Near[dist-1] * lens[j]
					}
				}
			}
			kd := k1 * (1 - b + b*l/avg)
			var score float64
			for ti := range nt {
				if fj := f[ti]; fj > 0 {
					score += idf[ti] * fj * (k1 + 1) / (fj + kd)
				}
			}
			if score <= 0 {
				continue
			}
			h := Hit{ID: id, Seq: first[d], Score: score / norm}
			if q.Reach > 0 {
				h.From, h.To = first[max(d-q.Reach, 0)], int64(math.MaxInt64)
				if q.Reach < span-1-d { // d+q.Reach+1 < span, without overflow
					h.To = first[d+q.Reach+1]
				}
				if h.From == 0 || h.To == 0 {
					h.From, h.To = 0, 0 // a unit with no entry: no span known
				}
			}
			if top.Len() < q.K {
				heap.Push(top, h)
			} else if better(h, (*top)[0]) {
				(*top)[0] = h
				heap.Fix(top, 0)
			}
		}
	}
	out := slices.Clone(*top)
	slices.SortFunc(out, func(a, b Hit) int {
		if better(a, b) {
			return -1
		}
		if better(b, a) {
			return 1
		}
		return 0
	})
	return out, nil
}

// prune is false in tests that compare the pruned search with the
// exhaustive one.
var prune = true

// scratch is a search's memory, reused between searches (scratchPool):
// one conversation's decoded index (fill), reused from conversation to
// conversation, and the slabs Search keeps of each conversation it may
// score.
type scratch struct {
	units      []unitEntry
	ps         []posting
	lens, own  []float64 // by ordinal - Lo; own by term, then ordinal - Lo
	first      []int64   // first Seq by ordinal - Lo
	reach, tmp []bool    // any term reaches the unit; one term does

	most, klens, counts []float64
	active, kreach      []bool
	toff                []int
	kfirst              []int64
	ords                []int32
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxScratch is the most a pooled scratch keeps (in entries of its
// largest slab): a search of a huge scope does not pin its slabs.
const maxScratch = 4 << 20

func (sc *scratch) put() {
	if max(cap(sc.own), cap(sc.counts), cap(sc.klens)) <= maxScratch {
		scratchPool.Put(sc)
	}
}

// fill decodes conversation c for q into sc (lens, first, own, reach),
// sets active[t] and most[t] (each term's largest own count there) and,
// with df not nil, adds to df[t] the units term t reaches. It returns the
// conversation's span of units (0 for none).
func (sc *scratch) fill(q Query, c ConvData, weight [5]float64, active []bool, most, df []float64) (int, error) {
	nt := len(q.Terms)
	clear(active)
	clear(most)
	s := c.State.K[q.Kind]
	var err error
	sc.units, err = decodeUnitsInto(c.Units, sc.units[:0])
	if err != nil {
		return 0, fmt.Errorf("conversation %q: %w", c.ID, err)
	}
	units := sc.units
	span := int(int64(s.Hi)-int64(s.Lo)) + 1
	if span > len(units) {
		// A span is checked against the entries read: a corrupt state
		// allocates nothing big.
		return 0, fmt.Errorf("indexkit: conversation %q: %d units in its state, %d unit entries", c.ID, span, len(units))
	}
	sc.lens, sc.first = slices.Grow(sc.lens[:0], span)[:span], slices.Grow(sc.first[:0], span)[:span]
	sc.reach, sc.tmp = slices.Grow(sc.reach[:0], span)[:span], slices.Grow(sc.tmp[:0], span)[:span]
	sc.own = slices.Grow(sc.own[:0], span*nt)[:span*nt]
	clear(sc.lens) // reused: zero what this conversation uses
	clear(sc.first)
	clear(sc.reach)
	clear(sc.own)
	for _, e := range units {
		o := e.ords[q.Kind]
		if o < s.Lo || o > s.Hi {
			continue
		}
		sc.lens[o-s.Lo] += float64(e.n)
		if sc.first[o-s.Lo] == 0 {
			sc.first[o-s.Lo] = e.seq
		}
	}
	for ti := range nt {
		if ti >= len(c.Postings) || len(c.Postings[ti]) == 0 {
			continue
		}
		sc.ps, err = decodePostings(c.Postings[ti], sc.ps[:0])
		if err != nil {
			return 0, fmt.Errorf("conversation %q, term %q: %w", c.ID, q.Terms[ti], err)
		}
		ps := sc.ps
		own := sc.own[ti*span : (ti+1)*span]
		found := false
		// Both in Seq order (a store may read chunk rows in any order:
		// sorted here if not), one merge maps each posting to its unit.
		if !slices.IsSortedFunc(ps, func(a, b posting) int { return cmp.Compare(a.seq, b.seq) }) {
			slices.SortFunc(ps, func(a, b posting) int { return cmp.Compare(a.seq, b.seq) })
		}
		j := 0
		for _, x := range ps {
			for j < len(units) && units[j].seq < x.seq {
				j++
			}
			if j == len(units) || units[j].seq != x.seq {
				continue // a posting of a message no longer indexed
			}
			o := units[j].ords[q.Kind]
			if o < s.Lo || o > s.Hi || x.tf <= 0 {
				continue
			}
			own[o-s.Lo] += float64(x.tf)
			found = true
		}
		if !found {
			continue
		}
		active[ti] = true
		tr := sc.tmp
		clear(tr)
		for o, f := range own {
			if f == 0 {
				continue
			}
			most[ti] = max(most[ti], f)
			for off := -2; off <= 2; off++ {
				if d := o + off; d >= 0 && d < span && weight[off+2] > 0 && !tr[d] {
					tr[d] = true
					sc.reach[d] = true
					if df != nil {
						df[ti]++
					}
				}
			}
		}
	}
	return span, nil
}

// better orders hits: by score, then newest, then by ID.
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	if a.Seq != b.Seq {
		return a.Seq > b.Seq
	}
	return a.ID < b.ID
}

// hitHeap keeps the worst of the best on top.
type hitHeap []Hit

func (h hitHeap) Len() int           { return len(h) }
func (h hitHeap) Less(i, j int) bool { return better(h[j], h[i]) }
func (h hitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hitHeap) Push(x any)        { *h = append(*h, x.(Hit)) }
func (h *hitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// searchDistinct is Search for a query whose terms are not distinct and
// sorted: each conversation's postings of a term given twice are read
// once.
func searchDistinct(q Query, convs []ConvData) ([]Hit, error) {
	terms := slices.Clone(q.Terms)
	slices.Sort(terms)
	terms = slices.Compact(terms)
	out := make([]ConvData, len(convs))
	for i, c := range convs {
		out[i] = c
		out[i].Postings = make([][]byte, len(terms))
		for j, t := range q.Terms {
			if j < len(c.Postings) {
				k, _ := slices.BinarySearch(terms, t)
				if out[i].Postings[k] == nil {
					out[i].Postings[k] = c.Postings[j]
				}
			}
		}
	}
	q.Terms = terms
	return Search(q, out)
}
