package memories

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/memstack/memstack/memories/internal/bounded"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

// ---- extraction ----

// catchUp extracts, exchange by exchange, every message of id that
// extraction has not covered yet, until there is none or an attempt
// cannot advance.
func (m *Facts) catchUp(ctx context.Context, id identity) {
	for ctx.Err() == nil {
		recs, epoch, err := m.pending(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				m.failures.Add(1)
				m.report(FactsEvent{IdentityHash: m.HashIdentity(id), Err: m.redact(err, id)})
			}
			return
		}
		if len(recs) == 0 {
			return
		}
		for _, g := range conv.Exchanges(recs, recMessage) {
			if !m.extractExchange(ctx, id, g, epoch) {
				return
			}
		}
	}
}

// pending returns id's messages after the last one extraction covered,
// and the epoch of the facts state it read (before the messages, so that
// commit can tell a Clear that came after).
func (m *Facts) pending(ctx context.Context, id identity) ([]store.Record, uint64, error) {
	for range stateRetries {
		recs, st, err := m.pendingOnce(ctx, id)
		if err != nil || recs == nil {
			return nil, 0, err
		}
		if !m.perUser {
			return recs, st.Epoch, nil // only a per-user Clear moves the epoch
		}
		// The epoch again, after the messages: if a per-user Clear moved
		// it while they were read, an exchange said after that Clear may be
		// among them, and commit would drop its facts; read again. When
		// it did not move, every exchange read was stored before any Clear
		// that moves it later, so commit may drop their facts then.
		again, _, err := m.readState(ctx, m.scope(id))
		if err != nil {
			return nil, 0, err
		}
		if again.Epoch == st.Epoch {
			return recs, st.Epoch, nil
		}
	}
	return nil, 0, fmt.Errorf("memstack: reading the facts of %s: %w: the facts were cleared %d times while their messages were read", m.scope(id).Key(), store.ErrConflict, stateRetries)
}

// pendingOnce is one read of pending: the state, then the messages after
// the covered one (nil when there are none).
func (m *Facts) pendingOnce(ctx context.Context, id identity) ([]store.Record, factsState, error) {
	st, _, err := m.readState(ctx, m.scope(id))
	if err != nil {
		return nil, factsState{}, err
	}
	through := st.Through[id.Conversation]
	stat, err := m.cfg.store.Stat(ctx, id)
	if err != nil {
		return nil, factsState{}, fmt.Errorf("memstack: reading the messages of %s: %w", id.Key(), err)
	}
	if stat.Count == 0 || stat.LastSeq <= through {
		return nil, factsState{}, nil
	}
	// Read back from the newest message until the covered one, growing
	// the window: a save reads a few messages, not the whole history.
	var recs []store.Record
	for k := 8; ; k *= 4 {
		if k >= stat.Count {
			recs, err = m.cfg.store.All(ctx, id)
		} else {
			recs, err = m.cfg.store.Last(ctx, id, k)
		}
		if err != nil {
			return nil, factsState{}, fmt.Errorf("memstack: reading the messages of %s: %w", id.Key(), err)
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
func (m *Facts) extractExchange(ctx context.Context, id identity, ex []store.Record, epoch uint64) bool {
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
		_, _, err := m.commit(ctx, id, through, nil, epoch)
		return err == nil
	}
	ev := FactsEvent{IdentityHash: m.HashIdentity(id), Messages: len(msgs)}
	start := time.Now()
	m.extractions.Add(1)
	cands, err := m.callExtractor(ctx, msgs)
	ev.Duration = time.Since(start)
	ev.Candidates = len(cands)
	if err != nil {
		m.failures.Add(1)
		ev.Err = m.redact(fmt.Errorf("extracting facts from %d messages of %s: %w", len(msgs), id.Key(), err), id)
		m.report(ev)
		if ctx.Err() != nil {
			return false // cancelled: the exchange is left for the next extraction
		}
		// Skip the exchange: a malformed answer or a failing model would fail
		// again on it.
		_, _, err := m.commit(ctx, id, through, nil, epoch)
		return err == nil
	}
	var facts []Fact
	facts, ev.Dropped = m.choose(id, cands, seqs, times)
	ev.Stored, ev.Superseded, err = m.commit(ctx, id, through, facts, epoch)
	if err != nil {
		m.failures.Add(1)
		ev.Err = m.redact(fmt.Errorf("storing the facts of %s: %w", id.Key(), err), id)
		m.report(ev)
		return false
	}
	m.stored.Add(int64(ev.Stored))
	m.superseded.Add(int64(ev.Superseded))
	m.report(ev)
	return true
}

// callExtractor runs the extractor with the configured timeout through
// callBounded: a panic is an error, and an extractor that ignores its
// deadline is abandoned (its late answer discarded), so Close, Clear and
// Flush return on time.
func (m *Facts) callExtractor(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
	if m.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.timeout)
		defer cancel()
	}
	return bounded.Call(ctx, fmt.Sprintf("the extractor %T", m.ext), func(ctx context.Context) ([]extract.Candidate, error) {
		return m.ext.Extract(ctx, msgs)
	})
}

// choose validates the candidates of one exchange and turns at most
// maxPerTurn of them into facts, in order, each valid from the time of its
// sources (zero when none has a time: commit dates it); it returns how
// many it dropped. times[i] is the time of the message seqs[i].
func (m *Facts) choose(id identity, cands []extract.Candidate, seqs []int64, times []time.Time) ([]Fact, int) {
	facts := make([]Fact, 0, min(len(cands), m.maxPerTurn))
	at := make(map[string]int, len(cands))
	dropped := 0
	for _, c := range cands {
		subject, attr := extract.Normalize(c.Subject, c.Attribute)
		value := strings.Join(strings.FieldsFunc(c.Value, unicode.IsSpace), " ")
		if subject == "" || attr == "" || value == "" ||
			utf8.RuneCountInString(subject) > maxFactSubject ||
			utf8.RuneCountInString(attr) > maxFactAttribute ||
			utf8.RuneCountInString(value) > maxFactValue {
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
			Sources: src, Conversation: id.Conversation, Rule: c.Rule, ValidFrom: newestTime(src, seqs, times)}
		if i, ok := at[f.Key]; ok {
			facts[i] = f // restated in the same exchange: the later value wins
			dropped++
			continue
		}
		if len(facts) == m.maxPerTurn {
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

// commit records facts (possibly none) for id and marks its messages up to
// through as covered, in one compare-and-set of the state, retried on
// conflict. It returns how many facts it recorded and superseded. If
// another writer covered through first, it records nothing.
//
// Cleared means gone (see package store): each attempt reads the state,
// then the messages' bounds, then commits with the version it read. If
// the exchange's messages are gone — a Clear or Forget, by any replica, after
// pending read them — it records nothing at all; a Clear after the state
// read makes the commit conflict, and the next attempt sees the messages
// gone. If the facts were cleared with the state kept (WithFactsPerUser:
// the epoch moved since pending's read), it records the coverage but not
// the facts: they come from an exchange said before the Clear.
func (m *Facts) commit(ctx context.Context, id identity, through int64, facts []Fact, epoch uint64) (stored, superseded int, err error) {
	scope := m.scope(id)
	for range stateRetries {
		st, version, err := m.readState(ctx, scope)
		if err != nil {
			return 0, 0, err
		}
		if st.Through[id.Conversation] >= through {
			return 0, 0, nil
		}
		stat, err := m.cfg.store.Stat(ctx, id)
		if err != nil {
			return 0, 0, fmt.Errorf("reading the messages of %s: %w", id.Key(), err)
		}
		if stat.Count == 0 || stat.FirstSeq > through {
			return 0, 0, nil // cleared or forgotten since they were read
		}
		keep := facts
		if st.Epoch != epoch {
			keep = nil
		}
		now := m.clock().Round(0).UTC()
		stored, superseded = apply(&st, keep, now)
		if st.Through == nil {
			st.Through = make(map[string]int64, 1)
		}
		st.Through[id.Conversation] = through
		value, err := json.Marshal(st)
		if err != nil {
			return 0, 0, fmt.Errorf("encoding the facts of %s: %w", scope.Key(), err)
		}
		_, err = m.cfg.store.PutState(ctx, scope, FactsStateName, value, version)
		if err == nil {
			return stored, superseded, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return 0, 0, fmt.Errorf("committing the facts of %s: %w", scope.Key(), err)
		}
	}
	return 0, 0, fmt.Errorf("committing the facts of %s: %w: gave up after %d attempts", scope.Key(), store.ErrConflict, stateRetries)
}

// apply records facts in st, dating those without a ValidFrom now: a fact
// whose key has a current fact with the same value (up to case) changes
// nothing; one with another value ends the current fact at its own
// ValidFrom (at the earliest the current fact's) and is appended.
func apply(st *factsState, facts []Fact, now time.Time) (stored, superseded int) {
	current := make(map[string]int, len(st.Facts))
	for i, f := range st.Facts {
		if f.Current() {
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

func (m *Facts) report(ev FactsEvent) {
	if m.hook != nil {
		m.hook(ev)
	}
}
