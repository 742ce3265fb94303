package retrieval

import (
	"cmp"
	"context"
	"math"
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
}

// Tokenize cache bounds: how many texts, and the longest text cached.
const (
	termCacheSize = 4096
	maxCachedDoc  = 4096
)

type bm25Scope struct {
	mu       sync.RWMutex
	docs     map[int64]map[string]float64 // seq → term → weighted frequency
	lens     map[int64]float64            // seq → weighted length in terms
	postings map[string][]posting         // term → its docs, by Seq, with the weighted frequency
	total    float64                      // sum of lens
}

var (
	_ Index        = (*BM25)(nil)
	_ Releaser     = (*BM25)(nil)
	_ ContextAdder = (*BM25)(nil)
)

// BM25Option configures NewBM25.
type BM25Option func(*BM25)

// WithTokenizer makes a BM25 index split docs and queries into terms with
// f instead of Tokenize: for another language's stop words and stemmer,
// or a domain's own terms. f must be deterministic and safe for concurrent
// use. A nil f keeps Tokenize.
func WithTokenizer(f func(text string) []string) BM25Option {
	return func(x *BM25) {
		if f != nil {
			x.tokenizer = f
		}
	}
}

// NewBM25 returns an empty BM25 index.
func NewBM25(opts ...BM25Option) *BM25 {
	terms, _ := lru.New[string, []string](termCacheSize)
	x := &BM25{scopes: make(map[string]*bm25Scope), terms: terms, tokenizer: Tokenize}
	for _, o := range opts {
		if o != nil {
			o(x)
		}
	}
	return x
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
func (x *BM25) String() string { return "BM25(k1=1.2, b=0.75)" }

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
			docs:     make(map[int64]map[string]float64),
			lens:     make(map[int64]float64),
			postings: make(map[string][]posting),
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
		s.docs[p.seq] = p.tf
		s.lens[p.seq] = p.n
		s.total += p.n
		for t, f := range p.tf {
			s.setPosting(t, p.seq, f)
		}
	}
	return nil
}

// AddContext adds c's terms, each occurrence counting c.Weight, to the doc
// with Seq seq in scope (see ContextAdder); it costs O(terms of c.Text).
func (x *BM25) AddContext(ctx context.Context, scope string, seq int64, c Context) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := checkContexts([]Doc{{Seq: seq, Context: []Context{c}}}); err != nil {
		return err
	}
	terms := x.tokenize(c.Text)
	if len(terms) == 0 {
		return nil
	}
	s := x.scope(scope, false)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tf, ok := s.docs[seq]
	if !ok {
		return nil
	}
	for _, t := range terms {
		tf[t] += c.Weight
		s.setPosting(t, seq, tf[t])
	}
	n := c.Weight * float64(len(terms))
	s.lens[seq] += n
	s.total += n
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
func (s *bm25Scope) setPosting(t string, seq int64, f float64) {
	post := s.postings[t]
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
	tf, ok := s.docs[seq]
	if !ok {
		return
	}
	for t := range tf {
		post := s.postings[t]
		if i, ok := slices.BinarySearchFunc(post, seq, cmpPosting); ok {
			post = slices.Delete(post, i, i+1)
		}
		s.postings[t] = post
		if len(post) == 0 {
			delete(s.postings, t)
		}
	}
	s.total -= s.lens[seq]
	delete(s.docs, seq)
	delete(s.lens, seq)
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
	scores := make(map[int64]float64)
	var norm float64
	for _, t := range terms {
		post := s.postings[t]
		idf := math.Log(1 + (float64(n)-float64(len(post))+0.5)/(float64(len(post))+0.5))
		norm += idf * (BM25K1 + 1)
		for _, ps := range post {
			seq, tf := ps.seq, ps.tf
			dl := s.lens[seq]
			scores[seq] += idf * tf * (BM25K1 + 1) / (tf + BM25K1*(1-BM25B+BM25B*dl/avg))
		}
	}
	hits := make([]Hit, 0, len(scores))
	for seq, sc := range scores {
		hits = append(hits, Hit{Seq: seq, Score: sc / norm})
	}
	sortHits(hits)
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits, nil
}

// Delete removes scope's docs.
func (x *BM25) Delete(ctx context.Context, scope string) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	x.Release(scope)
	return nil
}

// Release frees scope's docs (BM25 is in-process only, so this is Delete).
func (x *BM25) Release(scope string) {
	x.mu.Lock()
	delete(x.scopes, scope)
	x.mu.Unlock()
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
