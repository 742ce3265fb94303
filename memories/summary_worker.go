package memories

import (
	"context"
	"fmt"
	"time"

	"github.com/memstack/memstack/memories/internal/fold"
	"github.com/memstack/memstack/store"
)

// Summarizations run in m.pool (package memories/internal/worker): one at
// a time per identity, synchronously on the saving call's goroutine or in
// a background worker per identity; a pass is the engine's (package
// memories/internal/fold). This file is what the Summary gives them: the
// engine's configuration, and the layer's side of the calls.

// engineConfig is the fold engine's configuration: the Summary's options
// and its callbacks.
func (m *Summary) engineConfig() fold.Config {
	c := &m.cfg
	fc := fold.Config{
		Store:          c.store,
		Summarizer:     m.sum,
		StateName:      SummaryStateName,
		MaxMessages:    m.n,
		BatchSize:      m.m,
		MaxTokens:      m.t,
		Cost:           m.cost,
		Timeout:        DefaultSummaryTimeout,
		ErrTimeout:     ErrSummaryTimeout,
		RetryMin:       defaultRetryMin,
		RetryMax:       defaultRetryMax,
		MaxBackoffs:    maxSummaryBackoffs,
		Earlier:        c.earlier,
		UsersStateName: UserSummariesStateName,
		Report:         m.report,
		Closed:         func() bool { return m.pool.Closed() },
		Alone:          m.alone,
	}
	if c.sumTimeoutSet {
		fc.Timeout = c.sumTimeout
	}
	if c.retrySet {
		fc.RetryMin, fc.RetryMax = c.retryMin, c.retryMax
	}
	if c.retention != nil {
		fc.Retain = func(ctx context.Context, id identity, limit int64) { m.retain(ctx, id, 0, limit) }
	}
	return fc
}

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

// alone runs f for id with no summarization of id, and no Clear of it,
// running in this Summary (worker.Pool.Cancelable): a Clear of id
// cancels f and waits for it to end.
func (m *Summary) alone(ctx context.Context, id identity, f func(context.Context) error) error {
	return poolErr(m.pool.Cancelable(ctx, id, f), ctx, "completing a conversation", ErrClosed)
}

// report passes a summarization attempt to the hook (WithSummaryHook).
func (m *Summary) report(id identity, n int, took time.Duration, err error) {
	if m.cfg.summaryHook != nil {
		m.cfg.summaryHook(SummaryEvent{IdentityHash: m.HashIdentity(id), Messages: n, Duration: took, Err: m.redact(err, id)})
	}
}

// cost is a message's token cost in token mode: its rendered line plus
// the line break, cached per (identity, Seq), capped at 2^40 so sums
// never wrap. A negative count or a panicking counter is an error
// (tokens.Count), never cached.
func (m *Summary) cost(id identity, r store.Record) (int, error) {
	return m.lineCost(m.counts, m.counter, id, r, 1<<40)
}
