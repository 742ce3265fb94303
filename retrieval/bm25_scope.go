package retrieval

import (
	"math"
	"slices"
	"sync"
)

// bm25Scope is one scope's index. Its docs are kept in Seq order, one
// entry a doc by position (order, olen, docs), each doc a slice of (term
// number, weighted frequency) pairs over the scope's numbered terms (ids,
// terms), in chunks of an arena (alloc). For pruned search (bm25_prune.go)
// each term also has its df with neighbours and its bounds per block. The
// index holds no pointer per term occurrence and no per-term posting
// list: the garbage collector scans a pointer a doc and three a term, and
// a search reads the docs around the blocks it scores, which lie together
// in memory.
type bm25Scope struct {
	mu     sync.RWMutex
	ids    map[string]int32 // term → its number
	terms  []string         // number → term
	own    []int32          // number → docs holding the term
	unused int              // numbered terms no doc holds (see compact)
	order  []int64          // the docs' Seqs, increasing
	olen   []float64        // olen[i] is the length of the doc at position i
	docs   [][]docTF        // docs[i] is the doc at position i
	// dead is how many positions at the start of the order hold docs
	// removed from the front (of length 0 and no terms: tombstones), which
	// keep the other docs' positions, and so the bounds, in place. They
	// are dropped once they are as many as the live docs (dropDead).
	dead int
	// ctotal is the sum of the live docs' lengths with their
	// neighbours', valid when ctotalOK.
	ctotal   float64
	ctotalOK bool
	// Pruning: per term number, the positions its words reach (cdf, its
	// df) and its largest impact per block, by superblock (bmax), at the
	// reference mean length avgRef. boundsOK is false while they wait to
	// be rebuilt.
	cdf      []int32
	bmax     []termBounds
	avgRef   float64
	boundsOK bool
	win      []int32 // term number → index+1 in wterms during reweigh, a mark elsewhere (else 0)
	wterms   []winTF // reweigh's window
	ringAt   []int32 // sweepTail's scratch: term*5 + position%5 → index+1 (else 0)
	rebuilds int     // how many times rebound rebuilt the bounds (for tests)
	// The docs' terms lie in arena chunks (see alloc): arena is the
	// current one; held is the number of terms the docs hold, garbage
	// that of docs replaced or removed since the last repack.
	arena         []docTF
	held, garbage int
	repacks       int // how many times repack copied the docs (for tests)
}

func newBM25Scope() *bm25Scope {
	return &bm25Scope{ids: make(map[string]int32), ctotalOK: true, boundsOK: true, avgRef: 1}
}

// docTF is one term of a doc: its number and weighted frequency.
type docTF struct {
	term int32
	tf   float64
}

// prepared is a doc ready to join a scope: its Seq, its terms' weighted
// frequencies and its weighted length.
type prepared struct {
	seq int64
	tf  map[string]float64
	n   float64
}

// add adds docs, replacing those with the same Seq. The caller holds s.mu
// for writing.
func (s *bm25Scope) add(prep []prepared, near [2]float64) {
	if 4*len(prep) > len(s.order) {
		s.boundsOK = false // a large batch: one rebuild at the end
	}
	if s.boundsOK && len(prep) >= minTailBatch && appendsOnly(s.order, prep) {
		s.appendBatch(prep, near)
		s.settle(near)
		return
	}
	for _, p := range prep {
		doc := s.numbered(p)
		i, found := len(s.order), false
		if i > 0 && s.order[i-1] >= p.seq {
			i, found = slices.BinarySearch(s.order, p.seq)
		}
		if found && i >= s.dead {
			s.replace(i, doc, p.n, near)
			continue
		}
		if i < len(s.order) && s.dead > 0 {
			// An insertion before the end moves docs: the tombstones go
			// first (the bounds are rebuilt anyway).
			s.dropDead()
			i, _ = slices.BinarySearch(s.order, p.seq)
		}
		s.hold(doc, 1)
		if i == len(s.order) {
			if s.ctotalOK {
				s.ctotal += s.appendDelta(p.n, near)
			}
			s.order, s.olen, s.docs = append(s.order, p.seq), append(s.olen, p.n), append(s.docs, doc)
			if s.boundsOK {
				s.reweigh(i, nil, doc, false, true, 0, p.n, near)
			}
			continue
		}
		s.order = slices.Insert(s.order, i, p.seq)
		s.olen = slices.Insert(s.olen, i, p.n)
		s.docs = slices.Insert(s.docs, i, doc)
		s.ctotalOK, s.boundsOK = false, false
	}
	s.settle(near)
}

// minTailBatch is the fewest docs appended in one call whose bounds are
// brought up to date by one sweep over them (appendBatch) rather than doc
// by doc (reweigh).
const minTailBatch = 8

// appendsOnly reports whether prep's docs all join the end of order, in
// order.
func appendsOnly(order []int64, prep []prepared) bool {
	last := int64(math.MinInt64)
	if len(order) > 0 {
		last = order[len(order)-1]
	}
	for _, p := range prep {
		if p.seq <= last {
			return false
		}
		last = p.seq
	}
	return true
}

// appendBatch appends prep's docs (appendsOnly) and brings the bounds up
// to date in one sweep over the new positions and the two before them
// (sweepTail). The caller holds s.mu for writing, with the bounds
// current.
func (s *bm25Scope) appendBatch(prep []prepared, near [2]float64) {
	start := len(s.order)
	for _, p := range prep {
		doc := s.numbered(p)
		s.hold(doc, 1)
		if s.ctotalOK {
			s.ctotal += s.appendDelta(p.n, near)
		}
		s.order, s.olen, s.docs = append(s.order, p.seq), append(s.olen, p.n), append(s.docs, doc)
	}
	s.sweepTail(start, near)
}

// settle ends a change: the lengths' sum and the pruning bounds are
// brought up to date, and the terms compacted if most are unused. The
// caller holds s.mu for writing.
func (s *bm25Scope) settle(near [2]float64) {
	if s.dead > 0 && s.dead >= s.live() {
		s.dropDead() // amortised: after as many removals as docs left
	}
	s.recount(near)
	s.maybeCompact()
	s.repack()
	if m := s.mean(); m > s.avgRef*maxDrift || m*maxDrift < s.avgRef {
		s.boundsOK = false // the bounds, kept at avgRef, would loosen
	}
	s.rebound(near)
}

// hold counts doc's terms as held by one more doc (by < 0: one fewer, its
// room in the arena then garbage). The caller holds s.mu for writing.
func (s *bm25Scope) hold(doc []docTF, by int32) {
	if by > 0 {
		s.held += len(doc)
	} else {
		s.held -= len(doc)
		s.garbage += len(doc)
	}
	for _, d := range doc {
		was := s.own[d.term]
		s.own[d.term] += by
		switch {
		case was == 0 && by > 0:
			s.unused--
		case was > 0 && s.own[d.term] == 0:
			s.unused++
		}
	}
}

// numbered returns p's terms as a doc of s, numbering new terms. The
// caller holds s.mu for writing.
func (s *bm25Scope) numbered(p prepared) []docTF {
	doc := s.alloc(len(p.tf))
	for t, f := range p.tf {
		doc = append(doc, docTF{s.termID(t), f})
	}
	return doc
}

// Arena chunks: at least minChunk terms, and at most maxChunk unless a
// doc needs more.
const (
	minChunk = 64
	maxChunk = 4096
)

// alloc returns an empty doc with room for n terms, from the scope's arena:
// docs added one after another lie one after another in memory, so that a
// search reads the docs around a block from a few neighbouring cache lines.
// A chunk is as large as the docs the scope holds (within minChunk and
// maxChunk), so a small scope's arena is small. The caller holds s.mu for
// writing.
func (s *bm25Scope) alloc(n int) []docTF {
	if cap(s.arena)-len(s.arena) < n {
		s.arena = make([]docTF, 0, max(n, min(maxChunk, max(minChunk, s.held))))
	}
	at := len(s.arena)
	s.arena = s.arena[:at+n]
	return s.arena[at : at : at+n]
}

// repack copies the docs into a fresh arena, in order, when the arena's
// garbage (the room of docs replaced or removed since the last repack)
// outweighs the docs held: O(terms held), once per as many terms dropped.
// The caller holds s.mu for writing, between changes.
func (s *bm25Scope) repack() {
	if s.garbage <= max(s.held, maxChunk) {
		return
	}
	s.arena = nil
	for i, d := range s.docs {
		if d != nil {
			s.docs[i] = append(s.alloc(len(d)), d...)
		}
	}
	s.garbage = 0
	s.repacks++
}

// mean is the docs' mean length with neighbours (1 for none, or none
// long): what BM25 divides lengths by. Valid when ctotalOK.
func (s *bm25Scope) mean() float64 {
	if live := s.live(); live > 0 && s.ctotal > 0 {
		return s.ctotal / float64(live)
	}
	return 1
}

// live is how many docs s holds.
func (s *bm25Scope) live() int { return len(s.order) - s.dead }

// dropDead drops the tombstones at the start of the order, moving every
// doc: the bounds are to be rebuilt. The live docs' lengths with
// neighbours do not change (a tombstone's length is 0). The caller holds
// s.mu for writing.
func (s *bm25Scope) dropDead() {
	if s.dead == 0 {
		return
	}
	clear(s.docs[:s.dead])
	s.order = slices.Delete(s.order, 0, s.dead)
	s.olen = slices.Delete(s.olen, 0, s.dead)
	s.docs = slices.Delete(s.docs, 0, s.dead)
	s.dead, s.boundsOK = 0, false
}

// replace makes doc, of length n, the doc at position i, in place: the
// order is unchanged, so the pruning bounds are kept up to date rather
// than rebuilt. The caller holds s.mu for writing.
func (s *bm25Scope) replace(i int, doc []docTF, n float64, near [2]float64) {
	old := s.docs[i]
	if s.boundsOK {
		s.reweigh(i, old, doc, true, true, s.olen[i], n, near)
	}
	s.hold(doc, 1) // first, so a term both hold is never unused
	s.hold(old, -1)
	s.docs[i] = doc
	if s.ctotalOK {
		// Position j's length with neighbours counts i's length once
		// if j = i, with weight near[dist-1] if j is dist away.
		share := 1.0
		for dist := 1; dist <= 2; dist++ {
			for _, j := range [2]int{i - dist, i + dist} {
				if j >= s.dead && j < len(s.order) {
					share += near[dist-1]
				}
			}
		}
		s.ctotal += (n - s.olen[i]) * share
	}
	s.olen[i] = n
}

// remove drops seq's doc, if s holds it. The last doc and the first live
// one go without moving the others (the first becomes a tombstone), so the
// bounds are kept up to date: what a conversation's growth and its
// retention do. The caller holds s.mu for writing.
func (s *bm25Scope) remove(seq int64, near [2]float64) {
	i, ok := slices.BinarySearch(s.order, seq)
	if !ok || i < s.dead {
		return
	}
	last := i == len(s.order)-1
	first := i == s.dead && !last
	if (last || first) && s.boundsOK {
		s.reweigh(i, s.docs[i], nil, true, false, s.olen[i], 0, near)
	} else {
		s.dropDead()
		i, _ = slices.BinarySearch(s.order, seq)
		s.boundsOK = false
	}
	s.hold(s.docs[i], -1)
	n := s.olen[i]
	if first && s.boundsOK {
		if s.ctotalOK {
			// Its length with neighbours leaves the sum, and its own
			// length leaves those of the docs after it.
			d := s.nearLen(i, near)
			for dist := 1; dist <= 2; dist++ {
				if i+dist < len(s.order) {
					d += near[dist-1] * n
				}
			}
			s.ctotal -= d
		}
		s.docs[i], s.olen[i] = nil, 0
		s.dead++
		return
	}
	s.order = slices.Delete(s.order, i, i+1)
	s.olen = slices.Delete(s.olen, i, i+1)
	s.docs = slices.Delete(s.docs, i, i+1)
	if last && s.ctotalOK {
		s.ctotal -= s.appendDelta(n, near) // what appending it added
	} else {
		s.ctotalOK = false
	}
}

// maxOneByOne is the most docs Remove removes one at a time (each costs
// O(docs after it)); more are removed in one pass over the order
// (removeMany).
const maxOneByOne = 8

// removeMany drops the docs seqs (those s holds) in one pass over the
// order, and marks the lengths' sum and the bounds for rebuilding. The
// caller holds s.mu for writing.
func (s *bm25Scope) removeMany(seqs []int64) {
	s.dropDead()
	gone := make(map[int64]struct{}, len(seqs))
	for _, seq := range seqs {
		gone[seq] = struct{}{}
	}
	kept := 0
	for i, seq := range s.order {
		if _, ok := gone[seq]; ok {
			s.hold(s.docs[i], -1)
			continue
		}
		s.order[kept], s.olen[kept], s.docs[kept] = seq, s.olen[i], s.docs[i]
		kept++
	}
	if kept == len(s.order) {
		return
	}
	clear(s.docs[kept:]) // no longer reachable
	s.order, s.olen, s.docs = s.order[:kept], s.olen[:kept], s.docs[:kept]
	s.ctotalOK, s.boundsOK = false, false
}

// recount brings the sum of the docs' lengths with their neighbours' up
// to date after a change that moved docs. The caller holds s.mu for
// writing.
func (s *bm25Scope) recount(near [2]float64) {
	if s.ctotalOK {
		return
	}
	total := 0.0
	for i := s.dead; i < len(s.order); i++ {
		total += s.nearLen(i, near)
	}
	s.ctotal, s.ctotalOK = total, true
}

// appendDelta is how much the sum of the docs' lengths with their
// neighbours grows when a doc of length n joins the end of the order (the
// caller then appends it): its own length, and each pair it makes with the
// two docs before it, counted both ways.
func (s *bm25Scope) appendDelta(n float64, near [2]float64) float64 {
	d := n
	for dist := 1; dist <= 2; dist++ {
		if i := len(s.order) - dist; i >= s.dead {
			d += near[dist-1] * (s.olen[i] + n)
		}
	}
	return d
}

// nearLen is the length of the doc at position i of the order with its
// neighbours'.
func (s *bm25Scope) nearLen(i int, near [2]float64) float64 {
	l := s.olen[i]
	for dist := 1; dist <= 2; dist++ {
		for _, j := range [2]int{i - dist, i + dist} {
			if j >= 0 && j < len(s.olen) {
				l += near[dist-1] * s.olen[j]
			}
		}
	}
	return l
}

// termID returns t's number, numbering it if it is new. The caller holds
// s.mu for writing.
func (s *bm25Scope) termID(t string) int32 {
	if id, ok := s.ids[t]; ok {
		return id
	}
	id := int32(len(s.terms))
	s.ids[t] = id
	s.terms = append(s.terms, t)
	s.own = append(s.own, 0)
	s.cdf = append(s.cdf, 0)
	s.bmax = append(s.bmax, termBounds{})
	s.win = append(s.win, 0)
	s.unused++ // until a doc holds it
	return id
}

// minCompact is how many unused term numbers a scope keeps before it
// renumbers its terms (and only when they are most of them).
const minCompact = 1024

// maybeCompact compacts s when most of its numbered terms are unused. The
// caller holds s.mu for writing, between changes (no doc half built).
func (s *bm25Scope) maybeCompact() {
	if s.unused > minCompact && s.unused > len(s.terms)/2 {
		s.compact()
	}
}

// compact renumbers the terms some doc still holds, dropping the others:
// a scope whose words come and go (a conversation trimmed by retention)
// keeps a dictionary of the words it holds, not of every word it held.
// The caller holds s.mu for writing.
func (s *bm25Scope) compact() {
	renum := make([]int32, len(s.terms))
	held := len(s.terms) - s.unused
	ids := make(map[string]int32, held)
	terms := make([]string, 0, held)
	own := make([]int32, 0, held)
	cdf := make([]int32, 0, held)
	bmax := make([]termBounds, 0, held)
	for old, t := range s.terms {
		if s.own[old] == 0 {
			renum[old] = -1
			continue
		}
		renum[old] = int32(len(terms))
		ids[t] = int32(len(terms))
		terms = append(terms, t)
		own = append(own, s.own[old])
		cdf = append(cdf, s.cdf[old])
		bmax = append(bmax, s.bmax[old])
	}
	for _, doc := range s.docs {
		for i := range doc {
			doc[i].term = renum[doc[i].term]
		}
	}
	s.ids, s.terms, s.own, s.unused = ids, terms, own, 0
	s.cdf, s.bmax, s.win, s.ringAt = cdf, bmax, make([]int32, len(terms)), nil
}
