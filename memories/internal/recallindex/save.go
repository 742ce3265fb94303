package recallindex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/memstack/memstack/memories/internal/bounded"
	"slices"
	"time"

	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
)

// Saved indexes what the store holds for id after a save (what: "turn"
// or "message", for the error) and, for a scope wider than the
// conversation over a store without a change feed, records the save in
// the scope's journal — unless journaled: the caller stored the entry
// (JournalEntry) with the turn. A transient indexing failure is reported
// and retried later (nil is returned); a permanent one is returned,
// wrapped.
func (x *Engine) Saved(ctx context.Context, id identity, what string, journaled bool) error {
	if x.storeSearching(ctx, id) {
		return nil // the store indexed the save in its transaction
	}
	e := x.acquire(id)
	defer x.release(e)
	if journaled {
		err := x.sync(ctx, id, e, nil)
		x.journaled(ctx, x.journalID(id))
		if err != nil && retrieval.Permanent(err) {
			return fmt.Errorf("memstack: %s stored; indexing failed: %w", what, err)
		}
		return nil
	}
	// The journal entry and the indexing are independent: over a store
	// behind a network the entry is written while the index syncs, so a
	// save waits for the slower of the two round trips, not for both. (The
	// in-memory store answers in microseconds: a goroutine would cost it
	// more than it saves.)
	var written chan error
	if x.journals() && !x.memStore {
		written = make(chan error, 1)
		go func() { written <- x.journal(ctx, id, e) }()
	}
	err := x.sync(ctx, id, e, nil)
	var jerr error
	switch {
	case written != nil:
		jerr = <-written
	case x.journals():
		jerr = x.journal(ctx, id, e)
	}
	if err != nil && retrieval.Permanent(err) {
		return fmt.Errorf("memstack: %s stored; indexing failed: %w", what, err)
	}
	return jerr
}

func (x *Engine) indexCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if x.cfg.Timeout > 0 {
		return context.WithTimeout(ctx, x.cfg.Timeout)
	}
	return ctx, func() {}
}

// syncError is a failure of syncLocked to read the store or to index what
// it read, reported already: a scope's sync retries that conversation at
// its next sync (see cannotRead) rather than taking it as indexed.
type syncError struct{ error }

func (e syncError) Unwrap() error { return e.error }

// sync indexes what the store holds for id that e has not indexed yet.
// recs, if not nil, is everything the store holds for id.
func (x *Engine) sync(ctx context.Context, id identity, e *recallEntry, recs []store.Record) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return x.syncLocked(ctx, id, e, recs)
}

// syncLocked is sync with e.mu held.
func (x *Engine) syncLocked(ctx context.Context, id identity, e *recallEntry, recs []store.Record) error {
	if recs == nil {
		var err error
		if recs, err = x.unindexed(ctx, id, e); err != nil {
			x.report(id, OpIndex, 0, 0, err)
			return syncError{err}
		}
	}
	if len(recs) == 0 || (e.ready && recs[len(recs)-1].Seq == e.seen) {
		e.ready = true
		return nil
	}
	last := recs[len(recs)-1].Seq
	var docs []retrieval.Doc
	var at map[int64]time.Time // the docs' times, for a scoped Recall
	source := ""               // the docs' source in a scope's durable index
	if x.scoped() {
		at = make(map[int64]time.Time)
		if x.durable != nil {
			source = id.Key()
		}
	}
	for _, x := range x.units(recs) {
		if !e.ready || x.through > e.seen {
			docs = append(docs, retrieval.Doc{Seq: x.seq, Through: x.through, Text: x.text(), Source: source})
			if at != nil {
				at[x.seq] = x.at
			}
		}
	}
	if len(docs) > 0 {
		if at != nil {
			x.assign(id, docs, at) // the scope's doc IDs
		}
		ictx, cancel := x.indexCtx(ctx)
		start := time.Now()
		err := x.add(ictx, id, e, docs)
		cancel()
		x.report(id, OpIndex, len(docs), time.Since(start), err)
		if err != nil {
			return syncError{err}
		}
	}
	e.ready, e.seen = true, last
	return nil
}

// unindexed returns the stored messages of id that e may not have indexed
// yet, starting at a human message (so the first exchange is whole): all
// of them on first use, else the newest ones, read in growing batches.
func (x *Engine) unindexed(ctx context.Context, id identity, e *recallEntry) ([]store.Record, error) {
	s := x.cfg.Store
	if !e.ready {
		recs, err := s.All(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("memstack: reading messages to index: %w", err)
		}
		return recs, nil
	}
	// No Stat first (a round trip over a networked store): a save has
	// just stored something, and the newest messages tell as well when
	// nothing is new (the newest is e.seen; the caller then indexes
	// nothing). Enough to start at a unit that was indexed already.
	const need = 1
	for n := 8; ; n *= 2 {
		recs, err := s.Last(ctx, id, n)
		if err != nil {
			return nil, fmt.Errorf("memstack: reading messages to index: %w", err)
		}
		if len(recs) < n || recs[len(recs)-1].Seq == e.seen {
			return recs, nil // all of them, or nothing new
		}
		if first := recs[0]; first.Seq <= e.seen && x.opens(first.Message) {
			old := 0
			for _, r := range recs {
				if r.Seq <= e.seen && x.opens(r.Message) {
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
func (x *Engine) add(ctx context.Context, id identity, e *recallEntry, docs []retrieval.Doc) error {
	if x.durable == nil {
		return x.addDocs(ctx, id, e, docs, 0)
	}
	st, version, err := x.readRecallState(ctx, id)
	if err != nil {
		return err
	}
	if err := x.durable.CheckSpaces(st.Spaces); err != nil {
		return err
	}
	since := st.Through
	if st.Scope != x.stateScope() {
		since = 0 // indexed under another scope's namespace: index anew
	}
	if err := x.addDocs(ctx, id, e, docs, since); err != nil {
		return err
	}
	// Cleared means gone: if another replica cleared (or a Forget removed)
	// the messages while they were being indexed, take their docs back —
	// its Clear deleted the scope's docs before these landed. A Clear
	// after this check deletes them itself. Docs of messages still stored
	// stay; so do the stale docs of a store that cannot remove single
	// ones (Recall never shows them: it shows only stored messages).
	docs, err = x.dropGone(ctx, id, docs)
	if err != nil || len(docs) == 0 {
		return err
	}
	through := st.Through
	for _, d := range docs {
		through = max(through, d.Through)
	}
	for attempt := 0; ; attempt++ {
		if st.Scope != x.stateScope() {
			st.Through = 0
		}
		next := recallState{Through: max(st.Through, through), Spaces: x.durable.Spaces(), Scope: x.stateScope()}
		if next.Through == st.Through && next.Scope == st.Scope && slices.Equal(next.Spaces, st.Spaces) {
			return nil
		}
		value, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("memstack: encoding the recall state of %s: %w", id.Key(), err)
		}
		_, err = x.cfg.Store.PutState(ctx, id, x.cfg.StateName, value, version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt == 2 {
			return fmt.Errorf("memstack: recording the recall state of %s: %w", id.Key(), err)
		}
		// Another writer advanced the state, or a Clear or Forget moved
		// its version: merge with what is there now, for the docs whose
		// messages are still stored (a Clear leaves no state to restore).
		if st, version, err = x.readRecallState(ctx, id); err != nil {
			return err
		}
		if docs, err = x.dropGone(ctx, id, docs); err != nil || len(docs) == 0 {
			return err
		}
		through = 0
		for _, d := range docs {
			through = max(through, d.Through)
		}
	}
}

// indexCall runs f, one call into m's index (and so into its embedder and
// vector store), through bounded.Run: a panic is an error, and a call that
// outlives its context by bounded.Grace is abandoned (see Recall,
// "Failures"); late, if not nil, runs when an abandoned call ends.
// The default index (a retrieval.BM25: in process memory, no model, no
// store) is called on the caller's goroutine, its panics recovered all the
// same: it cannot hang, and a goroutine per call would cost its fast
// operations more than they do.
func indexCall[T any](x *Engine, ctx context.Context, op string, f func(context.Context) (T, error), late func(T, error)) (T, bounded.End, error) {
	what := func() string { return fmt.Sprintf("%s in the recall index %s", op, IndexName(x.cfg.Index)) }
	if x.inProcess {
		v, err := callRecovered(ctx, what, f)
		if ctx.Err() != nil {
			return v, bounded.Late, err
		}
		return v, bounded.InTime, err
	}
	return bounded.Run(ctx, what, f, late)
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
func (x *Engine) addDocs(ctx context.Context, id identity, e *recallEntry, docs []retrieval.Doc, since int64) error {
	if err := x.deletePending(e); err != nil {
		return err
	}
	x.hold(e) // released when the call has ended (by afterAdd, if its answer is not used)
	// afterAdd outlives the call: ctx's values without its deadline, and
	// without its Recorder (the call's report is done by then).
	bg := observe.WithRecorder(context.WithoutCancel(ctx), nil)
	_, end, err := indexCall(x, ctx, "add", func(ctx context.Context) (struct{}, error) {
		if x.durable != nil {
			return struct{}{}, x.durable.AddSince(ctx, x.ns(id), docs, since)
		}
		return struct{}{}, x.cfg.Index.Add(ctx, x.ns(id), docs)
	}, func(struct{}, error) { x.afterAdd(bg, id, e, docs) })
	switch end {
	case bounded.InTime:
		x.release(e)
	case bounded.Late:
		go x.afterAdd(bg, id, e, docs)
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
func (x *Engine) afterAdd(ctx context.Context, id identity, e *recallEntry, docs []retrieval.Doc) {
	defer x.release(e)
	ctx, cancel := context.WithTimeout(ctx, x.cleanupTimeout())
	defer cancel()
	if x.durable != nil {
		_, _ = x.dropGone(ctx, id, docs)
		return
	}
	stat, err := x.cfg.Store.Stat(ctx, id)
	if err != nil || !slices.ContainsFunc(docs, func(d retrieval.Doc) bool { return stat.Count == 0 || d.Through < stat.FirstSeq }) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if x.deleteIndex(ctx, id, e) == nil {
		e.ready, e.seen = false, 0
	}
}

// deleteIndex deletes the identity's index entries as a bounded call; e.mu
// is held. A delete that is abandoned goes on; until it has returned,
// nothing is indexed for the identity (deletePending), since it would
// remove what was indexed meanwhile.
func (x *Engine) deleteIndex(ctx context.Context, id identity, e *recallEntry) error {
	if x.scoped() && x.durable == nil {
		// The scope's index holds other conversations' units too:
		// remove this conversation's only (every unit indexed for it).
		return x.removeUnits(ctx, id, append(unitSeqs(e.exs), x.owned(id)...))
	}
	remove := func(ctx context.Context) error { return x.cfg.Index.Delete(ctx, id.Key()) }
	if x.scoped() {
		// A scope's durable index: this conversation's docs only, by
		// doc ID those of the units read before the messages went (Seqs
		// never come back: a turn saved since has other IDs), and
		// whatever an earlier version, or a conversation-scoped Recall on
		// the same vector store, indexed under the conversation's own
		// scope. (Clear removed the others by source, before the
		// messages.) Like a Delete, a removal abandoned while it runs
		// holds the conversation's indexing back (deletePending).
		ns, docs := x.ns(id), x.disown(id, append(unitSeqs(e.exs), x.owned(id)...))
		remove = func(ctx context.Context) error {
			if r, ok := x.cfg.Index.(retrieval.Remover); ok && len(docs) > 0 {
				if err := r.Remove(ctx, ns, docs); err != nil && !errors.Is(err, retrieval.ErrCannotRemove) {
					return err
				}
			}
			return x.cfg.Index.Delete(ctx, id.Key())
		}
	}
	x.hold(e) // released when the call has ended
	done := make(chan struct{})
	_, end, err := indexCall(x, ctx, "delete", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, remove(ctx)
	}, func(struct{}, error) {
		close(done)
		x.release(e)
	})
	if end == bounded.Abandoned {
		e.deletes = append(e.deletes, done)
	} else {
		x.release(e)
	}
	return err
}

// errDeletePending fails the indexing of an identity while a delete of its
// index entries that was abandoned still runs.
var errDeletePending = errors.New("memstack: not indexed: an abandoned delete of the identity's recall index entries (a Clear's) is still running; indexing is retried at the next save or load")

// deletePending returns errDeletePending while an abandoned delete of e's
// identity runs; e.mu is held.
func (x *Engine) deletePending(e *recallEntry) error {
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

func (x *Engine) cleanupTimeout() time.Duration {
	if x.cfg.Timeout > 0 {
		return x.cfg.Timeout
	}
	return recallCleanupTimeout
}

// dropGone removes from the durable index the docs whose messages the
// store no longer holds (all of them are older than its oldest message)
// and returns the others.
func (x *Engine) dropGone(ctx context.Context, id identity, docs []retrieval.Doc) ([]retrieval.Doc, error) {
	stat, err := x.cfg.Store.Stat(ctx, id)
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
	if r, ok := x.durable.(retrieval.Remover); ok {
		_, _, err := indexCall(x, ctx, "remove", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, r.Remove(ctx, x.ns(id), gone)
		}, nil)
		if err != nil && !errors.Is(err, retrieval.ErrCannotRemove) {
			return nil, fmt.Errorf("memstack: removing the index entries of cleared messages: %w", err)
		}
	}
	return kept, nil
}
