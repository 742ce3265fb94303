// Package retrieval ranks past exchanges of a conversation for a query: the
// indexes behind memories.Recall. Its one job is "given a scope and a
// question, which docs of that scope matter, and how much" — it knows
// nothing of stores, prompts or langchaingo's memories.
//
// # Indexes
//
// Every index implements Index (Add, Search, Delete, Range) and keeps each
// scope's docs apart: a search in one scope never returns another scope's
// doc (memstack scopes are identity keys).
//
//   - BM25: an in-process lexical index (Okapi BM25, k1 = 1.2, b = 0.75)
//     over Tokenize's tokens (English Snowball stems; WithTokenizer and
//     TokenizeWith for others), needing no model. Scores are normalised to
//     [0, 1) (see BM25). A doc may carry weighted Context text, and
//     WithNeighbourWeights scores each doc with its neighbours' words (how
//     memories.Recall finds the turn that answers in other words).
//   - Vector: a vector index over any langchaingo embeddings.Embedder and
//     any vectorstores.VectorStore. Scores are cosine similarities in
//     [-1, 1]. Each document carries its scope, Seq and vector space in
//     its metadata; searches filter by scope and check every result's
//     scope and space again, so neither another identity's exchange nor a
//     vector from another embedder can slip through.
//   - NewHybrid: reciprocal-rank fusion of two indexes (typically BM25 and
//     Vector), k = 60, normalised to [0, 1]. When one part fails, the
//     other's ranking is used and the error says so (ErrDegraded).
//   - Chromem: the embedded vector store — a langchaingo
//     vectorstores.VectorStore over a github.com/philippgille/chromem-go
//     collection, in memory or persisted to a directory.
//
// # Durability and vector spaces
//
// BM25 lives in process memory; whoever feeds it rebuilds it from the
// messages after a restart. A Vector's entries live in its vector store and
// outlive the process; it implements Durable so that the feeder can skip
// what an earlier run embedded (AddSince) and check that the stored vectors
// come from the same vector space (CheckSpaces). A vector space is the
// embedder's name (WithEmbedderName; the embedder's Go type by default) and
// the vectors' dimension (WithDimension, or detected from the first vector).
// Mixing spaces is always an error, never silent: ErrDimensionChanged when
// the embedder starts returning another dimension, ErrSpaceMismatch when
// stored vectors come from another space.
//
// # Failures
//
// Embedder failures are wrapped in ErrEmbedding: transient, worth retrying.
// ErrDimensionChanged and ErrSpaceMismatch are permanent (Permanent).
// Embedding calls are counted in the observe.Recorder of the call's
// context, if any. A panicking embedder or vector store fails the
// operation with an error (an embedder's wraps ErrEmbedding); no panic of
// theirs reaches the caller or ends the process. An embedder or store that
// ignores its context is waited for (a hybrid search only
// HybridSearchGrace past the context, then it answers with the other
// part): memories.Recall bounds each index call and abandons one that
// outlives its context.
package retrieval
