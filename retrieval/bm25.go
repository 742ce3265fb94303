package retrieval

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
)

// BM25 parameters (Robertson et al.; the common defaults, also Lucene's).
const (
	BM25K1 = 1.2
	BM25B  = 0.75
)

// BM25 is an in-process lexical index: Okapi BM25 over Tokenize's terms,
// needing no model. It is memories.Recall's default index.
//
// For a query with distinct terms q1..qn, a doc d scores
//
//	raw(d) = Σ idf(qi) · tf(qi,d) · (k1+1) / (tf(qi,d) + k1 · (1 − b + b · |d|/avgdl))
//	idf(q) = ln(1 + (N − n(q) + 0.5) / (n(q) + 0.5))
//
// with k1 = 1.2, b = 0.75, N the number of docs in the scope, n(q) the
// number containing q, |d| the doc's length in terms and avgdl the mean
// length (the idf is Lucene's, which is never negative). A query term
// repeated counts once. A doc's terms are those of its Text, each
// occurrence counting 1, and those of its Context, each occurrence
// counting the Context's Weight (a weighted bag of words, as BM25F weights
// fields): tf(q,d) and |d| are these weighted counts, and n(q) counts the
// docs with q anywhere.
//
// Scores are normalised to [0, 1): score(d) = raw(d) / Σ idf(qi) · (k1+1),
// the raw score divided by its supremum (every query term present with an
// unbounded frequency). A score is thus the share of the query's weight
// the doc matches — comparable across queries, so one threshold fits all.
// A doc matching a rare query term once, in a doc of average length,
// scores about 0.45 times that term's share of the query's weight.
//
// Only docs that share at least one term with the query are hits; hits are
// ordered by score, then newest (highest Seq) first.
//
// Each scope keeps an inverted index in process memory: Add and Release
// cost O(terms of the doc), Search O(postings of the query terms). BM25 is
// safe for concurrent use.
type BM25 struct {
	mu     sync.RWMutex
	scopes map[string]*bm25Scope
	// terms caches Tokenize's result per text: a doc's text is tokenised
	// again as its neighbours' context (memories.Recall), and re-added
	// when its own context grows.
	terms     *lru.Cache[string, []string]
	tokenizer func(string) []string
	near      [2]float64 // WithNeighbourWeights
}

// Tokenize cache bounds: how many texts, and the longest text cached.
const (
	termCacheSize = 4096
	maxCachedDoc  = 4096
)

// A scope's index holds no pointer per term occurrence: terms are numbered
// (ids, terms), a doc is a slice of (term number, frequency) pairs, and a
// term's postings a slice of (Seq, frequency) pairs, so the garbage
// collector scans a few pointers per doc and per term, not the index.
type bm25Scope struct {
	mu       sync.RWMutex
	ids      map[string]int32  // term → its number
	terms    []string          // number → term
	docs     map[int64][]docTF // seq → its terms with their weighted frequencies
	lens     map[int64]float64 // seq → weighted length in terms
	postings [][]posting       // term number → its docs, by Seq, with the weighted frequency
	unused   int               // numbered terms no doc holds (see compact)
	total    float64           // sum of lens
	// With neighbour weights (WithNeighbourWeights): the docs' Seqs in
	// order, and the sum of the docs' lengths with their neighbours'
	// (ctotal), valid when ctotalOK.
	order    []int64
	olen     []float64 // olen[i] is the length of the doc order[i]
	ctotal   float64
	ctotalOK bool
}

var (
	_ Index    = (*BM25)(nil)
	_ Releaser = (*BM25)(nil)
	_ Remover  = (*BM25)(nil)
)

// BM25Option configures NewBM25. An option with a bad value makes NewBM25
// return an error naming the option.
type BM25Option func(*BM25) error

// WithTokenizer makes a BM25 index split docs and queries into terms with
// f instead of Tokenize: for another language's stop words and stemmer,
// or a domain's own terms. f must be deterministic and safe for concurrent
// use. A nil f keeps Tokenize.
func WithTokenizer(f func(text string) []string) BM25Option {
	return func(x *BM25) error {
		if f != nil {
			x.tokenizer = f
		}
		return nil
	}
}

// WithNeighbourWeights makes a BM25 index score each doc as if the docs
// next to it in Seq order were part of it: every term of the docs just
// before and after it counting w1, of the docs two away w2 — as if each
// doc had been added with those docs' texts as its Context (a test checks
// the two give the same scores) — with each doc indexed only once, so an
// Add costs what it costs without. memories.Recall's index uses it: in a
// conversation the turn that holds an answer often shares no word with
// the question, while the turns around it do. Weights must lie in [0, 1]:
// for another (or NaN), NewBM25 returns an error wrapping
// ErrInvalidArgument that names the option. (0, 0) is no neighbours, the
// default.
func WithNeighbourWeights(w1, w2 float64) BM25Option {
	return func(x *BM25) error {
		for _, w := range []float64{w1, w2} {
			if math.IsNaN(w) || w < 0 || w > 1 {
				return fmt.Errorf("%w: WithNeighbourWeights(%v, %v): weights must lie in [0, 1]", ErrInvalidArgument, w1, w2)
			}
		}
		x.near = [2]float64{w1, w2}
		return nil
	}
}

// NewBM25 returns an empty BM25 index. A nil option, or an option with a
// bad value, is an error wrapping ErrInvalidArgument that names it; NewBM25
// never panics.
func NewBM25(opts ...BM25Option) (*BM25, error) {
	terms, _ := lru.New[string, []string](termCacheSize)
	x := &BM25{scopes: make(map[string]*bm25Scope), terms: terms, tokenizer: Tokenize}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: NewBM25: option %d of %d is nil", ErrInvalidArgument, i+1, len(opts))
		}
		if err := o(x); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// tokenize is the index's tokenizer, cached. The returned slice is
// shared: read only.
func (x *BM25) tokenize(text string) []string {
	if len(text) > maxCachedDoc || x.terms == nil {
		return x.tokenizer(text)
	}
	if t, ok := x.terms.Get(text); ok {
		return t
	}
	t := x.tokenizer(text)
	x.terms.Add(text, t)
	return t
}

// String describes the index.
func (x *BM25) String() string {
	if x.near != [2]float64{} {
		return fmt.Sprintf("BM25(k1=1.2, b=0.75, neighbours %g/%g)", x.near[0], x.near[1])
	}
	return "BM25(k1=1.2, b=0.75)"
}

// Range returns LexicalRange, [0, 1].
func (x *BM25) Range() Range { return LexicalRange }

func (x *BM25) scope(name string, create bool) *bm25Scope {
	x.mu.RLock()
	s := x.scopes[name]
	x.mu.RUnlock()
	if s != nil || !create {
		return s
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if s = x.scopes[name]; s == nil {
		s = &bm25Scope{
			ids:      make(map[string]int32),
			docs:     make(map[int64][]docTF),
			lens:     make(map[int64]float64),
			ctotalOK: true,
		}
		x.scopes[name] = s
	}
	return s
}

// Add indexes docs under scope, replacing docs with the same Seq. A
// Context weight outside (0, 1] is an error wrapping ErrInvalidArgument,
// and nothing is added.
func (x *BM25) Add(ctx context.Context, scope string, docs []Doc) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if len(docs) == 0 {
		return nil
	}
	if err := checkContexts(docs); err != nil {
		return err
	}
	type prepared struct {
		seq int64
		tf  map[string]float64
		n   float64
	}
	prep := make([]prepared, len(docs))
	for i, d := range docs {
		terms := x.tokenize(d.Text)
		size := len(terms)
		ctx := make([][]string, len(d.Context))
		for j, c := range d.Context {
			ctx[j] = x.tokenize(c.Text)
			size += len(ctx[j])
		}
		tf := make(map[string]float64, size)
		for _, t := range terms {
			tf[t]++
		}
		n := float64(len(terms))
		for j, c := range d.Context {
			for _, t := range ctx[j] {
				tf[t] += c.Weight
			}
			n += c.Weight * float64(len(ctx[j]))
		}
		prep[i] = prepared{d.Seq, tf, n}
	}
	s := x.scope(scope, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range prep {
		s.remove(p.seq)
		if n := len(s.order); n == 0 || s.order[n-1] < p.seq {
			if s.ctotalOK {
				s.ctotal += s.appendDelta(p.seq, p.n, x.near)
			}
			s.order = append(s.order, p.seq)
			s.olen = append(s.olen, p.n)
		} else {
			i, _ := slices.BinarySearch(s.order, p.seq)
			s.order = slices.Insert(s.order, i, p.seq)
			s.olen = slices.Insert(s.olen, i, p.n)
			s.ctotalOK = false
		}
		doc := make([]docTF, 0, len(p.tf))
		for t, f := range p.tf {
			id := s.termID(t)
			doc = append(doc, docTF{id, f})
			s.setPosting(id, p.seq, f)
		}
		s.docs[p.seq] = doc
		s.lens[p.seq] = p.n
		s.total += p.n
	}
	s.recount(x.near)
	s.maybeCompact()
	return nil
}

// recount brings the sum of the docs' lengths with their neighbours' up
// to date after an insertion or a removal. The caller holds s.mu for
// writing.
func (s *bm25Scope) recount(near [2]float64) {
	if s.ctotalOK {
		return
	}
	total := 0.0
	for i := range s.order {
		total += s.nearLen(i, near)
	}
	s.ctotal, s.ctotalOK = total, true
}

// docTF is one term of a doc: its number and weighted frequency.
type docTF struct {
	term int32
	tf   float64
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
	s.postings = append(s.postings, nil)
	s.unused++ // until setPosting gives it a doc
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
	ids := make(map[string]int32, len(s.terms)-s.unused)
	terms := make([]string, 0, len(s.terms)-s.unused)
	postings := make([][]posting, 0, len(s.terms)-s.unused)
	for old, t := range s.terms {
		if len(s.postings[old]) == 0 {
			renum[old] = -1
			continue
		}
		renum[old] = int32(len(terms))
		ids[t] = int32(len(terms))
		terms = append(terms, t)
		postings = append(postings, s.postings[old])
	}
	for _, doc := range s.docs {
		for i := range doc {
			doc[i].term = renum[doc[i].term]
		}
	}
	s.ids, s.terms, s.postings, s.unused = ids, terms, postings, 0
}

// postingsOf returns t's postings (nil for a term the scope never held).
// The caller holds s.mu.
func (s *bm25Scope) postingsOf(t string) []posting {
	if id, ok := s.ids[t]; ok {
		return s.postings[id]
	}
	return nil
}

// posting is one doc of a term's postings.
type posting struct {
	seq int64
	tf  float64
}

func cmpPosting(p posting, seq int64) int { return cmp.Compare(p.seq, seq) }

// setPosting sets term t's frequency in doc seq. Postings are kept in Seq
// order; docs arrive newest last, so this is an append or an update of
// the last entries, not a map insertion. The caller holds s.mu for
// writing.
func (s *bm25Scope) setPosting(t int32, seq int64, f float64) {
	post := s.postings[t]
	if len(post) == 0 {
		s.unused--
	}
	if n := len(post); n == 0 || post[n-1].seq < seq {
		s.postings[t] = append(post, posting{seq, f})
		return
	}
	i, ok := slices.BinarySearchFunc(post, seq, cmpPosting)
	if ok {
		post[i].tf = f
		return
	}
	s.postings[t] = slices.Insert(post, i, posting{seq, f})
}

// remove drops seq's doc from s. The caller holds s.mu for writing.
func (s *bm25Scope) remove(seq int64) {
	doc, ok := s.docs[seq]
	if !ok {
		return
	}
	for _, d := range doc {
		post := s.postings[d.term]
		if i, ok := slices.BinarySearchFunc(post, seq, cmpPosting); ok {
			post = slices.Delete(post, i, i+1)
		}
		if len(post) == 0 {
			post = nil // the term's number stays, its array goes
			s.unused++
		}
		s.postings[d.term] = post
	}
	s.total -= s.lens[seq]
	delete(s.docs, seq)
	delete(s.lens, seq)
	if i, ok := slices.BinarySearch(s.order, seq); ok {
		s.order = slices.Delete(s.order, i, i+1)
		s.olen = slices.Delete(s.olen, i, i+1)
	}
	s.ctotalOK = false
}

// Search returns the k best docs of scope for query (see BM25 for the
// scoring). An empty query, or one made only of stop words, has no hits.
func (x *BM25) Search(ctx context.Context, scope, query string, k int) ([]Hit, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if err := checkK(k); err != nil {
		return nil, err
	}
	if strings.TrimSpace(query) == "" {
		return nil, nil
	}
	terms := slices.Clone(x.tokenize(query))
	slices.Sort(terms)
	terms = slices.Compact(terms)
	if len(terms) == 0 {
		return nil, nil
	}
	s := x.scope(scope, false)
	if s == nil {
		return nil, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := len(s.docs)
	if n == 0 {
		return nil, nil
	}
	avg := s.total / float64(n)
	if avg == 0 {
		avg = 1
	}
	if x.near != [2]float64{} {
		return s.searchNear(terms, k, x.near), nil
	}
	scores := make(map[int64]float64)
	var norm float64
	for _, t := range terms {
		post := s.postingsOf(t)
		idf := math.Log(1 + (float64(n)-float64(len(post))+0.5)/(float64(len(post))+0.5))
		norm += idf * (BM25K1 + 1)
		for _, ps := range post {
			seq, tf := ps.seq, ps.tf
			dl := s.lens[seq]
			scores[seq] += idf * tf * (BM25K1 + 1) / (tf + BM25K1*(1-BM25B+BM25B*dl/avg))
		}
	}
	top := newTopK(k)
	for seq, sc := range scores {
		top.offer(Hit{Seq: seq, Score: sc / norm})
	}
	return top.hits(), nil
}

// appendDelta is how much the sum of the docs' lengths with their
// neighbours grows when a doc of length n and Seq seq joins the end of
// the order (the caller then appends it): its own length, and each pair
// it makes with the two docs before it, counted both ways.
func (s *bm25Scope) appendDelta(seq int64, n float64, near [2]float64) float64 {
	d := n
	for dist := 1; dist <= 2; dist++ {
		if i := len(s.order) - dist; i >= 0 {
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

// searchNear is Search with neighbour weights (see WithNeighbourWeights):
// the same scoring over each doc's terms and its neighbours', weighted.
// It goes term by term: the term's weighted frequency at every position
// its postings reach, then its idf (its df is the number of positions
// reached), then each reached doc's score grows by the term's share, so
// the working arrays hold one value a doc whatever the number of terms.
// They come from nearBufs and go back there zeroed: a search allocates
// what it returns, not what it scores. The caller holds s.mu for reading.
func (s *bm25Scope) searchNear(terms []string, k int, near [2]float64) []Hit {
	n := len(s.order)
	avg := s.ctotal / float64(n) // Add keeps ctotal up to date
	if avg == 0 {
		avg = 1
	}
	weight := [5]float64{near[1], near[0], 1, near[0], near[1]} // by offset -2..2
	// The buffer goes back only when the search ends normally: a panic
	// midway (recovered by a caller) leaves it dirty, so it is dropped.
	buf := getNearBuf()
	if cap(buf.score) < n {
		buf.score, buf.tf, buf.kd = make([]float64, n), make([]float64, n), make([]float64, n)
	}
	score, tf, kd := buf.score[:n], buf.tf[:n], buf.kd[:n]
	cand, reached, kdSet := buf.cand[:0], buf.reached[:0], buf.kdSet[:0]
	var norm float64
	for _, t := range terms {
		reached = reached[:0]
		from := 0
		for _, ps := range s.postingsOf(t) {
			// Postings and order are both in Seq order, and every
			// posting's Seq is in the order: search forward, from just
			// after the last one found.
			p, ok := seekSeq(s.order, from, ps.seq)
			if !ok {
				continue
			}
			from = p + 1
			for off := -2; off <= 2; off++ {
				d, w := p+off, weight[off+2]
				if d < 0 || d >= n || w*ps.tf == 0 {
					continue
				}
				if tf[d] == 0 {
					reached = append(reached, int32(d))
				}
				tf[d] += w * ps.tf
			}
		}
		df := float64(len(reached))
		idf := math.Log(1 + (float64(n)-df+0.5)/(df+0.5))
		norm += idf * (BM25K1 + 1)
		for _, d := range reached {
			f := tf[d]
			tf[d] = 0
			// The doc's length term, the same for every query term:
			// computed at its first term, kept for the others (always
			// > 0, so 0 marks "not yet").
			kn := kd[d]
			if kn == 0 {
				kn = BM25K1 * (1 - BM25B + BM25B*s.nearLen(int(d), near)/avg)
				kd[d] = kn
				kdSet = append(kdSet, d)
			}
			c := idf * f * (BM25K1 + 1) / (f + kn)
			if c == 0 {
				continue // only with weights so small the product underflows
			}
			if score[d] == 0 {
				cand = append(cand, d) // score stays > 0 from here on
			}
			score[d] += c
		}
	}
	top := newTopK(k)
	for _, d := range cand {
		top.offer(Hit{Seq: s.order[d], Score: score[d] / norm})
		score[d] = 0 // the buffer goes back zeroed
	}
	for _, d := range kdSet {
		kd[d] = 0
	}
	buf.cand, buf.reached, buf.kdSet = cand, reached, kdSet
	buf.put()
	return top.hits()
}

// seekSeq returns the position of seq in order, searching from position
// from on (order is sorted, and seq is not before order[from]), and
// whether it is there; if not, the position it would have. It gallops:
// the cost grows with the log of the distance moved, so a walk through
// the postings of a term most docs hold costs O(1) a posting.
func seekSeq(order []int64, from int, seq int64) (int, bool) {
	if from < len(order) && order[from] >= seq {
		return from, order[from] == seq
	}
	lo, step := from, 1
	hi := lo + step
	for hi < len(order) && order[hi] < seq {
		lo = hi
		step *= 2
		hi = lo + step
	}
	hi = min(hi+1, len(order)) // order[hi] >= seq: in the range
	i, ok := slices.BinarySearch(order[lo:hi], seq)
	return lo + i, ok
}

// nearBuf is searchNear's working arrays, kept between searches: score,
// tf and kd are all zeros when it is put back.
type nearBuf struct {
	score, tf, kd        []float64 // by position in the order
	cand, reached, kdSet []int32   // positions
}

// maxKeptBuf bounds the buffers kept for the next search, in elements: a
// search of a huge scope does not pin its arrays.
const maxKeptBuf = 1 << 20

// nearBufs keeps a few buffers between searches (as many as searches can
// run at once, GOMAXPROCS): unlike a sync.Pool, which a garbage collection
// empties, it keeps them, so a search of a large scope does not allocate
// its arrays again after every collection.
var nearBufs = make(chan *nearBuf, max(runtime.GOMAXPROCS(0), 2))

// getNearBuf returns a kept buffer, or a new one.
func getNearBuf() *nearBuf {
	select {
	case b := <-nearBufs:
		return b
	default:
		return new(nearBuf)
	}
}

func (b *nearBuf) put() {
	if cap(b.score) > maxKeptBuf {
		return
	}
	select {
	case nearBufs <- b:
	default: // enough are kept
	}
}

// topK keeps the k best hits offered (see sortHits' order) in a bounded
// heap: O(log k) an offer, k hits of memory.
type topK struct {
	k int
	h hitHeap
}

func newTopK(k int) *topK { return &topK{k: k, h: make(hitHeap, 0, min(k, 64))} }

func (t *topK) offer(x Hit) {
	if len(t.h) < t.k {
		heap.Push(&t.h, x)
		return
	}
	if better(x, t.h[0]) {
		t.h[0] = x
		heap.Fix(&t.h, 0)
	}
}

// hits returns the kept hits, best first.
func (t *topK) hits() []Hit {
	out := []Hit(t.h)
	sortHits(out)
	return out
}

// Delete removes scope's docs.
func (x *BM25) Delete(ctx context.Context, scope string) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	x.Release(scope)
	return nil
}

// Remove implements Remover: it drops scope's docs with the given Seqs
// (Seqs it does not hold are ignored), in O(terms of those docs).
func (x *BM25) Remove(ctx context.Context, scope string, seqs []int64) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s := x.scope(scope, false)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seq := range seqs {
		s.remove(seq)
	}
	s.recount(x.near)
	s.maybeCompact()
	return nil
}

// Release frees scope's docs (BM25 is in-process only, so this is Delete).
func (x *BM25) Release(scope string) {
	x.mu.Lock()
	delete(x.scopes, scope)
	x.mu.Unlock()
}

// better reports whether a ranks before b (see sortHits).
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Seq > b.Seq
}

// hitHeap is a min-heap of hits: the worst kept hit on top.
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

// sortHits orders hits by score, best first, then newest (highest Seq)
// first.
func sortHits(hits []Hit) {
	slices.SortFunc(hits, func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		case a.Seq > b.Seq:
			return -1
		case a.Seq < b.Seq:
			return 1
		}
		return 0
	})
}
