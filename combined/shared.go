package combined

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// StoreUse says how a memory uses the store that keeps its transcript:
// what New needs to check a stack whose layers share a store.
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
}

// StoreUser is implemented by memories that keep their transcript in a
// store.Store (every memory of package memories). New reads it to check
// that the layers sharing a store keep each other's data; see "One store
// for a whole stack" in the package documentation.
type StoreUser interface {
	StoreUse() StoreUse
}

// sameStore reports whether a and b are the same store value. Values of
// a type that cannot be compared are the same only if they are one
// pointer-shaped value.
func sameStore(a, b store.Store) bool {
	if a == nil || b == nil {
		return false
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta != tb {
		return false
	}
	if ta.Comparable() {
		return a == b
	}
	return false
}

// checkShared refuses a stack in which a layer's retention would remove
// messages another layer on the same store reads, or two layers on one
// store keep state under the same name.
func (m *Memory) checkShared() error {
	uses := make([]*StoreUse, len(m.children))
	for i, c := range m.children {
		if su, ok := c.(StoreUser); ok {
			u := su.StoreUse()
			if u.Store != nil {
				uses[i] = &u
			}
		}
	}
	for i, a := range uses {
		if a == nil {
			continue
		}
		for j, b := range uses {
			if j == i || b == nil || !sameStore(a.Store, b.Store) {
				continue
			}
			if a.Keeps >= 0 && (b.Reads == 0 || b.Reads > a.Keeps) {
				reads := "every message of a conversation"
				if b.Reads > 0 {
					reads = fmt.Sprintf("the newest %d messages", b.Reads)
				}
				return fmt.Errorf("%w: %s removes messages from the store it shares with %s (%s): "+
					"its retention keeps the newest %d non-system messages, and %s reads %s; "+
					"give the retention to no layer, or give the layers stores of their own",
					ErrInvalid, m.name(i), m.name(j), describeStore(a.Store), a.Keeps, m.name(j), reads)
			}
			if j > i {
				for _, s := range a.States {
					for _, t := range b.States {
						if s == t {
							return fmt.Errorf("%w: %s and %s both keep the state %q in one store (%s): "+
								"give one of them a store (or a namespace) of its own",
								ErrInvalid, m.name(i), m.name(j), s, describeStore(a.Store))
						}
					}
				}
			}
		}
	}
	return nil
}

// describeStore names a store in errors: its String, else its type.
func describeStore(s store.Store) string {
	if st, ok := s.(fmt.Stringer); ok {
		return st.String()
	}
	return fmt.Sprintf("%T", s)
}

// saveContext returns ctx with the save key that makes every child's
// save of one turn the same save (memstack.WithSaveKey): the caller's,
// else a fresh random one. Children that share a store then store the
// turn there once. The time is left as the caller gave it: without
// memstack.WithTime each child dates its messages as it would alone (now,
// or a Facts memory's WithClock), and on a shared store the child that
// stores the turn first dates it.
func saveContext(ctx context.Context) context.Context {
	if _, ok := memstack.SaveKeyFrom(ctx); !ok {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
		ctx = memstack.WithSaveKey(ctx, "cm-"+hex.EncodeToString(b[:]))
	}
	return ctx
}
