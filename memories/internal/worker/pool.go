package worker

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned by a Pool's Flush and Exclusive after Close.
var ErrClosed = errors.New("worker: closed")

// Config is what a Pool runs, and how.
type Config[K comparable] struct {
	// Run does one pass of the work for k with a context that the key's
	// Exclusive and the Pool's Close cancel; background tells whether a
	// background worker (Kick) runs it, else the caller of Now. The
	// Pool never runs two passes of one key at a time.
	Run func(ctx context.Context, k K, background bool) error
	// Wait, if not nil, reports whether k's work must wait (a retry
	// backoff that has not passed): Now skips the pass and a worker
	// exits. It is called with the Pool's lock held and must not call
	// the Pool.
	Wait func(k K) bool
	// Queue makes a Now that finds a pass of its key running wait for it
	// (or for its ctx) and then make its own pass, unless a pass that
	// started after its call covered it already; a Now that ends on its
	// ctx leaves its work to the next pass. Without Queue such a Now
	// returns at once, leaving its work to the running pass or the next
	// call's.
	Queue bool
}

// Pool runs a layer's work per key: one pass at a time per key, on the
// caller's goroutine (Now) or in a background worker per key (Kick). It is
// safe for concurrent use.
type Pool[K comparable] struct {
	cfg      Config[K]
	slots    *Registry[K, slot]
	closeCtx context.Context
	closeAll context.CancelFunc

	mu        sync.Mutex
	closed    bool
	closeDone chan struct{} // closed when the first Close has stopped the work
	inflight  int           // passes (Now) and workers running
	idle      chan struct{} // closed when inflight drops to 0; nil while 0
}

// slot is a key's coordination state.
type slot struct {
	// sem (capacity 1) is held during a pass of the key, and by
	// Exclusive.
	sem chan struct{}
	// The rest is guarded by Pool.mu.
	worker bool               // a background worker runs for the key
	dirty  bool               // work arrived since the last pass started
	cancel context.CancelFunc // cancels the running pass, if any
}

// New returns a Pool that runs c.Run.
func New[K comparable](c Config[K]) *Pool[K] {
	p := &Pool[K]{cfg: c}
	p.slots = NewRegistry[K, slot](0, func(K) *slot { return &slot{sem: make(chan struct{}, 1)} }, nil)
	p.closeCtx, p.closeAll = context.WithCancel(context.Background())
	return p
}

// Closed reports whether Close was called.
func (p *Pool[K]) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Len returns how many keys the Pool keeps state for (keys in use by a
// pass, a worker or an Exclusive).
func (p *Pool[K]) Len() int { return p.slots.Len() }

// startLocked counts one more pass or worker; it fails after Close. p.mu
// must be held.
func (p *Pool[K]) startLocked() bool {
	if p.closed {
		return false
	}
	if p.inflight == 0 {
		p.idle = make(chan struct{})
	}
	p.inflight++
	return true
}

func (p *Pool[K]) doneLocked() {
	p.inflight--
	if p.inflight == 0 {
		close(p.idle)
		p.idle = nil
	}
}

// Now makes one pass of k's work on the caller's goroutine and returns its
// error; it returns nil without a pass after Close, while Wait(k) holds,
// or when another pass covers its work (see Config.Queue).
func (p *Pool[K]) Now(ctx context.Context, k K) error {
	p.mu.Lock()
	if !p.startLocked() {
		p.mu.Unlock()
		return nil
	}
	s := p.slots.Acquire(k)
	s.dirty = true
	wait := p.cfg.Wait != nil && p.cfg.Wait(k)
	p.mu.Unlock()
	defer func() {
		p.slots.Release(k)
		p.mu.Lock()
		p.doneLocked()
		p.mu.Unlock()
	}()
	if wait {
		return nil
	}
	if p.cfg.Queue {
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return nil // the work stays for the next pass
		}
	} else {
		select {
		case s.sem <- struct{}{}:
		default:
			return nil // a pass of k runs; it or the next one covers this call
		}
	}
	defer func() { <-s.sem }()
	p.mu.Lock()
	// Queued, a pass that started after this call stored its work
	// covered it (that pass cleared dirty).
	run := !p.cfg.Queue || (s.dirty && ctx.Err() == nil)
	s.dirty = false
	p.mu.Unlock()
	if !run {
		return nil
	}
	return p.pass(ctx, k, s, false)
}

// Kick marks k's work pending and starts k's background worker unless one
// runs. The worker runs with ctx's values but not its cancellation (Close
// cancels it), and makes passes while work keeps arriving, then exits.
func (p *Pool[K]) Kick(ctx context.Context, k K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.startLocked() {
		return
	}
	s := p.slots.Acquire(k) // released by the worker, or just below
	if s.worker {
		s.dirty = true
		p.slots.Release(k)
		p.doneLocked()
		return
	}
	s.worker, s.dirty = true, true
	go p.work(context.WithoutCancel(ctx), k, s)
}

// work is k's background worker.
func (p *Pool[K]) work(ctx context.Context, k K, s *slot) {
	for {
		p.mu.Lock()
		if !s.dirty || p.closed || (p.cfg.Wait != nil && p.cfg.Wait(k)) {
			// Exit in the critical section that Kick checks, so work
			// arriving now starts a new worker.
			s.worker = false
			p.slots.Release(k)
			p.doneLocked()
			p.mu.Unlock()
			return
		}
		s.dirty = false
		p.mu.Unlock()
		select {
		case s.sem <- struct{}{}:
		case <-p.closeCtx.Done():
			continue
		}
		_ = p.pass(ctx, k, s, true) // Run reports its own failures
		<-s.sem
	}
}

// pass runs one pass of k. The caller holds s.sem.
func (p *Pool[K]) pass(ctx context.Context, k K, s *slot, background bool) error {
	return p.cancelable(ctx, s, func(ctx context.Context) error { return p.cfg.Run(ctx, k, background) })
}

// cancelable runs f with a context that an Exclusive of s's key and Close
// cancel. The caller holds s.sem.
func (p *Pool[K]) cancelable(ctx context.Context, s *slot, f func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.closeCtx, cancel)
	p.mu.Lock()
	s.cancel = cancel
	p.mu.Unlock()
	defer func() {
		stop()
		cancel()
		p.mu.Lock()
		s.cancel = nil
		p.mu.Unlock()
	}()
	return f(ctx)
}

// Exclusive cancels k's running pass, if any, waits for it to end (or for
// ctx: then it returns ctx's error) and runs f while no pass of k runs,
// returning f's error. After Close it returns ErrClosed without running f.
func (p *Pool[K]) Exclusive(ctx context.Context, k K, f func() error) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	s := p.slots.Acquire(k)
	if s.cancel != nil {
		s.cancel()
	}
	p.mu.Unlock()
	defer p.slots.Release(k)
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	return f()
}

// Cancelable is Exclusive for work that a later Exclusive (or
// Cancelable) of k, and Close, may cancel as they cancel a pass: f runs
// with a context that they cancel.
func (p *Pool[K]) Cancelable(ctx context.Context, k K, f func(context.Context) error) error {
	return p.Exclusive(ctx, k, func() error {
		s := p.slots.Acquire(k)
		defer p.slots.Release(k)
		return p.cancelable(ctx, s, f)
	})
}

// Flush waits until no pass or worker runs, or ctx is done (it returns
// ctx's error). After Close it returns ErrClosed.
func (p *Pool[K]) Flush(ctx context.Context) error {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return ErrClosed
		}
		if p.inflight == 0 {
			p.mu.Unlock()
			return nil
		}
		idle := p.idle
		p.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close cancels every running pass, waits for them and the workers to
// stop, and refuses work for good: Now and Kick do nothing afterwards. A
// second Close, or one called concurrently, returns once the first has
// stopped the work.
func (p *Pool[K]) Close() {
	p.mu.Lock()
	if p.closed {
		done := p.closeDone
		p.mu.Unlock()
		<-done
		return
	}
	p.closed = true
	p.closeDone = make(chan struct{})
	idle := p.idle
	p.mu.Unlock()
	p.closeAll()
	if idle != nil {
		<-idle
	}
	close(p.closeDone)
}
