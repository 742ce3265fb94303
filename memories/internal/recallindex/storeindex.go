package recallindex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/internal/stackmemo"
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
// read of the user's history. A load, in every scope, keeps nothing per
// conversation: the current conversation's recent units are known from
// its tail (recentFrom), and of every conversation with hits, the current
// one included, it reads only the stretches around them: the store gives
// each hit's span (indexkit.Query.Reach: viewReach units on either side),
// and a store.RangeReader reads them all in one call, keeping nothing in
// process (readOthers); a store that cannot, or a unit brought by its
// date (which has no span), has the conversation read whole. A
// conversation-scoped load is the same load over a scope of one
// conversation: its first load costs its hits' stretches and its tail,
// not the conversation, and its view names no other conversation
// (View.Conversation).
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
	ictx, cancel := x.indexCtx(ctx)
	defer cancel()
	start := time.Now()
	// Each hit's stretch of its conversation, that the view may show.
	q := indexkit.Query{Terms: indexkit.QueryTerms(query), Kind: x.kind(), Near: x.cfg.Near, K: k, Reach: x.viewReach(reach)}
	hits, err := x.searcher.SearchRecall(ictx, x.recallScope(id), q)
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
	v, err := x.storeScopedLoad(ctx, id, q)
	return v, true, err
}

// storeScopedLoad is loadFromStore, for every scope (the conversation's
// too: its search is the conversation's). It keeps nothing in process: the current conversation's
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
		dated, err = x.searcher.RecallDated(dctx, x.recallScope(id), x.kind(), first, last)
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
		recs, err := stackmemo.Tail(ctx, x.cfg.Store, id, read, 0) // shared with a RecentN's identical read
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

// recallScope is what a search of id's scope searches: its
// conversation, or the user's or the tenant's conversations.
func (x *Engine) recallScope(id identity) store.RecallScope {
	in := store.RecallScope{Scope: x.storeScope(id)}
	if !x.scoped() {
		in.Conversation = &id
	}
	return in
}

// viewReach is how many units on either side of a hit a load's view
// holds for a selection that shows reach of them (0: recallViewReach):
// at most recallViewReach in a scope wider than the conversation, as
// many as asked, and at least recallViewReach, in a conversation.
func (x *Engine) viewReach(reach int) int {
	switch {
	case reach <= 0:
		return recallViewReach
	case x.scoped():
		return min(reach, recallViewReach)
	default:
		return max(reach, recallViewReach)
	}
}

// kind is the unit the Engine indexes, as indexkit names it.
func (x *Engine) kind() indexkit.Kind {
	if x.cfg.Turns {
		return indexkit.Turns
	}
	return indexkit.Exchanges
}
