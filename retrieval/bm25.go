package retrieval

import (
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
// Each scope keeps its docs and, per term, bounds of its share of the
// score by block of neighbouring docs, in process memory. What a
// conversation does costs O(terms of the docs near the change): Add of a
// doc that joins the end of the scope's order or replaces one, Remove of
// the newest or the oldest doc. Other changes (a doc inserted before the
// end, one removed from the middle, a batch of more than a quarter of the
// scope) rebuild the bounds, O(terms of the scope's docs), as does a mean
// doc length that moved by half since they were built. Search bounds the blocks its
// terms reach and scores only those that can hold one of the k best (see
// bm25_prune.go): on a long conversation a few in a thousand of its docs.
// Its allocations are what it returns. BM25 is safe for concurrent use.
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
		s = newBM25Scope()
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
	s.add(prep, x.near)
	return nil
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
	if s.live() == 0 {
		return nil, nil
	}
	return s.searchNear(terms, k, x.near), nil
}

// nearBuf is searchNear's working arrays, kept between searches: bound and
// seen are all zeros when it is put back.
type nearBuf struct {
	bound     []float64 // by block
	seen      []bool    // by superblock
	touched   []int32   // superblocks
	cands     candHeap
	qs        []qterm
	qmark     []int32   // term number → index+1 in qs (else 0)
	f         []float64 // by query term and position in a block
	stretched [stretchBuckets + 1]float64
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
	if cap(b.bound) > maxKeptBuf || cap(b.qmark) > maxKeptBuf || cap(b.f) > maxKeptBuf {
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
// (Seqs it does not hold are ignored). Removing the newest or the oldest
// doc costs O(terms of the docs near it); removing others, or more than a
// few at once, rebuilds the scope's bounds (O(terms of its docs)).
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
	if len(seqs) <= maxOneByOne {
		for _, seq := range seqs {
			s.remove(seq, x.near)
		}
	} else {
		s.removeMany(seqs)
	}
	s.settle(x.near)
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
