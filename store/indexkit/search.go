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
	// Per conversation with postings: its units' lengths and first Seqs,
	// and each term's own counts, by ordinal (slices of one slab each),
	// and the units each term reaches (its df).
	type prepared struct {
		id     string
		lens   []float64 // by ordinal - lo
		own    []float64 // by term, then ordinal - lo
		first  []int64   // first Seq by ordinal - lo
		reach  []bool    // any term reaches the unit
		active []bool    // by term: it has postings here
		most   []float64 // by term: its largest own count here
		short  float64   // the shortest unit's length
		bound  float64   // no unit here scores more (see below)
	}
	nt := len(q.Terms)
	df := make([]float64, nt)
	// One allocation per slab: the conversations' spans, each at most
	// its unit entries (a span is checked against them: a corrupt state
	// allocates nothing big).
	slab := 0
	for _, c := range convs {
		if c.HasPostings() {
			slab += int(min(c.State.Units(q.Kind), int64(len(c.Units)/unitEntrySize)))
		}
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.put()
	lensSlab, firstSlab := slices.Grow(sc.lens[:0], slab), slices.Grow(sc.first[:0], slab)
	ownSlab, reachSlab := slices.Grow(sc.own[:0], slab*nt), slices.Grow(sc.reach[:0], slab)
	defer func() { sc.lens, sc.first, sc.own, sc.reach = lensSlab, firstSlab, ownSlab, reachSlab }()
	termReach := make([]bool, 0, 64)
	var preps []prepared
	var ps []posting
	var units []unitEntry
	for _, c := range convs {
		if !c.HasPostings() || c.State.Units(q.Kind) == 0 {
			continue
		}
		s := c.State.K[q.Kind]
		var err error
		units, err = decodeUnitsInto(c.Units, units[:0])
		if err != nil {
			return nil, fmt.Errorf("conversation %q: %w", c.ID, err)
		}
		span := int(int64(s.Hi)-int64(s.Lo)) + 1
		if span > len(units) {
			return nil, fmt.Errorf("indexkit: conversation %q: %d units in its state, %d unit entries", c.ID, span, len(units))
		}
		n := len(lensSlab)
		lensSlab, firstSlab = slices.Grow(lensSlab, span)[:n+span], slices.Grow(firstSlab, span)[:n+span]
		reachSlab = slices.Grow(reachSlab, span)[:n+span]
		o0 := len(ownSlab)
		ownSlab = slices.Grow(ownSlab, span*nt)[:o0+span*nt]
		p := prepared{id: c.ID, lens: lensSlab[n : n+span], first: firstSlab[n : n+span], own: ownSlab[o0 : o0+span*nt], reach: reachSlab[n : n+span],
			active: make([]bool, nt), most: make([]float64, nt)}
		clear(p.lens) // the slabs are reused: zero what this search uses
		clear(p.first)
		clear(p.own)
		clear(p.reach)
		for _, e := range units {
			o := e.ords[q.Kind]
			if o < s.Lo || o > s.Hi {
				continue
			}
			p.lens[o-s.Lo] += float64(e.n)
			if p.first[o-s.Lo] == 0 {
				p.first[o-s.Lo] = e.seq
			}
		}
		if cap(termReach) < span {
			termReach = make([]bool, span)
		}
		tr := termReach[:span]
		for ti := range nt {
			if ti >= len(c.Postings) || len(c.Postings[ti]) == 0 {
				continue
			}
			ps, err = decodePostings(c.Postings[ti], ps[:0])
			if err != nil {
				return nil, fmt.Errorf("conversation %q, term %q: %w", c.ID, q.Terms[ti], err)
			}
			own := p.own[ti*span : (ti+1)*span]
			found := false
			// Both in Seq order (a store may read chunk rows in any
			// order: sorted here if not), one merge maps each posting to
			// its unit.
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
			p.active[ti] = true
			clear(tr)
			for o, f := range own {
				if f == 0 {
					continue
				}
				p.most[ti] = max(p.most[ti], f)
				for off := -2; off <= 2; off++ {
					if d := o + off; d >= 0 && d < span && weight[off+2] > 0 && !tr[d] {
						tr[d] = true
						p.reach[d] = true
						df[ti]++
					}
				}
			}
		}
		if slices.Contains(p.active, true) {
			p.short = slices.Min(p.lens)
			preps = append(preps, p)
		}
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
	for i := range preps {
		p := &preps[i]
		kd := k1 * (1 - b + b*p.short/avg)
		for ti := range nt {
			if fj := p.most[ti] * wsum; p.active[ti] && fj > 0 {
				p.bound += idf[ti] * fj * (k1 + 1) / (fj + kd)
			}
		}
		p.bound = p.bound / norm * (1 + 1e-9) // above any rounding of a score
	}
	slices.SortStableFunc(preps, func(a, b prepared) int { return cmp.Compare(b.bound, a.bound) })
	top := &hitHeap{}
	f := make([]float64, nt)
	var near []float64 // by term, then ordinal: the weighted counts
	w1, w2 := q.Near[0], q.Near[1]
	for _, p := range preps {
		if prune && top.Len() == q.K && p.bound < (*top)[0].Score {
			continue // none of its units can rank
		}
		span := len(p.lens)
		// Each term's weighted count at every ordinal, term by term (one
		// pass over its counts), summed by position as retrieval.BM25
		// sums (from two before to two after): a zero count adds nothing
		// to a sum of non-negatives.
		if cap(near) < span*nt {
			near = make([]float64, span*nt)
		}
		near = near[:span*nt]
		for ti := range nt {
			if !p.active[ti] {
				continue
			}
			own, out := p.own[ti*span:(ti+1)*span], near[ti*span:(ti+1)*span]
			for d := range span {
				var v float64
				if d >= 2 {
					v += w2 * own[d-2]
				}
				if d >= 1 {
					v += w1 * own[d-1]
				}
				v += own[d]
				if d+1 < span {
					v += w1 * own[d+1]
				}
				if d+2 < span {
					v += w2 * own[d+2]
				}
				out[d] = v
			}
		}
		for d := range span {
			if !p.reach[d] {
				continue
			}
			for ti := range nt {
				f[ti] = 0
				if p.active[ti] {
					f[ti] = near[ti*span+d]
				}
			}
			l := p.lens[d]
			for dist := 1; dist <= 2; dist++ {
				for _, j := range [2]int{d - dist, d + dist} {
					if j >= 0 && j < span {
						l += q.Near[dist-1] * p.lens[j]
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
			h := Hit{ID: p.id, Seq: p.first[d], Score: score / norm}
			if q.Reach > 0 {
				h.From, h.To = p.first[max(d-q.Reach, 0)], int64(math.MaxInt64)
				if e := d + q.Reach + 1; e < span {
					h.To = p.first[e]
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

// scratch holds a search's slabs between searches (scratchPool): memory
// the next search finds mapped, not fresh pages to fault in.
type scratch struct {
	lens, own []float64
	first     []int64
	reach     []bool
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxScratch is the most a pooled scratch keeps (in float64s of own):
// a search of a huge scope does not pin its slabs.
const maxScratch = 4 << 20

func (sc *scratch) put() {
	if cap(sc.own) <= maxScratch {
		scratchPool.Put(sc)
	}
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
