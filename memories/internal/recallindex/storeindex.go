package recallindex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/storekit"
)

// The store's own index (Config.Searcher): a store.RecallSearcher keeps
// the lexical index beside its messages, written in each append's
// transaction, so an Engine over it indexes nothing in process: a save
// only stores, and a load asks the store, which every replica shares —
// a process's first load of a user costs a search of the database, not a
// read of the user's history. A conversation-scoped load still reads the
// conversation's units (incrementally, as for the in-process index) for
// the recent window and the view. A scoped load keeps nothing per
// conversation: the current conversation's recent units are known from
// its tail (recentFrom), and of every conversation with hits, the current
// one included, it reads only the stretches around them: the store gives each hit's span
// (indexkit.Query.Reach, recallViewReach units on either side), and a
// store.RangeReader reads them all in one call, keeping nothing in
// process (readOthers); a store that cannot, or a unit brought by its
// date (which has no span), has the conversation read whole.
//
// Until the store has answered once (its index off, or a database still
// indexing its older messages: store.ErrRecallNotReady) the Engine works
// as over any store, with its in-process index (and the scope's journal
// over a store without a change feed); from the first answer on (an index
// on and complete stays so) it searches the store. It asks at most once a
// storeRecheck, so a store whose index is off costs a save or a load
// nothing more.
//
// A search of the store that fails (a row that does not decode, a
// timeout) is reported and the load goes on without hits, as a failed
// in-process search does: recall never fails the caller's chain for it.

// storeRecheck is how long an Engine goes on with its in-process index
// after the store said its index is not ready, before it asks again.
const storeRecheck = time.Second

// storeSearching reports whether loads search the store's index and
// saves index nothing, asking the store (an empty search, which reads no
// index) until it answers.
func (x *Engine) storeSearching(ctx context.Context, id identity) bool {
	if x.searcher == nil {
		return false
	}
	if x.storeOn.Load() {
		return true
	}
	now := time.Now().UnixNano()
	if last := x.storeAsked.Load(); last != 0 && now-last < int64(storeRecheck) {
		return false
	}
	x.storeAsked.Store(now)
	if _, err := x.searchStore(ctx, id, "", 1, 0); err != nil {
		return false // not ready, or failing: in process, asked again later
	}
	x.storeOn.Store(true)
	return true
}

// searchStore asks the store for the k best units of id's scope (its
// conversation, user or tenant) for query, with the timeout, reported as
// a search.
func (x *Engine) searchStore(ctx context.Context, id identity, query string, k, reach int) ([]store.RecallHit, error) {
	in := store.RecallScope{Scope: x.storeScope(id)}
	if !x.scoped() {
		in.Conversation = &id
	}
	ictx, cancel := x.indexCtx(ctx)
	defer cancel()
	start := time.Now()
	q := indexkit.Query{Terms: indexkit.QueryTerms(query), Kind: x.kind(), Near: x.cfg.Near, K: k}
	if x.scoped() {
		// The stretch a view shows of each hit's conversation.
		q.Reach = recallViewReach
		if reach > 0 {
			q.Reach = min(reach, recallViewReach)
		}
	}
	hits, err := x.searcher.SearchRecall(ictx, in, q)
	if errors.Is(err, store.ErrRecallNotReady) {
		return nil, err // not a failure: the caller searches in process
	}
	if query != "" {
		x.report(id, OpSearch, len(hits), time.Since(start), err)
	}
	return hits, err
}

// loadFromStore is Load over the store's index; ok is false when the
// store's index is not complete yet (the caller loads as over any store).
func (x *Engine) loadFromStore(ctx context.Context, id identity, q Query) (_ View, ok bool, err error) {
	if !x.storeSearching(ctx, id) {
		return View{}, false, nil
	}
	if x.scoped() {
		v, err := x.storeScopedLoad(ctx, id, q)
		return v, true, err
	}
	e := x.acquire(id)
	defer x.release(e)
	e.mu.Lock()
	if _, err := x.refreshExchanges(ctx, id, e, nil); err != nil {
		e.mu.Unlock()
		if cerr := ctx.Err(); cerr != nil {
			return View{}, true, fmt.Errorf("memstack: %w", cerr)
		}
		if errors.As(err, new(recallResetError)) {
			return View{}, true, nil
		}
		return View{}, true, err
	}
	e.ready, e.seen = true, e.exsStat.LastSeq // nothing to index here
	exs := e.exs
	first := firstRecent(exs, q.Exclude)
	var days []int // the conversation's units of q's date
	if q.Date != nil {
		e.indexDays()
		e.days.each(*q.Date, func(seq int64) {
			if i, ok := unitAt(exs, seq); ok && q.Date.Matches(exs[i].at) {
				days = append(days, i)
			}
		})
		slices.Sort(days)
		days = slices.Compact(days)
	}
	e.mu.Unlock()
	v, err := x.storeConversationView(ctx, id, exs, first, q, days)
	return v, true, err
}

// storeScopedLoad is loadFromStore for a scope wider than the
// conversation. It keeps nothing in process: the current conversation's
// recent units are known from its tail (recentFrom), and of every
// conversation with hits, the current one included, the load reads the
// stretches around them (see readOthers).
func (x *Engine) storeScopedLoad(ctx context.Context, id identity, q Query) (View, error) {
	from, recent, err := x.recentFrom(ctx, id, q.Exclude)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return View{}, fmt.Errorf("memstack: %w", cerr)
		}
		return View{}, err
	}
	var dated []store.RecallHit
	if q.Date != nil {
		first, last := q.Date.keys()
		dctx, cancel := x.indexCtx(ctx)
		start := time.Now()
		dated, err = x.searcher.RecallDated(dctx, store.RecallScope{Scope: x.storeScope(id)}, x.kind(), first, last)
		cancel()
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return View{}, fmt.Errorf("memstack: %w", cerr)
			}
			x.report(id, OpSearch, 0, time.Since(start), err) // transient: no dated units
			dated = nil
		}
	}
	ask := q.Want + recent
	for {
		v, crowded, err := x.storeScopedView(ctx, id, from, q, ask, dated)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return View{}, fmt.Errorf("memstack: %w", cerr)
			}
			return View{}, fmt.Errorf("memstack: recall search: %w", err)
		}
		if !crowded || ask >= maxSearch {
			return v, nil
		}
		ask = min(4*ask, maxSearch)
	}
}

// recentFrom returns the Seq of the first of id's units with a message
// among its last n non-system messages (what a recent window shows:
// firstRecent) and how many units those are; math.MaxInt64 and 0 when
// there are none. It reads id's tail (store.Tail), a little more than n
// messages, and more when the first unit it read may have begun before
// them.
func (x *Engine) recentFrom(ctx context.Context, id identity, n int) (int64, int, error) {
	if n < 1 {
		return math.MaxInt64, 0, nil
	}
	for extra := 8; ; extra *= 4 {
		read := n + extra
		if extra > math.MaxInt/8 || read < n {
			read = math.MaxInt
		}
		recs, err := x.cfg.Store.Tail(ctx, id, read, 0)
		if err != nil {
			return 0, 0, fmt.Errorf("memstack: loading history: %w", err)
		}
		others := 0
		for _, r := range recs {
			if !conv.IsSystem(r.Message) {
				others++
			}
		}
		us := x.units(recs)
		if len(us) == 0 {
			return math.MaxInt64, 0, nil
		}
		// Every unit but the first read opens with its own first message;
		// the first may have begun before the tail, unless the tail holds
		// every message.
		if first := firstRecent(us, n); first > 0 || others < read || read == math.MaxInt {
			return us[first].seq, len(us) - first, nil
		}
	}
}

// storeConversationView is a conversation's View from the store's hits.
func (x *Engine) storeConversationView(ctx context.Context, id identity, exs []Unit, first int, q Query, days []int) (View, error) {
	v := View{Units: exs, first: first, cur: id, Dated: days}
	if first == 0 {
		return View{}, nil // every unit is a recent one
	}
	if strings.TrimSpace(q.Text) == "" {
		return v, nil
	}
	// A unit saved after the units were read (by any replica) is not
	// among them: ask again for more while such hits crowd out those
	// wanted.
	want := min(len(exs), q.Want+len(exs)-first)
	for ask := want; ; ask *= 4 {
		hits, err := x.searchStore(ctx, id, q.Text, ask, 0)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return View{}, fmt.Errorf("memstack: %w", cerr)
			}
			return v, nil // reported: the view without hits
		}
		v.Hits, v.Top = v.Hits[:0], 0
		if len(hits) > 0 {
			v.Top = hits[0].Score
		}
		for _, h := range hits {
			if i, ok := unitAt(exs, h.Seq); ok {
				v.Hits = append(v.Hits, retrieval.Hit{Seq: int64(i), Score: h.Score})
			}
		}
		if len(hits) < ask || ask >= maxSearch || len(v.Hits) >= want {
			return v, nil
		}
	}
}

// storeScopedView is scopedView over the store's hits: each hit names its
// conversation and unit, so no in-process bookkeeping is needed; dated
// are the scope's units of q's date, as the store files them.
func (x *Engine) storeScopedView(ctx context.Context, id identity, recentFrom int64, q Query, ask int, datedUnits []store.RecallHit) (View, bool, error) {
	var found []store.RecallHit
	if strings.TrimSpace(q.Text) != "" {
		var err error
		if found, err = x.searchStore(ctx, id, q.Text, ask, q.Reach); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return View{}, false, cerr
			}
			found = nil // reported: the view without hits
		}
	}
	hits := make([]retrieval.Hit, len(found))
	owners := make(map[int64]recallOwner, len(found)+len(datedUnits))
	convs := map[identity]*scopeConv{}
	conv := func(cid identity) *scopeConv {
		c := convs[cid]
		if c == nil {
			c = &scopeConv{id: cid}
			convs[cid] = c
		}
		return c
	}
	// A derived conversation (a recall journal, a user's facts) is no
	// conversation of the user's: never shown, as in process.
	for i, h := range found {
		hits[i] = retrieval.Hit{Seq: int64(i), Score: h.Score}
		if !storekit.Derived(h.ID) {
			owners[int64(i)] = recallOwner{conv: conv(h.ID), seq: h.Seq, span: store.SeqRange{From: h.From, To: h.To}}
		}
	}
	dated := make([]int64, 0, len(datedUnits))
	for j, h := range datedUnits {
		if storekit.Derived(h.ID) {
			continue
		}
		doc := -int64(j) - 1
		owners[doc] = recallOwner{conv: conv(h.ID), seq: h.Seq}
		dated = append(dated, doc)
	}
	return x.viewOf(ctx, id, current{ranged: true, from: recentFrom}, q, ask, hits, owners, dated, 0, false)
}

// kind is the unit the Engine indexes, as indexkit names it.
func (x *Engine) kind() indexkit.Kind {
	if x.cfg.Turns {
		return indexkit.Turns
	}
	return indexkit.Exchanges
}
