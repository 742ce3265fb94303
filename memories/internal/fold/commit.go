package fold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/memories/internal/bounded"
	"github.com/memstack/memstack/memories/internal/statejson"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
	"github.com/tmc/langchaingo/llms"
)

// State is what the engine keeps in the store's state (Config.StateName)
// per conversation: its running summary.
type State struct {
	Summary string `json:"summary"`
	// Through is the Seq of the newest message the summary covers.
	Through int64 `json:"through"`
	// Folded counts the messages folded into the summary so far.
	Folded int64 `json:"folded"`
}

// summarize calls the summarizer through bounded.Call: a panic is an
// error, and a call that outlives its context is abandoned.
func (x *Engine) summarize(ctx context.Context, prev string, batch []llms.ChatMessage) (string, error) {
	return bounded.Call(ctx, fmt.Sprintf("the summarizer %T", x.cfg.Summarizer), func(ctx context.Context) (string, error) {
		return x.cfg.Summarizer.Summarize(ctx, prev, batch)
	})
}

// attempt plans a fold for id and, if one is due, summarizes and commits it.
func (x *Engine) attempt(ctx context.Context, id identity) error {
	p, err := x.plan(ctx, id)
	if err != nil {
		x.report(id, 0, 0, err)
		return err
	}
	if p == nil {
		return nil
	}
	n := len(p.batch)
	start := time.Now()
	x.calls.Add(1)
	x.llmCall(ctx)
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if x.cfg.Timeout > 0 {
		sctx, cancel = context.WithTimeout(ctx, x.cfg.Timeout)
	}
	text, err := x.summarize(sctx, p.prev.Summary, p.batch)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded)
	cancel()
	if timedOut {
		err = fmt.Errorf("%w after %v: %w", x.cfg.ErrTimeout, x.cfg.Timeout, err)
	}
	took := time.Since(start)
	if err == nil && strings.TrimSpace(text) == "" {
		err = fmt.Errorf("%w: the summarizer returned no text", summarizer.ErrEmptySummary)
	}
	if err != nil {
		x.failures.Add(1)
		if ctx.Err() == nil { // a cancelled call is not the summarizer's fault
			x.backoffOnce(id)
		}
		err = fmt.Errorf("summarizing %d messages of %s: %w", n, id.Key(), err)
		x.report(id, n, took, err)
		return err
	}
	value, err := json.Marshal(State{Summary: text, Through: p.through, Folded: p.prev.Folded + int64(n)})
	if err != nil {
		err = fmt.Errorf("encoding the summary of %s: %w", id.Key(), err)
		x.report(id, n, took, err)
		return err
	}
	if _, err := x.cfg.Store.PutState(ctx, id, x.cfg.StateName, value, p.version); err != nil {
		err = fmt.Errorf("committing the summary of %s: %w", id.Key(), err)
		x.report(id, n, took, err)
		if errors.Is(err, store.ErrConflict) {
			// Another writer committed a summary first; ours was built on
			// an older one and is dropped, so nothing is folded twice.
			// Finish the other writer's commit; the next turn plans anew.
			x.tidy(context.WithoutCancel(ctx), id)
			return nil
		}
		return err
	}
	x.folded.Add(int64(n))
	x.endBackoff(id)
	// Committed. Under a retention, removing folded messages is
	// housekeeping (loads already skip them), so it is not cancelled with
	// the call and a failure is left for the next fold.
	x.retain(context.WithoutCancel(ctx), id, p.through)
	x.report(id, n, took, nil)
	return nil
}

// retain applies Config.Retain, if set, to id up to Seq limit.
func (x *Engine) retain(ctx context.Context, id identity, limit int64) {
	if x.cfg.Retain != nil {
		x.cfg.Retain(ctx, id, limit)
	}
}

// tidy re-reads id's state and, under a retention, removes the messages
// it lets go.
func (x *Engine) tidy(ctx context.Context, id identity) {
	if x.cfg.Retain == nil {
		return
	}
	if st, _, err := x.readState(ctx, id); err == nil && st.Through > 0 {
		x.retain(ctx, id, st.Through)
	}
}

// readState returns id's State and its version: for an absent state the
// zero State and the store's absent version, which a Clear or Forget
// moves (see package store).
func (x *Engine) readState(ctx context.Context, id identity) (State, int64, error) {
	return statejson.Read[State](ctx, x.cfg.Store, id, x.cfg.StateName,
		func(err error) error { return fmt.Errorf("memstack: reading the summary of %s: %w", id.Key(), err) },
		func(err error) error {
			return fmt.Errorf("memstack: the stored summary of %s (state %q) is not valid JSON: %w", id.Key(), x.cfg.StateName, err)
		})
}

// Unsummarized reads id's State, then the system messages and the
// non-system messages the summary does not cover (store Tail after the
// covered Seq), both in order: what a load shows. The state is read
// again after the messages and the pair retried until it is unchanged: a
// Clear in between (by any replica) would otherwise pair the cleared
// summary with messages saved after the Clear, and under a retention a
// fold committed in between may remove messages the first read does not
// cover.
func (x *Engine) Unsummarized(ctx context.Context, id memstack.Identity) (State, []store.Record, []store.Record, error) {
	for attempt := 0; ; attempt++ {
		st, version, err := x.readState(ctx, id)
		if err != nil {
			return State{}, nil, nil, err
		}
		recs, err := x.cfg.Store.Tail(ctx, id, math.MaxInt, st.Through)
		if err != nil {
			return State{}, nil, nil, fmt.Errorf("memstack: loading history: %w", err)
		}
		if attempt < 8 {
			_, again, err := x.readState(ctx, id)
			if err != nil {
				return State{}, nil, nil, err
			}
			if again != version {
				continue
			}
		}
		system, rest := conv.SplitSystem(recs, recMessage)
		return st, system, rest, nil
	}
}

// recMessage is a record's message: the message func of the conv helpers
// for records.
func recMessage(r store.Record) llms.ChatMessage { return r.Message }
