// Package stackmemo is what the layers of one combined call share, so
// that layers on one store do not make the same store call twice.
// combined.Memory attaches a Memo to a save's context (WithSave) and to a
// load's (WithLoad).
//
// A save: a layer about to append messages under an append key
// (memories' keyed appends, see memstack.WithSaveKey) first claims the
// (store, identity, append key). The first claimant appends; a layer
// that finds the claim taken waits for that append and, when it
// succeeded, stores nothing: the store would have found the key already
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
	"errors"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// errPanicked is a shared read whose store call panicked.
var errPanicked = errors.New("stackmemo: the store's Tail panicked")

// Memo records the appends of one save, or the tails read by one load.
// Tails are shared in a load only: in a save, a layer may read after
// another's append what that layer read before it.
type Memo struct {
	mu    sync.Mutex
	m     map[key]*Entry        // a save's
	tails map[tailKey]*tailRead // a load's
	ended bool
}

type key struct {
	store     any
	id, apkey string
}

// Entry is one claimed append.
type Entry struct {
	memo *Memo
	key  key
	done chan struct{}
	ok   bool
	at   time.Time
}

type ctxKey struct{}

// WithSave returns ctx with a new save's Memo, unless it carries a Memo
// already, and the function that ends it: call it when the save returns.
// An ended Memo shares nothing (work a layer left running, with ctx's
// values, after the call makes its own store calls).
func WithSave(ctx context.Context) (context.Context, func()) {
	return with(ctx, &Memo{m: map[key]*Entry{}})
}

// WithLoad is WithSave for a load.
func WithLoad(ctx context.Context) (context.Context, func()) {
	return with(ctx, &Memo{tails: map[tailKey]*tailRead{}})
}

func with(ctx context.Context, m *Memo) (context.Context, func()) {
	if From(ctx) != nil {
		return ctx, func() {}
	}
	return context.WithValue(ctx, ctxKey{}, m), func() {
		m.mu.Lock()
		m.ended = true
		m.mu.Unlock()
	}
}

// From returns ctx's Memo, or nil.
func From(ctx context.Context) *Memo {
	m, _ := ctx.Value(ctxKey{}).(*Memo)
	return m
}

// Claim claims the append of the messages under append key apkey for the
// identity (its key) in store. first reports whether this is the first
// claim: the caller appends, then calls Finish. Otherwise the caller may
// Wait for the first claimant. A store whose dynamic type cannot be
// compared (no map key) is never claimed: e is nil and first true.
func (m *Memo) Claim(store any, id, apkey string) (e *Entry, first bool) {
	if m == nil || m.m == nil || !comparable(store) {
		return nil, true
	}
	k := key{store, id, apkey}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ended {
		return nil, true
	}
	if e := m.m[k]; e != nil {
		return e, false
	}
	e = &Entry{memo: m, key: k, done: make(chan struct{})}
	m.m[k] = e
	return e, true
}

// Finish records the first claimant's append: whether it stored the
// messages, and the time it dated them. After a failure the claim is
// released: the next Claim is a first one (one of the waiters tries
// again, and the others wait for it). It may be called on a nil Entry.
func (e *Entry) Finish(ok bool, at time.Time) {
	if e == nil {
		return
	}
	if !ok {
		e.memo.mu.Lock()
		delete(e.memo.m, e.key)
		e.memo.mu.Unlock()
	}
	e.ok, e.at = ok, at
	close(e.done)
}

// Wait waits for the first claimant's append and returns whether it
// stored the messages and their time; err is ctx's when ctx is done
// first.
func (e *Entry) Wait(ctx context.Context) (stored bool, at time.Time, err error) {
	select {
	case <-e.done:
		return e.ok, e.at, nil
	case <-ctx.Done():
		return false, time.Time{}, ctx.Err()
	}
}

// comparable reports whether store can be a map key: its value, not only
// its type, must be comparable (a struct type with an interface field is
// comparable, but hashing one that holds a slice or a map panics).
func comparable(store any) bool {
	return store != nil && reflect.ValueOf(store).Comparable()
}

type tailKey struct {
	store any
	id    string
	n     int
	after int64
}

type tailRead struct {
	done chan struct{}
	recs []store.Record
	err  error
}

// Tail returns st.Tail(ctx, id, n, after), read once per Memo: a layer
// asking for the same tail while another's read is in flight waits for
// it (or for its own ctx). Each caller gets its own copy of the slice. A
// failed read is not shared: the next caller reads again. Without a Memo
// in ctx (a layer used on its own), or over a store that cannot be
// compared, it is st.Tail.
func Tail(ctx context.Context, st store.Store, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	m := From(ctx)
	if m == nil || m.tails == nil || !comparable(st) {
		return st.Tail(ctx, id, n, after)
	}
	k := tailKey{st, id.Key(), n, after}
	for {
		m.mu.Lock()
		if m.ended {
			m.mu.Unlock()
			return st.Tail(ctx, id, n, after)
		}
		r := m.tails[k]
		first := r == nil
		if first {
			r = &tailRead{done: make(chan struct{})}
			m.tails[k] = r
		}
		m.mu.Unlock()
		if first {
			ok := false
			defer func() {
				if !ok {
					// Failed or panicked: not shared (the panic goes on).
					if r.err == nil {
						r.err = errPanicked
					}
					m.mu.Lock()
					delete(m.tails, k)
					m.mu.Unlock()
				}
				close(r.done)
			}()
			r.recs, r.err = st.Tail(ctx, id, n, after)
			ok = r.err == nil
			return slices.Clone(r.recs), r.err
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.err == nil {
			return slices.Clone(r.recs), nil
		}
		// Its read failed: read again (the next claimant).
	}
}
