// Package savememo lets the layers of one combined save store a turn
// once: combined.Memory.SaveContext attaches a Memo to the save's
// context, and a layer about to append messages under an append key
// (memories' keyed appends, see memstack.WithSaveKey) first claims the
// (store, identity, append key). The first claimant appends; a layer
// that finds the claim taken waits for that append and, when it
// succeeded, stores nothing: the store would have found the key already
// stored and stored nothing either (store.WithAppendKey), at the cost of
// a transaction. When it failed, the layer appends itself, as it would
// have without the memo.
package savememo

import (
	"context"
	"reflect"
	"sync"
	"time"
)

// Memo records the appends of one save.
type Memo struct {
	mu sync.Mutex
	m  map[key]*Entry
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

// With returns ctx with a new Memo, unless it carries one already.
func With(ctx context.Context) context.Context {
	if From(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, &Memo{m: map[key]*Entry{}})
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
	if m == nil || store == nil || !reflect.TypeOf(store).Comparable() {
		return nil, true
	}
	k := key{store, id, apkey}
	m.mu.Lock()
	defer m.mu.Unlock()
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
