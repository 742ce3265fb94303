// Package recallindex is the mechanism of memories.Recall: it keeps a
// search index (retrieval.Index) in step with what the store holds and
// answers a load's search with the units to choose from. What a load
// shows, in what order and how — the policy — is memories.Recall's.
//
// Words as the conversation helpers (internal/conv) define them: a unit is
// a turn or an exchange (Config.Turns), the piece of a conversation that
// is indexed, found and shown whole; a scope is whose conversations a
// search covers (Scope).
//
//   - Conversations. Each conversation has an entry (a worker.Registry,
//     WithCacheSize idle ones kept) with its units as stored, kept up to
//     date incrementally from the store's Stat, so a load costs O(new
//     messages + what it shows), and the Seq through which they are
//     indexed. A change other than appends (a Clear, a trimmed prefix,
//     by any replica) resets the conversation's units in the index.
//   - Indexing. Saved indexes what a save stored (bounded calls into the
//     index: a panic is an error, a call that outlives its context is
//     abandoned; an abandoned delete blocks indexing until it returns).
//     A durable index (retrieval.Durable) has a watermark per
//     conversation in the store's state (Config.StateName), advanced with
//     a compare-and-set, so a Clear or Forget in between conflicts and
//     the docs of messages gone meanwhile are taken back.
//   - Scopes. With a scope wider than the conversation, the units of
//     every conversation of the user (or tenant) live in one index
//     namespace, each under a doc ID of the scope's own (Seqs are unique
//     per conversation only). A load learns which conversations other
//     processes saved to since it last looked from the store's change
//     feed (store.ChangeFeed: sqlitestore's per-conversation stat rows,
//     which every Append writes anyway; redisstore's per-user sorted
//     set, which its append script keeps), so a save writes nothing more
//     than a conversation-scoped one. Over a store without one, a save
//     records the conversation it saved to in the scope's journal, a
//     small message under a derived identity, and a load catches up from
//     it with one Stat when nothing changed. A process's first load of a
//     scope (or one behind a trimmed journal) indexes every conversation
//     of the scope (store.Users lists them), oldest first.
//   - Views. Load returns a View: for a conversation, its units; for a
//     wider scope, the units around the hits, in runs of one
//     conversation each, read from the store only for the conversations
//     that have hits, and only units still stored.
package recallindex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories/internal/worker"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

type identity = memstack.Identity

// The operations an Engine reports (Config.Report).
const (
	OpIndex  = "index"
	OpSearch = "search"
)

// Config is what an Engine works with.
type Config struct {
	// Store holds the messages (and a durable index's watermarks, and
	// the scopes' journals).
	Store store.Store
	// Index is the index searched.
	Index retrieval.Index
	// Turns makes each turn a unit, else each exchange.
	Turns bool
	// Scope is whose conversations a search covers.
	Scope Scope
	// Timeout bounds each index call (0: none).
	Timeout time.Duration
	// CacheSize is how many idle conversations' (and scopes') entries
	// are kept.
	CacheSize int
	// StateName names the store state holding a durable index's
	// watermark per conversation.
	StateName string
	// Report, if not nil, gets every index operation (OpIndex, OpSearch):
	// the units it concerned, how long it took, its error.
	Report func(id memstack.Identity, op string, n int, took time.Duration, err error)
	// Append stores messages for id as the layer's own saves do (under
	// the save key in ctx, at its time), without reporting them: the
	// journal's entries.
	Append func(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error
	// Searcher, if not nil, is the store's own lexical index, which ranks
	// as Index (a retrieval.BM25 with neighbour weights Near and
	// retrieval.Tokenize) does: once it answers, loads search it and
	// saves index nothing in process (see storeindex.go).
	Searcher store.RecallSearcher
	// Near are the neighbour weights the Searcher ranks with.
	Near [2]float64
}

// Engine keeps Config.Index in step with Config.Store. It is safe for
// concurrent use.
type Engine struct {
	cfg     Config
	durable retrieval.Durable // the index, if it is durable
	// inProcess: the index is a retrieval.BM25, called without a
	// goroutine of its own (see indexCall).
	inProcess bool
	// memStore: the store is the in-memory store, which answers in
	// microseconds: no goroutine, timer or parallel read is worth its
	// cost there.
	memStore bool
	// feed: the store's change feed, for a scope wider than the
	// conversation over a store.ChangeFeed that follows scopes of its
	// kind (nil otherwise: the scope's journal tells what changed).
	feed store.ChangeFeed
	// searcher is Config.Searcher; storeOn, that it has answered (its
	// index is complete).
	searcher store.RecallSearcher
	// ranger is the store as a store.RangeReader (nil if it is not): a
	// load over the store's index reads the stretches around its hits.
	ranger     store.RangeReader
	storeOn    atomic.Bool
	storeAsked atomic.Int64 // when the store last said its index is not ready (UnixNano)
	entries    *worker.Registry[identity, recallEntry]
	scopes     *worker.Registry[string, recallScopeEntry]
	journalN   atomic.Int64 // journal entries written, to trim now and then
}

// New returns an Engine for c.
func New(c Config) *Engine {
	x := &Engine{cfg: c, searcher: c.Searcher}
	x.ranger, _ = c.Store.(store.RangeReader)
	x.durable, _ = c.Index.(retrieval.Durable)
	_, x.inProcess = c.Index.(*retrieval.BM25)
	_, x.memStore = c.Store.(*store.InMemory)
	if f, ok := c.Store.(store.ChangeFeed); ok && c.Scope != ScopeConversation {
		// Follows is fixed per store and per kind of scope: ask it with
		// one scope of the kind.
		probe := store.UserScope("", "")
		if c.Scope == ScopeTenant {
			probe = store.TenantScope("")
		}
		if f.Follows(probe) {
			x.feed = f
		}
	}
	x.entries = worker.NewRegistry(c.CacheSize, x.newEntry, x.evict)
	x.scopes = worker.NewRegistry(c.CacheSize, nil, x.evictScope)
	return x
}

// report passes one operation to Config.Report.
func (x *Engine) report(id identity, op string, n int, took time.Duration, err error) {
	if x.cfg.Report != nil {
		x.cfg.Report(id, op, n, took, err)
	}
}

// IndexName names idx for errors and descriptions.
func IndexName(idx retrieval.Index) string {
	if s, ok := idx.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", idx)
}

// recallEntry is what an Engine knows about one conversation's index.
type recallEntry struct {
	id identity

	mu    sync.Mutex // held while indexing or loading the conversation
	ready bool       // the conversation's units were indexed in this process
	seen  int64      // the Seq of the newest message indexed
	// deletes are closed when the index deletes of the conversation that
	// were abandoned (see deleteIndex) return; while one is open nothing
	// is indexed for it. Guarded by mu.
	deletes []chan struct{}

	// The conversation's units as stored, kept up to date incrementally
	// (see refreshExchanges) so that a load costs O(new messages + what
	// it shows), not O(history). exsStat is the store's Stat they
	// reflect.
	exs     []Unit
	exsStat store.Stat
	exsOK   bool
	// days finds exs's units by day (see Query.Date); it has recorded
	// every unit up to the Seq daysThrough.
	days        dayIndex
	daysThrough int64

	// jentry is the conversation's journal entry (see journal), made
	// once.
	jentry atomic.Pointer[llms.HumanChatMessage]
}

// recallState is what an Engine with a durable index keeps in the store's
// state per conversation.
type recallState struct {
	// Through is the Seq of the newest message whose unit is in the
	// durable index.
	Through int64 `json:"through"`
	// Spaces are the durable index's vector spaces.
	Spaces []retrieval.Space `json:"spaces,omitempty"`
	// Scope is the scope whose namespace the docs were indexed under:
	// "" for the conversation's (see stateScope).
	Scope string `json:"scope,omitempty"`
}

// Unit is one unit of a conversation: its first message's Seq, its last
// message's Seq, its messages and the time its first message was saved.
// Its messages are never changed once other goroutines can see them.
type Unit struct {
	seq, through int64
	msgs         []llms.ChatMessage
	at           time.Time
}

// Seq is the Seq of the unit's first message: its ID in its conversation.
func (u Unit) Seq() int64 { return u.seq }

// Msgs are the unit's messages (read only).
func (u Unit) Msgs() []llms.ChatMessage { return u.msgs }

// At is when the unit's first message was saved.
func (u Unit) At() time.Time { return u.at }

// Query is one load's search.
type Query struct {
	// Text is what to search for ("" searches nothing; a dated query
	// still brings its date's units).
	Text string
	// Want is how many hits the selection needs beyond the recent units
	// (the search asks for these and as many as the recent units).
	Want int
	// Exclude is how many of the conversation's newest non-system
	// messages a recent window shows: their units are marked recent.
	Exclude int
	// Date, if not nil, is the date the question names: View.Dated lists
	// the units said on it, hits or not, found through a day index (the
	// cost is what the date holds, not the history).
	Date *Day
	// Reach is how many units on either side of a hit the selection may
	// show (its neighbours, a partner): a load over the store's index
	// reads that many around each hit (Engine.viewReach: at most
	// recallViewReach in a scope wider than the conversation; 0 is
	// recallViewReach).
	Reach int
}

// View is what a load selects from: Units, the Hits among them (Seq is
// an index in Units), best first, and the Dated ones.
type View struct {
	Units []Unit
	Hits  []retrieval.Hit
	Dated []int
	// Top is the best score the index answered with (0 for none), also
	// when its unit is no longer stored: what a date boost scales with.
	Top float64
	// For a scope wider than the conversation: src[i] is the run of
	// Units[i] (a run: consecutive units of one conversation), ids[run]
	// its conversation, excl[i] whether it is one of the current
	// conversation's recent units. For a conversation, src is nil and
	// the units from first on are the recent ones.
	src   []int
	ids   []identity
	excl  []bool
	first int
	cur   identity
	// single: a conversation's view built as a scoped one (over the
	// store's index: the stretches around its hits), which spans one
	// conversation only.
	single bool
}

// Recent reports whether unit i is one of the current conversation's
// units that a recent window shows (Query.Exclude).
func (v View) Recent(i int) bool {
	if v.src != nil {
		return v.excl[i]
	}
	return i >= v.first
}

// SameRun reports whether units i and j are of one run of one
// conversation: neighbours in it.
func (v View) SameRun(i, j int) bool { return v.src == nil || v.src[i] == v.src[j] }

// Conversation returns the conversation of unit i, and whether the view
// spans conversations at all.
func (v View) Conversation(i int) (memstack.Identity, bool) {
	if v.src == nil || v.single {
		return v.cur, false
	}
	return v.ids[v.src[i]], true
}

// Elsewhere reports whether unit i is of another conversation than the
// load's.
func (v View) Elsewhere(i int) bool { return v.src != nil && v.ids[v.src[i]] != v.cur }

// firstRecent returns the index of the first of exs's units that has a
// message among the last n non-system messages.
func firstRecent(exs []Unit, n int) int {
	first, seen := len(exs), 0
	for first > 0 && seen < n {
		first--
		seen += len(exs[first].msgs)
	}
	return first
}

// loadStats returns, for a scoped load over a store.MultiStat, the Stats
// of id and of its scope's journal, read in one round trip; nil, nil
// otherwise, or when the read fails (each is then read on its own).
func (x *Engine) loadStats(ctx context.Context, id identity) (cur, journal *store.Stat) {
	ms, ok := x.cfg.Store.(store.MultiStat)
	if !ok || !x.journals() {
		return nil, nil
	}
	st, err := ms.StatMany(ctx, []identity{id, x.journalID(id)})
	if err != nil || len(st) != 2 {
		return nil, nil
	}
	return &st[0], &st[1]
}

// Load syncs the index with the store for id's scope and searches it for
// q. A View with no units shows nothing. Errors name the step: reading
// the store, a permanent index failure; transient index failures are
// reported and the load goes on with what is indexed.
func (x *Engine) Load(ctx context.Context, id memstack.Identity, q Query) (View, error) {
	if x.searcher != nil {
		if v, ok, err := x.loadFromStore(ctx, id, q); ok {
			return v, err
		}
	}
	e := x.acquire(id)
	defer x.release(e)
	// The entry stays locked while its units are read and synced (a
	// concurrent save would extend them); the units read are never
	// written afterwards (see refreshExchanges), so the view outlives the
	// lock.
	// Over a store.MultiStat a scoped load reads the Stats of the
	// conversation and of the scope's journal in one round trip.
	known, journal := x.loadStats(ctx, id)
	e.mu.Lock()
	recs, err := x.refreshExchanges(ctx, id, e, known)
	if err != nil {
		e.mu.Unlock()
		if cerr := ctx.Err(); cerr != nil {
			return View{}, fmt.Errorf("memstack: %w", cerr)
		}
		if errors.As(err, new(recallResetError)) {
			return View{}, nil // a transient index failure, reported
		}
		return View{}, err
	}
	// The units just checked against the store (e.exsStat is current)
	// tell whether anything is left to index: when nothing is, the sync
	// and its round trip are skipped.
	upToDate := recs == nil && e.ready && e.exsOK && (e.exsStat.Count == 0 || e.exsStat.LastSeq == e.seen)
	if !upToDate {
		if err := x.syncLocked(ctx, id, e, recs); err != nil {
			if cerr := ctx.Err(); cerr != nil {
				e.mu.Unlock()
				return View{}, fmt.Errorf("memstack: %w", cerr)
			}
			if retrieval.Permanent(err) {
				e.mu.Unlock()
				return View{}, fmt.Errorf("memstack: recall index: %w", err)
			}
			// Transient: reported; search what is indexed.
		}
	}
	exs := e.exs
	first := firstRecent(exs, q.Exclude)
	if x.scoped() {
		// A scoped load reads other conversations' entries: never with
		// this one's lock held (no two entry locks at once).
		e.mu.Unlock()
		v, err := x.scopedHits(ctx, id, exs, first, q, journal)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return View{}, fmt.Errorf("memstack: %w", cerr)
			}
			return View{}, fmt.Errorf("memstack: recall search: %w", err)
		}
		return v, nil
	}
	// A conversation's load keeps the entry locked through its search, as
	// a Clear of the conversation waits for it.
	defer e.mu.Unlock()
	v := View{Units: exs, first: first, cur: id}
	if first == 0 {
		return View{}, nil // every unit is a recent one
	}
	var hits []retrieval.Hit
	if strings.TrimSpace(q.Text) != "" {
		// Hits for units no longer stored (a durable index keeps what
		// another writer cleared) take no place: ask again for more while
		// they crowd out those wanted (up to maxSearch hits).
		want := min(len(exs), q.Want+len(exs)-first)
		for ask := want; ; ask *= 4 {
			hits, err = x.search(ctx, id, q.Text, ask)
			if err != nil || len(hits) < ask || ask >= maxSearch || stored(exs, hits) >= want {
				break
			}
		}
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return View{}, fmt.Errorf("memstack: %w", cerr)
		}
		if retrieval.Permanent(err) {
			return View{}, fmt.Errorf("memstack: recall search: %w", err)
		}
		// Transient (reported): use whatever hits came back (a degraded
		// hybrid's), or none.
	}
	if len(hits) > 0 {
		v.Top = hits[0].Score
	}
	for _, h := range hits {
		if i, ok := unitAt(exs, h.Seq); ok {
			v.Hits = append(v.Hits, retrieval.Hit{Seq: int64(i), Score: h.Score})
		}
	}
	if q.Date != nil {
		e.indexDays()
		e.days.each(*q.Date, func(seq int64) {
			if i, ok := unitAt(exs, seq); ok && q.Date.Matches(exs[i].at) {
				v.Dated = append(v.Dated, i)
			}
		})
		slices.Sort(v.Dated)
		v.Dated = slices.Compact(v.Dated)
	}
	return v, nil
}

// indexDays records in e.days the units of e.exs it has not recorded
// (their Seqs only grow: a unit with a Seq past daysThrough is new), and
// rebuilds it when most of its entries are of units gone. e.mu is held.
func (e *recallEntry) indexDays() {
	if e.days.stale(len(e.exs)) {
		e.days.reset()
		e.daysThrough = 0
	}
	i, _ := slices.BinarySearchFunc(e.exs, e.daysThrough+1, func(x Unit, seq int64) int { return cmp.Compare(x.seq, seq) })
	for _, u := range e.exs[i:] {
		e.days.add(u.at, u.seq)
	}
	if n := len(e.exs); n > 0 {
		e.daysThrough = max(e.daysThrough, e.exs[n-1].seq)
	}
}

// maxSearch bounds how many hits a load asks the index for when hits for
// units no longer stored crowd out the ones wanted.
const maxSearch = 2048

// unitAt returns the index of the unit of exs (in Seq order) whose first
// message has Seq seq.
func unitAt(exs []Unit, seq int64) (int, bool) {
	return slices.BinarySearchFunc(exs, seq, func(x Unit, seq int64) int { return cmp.Compare(x.seq, seq) })
}

// stored counts the hits whose unit is in exs.
func stored(exs []Unit, hits []retrieval.Hit) int {
	n := 0
	for _, h := range hits {
		if _, ok := unitAt(exs, h.Seq); ok {
			n++
		}
	}
	return n
}

// search runs the query with the timeout and reports it.
func (x *Engine) search(ctx context.Context, id identity, query string, k int) ([]retrieval.Hit, error) {
	ictx, cancel := x.indexCtx(ctx)
	defer cancel()
	start := time.Now()
	// An answer that comes after the deadline but within the grace is
	// used: a search commits nothing, and a hybrid whose vector part
	// hangs answers then with its lexical part's hits.
	hits, _, err := indexCall(x, ictx, "search", func(ctx context.Context) ([]retrieval.Hit, error) {
		return x.cfg.Index.Search(ctx, x.ns(id), query, k)
	}, nil)
	x.report(id, OpSearch, len(hits), time.Since(start), err)
	return hits, err
}
