// Package worker is the per-identity machinery that memstack's long-term
// layers share; the layers decide what work to do, this package decides
// when it runs and keeps its bookkeeping bounded.
//
//   - A Registry keeps one entry per key (an identity, in memstack's
//     vocabulary) while something uses it, and, when asked to, a bounded
//     number of idle entries as a cache, least recently used evicted first.
//     Recall keeps its per-identity index state in one; a Pool keeps its
//     per-key coordination in another.
//   - A Pool runs a layer's work for a key (a Summary's fold, a Facts
//     extraction) at most once at a time per key: synchronously, on the
//     caller's goroutine (Now), or in a background worker per key that runs
//     while work keeps arriving and then exits (Kick). Exclusive lets a
//     Clear cancel the key's running pass and run with no pass in flight;
//     Flush waits for every pass and worker; Close cancels them, waits, and
//     refuses new work for good.
//
// Nothing is kept for a key once its last user is done, beyond the idle
// entries a Registry is told to keep.
package worker

import (
	"container/list"
	"sync"
)

// Registry holds one *V per key while it is in use, plus up to idle
// values no one uses, most recently released kept. Every operation costs
// O(1) whatever the number of keys. It is safe for concurrent use; a *V it
// returns is the caller's to guard.
type Registry[K comparable, V any] struct {
	idle  int
	newV  func(K) *V
	evict func(K, *V)

	mu      sync.Mutex
	entries map[K]*regEntry[K, V]
	unused  list.List // of *regEntry with no user, most recently released first
}

type regEntry[K comparable, V any] struct {
	key  K
	v    *V
	refs int
	elem *list.Element // in unused while refs is 0
}

// NewRegistry returns a Registry that creates a key's value with newV
// (nil: a new zero V) on first use and keeps up to idle unused values
// (0: none; a value goes as soon as its last user releases it). evict,
// if not nil, is called for each value the Registry lets go, with the
// Registry's lock held: it must not call the Registry.
func NewRegistry[K comparable, V any](idle int, newV func(K) *V, evict func(K, *V)) *Registry[K, V] {
	if newV == nil {
		newV = func(K) *V { return new(V) }
	}
	return &Registry[K, V]{idle: max(idle, 0), newV: newV, evict: evict, entries: make(map[K]*regEntry[K, V])}
}

// Acquire returns k's value, created if needed, marked in use once more;
// Release ends that use.
func (r *Registry[K, V]) Acquire(k K) *V {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[k]
	if e == nil {
		e = &regEntry[K, V]{key: k, v: r.newV(k)}
		r.entries[k] = e
	}
	r.use(e)
	return e.v
}

// Hold marks k's value, which the caller is using, in use once more (a
// use that may outlive the caller's); Release ends it.
func (r *Registry[K, V]) Hold(k K) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[k]; e != nil {
		r.use(e)
	}
}

func (r *Registry[K, V]) use(e *regEntry[K, V]) {
	if e.elem != nil {
		r.unused.Remove(e.elem)
		e.elem = nil
	}
	e.refs++
}

// Release ends one use of k's value. A value no one uses any more is
// kept as one of the idle ones, and the least recently released beyond
// them are let go.
func (r *Registry[K, V]) Release(k K) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[k]
	if e == nil || e.refs == 0 {
		return
	}
	if e.refs--; e.refs > 0 {
		return
	}
	e.elem = r.unused.PushFront(e)
	for r.unused.Len() > r.idle {
		old := r.unused.Remove(r.unused.Back()).(*regEntry[K, V])
		old.elem = nil
		delete(r.entries, old.key)
		if r.evict != nil {
			r.evict(old.key, old.v)
		}
	}
}

// Len returns how many values the Registry holds, in use or idle.
func (r *Registry[K, V]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}
