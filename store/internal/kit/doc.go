// Package kit holds the implementations that package store (its InMemory,
// History and AsHistory) and package storekit (the backend author's kit)
// share: the message codec, the argument checks, the append key, the
// forget buckets and the derived identities. It imports neither, so both
// can import it: store keeps its user API and re-exports the two error
// values and the constant it documents (ErrInvalidArgument, ErrCorrupt,
// UserFactsConversation); storekit re-exports the rest, with the docs
// backend authors read. Functions over store.Record are generic here
// (MergeBySeq, TailOf), since this package cannot name store's types.
package kit
