package memories

import (
	"context"
	"fmt"
	"time"

	"github.com/memstack/memstack/observe"
)

// Summarizations run in m.pool (package memories/internal/worker): one at
// a time per identity, synchronously on the saving call's goroutine or in
// a background worker per identity. This file is what the Summary gives
// the pool: a pass (run) and the retry backoff (waiting).

// open returns ErrClosed after Close.
func (m *Summary) open() error {
	if m.pool.Closed() {
		return ErrClosed
	}
	return nil
}

// after runs or schedules summarization once what (a turn, a message) is
// stored for id.
func (m *Summary) after(ctx context.Context, id identity, what string) error {
	if m.cfg.background {
		m.pool.Kick(ctx, id)
		return nil
	}
	if err := m.pool.Now(ctx, id); err != nil {
		return fmt.Errorf("memstack: %s stored; summarization failed: %w", what, err)
	}
	return nil
}

// run is one summarization attempt for id. In the background the call's
// observe.Recorder is dropped: the call's report is done before the
// worker summarizes.
func (m *Summary) run(ctx context.Context, id identity, background bool) error {
	if background && observe.FromContext(ctx) != nil {
		ctx = observe.WithRecorder(ctx, nil)
	}
	if m.cfg.earlier > 0 && !m.startedHere(id) {
		// The user's next conversation starts (or this process serves it
		// for the first time): complete the earlier ones first. A failure
		// is reported and never holds up this conversation's own
		// summarization; the earlier conversation is completed when the
		// user's next conversation starts, or by Complete.
		if err := m.completeEarlier(ctx, id); err != nil {
			if ctx.Err() != nil {
				return err
			}
			m.report(id, 0, 0, err)
		}
		m.noteStarted(id)
	}
	return m.attempt(ctx, id)
}

// waiting reports whether id's retry backoff has not passed yet.
func (m *Summary) waiting(id identity) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.backoffs.Peek(id)
	return ok && time.Now().Before(b.nextTry)
}
