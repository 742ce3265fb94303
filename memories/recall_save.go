package memories

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

// SaveContext stores the turn (validated first; stored whole or not at all)
// and indexes it. A transient indexing failure is reported to the hook and
// retried later, and the save succeeds; a permanent one (a vector space
// mismatch) is returned, wrapped, after the turn is stored.
func (m *Recall) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
	id, msgs, err := m.turn(ctx, inputs, outputs)
	if err != nil {
		return err
	}
	if err := m.append(ctx, id, msgs...); err != nil {
		return err
	}
	return m.indexStored(ctx, id, "turn")
}

// AddMessage stores one message of any role and indexes the unit it
// belongs to, as SaveContext does. System messages are stored but never
// indexed or shown.
func (m *Recall) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
	id, msg, err := m.message(ctx, msg)
	if err != nil {
		return err
	}
	if err := m.append(ctx, id, msg); err != nil {
		return err
	}
	return m.indexStored(ctx, id, "message")
}

func (m *Recall) indexStored(ctx context.Context, id identity, what string) error {
	e := m.acquire(id)
	defer m.release(e)
	if err := m.sync(ctx, id, e, nil); err != nil && retrieval.Permanent(err) {
		return fmt.Errorf("memstack: %s stored; indexing failed: %w", what, err)
	}
	if m.scoped() {
		return m.journal(ctx, id)
	}
	return nil
}

func (m *Recall) indexCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if m.timeout > 0 {
		return context.WithTimeout(ctx, m.timeout)
	}
	return ctx, func() {}
}

// sync indexes what the store holds for id that e has not indexed yet.
// recs, if not nil, is everything the store holds for id.
func (m *Recall) sync(ctx context.Context, id identity, e *recallEntry, recs []store.Record) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return m.syncLocked(ctx, id, e, recs)
}

// syncLocked is sync with e.mu held.
func (m *Recall) syncLocked(ctx context.Context, id identity, e *recallEntry, recs []store.Record) error {
	if recs == nil {
		var err error
		if recs, err = m.unindexed(ctx, id, e); err != nil {
			m.report(id, RecallOpIndex, 0, 0, err)
			return err
		}
	}
	if len(recs) == 0 || (e.ready && recs[len(recs)-1].Seq == e.seen) {
		e.ready = true
		return nil
	}
	last := recs[len(recs)-1].Seq
	var docs []retrieval.Doc
	var at map[int64]time.Time // the docs' times, for a scoped Recall
	if m.scoped() {
		at = make(map[int64]time.Time)
	}
	for _, x := range m.recallExchanges(recs) {
		if !e.ready || x.through > e.seen {
			docs = append(docs, retrieval.Doc{Seq: x.seq, Through: x.through, Text: x.text()})
			if at != nil {
				at[x.seq] = x.at
			}
		}
	}
	if len(docs) > 0 {
		if at != nil {
			m.assign(id, docs, at) // the scope's doc IDs
		}
		ictx, cancel := m.indexCtx(ctx)
		start := time.Now()
		err := m.add(ictx, id, e, docs)
		cancel()
		m.report(id, RecallOpIndex, len(docs), time.Since(start), err)
		if err != nil {
			return err
		}
	}
	e.ready, e.seen = true, last
	return nil
}

// unindexed returns the stored messages of id that e may not have indexed
// yet, starting at a human message (so the first exchange is whole): all
// of them on first use, else the newest ones, read in growing batches.
func (m *Recall) unindexed(ctx context.Context, id identity, e *recallEntry) ([]store.Record, error) {
	s := m.cfg.store
	if !e.ready {
		recs, err := s.All(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("memstack: reading messages to index: %w", err)
		}
		return recs, nil
	}
	st, err := s.Stat(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("memstack: reading messages to index: %w", err)
	}
	if st.Count == 0 || st.LastSeq == e.seen {
		return nil, nil
	}
	// Enough to start at a unit that was indexed already.
	const need = 1
	for n := 8; ; n *= 2 {
		recs, err := s.Last(ctx, id, n)
		if err != nil {
			return nil, fmt.Errorf("memstack: reading messages to index: %w", err)
		}
		if len(recs) < n || n >= st.Count {
			return recs, nil
		}
		if first := recs[0]; first.Seq <= e.seen && m.opens(first.Message) {
			old := 0
			for _, r := range recs {
				if r.Seq <= e.seen && m.opens(r.Message) {
					old++
				}
			}
			if old >= need {
				return recs, nil
			}
		}
	}
}

// add adds docs to the index; for a durable index it checks and advances
// the identity's recorded state. e.mu is held.
func (m *Recall) add(ctx context.Context, id identity, e *recallEntry, docs []retrieval.Doc) error {
	if m.durable == nil {
		return m.addDocs(ctx, id, e, docs, 0)
	}
	st, version, err := m.readRecallState(ctx, id)
	if err != nil {
		return err
	}
	if err := m.durable.CheckSpaces(st.Spaces); err != nil {
		return err
	}
	since := st.Through
	if st.Scope != m.stateScope() {
		since = 0 // indexed under another scope's namespace: index anew
	}
	if err := m.addDocs(ctx, id, e, docs, since); err != nil {
		return err
	}
	// Cleared means gone: if another replica cleared (or a Forget removed)
	// the messages while they were being indexed, take their docs back —
	// its Clear deleted the scope's docs before these landed. A Clear
	// after this check deletes them itself. Docs of messages still stored
	// stay; so do the stale docs of a store that cannot remove single
	// ones (Recall never shows them: it shows only stored messages).
	docs, err = m.dropGone(ctx, id, docs)
	if err != nil || len(docs) == 0 {
		return err
	}
	through := st.Through
	for _, d := range docs {
		through = max(through, d.Through)
	}
	for attempt := 0; ; attempt++ {
		if st.Scope != m.stateScope() {
			st.Through = 0
		}
		next := recallState{Through: max(st.Through, through), Spaces: m.durable.Spaces(), Scope: m.stateScope()}
		if next.Through == st.Through && next.Scope == st.Scope && slices.Equal(next.Spaces, st.Spaces) {
			return nil
		}
		value, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("memstack: encoding the recall state of %s: %w", id.Key(), err)
		}
		_, err = m.cfg.store.PutState(ctx, id, RecallStateName, value, version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt == 2 {
			return fmt.Errorf("memstack: recording the recall state of %s: %w", id.Key(), err)
		}
		// Another writer advanced the state, or a Clear or Forget moved
		// its version: merge with what is there now, for the docs whose
		// messages are still stored (a Clear leaves no state to restore).
		if st, version, err = m.readRecallState(ctx, id); err != nil {
			return err
		}
		if docs, err = m.dropGone(ctx, id, docs); err != nil || len(docs) == 0 {
			return err
		}
		through = 0
		for _, d := range docs {
			through = max(through, d.Through)
		}
	}
}

// indexCall runs f, one call into m's index (and so into its embedder and
// vector store), through runBounded: a panic is an error, and a call that
// outlives its context by abandonGrace is abandoned (see Recall,
// "Failures"); late, if not nil, runs when an abandoned call ends.
// The default index (a retrieval.BM25: in process memory, no model, no
// store) is called on the caller's goroutine, its panics recovered all the
// same: it cannot hang, and a goroutine per call would cost its fast
// operations more than they do.
func indexCall[T any](m *Recall, ctx context.Context, op string, f func(context.Context) (T, error), late func(T, error)) (T, boundedEnd, error) {
	what := func() string { return fmt.Sprintf("%s in the recall index %s", op, recallIndexName(m.idx)) }
	if m.inProcess {
		v, err := callRecovered(ctx, what, f)
		if ctx.Err() != nil {
			return v, boundedLate, err
		}
		return v, boundedInTime, err
	}
	return runBounded(ctx, what, f, late)
}

// callRecovered calls f; a panic is an error naming what().
func callRecovered[T any](ctx context.Context, what func() string, f func(context.Context) (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v, err = zero, fmt.Errorf("%s panicked: %v", what(), p)
		}
	}()
	return f(ctx)
}

// addDocs adds docs to the index (for a durable index, those with Through
// after since) as a bounded call; e.mu is held. The caller records the
// docs as indexed only when it returns nil, which it does only for an add
// that answered in time: an add whose answer came late, or that was
// abandoned, fails, and its docs are indexed again at the next save or
// load. Once such an add has returned, afterAdd takes back what it added
// for messages that are gone by then.
func (m *Recall) addDocs(ctx context.Context, id identity, e *recallEntry, docs []retrieval.Doc, since int64) error {
	if err := m.deletePending(e); err != nil {
		return err
	}
	m.hold(e) // released when the call has ended (by afterAdd, if its answer is not used)
	// afterAdd outlives the call: ctx's values without its deadline, and
	// without its Recorder (the call's report is done by then).
	bg := observe.WithRecorder(context.WithoutCancel(ctx), nil)
	_, end, err := indexCall(m, ctx, "add", func(ctx context.Context) (struct{}, error) {
		if m.durable != nil {
			return struct{}{}, m.durable.AddSince(ctx, m.ns(id), docs, since)
		}
		return struct{}{}, m.idx.Add(ctx, m.ns(id), docs)
	}, func(struct{}, error) { m.afterAdd(bg, id, e, docs) })
	switch end {
	case boundedInTime:
		m.release(e)
	case boundedLate:
		go m.afterAdd(bg, id, e, docs)
		if err == nil {
			err = fmt.Errorf("memstack: the recall index answered after its context ended: %w", ctx.Err())
		}
	}
	return err
}

// afterAdd runs once an add whose answer was not used has returned (see
// addDocs), and releases e. What the add stored for messages the store no
// longer holds — a Clear or Forget, here or in another process, came
// while it ran — is taken back: removed from a durable index (a store that
// cannot remove single docs keeps them, never shown: Seqs are never
// reused), or, from an in-process index, with the identity's entries,
// which its next save or load rebuilds from the store. Failures are not
// reported (the hook is called on callers' goroutines only).
func (m *Recall) afterAdd(ctx context.Context, id identity, e *recallEntry, docs []retrieval.Doc) {
	defer m.release(e)
	ctx, cancel := context.WithTimeout(ctx, m.cleanupTimeout())
	defer cancel()
	if m.durable != nil {
		_, _ = m.dropGone(ctx, id, docs)
		return
	}
	stat, err := m.cfg.store.Stat(ctx, id)
	if err != nil || !slices.ContainsFunc(docs, func(d retrieval.Doc) bool { return stat.Count == 0 || d.Through < stat.FirstSeq }) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if m.deleteIndex(ctx, id, e) == nil {
		e.ready, e.seen = false, 0
	}
}

// deleteIndex deletes the identity's index entries as a bounded call; e.mu
// is held. A delete that is abandoned goes on; until it has returned,
// nothing is indexed for the identity (deletePending), since it would
// remove what was indexed meanwhile.
func (m *Recall) deleteIndex(ctx context.Context, id identity, e *recallEntry) error {
	if m.scoped() {
		// The scope's index holds other conversations' units too:
		// remove this conversation's only (every unit indexed for it).
		return m.removeUnits(ctx, id, append(unitSeqs(e.exs), m.owned(id)...))
	}
	m.hold(e) // released when the call has ended
	done := make(chan struct{})
	_, end, err := indexCall(m, ctx, "delete", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, m.idx.Delete(ctx, id.Key())
	}, func(struct{}, error) {
		close(done)
		m.release(e)
	})
	if end == boundedAbandoned {
		e.deletes = append(e.deletes, done)
	} else {
		m.release(e)
	}
	return err
}

// errDeletePending fails the indexing of an identity while a delete of its
// index entries that was abandoned still runs.
var errDeletePending = errors.New("memstack: not indexed: an abandoned delete of the identity's recall index entries (a Clear's) is still running; indexing is retried at the next save or load")

// deletePending returns errDeletePending while an abandoned delete of e's
// identity runs; e.mu is held.
func (m *Recall) deletePending(e *recallEntry) error {
	e.deletes = slices.DeleteFunc(e.deletes, func(done chan struct{}) bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if len(e.deletes) > 0 {
		return errDeletePending
	}
	e.deletes = nil
	return nil
}

// recallCleanupTimeout bounds the work afterAdd does when no
// WithRecallTimeout is set.
const recallCleanupTimeout = 30 * time.Second

func (m *Recall) cleanupTimeout() time.Duration {
	if m.timeout > 0 {
		return m.timeout
	}
	return recallCleanupTimeout
}

// dropGone removes from the durable index the docs whose messages the
// store no longer holds (all of them are older than its oldest message)
// and returns the others.
func (m *Recall) dropGone(ctx context.Context, id identity, docs []retrieval.Doc) ([]retrieval.Doc, error) {
	stat, err := m.cfg.store.Stat(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("memstack: reading the messages of %s after indexing: %w", id.Key(), err)
	}
	var gone []int64
	kept := docs[:0:0]
	for _, d := range docs {
		if stat.Count == 0 || d.Through < stat.FirstSeq {
			gone = append(gone, d.Seq)
		} else {
			kept = append(kept, d)
		}
	}
	if len(gone) == 0 {
		return docs, nil
	}
	if r, ok := m.durable.(retrieval.Remover); ok {
		_, _, err := indexCall(m, ctx, "remove", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, r.Remove(ctx, m.ns(id), gone)
		}, nil)
		if err != nil && !errors.Is(err, retrieval.ErrCannotRemove) {
			return nil, fmt.Errorf("memstack: removing the index entries of cleared messages: %w", err)
		}
	}
	return kept, nil
}
