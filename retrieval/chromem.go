package retrieval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/philippgille/chromem-go"
	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
)

// Chromem is a langchaingo vectorstores.VectorStore over one
// github.com/philippgille/chromem-go collection: memstack's embedded vector
// store, in process memory (chromem.NewDB) or persisted to a directory
// (chromem.NewPersistentDB), with no server.
//
// Vectors always come from a langchaingo embedder — the one passed with
// vectorstores.WithEmbedder, else the one given to NewChromem — never from
// chromem's own embedding functions, so nothing calls a remote API behind
// the caller's back. Chromem normalises vectors and scores by cosine
// similarity, in [-1, 1].
//
// Documents get IDs derived from their MetaScope and MetaSeq metadata when
// both are present (as Vector sets them), so adding a re-indexed doc
// replaces the old version; other documents get random IDs. Metadata values
// are stored as strings (chromem's metadata is map[string]string) and
// returned as strings.
//
// Filters (vectorstores.WithFilters) are exact matches on metadata: a
// map[string]string or a map[string]any whose values are formatted with
// fmt.Sprint. Chromem also implements DocumentDeleter. It is safe for
// concurrent use.
type Chromem struct {
	col *chromem.Collection
	emb embeddings.Embedder
	// mu orders deletes against adds and queries: chromem's Delete reads
	// the collection unlocked, and a query sized by Count must not race
	// a delete.
	mu sync.RWMutex
}

var (
	_ vectorstores.VectorStore = (*Chromem)(nil)
	_ DocumentDeleter          = (*Chromem)(nil)
)

// errChromemEmbeds is what the collection's embedding function returns: the
// adapter always supplies vectors, so chromem must never embed on its own.
var errChromemEmbeds = errors.New("retrieval: Chromem computes vectors with a langchaingo embedder only")

// NewChromem returns a vector store over the collection called name in db,
// created if it does not exist. A nil db is a new in-memory database. e is
// the embedder used by calls that pass no vectorstores.WithEmbedder; it may
// be nil when every call passes one (as Vector does). An empty name is an
// error.
func NewChromem(db *chromem.DB, name string, e embeddings.Embedder) (*Chromem, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: NewChromem: the collection name must not be empty", ErrInvalidArgument)
	}
	if db == nil {
		db = chromem.NewDB()
	}
	if isNil(e) {
		e = nil
	}
	refuse := func(context.Context, string) ([]float32, error) { return nil, errChromemEmbeds }
	col, err := db.GetOrCreateCollection(name, nil, refuse)
	if err != nil {
		return nil, fmt.Errorf("retrieval: opening chromem collection %q: %w", name, err)
	}
	return &Chromem{col: col, emb: e}, nil
}

// Collection returns the underlying chromem collection.
func (c *Chromem) Collection() *chromem.Collection { return c.col }

// Count returns the number of documents in the collection.
func (c *Chromem) Count() int { return c.col.Count() }

func (c *Chromem) options(op string, options []vectorstores.Option) (vectorstores.Options, embeddings.Embedder, error) {
	var o vectorstores.Options
	for _, opt := range options {
		if opt != nil {
			opt(&o)
		}
	}
	if o.NameSpace != "" {
		return o, nil, fmt.Errorf("%w: Chromem.%s: name spaces are not supported; use a collection per name space", ErrInvalidArgument, op)
	}
	e := o.Embedder
	if isNil(e) {
		e = c.emb
	}
	if e == nil {
		return o, nil, fmt.Errorf("%w: Chromem.%s: no embedder (pass vectorstores.WithEmbedder or give one to NewChromem)", ErrInvalidArgument, op)
	}
	return o, e, nil
}

// AddDocuments embeds docs and adds them to the collection; it returns
// their IDs. Adding no documents is a no-op. Filters and a score threshold
// make no sense when adding and are rejected; a Deduplicater is honoured.
func (c *Chromem) AddDocuments(ctx context.Context, docs []schema.Document, options ...vectorstores.Option) ([]string, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	o, e, err := c.options("AddDocuments", options)
	if err != nil {
		return nil, err
	}
	if o.Filters != nil || o.ScoreThreshold != 0 {
		return nil, fmt.Errorf("%w: Chromem.AddDocuments: filters and score thresholds apply to searches only", ErrInvalidArgument)
	}
	if o.Deduplicater != nil {
		kept := docs[:0:0]
		for _, d := range docs {
			if !o.Deduplicater(ctx, d) {
				kept = append(kept, d)
			}
		}
		docs = kept
	}
	if len(docs) == 0 {
		return nil, nil
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.PageContent
	}
	vecs, err := e.EmbedDocuments(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(docs) {
		return nil, fmt.Errorf("%w: the embedder returned %d vectors for %d documents", ErrEmbedding, len(vecs), len(docs))
	}
	ids := make([]string, len(docs))
	cdocs := make([]chromem.Document, len(docs))
	for i, d := range docs {
		if zero(vecs[i]) {
			return nil, fmt.Errorf("%w: the embedder returned a zero vector for document %d", ErrEmbedding, i+1)
		}
		id, err := docID(d.Metadata)
		if err != nil {
			return nil, err
		}
		ids[i] = id
		cdocs[i] = chromem.Document{ID: id, Metadata: toStrings(d.Metadata), Embedding: vecs[i], Content: d.PageContent}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.col.AddDocuments(ctx, cdocs, 1); err != nil {
		return nil, fmt.Errorf("retrieval: adding documents to chromem collection %q: %w", c.col.Name, err)
	}
	return ids, nil
}

// SimilaritySearch returns up to numDocuments documents most similar to
// query, best first, with their cosine similarity as Score. Filters are
// exact metadata matches (see Chromem); a score threshold, which must lie
// in [-1, 1], drops documents scoring below it.
func (c *Chromem) SimilaritySearch(ctx context.Context, query string, numDocuments int, options ...vectorstores.Option) ([]schema.Document, error) {
	o, e, err := c.options("SimilaritySearch", options)
	if err != nil {
		return nil, err
	}
	if numDocuments < 1 {
		return nil, fmt.Errorf("%w: Chromem.SimilaritySearch: numDocuments=%d must be at least 1", ErrInvalidArgument, numDocuments)
	}
	if th := float64(o.ScoreThreshold); th < -1 || th > 1 {
		return nil, fmt.Errorf("%w: Chromem.SimilaritySearch: score threshold %v must lie in [-1, 1]", ErrInvalidArgument, th)
	}
	where, err := whereOf(o.Filters)
	if err != nil {
		return nil, err
	}
	if c.col.Count() == 0 {
		return []schema.Document{}, nil
	}
	qv, err := e.EmbedQuery(ctx, query)
	if err != nil {
		return nil, err
	}
	if zero(qv) {
		return nil, fmt.Errorf("%w: the embedder returned a zero vector for the query", ErrEmbedding)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := min(numDocuments, c.col.Count())
	if n == 0 {
		return []schema.Document{}, nil
	}
	res, err := c.col.QueryEmbedding(ctx, qv, n, where, nil)
	if err != nil {
		if strings.Contains(err.Error(), "vectors must have the same length") {
			return nil, fmt.Errorf("%w: chromem collection %q holds vectors of another dimension than the query's (%d): %w",
				ErrSpaceMismatch, c.col.Name, len(qv), err)
		}
		return nil, fmt.Errorf("retrieval: querying chromem collection %q: %w", c.col.Name, err)
	}
	out := make([]schema.Document, 0, len(res))
	for _, r := range res {
		if o.ScoreThreshold != 0 && r.Similarity < o.ScoreThreshold {
			continue
		}
		md := make(map[string]any, len(r.Metadata))
		for k, v := range r.Metadata {
			md[k] = v
		}
		out = append(out, schema.Document{PageContent: r.Content, Metadata: md, Score: r.Similarity})
	}
	return out, nil
}

// DeleteDocuments implements DocumentDeleter: it deletes the documents
// matching filter (a non-empty filter as SimilaritySearch takes).
func (c *Chromem) DeleteDocuments(ctx context.Context, filter any) error {
	where, err := whereOf(filter)
	if err != nil {
		return err
	}
	if len(where) == 0 {
		return fmt.Errorf("%w: Chromem.DeleteDocuments: the filter must not be empty", ErrInvalidArgument)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.col.Count() == 0 {
		return nil
	}
	if err := c.col.Delete(ctx, where, nil); err != nil {
		return fmt.Errorf("retrieval: deleting from chromem collection %q: %w", c.col.Name, err)
	}
	return nil
}

func whereOf(filter any) (map[string]string, error) {
	switch f := filter.(type) {
	case nil:
		return nil, nil
	case map[string]string:
		return f, nil
	case map[string]any:
		return toStrings(f), nil
	}
	return nil, fmt.Errorf("%w: Chromem: filter of type %T; use map[string]string or map[string]any", ErrInvalidArgument, filter)
}

func toStrings(md map[string]any) map[string]string {
	out := make(map[string]string, len(md))
	for k, v := range md {
		if s, ok := v.(string); ok {
			out[k] = s
		} else {
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// docID derives a document's ID from its scope and Seq, or draws a random
// one.
func docID(md map[string]any) (string, error) {
	scope, ok1 := md[MetaScope].(string)
	seq, ok2 := metaInt(md[MetaSeq])
	if ok1 && ok2 {
		sum := sha256.Sum256([]byte(scope))
		return fmt.Sprintf("%s-%d", hex.EncodeToString(sum[:16]), seq), nil
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("retrieval: drawing a document ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func zero(v []float32) bool {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return s == 0 || math.IsNaN(s)
}
