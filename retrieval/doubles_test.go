package retrieval_test

import (
	"context"
	"errors"
	"hash/fnv"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memstack/memstack/retrieval"
	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
)

// hashEmbedder is the embeddings.Embedder test double: a deterministic
// bag of words — every token (retrieval.Tokenize) adds 1 to the component
// its FNV hash selects — in dim dimensions (64 by default). Texts sharing
// words get similar vectors. It counts calls and texts, and can fail, be
// slow, or change its dimension.
type hashEmbedder struct {
	dim   atomic.Int32
	fail  atomic.Bool
	delay time.Duration

	docCalls, queryCalls, texts atomic.Int64
}

var _ embeddings.Embedder = (*hashEmbedder)(nil)

var errEmbedderDown = errors.New("embedder is down")

func newHashEmbedder(dim int) *hashEmbedder {
	e := &hashEmbedder{}
	e.dim.Store(int32(dim))
	return e
}

func (e *hashEmbedder) vector(text string) []float32 {
	v := make([]float32, e.dim.Load())
	toks := retrieval.Tokenize(text)
	for _, t := range toks {
		h := fnv.New32a()
		h.Write([]byte(t))
		v[int(h.Sum32()%uint32(len(v)))]++
	}
	if len(toks) == 0 {
		v[0] = 1 // never the zero vector
	}
	return v
}

func (e *hashEmbedder) wait(ctx context.Context) error {
	if e.delay > 0 {
		select {
		case <-time.After(e.delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if e.fail.Load() {
		return errEmbedderDown
	}
	return nil
}

func (e *hashEmbedder) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	e.docCalls.Add(1)
	e.texts.Add(int64(len(texts)))
	if err := e.wait(ctx); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e.vector(t)
	}
	return out, nil
}

func (e *hashEmbedder) EmbedQuery(ctx context.Context, text string) ([]float32, error) {
	e.queryCalls.Add(1)
	if err := e.wait(ctx); err != nil {
		return nil, err
	}
	return e.vector(text), nil
}

func (e *hashEmbedder) calls() int64 { return e.docCalls.Load() + e.queryCalls.Load() }

// sliceStore is a minimal vectorstores.VectorStore of the kind most
// langchaingo stores are: it appends every document (no IDs, so a document
// added twice is there twice), embeds with the WithEmbedder embedder,
// scores by cosine and — unless leaky — honours map[string]any filters by
// exact match. A leaky store ignores filters, like a store whose filter
// syntax differs.
type sliceStore struct {
	leaky bool

	mu   sync.Mutex
	docs []schema.Document
	vecs [][]float32
}

var _ vectorstores.VectorStore = (*sliceStore)(nil)

func opts(options []vectorstores.Option) vectorstores.Options {
	var o vectorstores.Options
	for _, f := range options {
		f(&o)
	}
	return o
}

func (s *sliceStore) AddDocuments(ctx context.Context, docs []schema.Document, options ...vectorstores.Option) ([]string, error) {
	o := opts(options)
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.PageContent
	}
	vecs, err := o.Embedder.EmbedDocuments(ctx, texts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs = append(s.docs, docs...)
	s.vecs = append(s.vecs, vecs...)
	return make([]string, len(docs)), nil
}

func (s *sliceStore) SimilaritySearch(ctx context.Context, query string, n int, options ...vectorstores.Option) ([]schema.Document, error) {
	o := opts(options)
	q, err := o.Embedder.EmbedQuery(ctx, query)
	if err != nil {
		return nil, err
	}
	filter, _ := o.Filters.(map[string]any)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []schema.Document
	for i, d := range s.docs {
		match := true
		for k, v := range filter {
			if d.Metadata[k] != v {
				match = false
			}
		}
		if !match && !s.leaky {
			continue
		}
		d.Score = float32(cosine(q, s.vecs[i]))
		out = append(out, d)
	}
	slices.SortStableFunc(out, func(a, b schema.Document) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

func (s *sliceStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.docs)
}

func cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.NaN()
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

// fixedIndex is a retrieval.Index double with a fixed ranking or error; it
// records the docs added to it.
type fixedIndex struct {
	hits []retrieval.Hit
	err  error
	rng  retrieval.Range

	mu       sync.Mutex
	added    []retrieval.Doc
	released []string
}

func (f *fixedIndex) Add(_ context.Context, _ string, docs []retrieval.Doc) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.added = append(f.added, docs...)
	return f.err
}

func (f *fixedIndex) Search(_ context.Context, _, _ string, k int) ([]retrieval.Hit, error) {
	if f.err != nil {
		return nil, f.err
	}
	return slices.Clone(f.hits[:min(k, len(f.hits))]), nil
}

func (f *fixedIndex) Delete(context.Context, string) error { return f.err }

func (f *fixedIndex) Range() retrieval.Range { return f.rng }

func (f *fixedIndex) Release(scope string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, scope)
}

func (f *fixedIndex) addedSeqs() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []int64
	for _, d := range f.added {
		out = append(out, d.Seq)
	}
	return out
}
