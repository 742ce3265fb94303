package combined

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"slices"

	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/stackmemo"
	"github.com/memstack/memstack/store"
)

// StoreUses implements StoreUser: the uses of every child, so a Memory
// nested in another is checked with the other's children.
func (m *Memory) StoreUses() []StoreUse {
	var out []StoreUse
	for _, c := range m.children {
		out = append(out, storeUses(c)...)
	}
	return out
}

// storeUses returns what c reports (StoreUser), or, for a langchaingo
// memory over store.AsHistory, a foreign use of that store.
func storeUses(c schema.Memory) []StoreUse {
	if su, ok := c.(StoreUser); ok {
		return su.StoreUses()
	}
	var h schema.ChatMessageHistory
	switch lc := c.(type) {
	case *memory.ConversationBuffer:
		h = lc.ChatHistory
	case *memory.ConversationWindowBuffer:
		h = lc.ChatHistory
	case *memory.ConversationTokenBuffer:
		h = lc.ChatHistory
	}
	if h == nil {
		return nil
	}
	if s, _, ok := store.HistoryStore(h); ok {
		return []StoreUse{{Store: s, Keeps: -1, Foreign: true}}
	}
	return nil
}

// sameStore reports whether a and b are the same store value. Values
// that cannot be compared (a struct holding a map) are never the same.
func sameStore(a, b store.Store) bool {
	if a == nil || b == nil {
		return false
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || !va.Comparable() || !vb.Comparable() {
		return false
	}
	return va.Equal(vb)
}

// checkShared refuses a stack in which a layer's retention would remove
// messages another layer on the same store reads, a langchaingo memory
// over store.AsHistory shares its store with another layer, or two
// layers on one store keep state under the same name.
func (m *Memory) checkShared() error {
	type use struct {
		child int
		StoreUse
	}
	var uses []use
	for i, c := range m.children {
		for _, u := range storeUses(c) {
			if u.Store != nil {
				uses = append(uses, use{i, u})
			}
		}
	}
	for x, a := range uses {
		for y, b := range uses {
			if x == y || a.child == b.child || !sameStore(a.Store, b.Store) {
				continue
			}
			m.shared = true
			if a.Foreign {
				return fmt.Errorf("%w: %s keeps its messages in the store it shares with %s (%s) through store.AsHistory: "+
					"it stores every turn again and may remove messages the other reads; give it a store (or a namespace) of its own",
					ErrInvalid, m.layer(a.child), m.layer(b.child), describeStore(a.Store))
			}
			if a.Keeps >= 0 && (b.Reads == 0 || b.Reads > a.Keeps) {
				reads := "every message of a conversation"
				if b.Reads > 0 {
					reads = fmt.Sprintf("the newest %d messages", b.Reads)
				}
				return fmt.Errorf("%w: %s removes messages from the store it shares with %s (%s): "+
					"its retention keeps the newest %d non-system messages, and %s reads %s; "+
					"give the retention to no layer, or give the layers stores of their own",
					ErrInvalid, m.layer(a.child), m.layer(b.child), describeStore(a.Store), a.Keeps, m.layer(b.child), reads)
			}
			if y > x {
				for _, s := range a.States {
					if slices.Contains(b.States, s) {
						return fmt.Errorf("%w: %s and %s both keep the state %q in one store (%s): "+
							"give one of them a store (or a namespace) of its own",
							ErrInvalid, m.layer(a.child), m.layer(b.child), s, describeStore(a.Store))
					}
				}
			}
		}
	}
	return nil
}

// layer names child i in New's errors: its layer name (WithLayerNames, or
// "<position>:<type>") and its Go type.
func (m *Memory) layer(i int) string {
	return fmt.Sprintf("layer %q (%T)", m.layers[i], m.children[i])
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
// turn there once (when children share a store, the others wait for the
// first: one store call, not one per child; package stackmemo), and the
// function to call when the save returns. The time is left as the caller gave it: without
// memstack.WithTime each child dates its messages as it would alone (now,
// or a Facts memory's WithClock), and on a shared store the child that
// stores the turn first dates it.
func (m *Memory) saveContext(ctx context.Context) (context.Context, func()) {
	if _, ok := memstack.SaveKeyFrom(ctx); !ok {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
		ctx = memstack.WithSaveKey(ctx, "cm-"+hex.EncodeToString(b[:]))
	}
	if !m.shared {
		return ctx, func() {}
	}
	return stackmemo.WithSave(ctx)
}

// loadContext returns ctx with a load's memo when children share a store
// (they read a tail they share once; package stackmemo), and the function
// to call when the load returns.
func (m *Memory) loadContext(ctx context.Context) (context.Context, func()) {
	if !m.shared {
		return ctx, func() {}
	}
	return stackmemo.WithLoad(ctx)
}
