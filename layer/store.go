package layer

import "github.com/memstack/memstack/store"

// StoreUse says how a memory uses a store that keeps its transcript:
// what combined.New needs to check a stack whose layers share a store.
//
// New refuses a stack in which, for two layers on the same store (stores
// compared as values), one layer's Keeps is not -1 and the other reads
// more than that many messages (Reads 0, or Reads > Keeps), one is
// Foreign, or both name the same state in States.
type StoreUse struct {
	// Store is the store the memory keeps its messages in.
	Store store.Store
	// Reads is how many of the newest non-system messages of a
	// conversation the memory may read; 0 means all of them.
	Reads int
	// Keeps is, under a retention (memories.WithRetention), how many of
	// the newest non-system messages of a conversation the memory keeps
	// when it removes older ones; -1 means it removes none.
	Keeps int
	// States names the state values (store.States) the memory keeps per
	// conversation in the store.
	States []string
	// Foreign is set for a memory that keeps its messages in the store
	// without memstack's rules — a langchaingo memory over
	// store.AsHistory: it stores every turn again, with no save key, and
	// its window and token buffers remove messages as they see fit. It
	// cannot share its store with another layer.
	Foreign bool
}

// StoreUser is implemented by memories that keep their transcript in
// stores (every memory of package memories, and combined.Memory itself,
// which reports its children's). combined.New reads it to check that the
// layers sharing a store keep each other's data; see "One store for a
// whole stack" in the documentation of package combined.
type StoreUser interface {
	// StoreUses returns one StoreUse per store the memory keeps messages
	// in.
	StoreUses() []StoreUse
}
