package retrieval

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Doc is one unit of text to index: in memstack, one exchange of a
// conversation (a human message and the answers that follow it).
type Doc struct {
	// Seq identifies the doc within its scope: the Seq (store.Record.Seq)
	// of the exchange's first message. Adding a doc with a Seq the scope
	// already holds replaces that doc.
	Seq int64
	// Through is the Seq of the doc's newest message. It grows when an
	// exchange grows; durable indexes use it to skip docs an earlier run
	// already stored (see Durable.AddSince).
	Through int64
	// Text is what is indexed.
	Text string
	// Source is where the doc comes from within its scope, for a scope
	// that gathers several ("" for none): memories.Recall, searching a
	// user's conversations, sets the conversation's identity key. An index
	// that keeps docs outside the process stores it, so that
	// SourceRemover.RemoveSource finds a source's docs without their Seqs
	// (after the messages are gone, say).
	Source string
	// Context is text indexed with the doc at a lower weight: what
	// surrounds it. memories.Recall puts the neighbouring exchanges here,
	// so an exchange that answers in other words than the question's is
	// still found through the turns around it. BM25 counts each term of
	// a Context with the Context's Weight (a term of Text counts 1);
	// indexes that do not weight terms (Vector) ignore Context.
	Context []Context
}

// Context is one piece of a Doc's context and the weight its terms count
// with, in (0, 1]; Add rejects another weight with an error wrapping
// ErrInvalidArgument.
type Context struct {
	Text   string
	Weight float64
}

// checkContexts returns an error naming the doc and the weight when a
// Context weight of docs lies outside (0, 1].
func checkContexts(docs []Doc) error {
	for _, d := range docs {
		for i, c := range d.Context {
			if math.IsNaN(c.Weight) || c.Weight <= 0 || c.Weight > 1 {
				return fmt.Errorf("%w: doc Seq %d: context %d has weight %v; a weight must lie in (0, 1]", ErrInvalidArgument, d.Seq, i+1, c.Weight)
			}
		}
	}
	return nil
}

// Hit is one search result: the Seq of a doc and its score under the
// index's scoring (see Index.Range).
type Hit struct {
	Seq   int64
	Score float64
}

// Range is the closed interval an index's scores lie in. A threshold on
// an index's scores must lie in its Range.
type Range struct{ Min, Max float64 }

// Contains reports whether x lies in r (NaN never does).
func (r Range) Contains(x float64) bool { return x >= r.Min && x <= r.Max }

// String formats r as "[min, max]".
func (r Range) String() string { return fmt.Sprintf("[%g, %g]", r.Min, r.Max) }

// Ranges of the indexes in this package.
var (
	// LexicalRange is the range of BM25 scores as this package normalises
	// them (see BM25).
	LexicalRange = Range{0, 1}
	// CosineRange is the range of cosine similarities (Vector).
	CosineRange = Range{-1, 1}
	// FusedRange is the range of normalised reciprocal-rank-fusion scores
	// (NewHybrid).
	FusedRange = Range{0, 1}
)

// Index ranks the docs of many scopes for a query. A scope is an opaque
// string naming whose docs they are (memstack uses memstack.Identity.Key);
// an index never returns a doc of one scope for a search in another.
//
// Implementations must be safe for concurrent use, honour ctx, and treat an
// empty or whitespace-only query as matching nothing (no hits, no error,
// no model call).
type Index interface {
	// Add indexes docs under scope, replacing any doc with the same Seq.
	// Adding the same docs again is harmless (Add is idempotent per Seq).
	Add(ctx context.Context, scope string, docs []Doc) error
	// Search returns at most k hits for query within scope, best first.
	// k < 1 is an error wrapping ErrInvalidArgument.
	Search(ctx context.Context, scope, query string, k int) ([]Hit, error)
	// Delete removes what the index holds for scope, where it can (see
	// Vector.Delete for stores that cannot delete).
	Delete(ctx context.Context, scope string) error
	// Range returns the interval the index's scores lie in.
	Range() Range
}

// Durable is implemented by an index that keeps (some of) its entries
// outside the process, so that they outlive it: Vector, whose vectors live
// in a vector store, and a hybrid with a durable part.
//
// Whoever feeds a durable index (memories.Recall) keeps, per scope, a
// watermark — the Through of the newest doc durably indexed — and the
// index's Spaces, next to its data (memories.Recall keeps them in its
// store's state), and hands them back after a restart: AddSince skips what
// an earlier run already stored, so vectors are not computed twice, and
// CheckSpaces refuses to mix vector spaces.
type Durable interface {
	Index
	// AddSince is Add after a restart or after another process's writes:
	// the durable parts skip docs with Through <= since, the in-process
	// parts (a BM25 part of a hybrid) add every doc.
	AddSince(ctx context.Context, scope string, docs []Doc, since int64) error
	// Spaces returns the vector space of each durable part, in order; a
	// Dim of 0 means not known yet (before the first embedding).
	Spaces() []Space
	// CheckSpaces compares spaces recorded with earlier entries (an
	// earlier Spaces result) with the index's own. It returns an error
	// wrapping ErrSpaceMismatch when they differ; a dimension the index
	// does not know yet is adopted from the record, so that a later vector
	// of another dimension is an error.
	CheckSpaces(recorded []Space) error
}

// SourceRemover is implemented by durable indexes that can remove every
// doc of a scope that came from one source (Doc.Source) without knowing
// their Seqs: Vector over a store that deletes by metadata filter, and a
// hybrid of one. memories.Recall uses it when a conversation of a user's
// scope is cleared or forgotten.
type SourceRemover interface {
	// RemoveSource removes scope's docs added with Source source. An index
	// that cannot returns ErrCannotRemove; a hybrid removes those of its
	// parts that keep docs outside the process (its in-process parts'
	// docs are removed by Seq, Remover).
	RemoveSource(ctx context.Context, scope, source string) error
}

// Remover is implemented by durable indexes that can remove single docs
// of a scope (Vector over a store that deletes by metadata filter).
// memories.Recall uses it to take back docs it added for messages that a
// Clear or Forget — by another replica — removed while it was indexing
// them, so a cleared turn's text is not stored again.
type Remover interface {
	// Remove removes scope's docs with the given Seqs, whatever their
	// Through; Seqs the index does not hold are ignored. An index that
	// cannot remove what it holds returns ErrCannotRemove.
	Remove(ctx context.Context, scope string, seqs []int64) error
}

// ErrCannotRemove is returned by Remover.Remove when the index (its vector
// store, or the shape of its scope filter) cannot delete single docs.
var ErrCannotRemove = errors.New("retrieval: the index cannot remove single documents")

// Releaser is implemented by indexes that hold per-scope state in process
// memory (BM25). Release frees scope's in-process state, leaving anything
// durable alone; whoever feeds the index adds the scope's docs again before
// its next search. memories.Recall releases the scopes of identities it
// evicts from its cache.
type Releaser interface {
	Release(scope string)
}

// Space names a vector space: the embedder that made the vectors and their
// dimension. Vectors of different spaces must never be compared.
type Space struct {
	// Embedder names the embedding model (see WithEmbedderName).
	Embedder string `json:"embedder"`
	// Dim is the vectors' dimension; 0 when not known yet.
	Dim int `json:"dim"`
}

// String formats s for error messages.
func (s Space) String() string {
	if s.Dim == 0 {
		return fmt.Sprintf("%q (dimension not known yet)", s.Embedder)
	}
	return fmt.Sprintf("%q (dimension %d)", s.Embedder, s.Dim)
}

var (
	// ErrInvalidArgument is wrapped by errors about bad arguments and
	// options (k < 1, a nil embedder, a threshold outside its range).
	ErrInvalidArgument = errors.New("retrieval: invalid argument")
	// ErrEmbedding is wrapped by errors of the embedder itself (it failed,
	// timed out, or returned the wrong number of vectors). Such errors
	// are transient: retrying later may succeed.
	ErrEmbedding = errors.New("retrieval: embedding failed")
	// ErrDimensionChanged is wrapped by the error returned when the
	// embedder returns a vector whose dimension differs from the
	// dimension of the index's space (set by WithDimension, detected from
	// the first vector, or adopted from recorded spaces). Retrying cannot
	// fix it.
	ErrDimensionChanged = errors.New("retrieval: the embedder's dimension changed")
	// ErrSpaceMismatch is wrapped by the error returned when stored
	// vectors come from another vector space (another embedder or
	// dimension) than the index's. Retrying cannot fix it: re-index into
	// a new collection, or configure the original embedder.
	ErrSpaceMismatch = errors.New("retrieval: stored vectors are from another vector space")
	// ErrDegraded is wrapped by the error of a hybrid search or add where
	// one part failed and the other worked: the hits returned are the
	// working part's ranking.
	ErrDegraded = errors.New("retrieval: one part of the hybrid index failed")
)

// Permanent reports whether err is one that retrying cannot fix: a vector
// space mismatch or a dimension change.
func Permanent(err error) bool {
	return errors.Is(err, ErrSpaceMismatch) || errors.Is(err, ErrDimensionChanged)
}

func checkK(k int) error {
	if k < 1 {
		return fmt.Errorf("%w: k=%d: k must be at least 1", ErrInvalidArgument, k)
	}
	return nil
}

func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("retrieval: %w", err)
	}
	return nil
}

// checkRange returns an error naming option when x is not in r.
func checkRange(option string, x float64, r Range) error {
	if math.IsNaN(x) || !r.Contains(x) {
		return fmt.Errorf("%w: %s(%v): the score must lie in %s", ErrInvalidArgument, option, x, r)
	}
	return nil
}

// describe names an index for String methods and error messages.
func describe(idx Index) string {
	if s, ok := idx.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", idx)
}
