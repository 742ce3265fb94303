// Package stackmemo is what the layers of one combined call share, so
// that layers on one store do not make the same store call twice.
// combined.Memory attaches a Memo to a save's context (WithSave) and to a
// load's (WithLoad).
//
// A save: a layer about to append messages under an append key
// (memories' keyed appends, see memstack.WithSaveKey) goes through
// Append, keyed by (store, identity, append key). The first layer
// appends; a layer that comes with the same key waits for that append
// and, when it succeeded, stores nothing: the store would have found the key already
// stored and stored nothing either (store.WithAppendKey), at the cost of
// a transaction. When it failed, the layer appends itself, as it would
// have without the memo.
//
// A load: layers reading the same tail of the same conversation of the
// same store (a RecentN's window and a Recall's recent units both read
// store.Tail(id, n, 0) with the same n) make one call (Tail), and each
// gets its own copy of the records.
package stackmemo

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// Memo records the appends of one save, or the tails read by one load.
// Tails are shared in a load only: in a save, a layer may read after
// another's append what that layer read before it.
type Memo struct {
	mu      sync.Mutex
	appends map[appendKey]*flight[time.Time]    // a save's
	tails   map[tailKey]*flight[[]store.Record] // a load's
	ended   bool
}

type appendKey struct {
	store     any
	id, apkey string
}

type tailKey struct {
	store any
	id    string
	n     int
	after int64
}

type ctxKey struct{}

// WithSave returns ctx with a new save's Memo, unless it carries a Memo
// already, and the function that ends it: call it when the save returns.
// An ended Memo shares nothing (work a layer left running, with ctx's
// values, after the call makes its own store calls).
func WithSave(ctx context.Context) (context.Context, func()) {
	return with(ctx, &Memo{appends: map[appendKey]*flight[time.Time]{}})
}

// WithLoad is WithSave for a load.
func WithLoad(ctx context.Context) (context.Context, func()) {
	return with(ctx, &Memo{tails: map[tailKey]*flight[[]store.Record]{}})
}

func with(ctx context.Context, m *Memo) (context.Context, func()) {
	if from(ctx) != nil {
		return ctx, func() {}
	}
	return context.WithValue(ctx, ctxKey{}, m), func() {
		m.mu.Lock()
		m.ended = true
		m.mu.Unlock()
	}
}

func from(ctx context.Context) *Memo {
	m, _ := ctx.Value(ctxKey{}).(*Memo)
	return m
}

// Append stores messages with appendTo (a store's keyed Append of them,
// dated at) once per save's Memo: a layer coming with the same (store,
// identity key, append key) while another's append is in flight, or
// after it succeeded, waits for it and returns the time that append
// dated the messages, storing nothing. A failed or panicking append is
// not shared: the next layer appends. Without a save's Memo in ctx (a
// layer used on its own), or over a store that cannot be compared, it
// is appendTo.
func Append(ctx context.Context, st any, id, apkey string, at time.Time, appendTo func() error) (time.Time, error) {
	m := from(ctx)
	if m == nil || m.appends == nil || !hashable(st) {
		return at, appendTo()
	}
	return share(ctx, m, m.appends, appendKey{st, id, apkey}, func() (time.Time, error) { return at, appendTo() })
}

// Tail returns st.Tail(ctx, id, n, after), read once per load's Memo (as
// Append stores once per save's). Each caller gets its own copy of the
// slice.
func Tail(ctx context.Context, st store.Store, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	m := from(ctx)
	if m == nil || m.tails == nil || !hashable(st) {
		return st.Tail(ctx, id, n, after)
	}
	recs, err := share(ctx, m, m.tails, tailKey{st, id.Key(), n, after}, func() ([]store.Record, error) {
		return st.Tail(ctx, id, n, after)
	})
	return slices.Clone(recs), err
}

// flight is one shared store call: its result, once done is closed; ok
// if it succeeded.
type flight[V any] struct {
	done chan struct{}
	v    V
	ok   bool
}

// share runs call once for k among the callers of m: the first runs it,
// the others wait for it (or for their ctx) and take its result. A call
// that failed or panicked is forgotten, so the next caller runs it again
// (its own error goes to its own caller; a panic goes on). An ended Memo
// shares nothing.
func share[K comparable, V any](ctx context.Context, m *Memo, flights map[K]*flight[V], k K, call func() (V, error)) (V, error) {
	for {
		m.mu.Lock()
		if m.ended {
			m.mu.Unlock()
			return call()
		}
		f := flights[k]
		first := f == nil
		if first {
			f = &flight[V]{done: make(chan struct{})}
			flights[k] = f
		}
		m.mu.Unlock()
		if first {
			defer func() {
				if !f.ok {
					m.mu.Lock()
					delete(flights, k)
					m.mu.Unlock()
				}
				close(f.done)
			}()
			v, err := call()
			f.v, f.ok = v, err == nil
			return v, err
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
		if f.ok {
			return f.v, nil
		}
		// Its call failed: call again (the next first caller).
	}
}

// hashable reports whether store can be a map key: its value, not only
// its type, must be comparable (a struct type with an interface field is
// comparable, but hashing one that holds a slice or a map panics).
func hashable(store any) bool {
	return store != nil && reflect.ValueOf(store).Comparable()
}
