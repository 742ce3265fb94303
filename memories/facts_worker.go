package memories

import (
	"context"

	"github.com/memstack/memstack/observe"
)

// ---- extraction scheduling (the pattern of Summary) ----

// after runs or schedules extraction once a message is stored for id.
func (m *Facts) after(ctx context.Context, id identity) {
	if m.cfg.background {
		m.kick(ctx, id)
		return
	}
	m.extractNow(ctx, id)
}

// entryLocked returns id's entry, created if needed, with one more
// reference. m.mu must be held; release drops the reference.
func (m *Facts) entryLocked(id identity) *factsEntry {
	e := m.ids[id]
	if e == nil {
		e = &factsEntry{sem: make(chan struct{}, 1)}
		m.ids[id] = e
	}
	e.refs++
	return e
}

func (m *Facts) release(id identity, e *factsEntry) {
	m.mu.Lock()
	m.releaseLocked(id, e)
	m.mu.Unlock()
}

func (m *Facts) releaseLocked(id identity, e *factsEntry) {
	e.refs--
	if e.refs == 0 && !e.worker && m.ids[id] == e {
		delete(m.ids, id)
	}
}

// startLocked counts one more running extraction or worker; it fails after
// Close. m.mu must be held.
func (m *Facts) startLocked() bool {
	if m.closed {
		return false
	}
	if m.inflight == 0 {
		m.idle = make(chan struct{})
	}
	m.inflight++
	return true
}

func (m *Facts) doneLocked() {
	m.inflight--
	if m.inflight == 0 {
		close(m.idle)
		m.idle = nil
	}
}

// extractNow is synchronous mode: extract id's pending turns on the
// caller's goroutine, one pass. A call that finds another extracting id
// waits for it (or for its own ctx), then makes its own pass, which finds
// its turn covered already or covers it; no call loops over the turns of
// callers that keep arriving, so a save costs its own extraction plus,
// at most, those of the saves of its identity running at the same time.
func (m *Facts) extractNow(ctx context.Context, id identity) {
	m.mu.Lock()
	if !m.startLocked() {
		m.mu.Unlock()
		return
	}
	e := m.entryLocked(id)
	e.dirty = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.releaseLocked(id, e)
		m.doneLocked()
		m.mu.Unlock()
	}()
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return // the turn stays for the next extraction
	}
	m.mu.Lock()
	dirty := e.dirty && ctx.Err() == nil
	e.dirty = false
	m.mu.Unlock()
	if dirty {
		m.step(ctx, id, e, false)
	}
	<-e.sem
}

// kick is background mode: mark id dirty and start its worker unless one
// runs.
func (m *Facts) kick(ctx context.Context, id identity) {
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
	// The worker outlives the call: keep ctx's values (the identity, the
	// recorder, tracing), drop its cancellation; Close cancels the worker.
	go m.work(context.WithoutCancel(ctx), id, e)
}

// work is id's background worker: it extracts while messages keep
// arriving, then exits.
func (m *Facts) work(ctx context.Context, id identity, e *factsEntry) {
	for {
		m.mu.Lock()
		if !e.dirty || m.closed {
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
		m.step(ctx, id, e, true)
		<-e.sem
	}
}

// step extracts id's pending turns with a context that Close and Clear can
// cancel. The caller holds e.sem.
func (m *Facts) step(ctx context.Context, id identity, e *factsEntry, background bool) {
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
	if !background {
		m.catchUp(ctx, id) // the caller's Recorder counts the model calls
		return
	}
	// Model calls made here are recorded on a Recorder of the worker's
	// own (the save that started it has delivered its report already)
	// and reported with the identity's next observed call.
	priv := observe.NewRecorder(observe.OpSave, "", "")
	m.catchUp(observe.WithRecorder(ctx, priv), id)
	if n := priv.Finish(0, nil).LLMCalls; n > 0 {
		m.mu.Lock()
		if m.laterLLM == nil {
			m.laterLLM = make(map[identity]int)
		}
		if _, ok := m.laterLLM[id]; ok || len(m.laterLLM) < maxLaterLLM {
			m.laterLLM[id] += n
		}
		m.mu.Unlock()
	}
}

// maxLaterLLM bounds how many identities' background model calls a Facts
// keeps for their next report (an identity never called again would keep
// its count forever).
const maxLaterLLM = 1 << 16

// reportLaterLLM adds to the Recorder in ctx the background model calls
// made for id since its last observed call.
func (m *Facts) reportLaterLLM(ctx context.Context, id identity) {
	rec := observe.FromContext(ctx)
	if !rec.Enabled() {
		return
	}
	m.mu.Lock()
	n := m.laterLLM[id]
	delete(m.laterLLM, id)
	m.mu.Unlock()
	if n > 0 {
		rec.LLMCall(n)
	}
}
