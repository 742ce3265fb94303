package retrieval

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/memstack/memstack/observe"
	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
)

// Metadata keys a Vector sets on every document it adds. Searches filter on
// MetaScope and check MetaScope, MetaEmbedder and MetaDim of every result.
const (
	MetaScope    = "memstack_scope"
	MetaSeq      = "memstack_seq"
	MetaThrough  = "memstack_through"
	MetaEmbedder = "memstack_embedder"
	MetaDim      = "memstack_dim"
	// MetaSource is the Doc's Source, set only when it is not "".
	MetaSource = "memstack_source"
)

// Vector is a vector index over any langchaingo embeddings.Embedder and any
// vectorstores.VectorStore (NewChromem is the embedded one).
//
// # Documents
//
// Each Doc becomes one schema.Document whose PageContent is the Doc's text
// and whose metadata holds MetaScope (the scope), MetaSeq, MetaThrough,
// MetaEmbedder and MetaDim (the vector space). Searches pass
// vectorstores.WithFilters(filter(scope)) — by default
// map[string]any{MetaScope: scope}, which pgvector, chroma and Chromem
// understand; set another with WithScopeFilter — and then check every
// result's MetaScope again, so even a store that ignores filters can never
// leak another scope's document (it only finds fewer). A store keeps the
// document of a re-indexed doc (an exchange that grew) twice unless it
// replaces by ID as Chromem does; results are de-duplicated by Seq, keeping
// the newest version.
//
// # Embedding
//
// Unless WithStoreEmbedder is set, the Vector embeds a batch itself first —
// one EmbedDocuments call, which also tells it the dimension before the
// documents are written — and hands the store, through
// vectorstores.WithEmbedder, an embedder that returns those vectors without
// calling the model again (pgvector, redisvector, mongovector and Chromem
// honour WithEmbedder; langchaingo's chroma store rejects it, so use
// WithStoreEmbedder there). Queries are embedded through the same option.
// Every call to the model is counted as observe.EmbeddingCall in the
// recorder of the call's context. With WithStoreEmbedder the store embeds
// with its own embedder, and the Vector can neither count those calls nor
// check dimensions (give WithDimension so the metadata holds it).
//
// # Vector space
//
// The space is the embedder's name (WithEmbedderName; by default its Go
// type, which does not tell two models behind one client type apart — name
// it) and dimension (WithDimension, or detected from the first vector).
// A vector of another dimension is an error wrapping ErrDimensionChanged;
// a search result from another space an error wrapping ErrSpaceMismatch.
// Vector implements Durable, so memories.Recall records the space and
// refuses a different one after a restart.
//
// # Failures
//
// An embedder error, and an embedder that panics, fail the operation with
// an error wrapping ErrEmbedding; a vector store that fails or panics fails
// it with an error naming the store. A panic never reaches the caller.
// Calls honour ctx only as far as the embedder and the store do: one that
// ignores its context is bounded by the caller (memories.Recall abandons
// it; see memories.Recall, "Failures").
//
// Scores are the store's similarity scores: cosine similarity in [-1, 1]
// for Chromem and pgvector. Vector is safe for concurrent use if its
// embedder and store are.
type Vector struct {
	emb         embeddings.Embedder
	vs          vectorstores.VectorStore
	name        string
	filter      func(scope string) any
	storeEmbeds bool
	// queries keeps the vectors of the last queries embedded: a caller
	// that searches again with the same query (asking for more hits, as
	// memories.Recall does when hits it cannot show crowd the ones it
	// wants) costs no second model call.
	queries *lru.Cache[string, []float32]

	mu  sync.Mutex
	dim int
}

// queryCacheSize is how many query vectors a Vector keeps.
const queryCacheSize = 16

var (
	_ Durable = (*Vector)(nil)
	_ Remover = (*Vector)(nil)
)

// VectorOption configures a Vector.
type VectorOption func(*Vector) error

// WithEmbedderName names the embedding model ("openai/text-embedding-3-small"):
// the name is stored with every vector and compared on every search and
// after every restart. Default: the embedder's Go type. An empty name is
// an error.
func WithEmbedderName(name string) VectorOption {
	return func(v *Vector) error {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("%w: WithEmbedderName(%q): the name must not be empty", ErrInvalidArgument, name)
		}
		v.name = name
		return nil
	}
}

// WithDimension declares the embedder's dimension, checked on every vector
// (default: detected from the first vector). d < 1 is an error.
func WithDimension(d int) VectorOption {
	return func(v *Vector) error {
		if d < 1 {
			return fmt.Errorf("%w: WithDimension(%d): the dimension must be at least 1", ErrInvalidArgument, d)
		}
		v.dim = d
		return nil
	}
}

// WithScopeFilter sets the value passed to vectorstores.WithFilters to
// restrict a search to one scope, for stores whose filter syntax differs
// from the default map[string]any{MetaScope: scope}. Results are checked
// again whatever the store does with it. A nil function is an error.
func WithScopeFilter(filter func(scope string) any) VectorOption {
	return func(v *Vector) error {
		if filter == nil {
			return fmt.Errorf("%w: WithScopeFilter(nil): the filter must not be nil", ErrInvalidArgument)
		}
		v.filter = filter
		return nil
	}
}

// WithStoreEmbedder makes the Vector leave embedding to the store's own
// embedder (the one the store was built with): for stores that reject
// vectorstores.WithEmbedder, such as langchaingo's chroma. The embedder
// given to NewVector is then not called, and embedding calls are neither
// counted nor dimension-checked.
func WithStoreEmbedder() VectorOption {
	return func(v *Vector) error {
		v.storeEmbeds = true
		return nil
	}
}

// NewVector returns a vector index that embeds with e and keeps vectors in
// vs. A nil e or vs (including a typed nil) is an error, as is a bad option.
func NewVector(e embeddings.Embedder, vs vectorstores.VectorStore, opts ...VectorOption) (*Vector, error) {
	if isNil(e) {
		return nil, fmt.Errorf("%w: NewVector: the embedder is nil", ErrInvalidArgument)
	}
	if isNil(vs) {
		return nil, fmt.Errorf("%w: NewVector: the vector store is nil", ErrInvalidArgument)
	}
	queries, err := lru.New[string, []float32](queryCacheSize)
	if err != nil {
		return nil, fmt.Errorf("retrieval: NewVector: %w", err)
	}
	v := &Vector{
		emb:     e,
		vs:      vs,
		name:    fmt.Sprintf("%T", e),
		filter:  func(scope string) any { return map[string]any{MetaScope: scope} },
		queries: queries,
	}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: NewVector: option %d of %d is nil", ErrInvalidArgument, i+1, len(opts))
		}
		if err := o(v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func isNil(x any) bool {
	if x == nil {
		return true
	}
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Interface, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// String describes the index.
func (v *Vector) String() string {
	return fmt.Sprintf("Vector(embedder=%s, store=%T)", v.space(), v.vs)
}

// Range returns CosineRange, [-1, 1].
func (v *Vector) Range() Range { return CosineRange }

func (v *Vector) space() Space {
	v.mu.Lock()
	defer v.mu.Unlock()
	return Space{Embedder: v.name, Dim: v.dim}
}

// Spaces returns the index's one space.
func (v *Vector) Spaces() []Space { return []Space{v.space()} }

// CheckSpaces implements Durable: recorded must be one space with the
// index's embedder name and, if both dimensions are known, its dimension.
func (v *Vector) CheckSpaces(recorded []Space) error {
	if len(recorded) == 0 {
		return nil
	}
	if len(recorded) != 1 {
		return fmt.Errorf("%w: %d spaces were recorded; this vector index has one, %s", ErrSpaceMismatch, len(recorded), v.space())
	}
	r := recorded[0]
	v.mu.Lock()
	defer v.mu.Unlock()
	own := Space{Embedder: v.name, Dim: v.dim}
	if r.Embedder != v.name || (r.Dim != 0 && v.dim != 0 && r.Dim != v.dim) {
		return fmt.Errorf("%w: the stored vectors come from %s, this index embeds with %s", ErrSpaceMismatch, r, own)
	}
	if v.dim == 0 && r.Dim != 0 {
		v.dim = r.Dim
	}
	return nil
}

// checkDim checks a vector against the space's dimension, adopting it if
// not known yet.
func (v *Vector) checkDim(vec []float32) error {
	if len(vec) == 0 {
		return fmt.Errorf("%w: the embedder returned an empty vector", ErrEmbedding)
	}
	for _, x := range vec {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%w: the embedder returned a vector with a NaN or infinite component", ErrEmbedding)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dim == 0 {
		v.dim = len(vec)
		return nil
	}
	if len(vec) != v.dim {
		return fmt.Errorf("%w: embedder %q returned a vector of dimension %d; the index's vectors have dimension %d",
			ErrDimensionChanged, v.name, len(vec), v.dim)
	}
	return nil
}

// metered is the embedder handed to the store for one call: it counts and
// checks every model call, serves the vectors the Vector computed first,
// and remembers the first failure so the Vector can report it precisely
// whatever the store does with it.
type metered struct {
	v      *Vector
	rec    *observe.Recorder
	cached map[string][]float32

	mu  sync.Mutex
	err error
}

func (v *Vector) meter(ctx context.Context) *metered {
	return &metered{v: v, rec: observe.FromContext(ctx)}
}

func (m *metered) fail(err error) error {
	m.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.mu.Unlock()
	return err
}

func (m *metered) failure() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// EmbedDocuments implements embeddings.Embedder.
func (m *metered) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	if m.cached != nil {
		out := make([][]float32, len(texts))
		hit := true
		for i, t := range texts {
			vec, ok := m.cached[t]
			if !ok {
				hit = false
				break
			}
			out[i] = vec
		}
		if hit {
			return out, nil
		}
	}
	m.rec.EmbeddingCall(1)
	vecs, err := m.embedDocuments(ctx, texts)
	if err != nil {
		return nil, m.fail(fmt.Errorf("%w: embedding %d texts with %q: %w", ErrEmbedding, len(texts), m.v.name, err))
	}
	if len(vecs) != len(texts) {
		return nil, m.fail(fmt.Errorf("%w: embedder %q returned %d vectors for %d texts", ErrEmbedding, m.v.name, len(vecs), len(texts)))
	}
	for _, vec := range vecs {
		if err := m.v.checkDim(vec); err != nil {
			return nil, m.fail(err)
		}
	}
	return vecs, nil
}

// EmbedQuery implements embeddings.Embedder: a query embedded lately, in
// the Vector's space, is served from the Vector's cache without a model
// call.
func (m *metered) EmbedQuery(ctx context.Context, text string) ([]float32, error) {
	if vec, ok := m.v.queries.Get(text); ok && m.v.checkDim(vec) == nil {
		return vec, nil
	}
	m.rec.EmbeddingCall(1)
	vec, err := m.embedQuery(ctx, text)
	if err != nil {
		return nil, m.fail(fmt.Errorf("%w: embedding a query with %q: %w", ErrEmbedding, m.v.name, err))
	}
	if err := m.v.checkDim(vec); err != nil {
		return nil, m.fail(err)
	}
	m.v.queries.Add(text, vec)
	return vec, nil
}

// embedDocuments calls the embedder; a panic is an error.
func (m *metered) embedDocuments(ctx context.Context, texts []string) (vecs [][]float32, err error) {
	defer catch(&err, "the embedder")
	return m.v.emb.EmbedDocuments(ctx, texts)
}

// embedQuery calls the embedder; a panic is an error.
func (m *metered) embedQuery(ctx context.Context, text string) (vec []float32, err error) {
	defer catch(&err, "the embedder")
	return m.v.emb.EmbedQuery(ctx, text)
}

// addDocuments, similaritySearch and deleteDocuments call the vector
// store; a panic is an error.
func (v *Vector) addDocuments(ctx context.Context, docs []schema.Document, opts []vectorstores.Option) (_ []string, err error) {
	defer catch(&err, "the vector store %T", v.vs)
	return v.vs.AddDocuments(ctx, docs, opts...)
}

func (v *Vector) similaritySearch(ctx context.Context, query string, n int, opts []vectorstores.Option) (_ []schema.Document, err error) {
	defer catch(&err, "the vector store %T", v.vs)
	return v.vs.SimilaritySearch(ctx, query, n, opts...)
}

func deleteDocuments(ctx context.Context, d DocumentDeleter, filter any) (err error) {
	defer catch(&err, "the vector store %T", d)
	return d.DeleteDocuments(ctx, filter)
}

// storeErr returns the error to report for a failed store call: the
// embedder's own failure if there was one (the store may have wrapped it
// with %v or not at all), else the store's error.
func (m *metered) storeErr(op string, err error) error {
	if f := m.failure(); f != nil {
		return f
	}
	return fmt.Errorf("retrieval: %s in vector store %T: %w", op, m.v.vs, err)
}

// Add embeds docs and adds them to the store under scope.
func (v *Vector) Add(ctx context.Context, scope string, docs []Doc) error {
	return v.AddSince(ctx, scope, docs, math.MinInt64)
}

// AddSince implements Durable: it adds the docs with Through > since.
func (v *Vector) AddSince(ctx context.Context, scope string, docs []Doc, since int64) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	texts := make([]string, 0, len(docs))
	keep := make([]Doc, 0, len(docs))
	for _, d := range docs {
		if d.Through > since && strings.TrimSpace(d.Text) != "" {
			keep = append(keep, d)
			texts = append(texts, d.Text)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	m := v.meter(ctx)
	var opts []vectorstores.Option
	if !v.storeEmbeds {
		vecs, err := m.EmbedDocuments(ctx, texts)
		if err != nil {
			return err
		}
		m.cached = make(map[string][]float32, len(texts))
		for i, t := range texts {
			m.cached[t] = vecs[i]
		}
		opts = append(opts, vectorstores.WithEmbedder(m))
	}
	sp := v.space()
	sdocs := make([]schema.Document, len(keep))
	for i, d := range keep {
		sdocs[i] = schema.Document{
			PageContent: d.Text,
			Metadata: map[string]any{
				MetaScope:    scope,
				MetaSeq:      d.Seq,
				MetaThrough:  d.Through,
				MetaEmbedder: sp.Embedder,
				MetaDim:      sp.Dim,
			},
		}
		if d.Source != "" {
			sdocs[i].Metadata[MetaSource] = d.Source
		}
	}
	if _, err := v.addDocuments(ctx, sdocs, opts); err != nil {
		return m.storeErr("adding documents", err)
	}
	return nil
}

// Search embeds query and returns the k most similar docs of scope.
func (v *Vector) Search(ctx context.Context, scope, query string, k int) ([]Hit, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if err := checkK(k); err != nil {
		return nil, err
	}
	if strings.TrimSpace(query) == "" {
		return nil, nil
	}
	m := v.meter(ctx)
	opts := []vectorstores.Option{vectorstores.WithFilters(v.filter(scope))}
	if !v.storeEmbeds {
		opts = append(opts, vectorstores.WithEmbedder(m))
	}
	// Ask for more than k: re-indexed docs may come back twice.
	res, err := v.similaritySearch(ctx, query, 2*k, opts)
	if err != nil {
		return nil, m.storeErr("searching", err)
	}
	if f := m.failure(); f != nil {
		return nil, f
	}
	sp := v.space()
	type best struct {
		through int64
		score   float64
	}
	bySeq := make(map[int64]best, len(res))
	for _, d := range res {
		if s, ok := d.Metadata[MetaScope].(string); !ok || s != scope {
			continue // another scope's document: never returned
		}
		if name, _ := d.Metadata[MetaEmbedder].(string); name != sp.Embedder {
			return nil, fmt.Errorf("%w: a stored vector comes from embedder %q, this index embeds with %s", ErrSpaceMismatch, name, sp)
		}
		if dim, ok := metaInt(d.Metadata[MetaDim]); ok && dim != 0 && sp.Dim != 0 && dim != int64(sp.Dim) {
			return nil, fmt.Errorf("%w: a stored vector has dimension %d, this index embeds with %s", ErrSpaceMismatch, dim, sp)
		}
		seq, ok := metaInt(d.Metadata[MetaSeq])
		if !ok {
			continue
		}
		through, _ := metaInt(d.Metadata[MetaThrough])
		if b, seen := bySeq[seq]; !seen || through > b.through {
			bySeq[seq] = best{through, float64(d.Score)}
		}
	}
	hits := make([]Hit, 0, len(bySeq))
	for seq, b := range bySeq {
		hits = append(hits, Hit{Seq: seq, Score: b.score})
	}
	sortHits(hits)
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits, nil
}

// DocumentDeleter is implemented by vector stores that can delete documents
// by a metadata filter (Chromem does); Vector.Delete uses it.
type DocumentDeleter interface {
	DeleteDocuments(ctx context.Context, filter any) error
}

// Delete removes scope's documents if the store implements DocumentDeleter
// (Chromem does), and does nothing otherwise: langchaingo's VectorStore
// interface has no way to delete. Documents left behind are harmless to
// memories.Recall, which only shows exchanges still in its message store
// and never reuses a Seq.
func (v *Vector) Delete(ctx context.Context, scope string) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if d, ok := v.vs.(DocumentDeleter); ok {
		if err := deleteDocuments(ctx, d, v.filter(scope)); err != nil {
			return fmt.Errorf("retrieval: deleting a scope's documents from %T: %w", v.vs, err)
		}
	}
	return nil
}

// Remove implements Remover: it deletes the documents of scope with the
// given Seqs, one DeleteDocuments call per Seq with the scope filter plus
// MetaSeq (as a decimal string when the filter is a map[string]string). It
// returns ErrCannotRemove when the store is not a DocumentDeleter or the
// scope filter (WithScopeFilter) is not a map the Seq can be added to.
func (v *Vector) Remove(ctx context.Context, scope string, seqs []int64) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if len(seqs) == 0 {
		return nil
	}
	for _, seq := range seqs {
		if err := v.deleteWhere(ctx, scope, MetaSeq, seq); err != nil {
			return fmt.Errorf("retrieval: deleting document Seq %d from %T: %w", seq, v.vs, err)
		}
	}
	return nil
}

// RemoveSource implements SourceRemover: one DeleteDocuments call with the
// scope filter plus MetaSource. It returns ErrCannotRemove as Remove does.
func (v *Vector) RemoveSource(ctx context.Context, scope, source string) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if err := v.deleteWhere(ctx, scope, MetaSource, source); err != nil {
		return fmt.Errorf("retrieval: deleting the documents of source %q from %T: %w", source, v.vs, err)
	}
	return nil
}

// deleteWhere deletes scope's documents whose metadata key holds value:
// the scope filter plus key (value as a decimal string or as itself when
// the filter is a map[string]string). ErrCannotRemove: see Remove.
func (v *Vector) deleteWhere(ctx context.Context, scope, key string, value any) error {
	d, ok := v.vs.(DocumentDeleter)
	if !ok {
		return fmt.Errorf("%w: %T cannot delete documents", ErrCannotRemove, v.vs)
	}
	var f any
	switch base := v.filter(scope).(type) {
	case map[string]any:
		m := make(map[string]any, len(base)+1)
		for k, x := range base {
			m[k] = x
		}
		m[key] = value
		f = m
	case map[string]string:
		m := make(map[string]string, len(base)+1)
		for k, x := range base {
			m[k] = x
		}
		m[key] = fmt.Sprint(value)
		f = m
	default:
		return fmt.Errorf("%w: the scope filter is a %T, not a map %s can be added to", ErrCannotRemove, base, key)
	}
	return deleteDocuments(ctx, d, f)
}

// metaInt reads an integer metadata value as stores return it: an integer,
// a float64 (JSON), a json.Number or a decimal string (Chromem).
func metaInt(x any) (int64, bool) {
	switch n := x.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	case float32:
		if f := float64(n); f == math.Trunc(f) && math.Abs(f) < 1<<24 {
			return int64(f), true
		}
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}
