package indexkit

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
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
	// Per conversation with postings: its units' lengths and each term's
	// own counts by ordinal, and the units each term reaches (its df).
	type prepared struct {
		id     string
		lo     int32
		lens   []float64   // by ordinal - lo
		own    [][]float64 // by term, by ordinal - lo (nil: none)
		first  []int64     // first Seq by ordinal - lo
		reach  []bool      // scratch
		hasAny bool
	}
	nt := len(q.Terms)
	df := make([]float64, nt)
	var preps []prepared
	var ps []posting
	for _, c := range convs {
		if !c.HasPostings() || c.State.Units(q.Kind) == 0 {
			continue
		}
		s := c.State.K[q.Kind]
		units, err := decodeUnits(c.Units)
		if err != nil {
			return nil, fmt.Errorf("conversation %q: %w", c.ID, err)
		}
		span := int(s.Hi-s.Lo) + 1
		p := prepared{id: c.ID, lo: s.Lo, lens: make([]float64, span), first: make([]int64, span), own: make([][]float64, nt)}
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
		for ti := range nt {
			if ti >= len(c.Postings) || len(c.Postings[ti]) == 0 {
				continue
			}
			ps, err = decodePostings(c.Postings[ti], ps[:0])
			if err != nil {
				return nil, fmt.Errorf("conversation %q, term %q: %w", c.ID, q.Terms[ti], err)
			}
			own := make([]float64, span)
			found := false
			for _, x := range ps {
				i, ok := slices.BinarySearchFunc(units, x.seq, func(e unitEntry, seq int64) int { return cmp.Compare(e.seq, seq) })
				if !ok {
					continue // a posting of a message no longer indexed
				}
				o := units[i].ords[q.Kind]
				if o < s.Lo || o > s.Hi || x.tf <= 0 {
					continue
				}
				own[o-s.Lo] += float64(x.tf)
				found = true
			}
			if !found {
				continue
			}
			p.own[ti] = own
			p.hasAny = true
			// The units its words reach.
			if p.reach == nil {
				p.reach = make([]bool, span)
			} else {
				clear(p.reach)
			}
			for o, f := range own {
				if f == 0 {
					continue
				}
				for off := -2; off <= 2; off++ {
					if d := o + off; d >= 0 && d < span && weight[off+2] > 0 && !p.reach[d] {
						p.reach[d] = true
						df[ti]++
					}
				}
			}
		}
		if p.hasAny {
			p.reach = nil
			preps = append(preps, p)
		}
	}
	idf := make([]float64, nt)
	var norm float64
	for ti := range nt {
		idf[ti] = math.Log(1 + (live-df[ti]+0.5)/(df[ti]+0.5))
		norm += idf[ti] * (k1 + 1)
	}
	top := &hitHeap{}
	f := make([]float64, nt)
	for _, p := range preps {
		span := len(p.lens)
		for d := range span {
			any := false
			for ti := range nt {
				f[ti] = 0
				own := p.own[ti]
				if own == nil {
					continue
				}
				// Summed by position, as retrieval.BM25 sums.
				for pos := max(0, d-2); pos <= min(span-1, d+2); pos++ {
					if v := own[pos]; v != 0 {
						f[ti] += weight[d-pos+2] * v
					}
				}
				if f[ti] > 0 {
					any = true
				}
			}
			if !any {
				continue
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
