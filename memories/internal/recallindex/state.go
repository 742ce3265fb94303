package recallindex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/memstack/memstack/memories/internal/statejson"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

// Clear removes the messages and the index entries of the identity in ctx,
// and only that one. When removing the index entries fails (or is
// abandoned, see Recall, "Failures") after the messages were removed, the
// error says the messages are cleared.
func (x *Engine) Clear(ctx context.Context, id identity) error {
	var err error
	e := x.acquire(id)
	defer x.release(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	var sourceErr error
	if x.scoped() {
		// The units to take out of the scope's index: every one stored.
		if _, err := x.refreshExchanges(ctx, id, e, nil); err != nil && !errors.As(err, new(recallResetError)) {
			return fmt.Errorf("memstack: clearing: %w", err)
		}
		// From a durable index shared by replicas, the conversation's
		// docs whatever their units (Doc.Source): before the messages
		// go, so that a turn another replica saves after the Clear, and
		// indexes, is never removed with them. (A doc another replica
		// adds meanwhile, of a turn the Clear then removes, that replica
		// takes back itself: see dropGone.)
		sourceErr = x.removeSource(ctx, id)
	}
	if err := x.cfg.Store.Clear(ctx, id); err != nil {
		return fmt.Errorf("memstack: clearing: %w", err)
	}
	e.ready, e.seen = false, 0
	ictx, cancel := x.indexCtx(ctx)
	defer cancel()
	err = errors.Join(sourceErr, x.deleteIndex(ictx, id, e))
	e.exs, e.exsOK = nil, false
	if err != nil {
		return fmt.Errorf("memstack: messages cleared; clearing the recall index: %w", err)
	}
	return nil
}

// removeSource removes from a scope's durable index every doc of
// conversation id (retrieval.SourceRemover), as a bounded call; an index
// that cannot is left as it is (its docs of units gone are never shown).
func (x *Engine) removeSource(ctx context.Context, id identity) error {
	r, ok := x.cfg.Index.(retrieval.SourceRemover)
	if !ok || x.durable == nil || !x.scoped() {
		return nil
	}
	ictx, cancel := x.indexCtx(ctx)
	defer cancel()
	_, _, err := indexCall(x, ictx, "remove", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, r.RemoveSource(ctx, x.ns(id), id.Key())
	}, nil)
	if errors.Is(err, retrieval.ErrCannotRemove) {
		return nil
	}
	return err
}

// acquire returns id's entry, created if needed, marked in use: an entry
// in use is never evicted. Up to WithCacheSize entries no one uses are
// kept (x.entries, a worker.Registry), the least recently used evicted
// first with their in-process index state.
func (x *Engine) acquire(id identity) *recallEntry { return x.entries.Acquire(id) }

// hold marks e in use once more (an index call that may outlive its
// caller); release ends it.
func (x *Engine) hold(e *recallEntry) { x.entries.Hold(e.id) }

// release marks e no longer in use.
func (x *Engine) release(e *recallEntry) { x.entries.Release(e.id) }

// newEntry is the entries registry's constructor.
func (x *Engine) newEntry(id identity) *recallEntry { return &recallEntry{id: id} }

// evict lets go of an evicted conversation's in-process index state (a
// scoped Recall's units stay in their scope's index: see evictScope).
func (x *Engine) evict(id identity, _ *recallEntry) {
	if r, ok := x.cfg.Index.(retrieval.Releaser); ok && !x.scoped() {
		r.Release(id.Key())
	}
}

// evictScope lets go of an evicted scope's in-process index state; its
// next load rebuilds it from the store.
func (x *Engine) evictScope(ns string, _ *recallScopeEntry) {
	if r, ok := x.cfg.Index.(retrieval.Releaser); ok {
		r.Release(ns)
	}
}

func (x *Engine) readRecallState(ctx context.Context, id identity) (recallState, int64, error) {
	return statejson.Read[recallState](ctx, x.cfg.Store, id, x.cfg.StateName,
		func(err error) error {
			return fmt.Errorf("memstack: reading the recall state of %s: %w", id.Key(), err)
		},
		func(err error) error {
			return fmt.Errorf("memstack: the recall state of %s (state %q) is not valid JSON: %w", id.Key(), x.cfg.StateName, err)
		})
}

// refreshExchanges brings e's exchanges up to date with the store (e.mu is
// held) and returns every stored record when it had to read them all (on
// first use, or when the store changed other than by appends), else nil.
// known, when not nil, is id's Stat read earlier in the same load (one
// round trip for many: store.MultiStat); when it is the Stat e's units
// were read at, they are current and nothing is read.
func (x *Engine) refreshExchanges(ctx context.Context, id identity, e *recallEntry, known *store.Stat) ([]store.Record, error) {
	if known != nil && e.exsOK && *known == e.exsStat {
		return nil, nil
	}
	s := x.cfg.Store
	st, err := s.Stat(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("memstack: loading history: %w", err)
	}
	if e.exsOK && st == e.exsStat {
		return nil, nil
	}
	if e.exsOK && e.exsStat.Count > 0 && st.FirstSeq == e.exsStat.FirstSeq && st.Count > e.exsStat.Count {
		k := st.Count - e.exsStat.Count
		recs, err := s.Last(ctx, id, k+1)
		if err != nil {
			return nil, fmt.Errorf("memstack: loading history: %w", err)
		}
		if len(recs) == k+1 && recs[0].Seq == e.exsStat.LastSeq {
			old, cloned := len(e.exs), false
			for _, r := range recs[1:] {
				// A message that extends an exchange an earlier load
				// may still be rendering (a selection outlives the lock
				// through LoadItems' Render) goes to a copy: exchanges
				// other goroutines can see are never written.
				if t := r.Message.GetType(); !cloned && old > 0 && len(e.exs) == old &&
					t != llms.ChatMessageTypeSystem && !x.opens(r.Message) {
					e.exs, cloned = slices.Clone(e.exs), true
				}
				e.exs = x.appendUnit(e.exs, r)
			}
			e.exsStat = store.Stat{Count: e.exsStat.Count + k, FirstSeq: e.exsStat.FirstSeq, LastSeq: recs[k].Seq}
			return nil, nil
		}
	}
	recs, err := loadAll(ctx, s, id)
	if err != nil {
		return nil, err
	}
	if (e.exsOK || e.ready) && x.durable == nil {
		// The store changed other than by appends (another writer cleared
		// it or removed a prefix), or this is the first load and saves
		// indexed before it, which may have been cleared since: drop the
		// in-process index of the identity and index what is stored now,
		// so removed units do not take the places of real hits. (A
		// durable index keeps its entries; hits for removed units are
		// skipped, and the search asks for more — see selectExchanges.)
		ictx, cancel := x.indexCtx(ctx)
		start := time.Now()
		err := x.deleteIndex(ictx, id, e)
		cancel()
		if err != nil {
			// An index failure like any other: reported, and the load
			// shows nothing; the next load resets again (e is as it was).
			err = fmt.Errorf("memstack: resetting the recall index: %w", err)
			x.report(id, OpIndex, 0, time.Since(start), err)
			return nil, recallResetError{err}
		}
		e.ready, e.seen = false, 0
	}
	e.exs = x.units(recs)
	e.exsStat, e.exsOK = store.Stat{Count: len(recs)}, true
	if len(recs) > 0 {
		e.exsStat.FirstSeq, e.exsStat.LastSeq = recs[0].Seq, recs[len(recs)-1].Seq
	}
	return recs, nil
}

// recallResetError is refreshExchanges' error when deleting the identity's
// in-process index entries failed: an index failure, reported already.
type recallResetError struct{ err error }

func (e recallResetError) Error() string { return e.err.Error() }
func (e recallResetError) Unwrap() error { return e.err }
