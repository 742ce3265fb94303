// Package factsengine is the mechanism of memories.Facts: it extracts
// facts from the exchanges stored in a store and keeps them, with what
// extraction covered, in the store's state. What a load shows, in what
// order and how — the policy — is memories.Facts's.
//
//   - State. Each scope (Config.Scope: the conversation, or a user's
//     derived identity shared by their conversations) has one JSON value
//     in the store's state (Config.StateName): every fact, current and
//     superseded, in the order recorded; per conversation, the Seq of
//     the newest message extraction covered (Through); and an epoch.
//   - Extraction. CatchUp reads the messages after the covered one and
//     gives them to the extractor exchange by exchange, in order (human
//     and AI messages with non-blank content only), through a bounded
//     call (Config.Timeout; a panic is an error, a call that outlives its
//     context is abandoned). It keeps at most Config.MaxPerTurn valid
//     candidates of an exchange; a key stated twice keeps its last value.
//     A fact is valid from the time of its source messages, else from the
//     clock at commit.
//   - Commit. An exchange's facts and its coverage are committed together
//     in one compare-and-set of the state (retried on store.ErrConflict):
//     nothing is recorded twice, and concurrent writers — other processes
//     sharing the store included — never lose each other's facts. A
//     failed extraction commits the coverage alone (the exchange is not
//     retried); a cancelled one commits nothing (the exchange is left for
//     the next extraction).
//   - Supersession. A new value for a key ends the current fact at the
//     new value's ValidFrom (never before the old one's) and is appended;
//     the same value up to case changes nothing. Facts are never deleted,
//     except by Forget.
//   - Clear and Forget. Each commit reads the state, then the exchange's
//     messages' bounds, then writes with the version it read: if a Clear
//     or Forget (by any replica) removed the messages, it records nothing;
//     one that came after the read makes the write conflict, and the
//     retry finds the messages gone.
//   - Epochs. Forget removes a scope's facts but keeps the coverage (a
//     scope shared by conversations must not extract their old exchanges
//     again), and moves the state's random epoch. CatchUp notes the epoch
//     before it reads the messages (and, for a shared scope, reads it
//     again after them until it stands still); a commit that finds
//     another epoch records the coverage but none of the facts, which
//     come from an exchange said before the Forget.
package factsengine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/memories/internal/bounded"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

type identity = memstack.Identity

// Bounds on a candidate's fields; a candidate over them is dropped.
const (
	maxSubject   = 64
	maxAttribute = 128
	maxValue     = 500
	stateRetries = 8
)

// Config is what an Engine works with.
type Config struct {
	// Store holds the messages and the facts state.
	Store store.Store
	// StateName names the store state holding each scope's facts.
	StateName string
	// Extractor finds the candidates of an exchange.
	Extractor extract.Extractor
	// Timeout bounds each extractor call (0: none).
	Timeout time.Duration
	// MaxPerTurn is how many facts one exchange records at most.
	MaxPerTurn int
	// Clock dates the facts of messages stored without a time.
	Clock func() time.Time
	// Scope returns the identity whose state keeps the facts of id (nil:
	// id itself). A scope other than id is shared by conversations.
	Scope func(id memstack.Identity) memstack.Identity
	// Report, if not nil, gets every extraction attempt of id, and every
	// failure to read what to extract.
	Report func(id memstack.Identity, ev Event)
}

// Event is one extraction attempt (one exchange of one identity), or a
// failure to read what to extract (Err alone).
type Event struct {
	// Messages given to the extractor; Candidates it returned.
	Messages, Candidates int
	// Stored facts recorded; Superseded facts they ended; Dropped
	// candidates left out (over MaxPerTurn, invalid, restated).
	Stored, Superseded, Dropped int
	// Duration of the extractor call.
	Duration time.Duration
	// Err is nil when the facts were committed.
	Err error
}

// Stats counts an Engine's work since it was built.
type Stats struct {
	Extractions, Failures, Stored, Superseded int64
}

// Engine extracts facts into Config.Store's state and keeps them. It is
// safe for concurrent use; memories.Facts runs at most one CatchUp per
// identity at a time (two would call the extractor twice for an exchange,
// which its commit records once).
type Engine struct {
	cfg Config

	extractions, failures, stored, superseded atomic.Int64
}

// New returns an Engine for c.
func New(c Config) *Engine {
	if c.Scope == nil {
		c.Scope = func(id identity) identity { return id }
	}
	return &Engine{cfg: c}
}

// Stats returns the engine's counters.
func (x *Engine) Stats() Stats {
	return Stats{
		Extractions: x.extractions.Load(),
		Failures:    x.failures.Load(),
		Stored:      x.stored.Load(),
		Superseded:  x.superseded.Load(),
	}
}

func (x *Engine) report(id identity, ev Event) {
	if x.cfg.Report != nil {
		x.cfg.Report(id, ev)
	}
}

func recMessage(r store.Record) llms.ChatMessage { return r.Message }

// CatchUp extracts, exchange by exchange, every message of id that
// extraction has not covered yet, until there is none or an attempt
// cannot advance. Failures go to Config.Report.
func (x *Engine) CatchUp(ctx context.Context, id identity) {
	for ctx.Err() == nil {
		recs, epoch, err := x.pending(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				x.failures.Add(1)
				x.report(id, Event{Err: err})
			}
			return
		}
		if len(recs) == 0 {
			return
		}
		for _, g := range conv.Exchanges(recs, recMessage) {
			if !x.extractExchange(ctx, id, g, epoch) {
				return
			}
		}
	}
}

// pending returns id's messages after the last one extraction covered,
// and the epoch of the facts state it read (before the messages, so that
// commit can tell a Forget that came after).
func (x *Engine) pending(ctx context.Context, id identity) ([]store.Record, uint64, error) {
	scope := x.cfg.Scope(id)
	for range stateRetries {
		recs, st, err := x.pendingOnce(ctx, id)
		if err != nil || recs == nil {
			return nil, 0, err
		}
		if scope == id {
			return recs, st.Epoch, nil // only a shared scope's Forget moves the epoch
		}
		// The epoch again, after the messages: if a Forget moved it while
		// they were read, an exchange said after that Forget may be among
		// them, and commit would drop its facts; read again. When it did
		// not move, every exchange read was stored before any Forget that
		// moves it later, so commit may drop their facts then.
		again, _, err := x.read(ctx, scope)
		if err != nil {
			return nil, 0, err
		}
		if again.Epoch == st.Epoch {
			return recs, st.Epoch, nil
		}
	}
	return nil, 0, fmt.Errorf("memstack: reading the facts of %s: %w: the facts were cleared %d times while their messages were read", scope.Key(), store.ErrConflict, stateRetries)
}

// pendingOnce is one read of pending: the state, then the messages after
// the covered one (nil when there are none).
func (x *Engine) pendingOnce(ctx context.Context, id identity) ([]store.Record, state, error) {
	st, _, err := x.read(ctx, x.cfg.Scope(id))
	if err != nil {
		return nil, state{}, err
	}
	through := st.Through[id.Conversation]
	stat, err := x.cfg.Store.Stat(ctx, id)
	if err != nil {
		return nil, state{}, fmt.Errorf("memstack: reading the messages of %s: %w", id.Key(), err)
	}
	if stat.Count == 0 || stat.LastSeq <= through {
		return nil, state{}, nil
	}
	// Read back from the newest message until the covered one, growing
	// the window: a save reads a few messages, not the whole history.
	var recs []store.Record
	for k := 8; ; k *= 4 {
		if k >= stat.Count {
			recs, err = x.cfg.Store.All(ctx, id)
		} else {
			recs, err = x.cfg.Store.Last(ctx, id, k)
		}
		if err != nil {
			return nil, state{}, fmt.Errorf("memstack: reading the messages of %s: %w", id.Key(), err)
		}
		if k >= stat.Count || len(recs) < k || len(recs) == 0 || recs[0].Seq <= through {
			break
		}
	}
	i := sort.Search(len(recs), func(i int) bool { return recs[i].Seq > through })
	if i == len(recs) {
		return nil, st, nil
	}
	return recs[i:], st, nil
}

// extractExchange extracts and commits the facts of one exchange and
// reports false when extraction cannot go on (cancelled, or the exchange
// could not be marked as covered).
func (x *Engine) extractExchange(ctx context.Context, id identity, ex []store.Record, epoch uint64) bool {
	var msgs []llms.ChatMessage
	var seqs []int64
	var times []time.Time
	for _, r := range ex {
		t := r.Message.GetType()
		if (t == llms.ChatMessageTypeHuman || t == llms.ChatMessageTypeAI) && strings.TrimSpace(r.Message.GetContent()) != "" {
			msgs = append(msgs, r.Message)
			seqs = append(seqs, r.Seq)
			times = append(times, r.Time)
		}
	}
	through := ex[len(ex)-1].Seq
	if len(msgs) == 0 {
		_, _, err := x.commit(ctx, id, through, nil, epoch)
		return err == nil
	}
	ev := Event{Messages: len(msgs)}
	start := time.Now()
	x.extractions.Add(1)
	cands, err := x.callExtractor(ctx, msgs)
	ev.Duration = time.Since(start)
	ev.Candidates = len(cands)
	if err != nil {
		x.failures.Add(1)
		ev.Err = fmt.Errorf("extracting facts from %d messages of %s: %w", len(msgs), id.Key(), err)
		x.report(id, ev)
		if ctx.Err() != nil {
			return false // cancelled: the exchange is left for the next extraction
		}
		// Skip the exchange: a malformed answer or a failing model would fail
		// again on it.
		_, _, err := x.commit(ctx, id, through, nil, epoch)
		return err == nil
	}
	var facts []Fact
	facts, ev.Dropped = x.choose(id, cands, seqs, times)
	ev.Stored, ev.Superseded, err = x.commit(ctx, id, through, facts, epoch)
	if err != nil {
		x.failures.Add(1)
		ev.Err = fmt.Errorf("storing the facts of %s: %w", id.Key(), err)
		x.report(id, ev)
		return false
	}
	x.stored.Add(int64(ev.Stored))
	x.superseded.Add(int64(ev.Superseded))
	x.report(id, ev)
	return true
}

// callExtractor runs the extractor with the configured timeout through
// bounded.Call: a panic is an error, and an extractor that ignores its
// deadline is abandoned (its late answer discarded), so Close, Clear and
// Flush return on time.
func (x *Engine) callExtractor(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
	if x.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, x.cfg.Timeout)
		defer cancel()
	}
	return bounded.Call(ctx, fmt.Sprintf("the extractor %T", x.cfg.Extractor), func(ctx context.Context) ([]extract.Candidate, error) {
		return x.cfg.Extractor.Extract(ctx, msgs)
	})
}

// choose validates the candidates of one exchange and turns at most
// MaxPerTurn of them into facts, in order, each valid from the time of its
// sources (zero when none has a time: commit dates it); it returns how
// many it dropped. times[i] is the time of the message seqs[i].
func (x *Engine) choose(id identity, cands []extract.Candidate, seqs []int64, times []time.Time) ([]Fact, int) {
	facts := make([]Fact, 0, min(len(cands), x.cfg.MaxPerTurn))
	at := make(map[string]int, len(cands))
	dropped := 0
	for _, c := range cands {
		subject, attr := extract.Normalize(c.Subject, c.Attribute)
		value := strings.Join(strings.FieldsFunc(c.Value, unicode.IsSpace), " ")
		if subject == "" || attr == "" || value == "" ||
			utf8.RuneCountInString(subject) > maxSubject ||
			utf8.RuneCountInString(attr) > maxAttribute ||
			utf8.RuneCountInString(value) > maxValue {
			dropped++
			continue
		}
		var src []int64
		for _, i := range c.Sources {
			if i >= 0 && i < len(seqs) && !slices.Contains(src, seqs[i]) {
				src = append(src, seqs[i])
			}
		}
		if len(src) == 0 {
			src = slices.Clone(seqs)
		}
		slices.Sort(src)
		f := Fact{Key: subject + " " + attr, Subject: subject, Attribute: attr, Value: value,
			origin:   origin{Sources: src, Conversation: id.Conversation, Rule: c.Rule},
			validity: validity{ValidFrom: newestTime(src, seqs, times)}}
		if i, ok := at[f.Key]; ok {
			facts[i] = f // restated in the same exchange: the later value wins
			dropped++
			continue
		}
		if len(facts) == x.cfg.MaxPerTurn {
			dropped++
			continue
		}
		at[f.Key] = len(facts)
		facts = append(facts, f)
	}
	return facts, dropped
}

// newestTime returns the newest non-zero time of the messages in src
// (times[i] is the time of seqs[i]), or the zero time if none has one.
func newestTime(src, seqs []int64, times []time.Time) time.Time {
	var at time.Time
	for i, seq := range seqs {
		if t := times[i]; !t.IsZero() && (at.IsZero() || t.After(at)) && slices.Contains(src, seq) {
			at = t
		}
	}
	return at
}

// apply records facts in st, dating those without a ValidFrom now: a fact
// whose key has a current fact with the same value (up to case) changes
// nothing; one with another value ends the current fact at its own
// ValidFrom (at the earliest the current fact's) and is appended.
func apply(st *state, facts []Fact, now time.Time) (stored, superseded int) {
	current := make(map[string]int, len(st.Facts))
	for i, f := range st.Facts {
		if f.ValidTo.IsZero() {
			current[f.Key] = i
		}
	}
	for _, f := range facts {
		if f.ValidFrom.IsZero() {
			f.ValidFrom = now
		}
		if i, ok := current[f.Key]; ok {
			old := &st.Facts[i]
			if strings.EqualFold(old.Value, f.Value) {
				continue
			}
			old.ValidTo = f.ValidFrom
			if old.ValidTo.Before(old.ValidFrom) {
				old.ValidTo = old.ValidFrom // an exchange replayed out of order
			}
			superseded++
		}
		f.Sources = slices.Clone(f.Sources)
		current[f.Key] = len(st.Facts)
		st.Facts = append(st.Facts, f)
		stored++
	}
	return stored, superseded
}
