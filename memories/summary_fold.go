package memories

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/memstack/memstack/memories/internal/bounded"
	"math"
	"strings"
	"time"

	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
	"github.com/tmc/langchaingo/llms"
)

// summarize calls the summarizer through bounded.Call: a panic is an
// error, and a call that outlives its context is abandoned.
func (m *Summary) summarize(ctx context.Context, prev string, batch []llms.ChatMessage) (string, error) {
	return bounded.Call(ctx, fmt.Sprintf("the summarizer %T", m.sum), func(ctx context.Context) (string, error) {
		return m.sum.Summarize(ctx, prev, batch)
	})
}

// sumPlan is one fold: the batch of messages and the state it builds on.
type sumPlan struct {
	prev    summaryState
	version int64
	batch   []llms.ChatMessage
	through int64
}

// attempt plans a fold for id and, if one is due, summarizes and commits it.
func (m *Summary) attempt(ctx context.Context, id identity) error {
	p, err := m.plan(ctx, id)
	if err != nil {
		m.report(id, 0, 0, err)
		return err
	}
	if p == nil {
		return nil
	}
	n := len(p.batch)
	start := time.Now()
	m.calls.Add(1)
	if _, offline := m.sum.(*summarizer.Extractive); !offline {
		observe.FromContext(ctx).LLMCall(1)
	}
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if m.timeout > 0 {
		sctx, cancel = context.WithTimeout(ctx, m.timeout)
	}
	text, err := m.summarize(sctx, p.prev.Summary, p.batch)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded)
	cancel()
	if timedOut {
		err = fmt.Errorf("%w after %v: %w", ErrSummaryTimeout, m.timeout, err)
	}
	took := time.Since(start)
	if err == nil && strings.TrimSpace(text) == "" {
		err = fmt.Errorf("%w: the summarizer returned no text", summarizer.ErrEmptySummary)
	}
	if err != nil {
		m.failures.Add(1)
		if ctx.Err() == nil { // a cancelled call is not the summarizer's fault
			m.backoff(id)
		}
		err = fmt.Errorf("summarizing %d messages of %s: %w", n, id.Key(), err)
		m.report(id, n, took, err)
		return err
	}
	value, err := json.Marshal(summaryState{Summary: text, Through: p.through, Folded: p.prev.Folded + int64(n)})
	if err != nil {
		err = fmt.Errorf("encoding the summary of %s: %w", id.Key(), err)
		m.report(id, n, took, err)
		return err
	}
	if _, err := m.cfg.store.PutState(ctx, id, SummaryStateName, value, p.version); err != nil {
		err = fmt.Errorf("committing the summary of %s: %w", id.Key(), err)
		m.report(id, n, took, err)
		if errors.Is(err, store.ErrConflict) {
			// Another writer committed a summary first; ours was built on
			// an older one and is dropped, so nothing is folded twice.
			// Finish the other writer's commit; the next turn plans anew.
			m.tidy(context.WithoutCancel(ctx), id)
			return nil
		}
		return err
	}
	m.folded.Add(int64(n))
	m.mu.Lock()
	m.backoffs.Remove(id)
	m.mu.Unlock()
	// Committed. Under a retention, removing folded messages is
	// housekeeping (loads already skip them), so it is not cancelled with
	// the call and a failure is left for the next fold.
	m.retain(context.WithoutCancel(ctx), id, 0, p.through)
	m.report(id, n, took, nil)
	return nil
}

// tidy re-reads id's state and, under a retention, removes the messages
// it lets go.
func (m *Summary) tidy(ctx context.Context, id identity) {
	if m.cfg.retention == nil {
		return
	}
	if st, _, err := m.readState(ctx, id); err == nil && st.Through > 0 {
		m.retain(ctx, id, 0, st.Through)
	}
}

// backoff records one more failure of id and when to try it again. After
// Close it records nothing.
func (m *Summary) backoff(id identity) {
	if m.pool.Closed() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, _ := m.backoffs.Get(id)
	b.failures++
	d := m.retryMin
	for i := 1; i < b.failures && d < m.retryMax; i++ {
		d *= 2
	}
	d = min(d, m.retryMax)
	b.nextTry = time.Now().Add(d)
	m.backoffs.Add(id, b)
}

func (m *Summary) report(id identity, n int, took time.Duration, err error) {
	if m.cfg.summaryHook != nil {
		m.cfg.summaryHook(SummaryEvent{IdentityHash: m.HashIdentity(id), Messages: n, Duration: took, Err: m.redact(err, id)})
	}
}

// readState returns id's summary state and its version: for an absent
// state the zero summaryState and the store's absent version, which a
// Clear or Forget moves (see package store).
func (m *Summary) readState(ctx context.Context, id identity) (summaryState, int64, error) {
	st, err := m.cfg.store.GetState(ctx, id, SummaryStateName)
	if err != nil {
		return summaryState{}, 0, fmt.Errorf("memstack: reading the summary of %s: %w", id.Key(), err)
	}
	var s summaryState
	if !st.Exists() {
		return s, st.Version, nil // the absent version: a Clear or Forget moves it
	}
	if err := json.Unmarshal(st.Value, &s); err != nil {
		return summaryState{}, 0, fmt.Errorf("memstack: the stored summary of %s (state %q) is not valid JSON: %w", id.Key(), SummaryStateName, err)
	}
	return s, st.Version, nil
}

// unsummarized reads id's summary state, then the system messages and
// the non-system messages the summary does not cover (store Tail after
// the covered Seq), both in order: what a load shows. The state is read
// again after the messages and the pair retried until it is unchanged: a
// Clear in between (by any replica) would otherwise pair the cleared
// summary with messages saved after the Clear, and under a retention a
// fold committed in between may remove messages the first read does not
// cover.
func (m *Summary) unsummarized(ctx context.Context, id identity) (summaryState, []store.Record, []store.Record, error) {
	for attempt := 0; ; attempt++ {
		st, version, err := m.readState(ctx, id)
		if err != nil {
			return summaryState{}, nil, nil, err
		}
		recs, err := m.cfg.store.Tail(ctx, id, math.MaxInt, st.Through)
		if err != nil {
			return summaryState{}, nil, nil, fmt.Errorf("memstack: loading history: %w", err)
		}
		if attempt < 8 {
			_, again, err := m.readState(ctx, id)
			if err != nil {
				return summaryState{}, nil, nil, err
			}
			if again != version {
				continue
			}
		}
		system, rest := split(recs)
		return st, system, rest, nil
	}
}
