package memories

import (
	"context"
	"fmt"
	"time"

	"github.com/memstack/memstack/observe"
)

// open returns ErrClosed after Close.
func (m *Summary) open() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// after runs or schedules summarization once what (a turn, a message) is
// stored for id.
func (m *Summary) after(ctx context.Context, id identity, what string) error {
	if m.cfg.background {
		m.kick(ctx, id)
		return nil
	}
	if err := m.summarizeNow(ctx, id); err != nil {
		return fmt.Errorf("memstack: %s stored; summarization failed: %w", what, err)
	}
	return nil
}

// entryLocked returns id's entry, created if needed, with one more
// reference. m.mu must be held; release drops the reference.
func (m *Summary) entryLocked(id identity) *sumEntry {
	e := m.ids[id]
	if e == nil {
		e = &sumEntry{sem: make(chan struct{}, 1)}
		m.ids[id] = e
	}
	e.refs++
	return e
}

func (m *Summary) release(id identity, e *sumEntry) {
	m.mu.Lock()
	m.releaseLocked(id, e)
	m.mu.Unlock()
}

// releaseLocked drops a reference to e, and e itself once nothing uses it
// (its backoff, if any, is in m.backoffs).
func (m *Summary) releaseLocked(id identity, e *sumEntry) {
	e.refs--
	if e.refs == 0 && !e.worker && m.ids[id] == e {
		delete(m.ids, id)
	}
}

// waitingLocked reports whether id's retry backoff has not passed yet.
// m.mu must be held.
func (m *Summary) waitingLocked(id identity) bool {
	b, ok := m.backoffs.Peek(id)
	return ok && time.Now().Before(b.nextTry)
}

// startLocked counts one more running summarization or worker; it fails
// after Close. m.mu must be held.
func (m *Summary) startLocked() bool {
	if m.closed {
		return false
	}
	if m.inflight == 0 {
		m.idle = make(chan struct{})
	}
	m.inflight++
	return true
}

func (m *Summary) doneLocked() {
	m.inflight--
	if m.inflight == 0 {
		close(m.idle)
		m.idle = nil
	}
}

// summarizeNow is synchronous mode: one summarization step for id on the
// caller's goroutine, unless one is already running for id, the backoff has
// not passed, or the memory is closed.
func (m *Summary) summarizeNow(ctx context.Context, id identity) error {
	m.mu.Lock()
	if !m.startLocked() {
		m.mu.Unlock()
		return nil
	}
	e := m.entryLocked(id)
	wait := m.waitingLocked(id)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.releaseLocked(id, e)
		m.doneLocked()
		m.mu.Unlock()
	}()
	if wait {
		return nil
	}
	select {
	case e.sem <- struct{}{}:
	default:
		return nil // another call is summarizing id; it or the next turn covers this one
	}
	defer func() { <-e.sem }()
	return m.step(ctx, id, e)
}

// kick is background mode: mark id dirty and start its worker unless one
// runs.
func (m *Summary) kick(ctx context.Context, id identity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if e := m.ids[id]; e != nil && e.worker {
		e.dirty = true
		return
	}
	if !m.startLocked() {
		return
	}
	e := m.entryLocked(id)
	e.worker, e.dirty = true, true
	// The worker outlives the call: keep ctx's values (the identity,
	// tracing), drop its cancellation; Close cancels the worker. The
	// call's observe.Recorder is dropped too: the call's report is done
	// before the worker summarizes.
	wctx := context.WithoutCancel(ctx)
	if observe.FromContext(ctx) != nil {
		wctx = observe.WithRecorder(wctx, nil)
	}
	go m.work(wctx, id, e)
}

// work is id's background worker: it summarizes while messages keep
// arriving, then exits.
func (m *Summary) work(ctx context.Context, id identity, e *sumEntry) {
	for {
		m.mu.Lock()
		if !e.dirty || m.closed || m.waitingLocked(id) {
			// Exit in the same critical section that kick checks, so a
			// message arriving now starts a new worker.
			e.worker = false
			m.releaseLocked(id, e)
			m.doneLocked()
			m.mu.Unlock()
			return
		}
		e.dirty = false
		m.mu.Unlock()
		select {
		case e.sem <- struct{}{}:
		case <-m.closeCtx.Done():
			continue
		}
		_ = m.step(ctx, id, e) // reported to the hook
		<-e.sem
	}
}

// step runs one summarization attempt with a context that Close and Clear
// can cancel. The caller holds e.sem.
func (m *Summary) step(ctx context.Context, id identity, e *sumEntry) error {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(m.closeCtx, cancel)
	m.mu.Lock()
	e.cancel = cancel
	m.mu.Unlock()
	defer func() {
		stop()
		cancel()
		m.mu.Lock()
		e.cancel = nil
		m.mu.Unlock()
	}()
	return m.attempt(ctx, id)
}
