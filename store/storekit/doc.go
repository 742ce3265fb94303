// Package storekit is the kit of those who write a store backend: the
// helpers a backend calls to follow the contract of package store, in the
// same way for every backend. The conformance tests that check a backend
// against that contract are in package storetest.
//
// The rule for what lives here rather than in package store: a user of
// memories and stores never calls it; a backend calls it to follow the
// contract. Package store keeps its user's API — the interfaces (Store,
// Messages, States, Users, Rewriter, ProcessState), the values they pass
// (Record, State, Stat, Scope, Export), the errors a caller tests with
// errors.Is (ErrCorrupt among them: a read returns it), WithAppendKey,
// UserFactsConversation, InMemory, FromHistory and AsHistory.
//
// What is here:
//
//   - The storage form of a message, which every backend shares so that
//     values written by one decode in another: EncodeMessageAt (dated
//     AppendTime(ctx)) to store, DecodeRecord to read (DecodeMessage and
//     EncodeMessage without the time).
//   - The checks an Append and a PutState run before storing anything:
//     CheckAppendKeyOf (the append key of store.WithAppendKey; AppendKey and
//     CheckAppendKey read and check one), CheckTime, CheckStateName.
//   - Reads: TailOf and MergeBySeq build Tail's answer; CloneMessage gives
//     a caller a copy that shares nothing with the backend's.
//   - Forget and ForgetScope: ForgetBucket and ForgetBuckets (the absent
//     versions a Forget moves), Derived, DerivedOf and ForgetOrder (the
//     derived identities, forgotten last); SortExport orders an Export.
//
// Package store's own backends (InMemory, History) use the same code: both
// packages call the implementations in store/internal/kit, which imports
// neither, so store does not import storekit and storekit, which names
// store's types (Record, Export), imports store without a cycle. The
// functions here are thin wrappers with the contract's documentation.
package storekit
