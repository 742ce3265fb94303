package recallindex

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
	"github.com/tmc/langchaingo/llms"
)

// Scope is whose conversations an Engine searches.
type Scope int

// The scopes.
const (
	// ScopeUser: every conversation of the identity's user.
	ScopeUser Scope = iota
	// ScopeConversation: the identity's conversation.
	ScopeConversation
	// ScopeTenant: every conversation of every user of the identity's
	// tenant.
	ScopeTenant
)

// String returns "user", "conversation" or "tenant".
func (s Scope) String() string {
	switch s {
	case ScopeConversation:
		return "conversation"
	case ScopeTenant:
		return "tenant"
	}
	return "user"
}

// recallJournalKeep is how many journal entries a save keeps when it trims
// the journal (once it holds twice as many); a replica that has not caught
// up for longer rebuilds the scope's index from the store.
const recallJournalKeep = 4096

// journalTimeout bounds a journal write, which outlives its caller's
// context.
const journalTimeout = 30 * time.Second

// recallJournalTrimmed is the name of the journal's state that records the
// Seq through which the journal was trimmed.
const recallJournalTrimmed = "recall-journal-trimmed"

// recallScopeEntry is what a Recall knows about one scope's index (a
// user's or a tenant's), in a worker.Registry keyed by the namespace.
type recallScopeEntry struct {
	mu    sync.Mutex // held while building the index or catching up
	built bool       // every conversation of the scope was indexed
	seen  int64      // the Seq of the newest journal entry caught up with
	// retry holds the conversations the last sync could not read: the
	// next one tries them again.
	retry []identity

	omu sync.Mutex
	// A scope's index holds units of many conversations, whose Seqs may
	// coincide (a store's Seqs are unique per identity only), so each
	// unit gets a doc ID of the scope's own: for an in-process index, in
	// the order it is first indexed (the IDs live as long as the entry
	// and its index); for a durable one, which replicas share and which
	// outlives the process, a hash of the unit (stableDocID), the same in
	// every process. docs maps a unit to its doc ID, owner a doc ID to
	// its unit.
	// A conversation's units are found through its scopeConv (one
	// identity look-up a call, then Seqs), so the bookkeeping of a save
	// costs no hashing of identities per unit.
	next  int64
	convs map[identity]*scopeConv
	owner map[int64]recallOwner
	days  dayIndex // owner's doc IDs by day (see Query.Date)
}

// scopeConv is one conversation of a scope's entry: its units' doc IDs.
type scopeConv struct {
	id   identity
	docs map[int64]int64 // unit (its first Seq) → doc ID
}

// recallOwner is the unit a doc ID stands for, and its time.
type recallOwner struct {
	conv *scopeConv
	seq  int64
	at   time.Time
	// span, when not zero, is the unit's stretch of its conversation as
	// the store's index found it (store.RecallHit's From and To): the
	// units recallViewReach on either side of it.
	span store.SeqRange
}

// id is the owner's conversation.
func (o recallOwner) id() identity { return o.conv.id }

// scoped reports whether m searches more than the conversation.
func (x *Engine) scoped() bool { return x.cfg.Scope != ScopeConversation }

// journals reports whether saves record themselves in the scope's journal:
// a scope wider than the conversation over a store without a change feed.
func (x *Engine) journals() bool { return x.scoped() && x.feed == nil && !x.storeOn.Load() }

// ns is the index scope (retrieval's namespace) id's units are kept under:
// the conversation's Key, or the user's or tenant's key prefix, marked.
func (x *Engine) ns(id identity) string {
	switch x.cfg.Scope {
	case ScopeUser:
		return "user\x00" + store.UserScope(id.Tenant, id.User).KeyPrefix()
	case ScopeTenant:
		return "tenant\x00" + store.TenantScope(id.Tenant).KeyPrefix()
	}
	return id.Key()
}

// stateScope names m's scope in a durable index's recorded state: "" for
// the conversation, else the scope's name.
func (x *Engine) stateScope() string {
	if !x.scoped() {
		return ""
	}
	return x.cfg.Scope.String()
}

// storeScope is the store.Scope a scoped Recall searches for id.
func (x *Engine) storeScope(id identity) store.Scope {
	if x.cfg.Scope == ScopeTenant {
		return store.TenantScope(id.Tenant)
	}
	return store.UserScope(id.Tenant, id.User)
}

// journalID is the identity of the journal of id's scope.
func (x *Engine) journalID(id identity) identity {
	if x.cfg.Scope == ScopeTenant {
		return identity{Tenant: id.Tenant, Conversation: store.UserRecallJournalConversation + "-tenant"}
	}
	return identity{Tenant: id.Tenant, User: id.User, Conversation: store.UserRecallJournalConversation}
}

// assign gives docs, units of conversation id (Seq: the unit's first
// Seq; at their times), the doc IDs of id's scope, in place.
func (x *Engine) assign(id identity, docs []retrieval.Doc, at map[int64]time.Time) {
	stable := x.durable != nil
	x.withOwners(id, func(u *recallScopeEntry) { u.assign(id, docs, at, stable) })
}

// stableDocID is the doc ID of the unit of conversation id whose first
// Seq is seq in a durable index (one that outlives the process, shared by
// replicas): every process must give a unit the same ID, so it is a hash
// of the conversation's key and the Seq (FNV-1a, never 0), of 52 bits so
// that a vector store that hands metadata back as JSON numbers (float64:
// pgvector, chroma) keeps it exact. Two units of one scope share an ID
// with a chance of about n²/2⁵³ for n units (1 in 10⁶ for 100,000): the
// later one indexed then owns it.
func stableDocID(id identity, seq int64) int64 {
	h := fnv.New64a()
	h.Write([]byte(id.Key()))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(seq, 10)))
	return int64(h.Sum64()>>12) | 1
}

// withOwners runs f on the entry of id's scope with its doc IDs locked.
func (x *Engine) withOwners(id identity, f func(*recallScopeEntry)) {
	ns := x.ns(id)
	u := x.scopes.Acquire(ns)
	defer x.scopes.Release(ns)
	u.omu.Lock()
	defer u.omu.Unlock()
	f(u)
}

// assign is Engine.assign with u.omu held.
func (u *recallScopeEntry) assign(id identity, docs []retrieval.Doc, at map[int64]time.Time, stable bool) {
	if u.owner == nil {
		u.owner, u.convs = make(map[int64]recallOwner), make(map[identity]*scopeConv)
	}
	c := u.convs[id]
	if c == nil {
		c = &scopeConv{id: id, docs: make(map[int64]int64)}
		u.convs[id] = c
	}
	for i, d := range docs {
		doc, ok := c.docs[d.Seq]
		if !ok {
			if stable {
				doc = stableDocID(id, d.Seq)
			} else {
				u.next++
				doc = u.next
			}
			c.docs[d.Seq] = doc
			u.days.add(at[d.Seq], doc)
		}
		u.owner[doc] = recallOwner{conv: c, seq: d.Seq, at: at[d.Seq]}
		docs[i].Seq = doc
	}
}

// owned returns the first Seqs of the units of conversation id that the
// scope's entry holds.
func (x *Engine) owned(id identity) []int64 {
	var out []int64
	x.withOwners(id, func(u *recallScopeEntry) {
		if c := u.convs[id]; c != nil {
			for seq := range c.docs {
				out = append(out, seq)
			}
		}
	})
	return out
}

// disown forgets the units seqs of conversation id and returns their doc
// IDs.
func (x *Engine) disown(id identity, seqs []int64) []int64 {
	var docs []int64
	stable := x.durable != nil
	x.withOwners(id, func(u *recallScopeEntry) {
		c := u.convs[id]
		if c == nil {
			if stable {
				// Another process may have indexed them into the
				// durable index: their IDs are known without it.
				for _, s := range seqs {
					docs = append(docs, stableDocID(id, s))
				}
			}
			return
		}
		for _, s := range seqs {
			if doc, ok := c.docs[s]; ok {
				docs = append(docs, doc)
				delete(c.docs, s)
				delete(u.owner, doc)
			} else if stable {
				docs = append(docs, stableDocID(id, s))
			}
		}
		if len(c.docs) == 0 {
			delete(u.convs, id)
		}
	})
	return docs
}

// JournalEntry returns, for a Recall searching more than the
// conversation, the journal entry a save to id records and the journal's
// identity, so that a caller whose store is a store.MultiAppender stores
// the turn and its entry in one write (and then calls Saved with
// journaled set); ok is false for a conversation-scoped Recall and for
// one over a store.ChangeFeed, which keeps no journal.
func (x *Engine) JournalEntry(id identity) (jid identity, entry llms.ChatMessage, ok bool, err error) {
	if !x.journals() {
		return identity{}, nil, false, nil
	}
	b, err := json.Marshal([2]string{id.User, id.Conversation})
	if err != nil {
		return identity{}, nil, false, fmt.Errorf("memstack: encoding the recall journal entry of %s: %w", id.Key(), err)
	}
	return x.journalID(id), llms.HumanChatMessage{Content: string(b)}, true, nil
}

// journal records, after a save to id, that id changed: one message in
// the scope's journal (under the save's append key, so a retried save
// records it once), and now and then trims the journal.
// e is id's entry, which keeps the entry once made.
func (x *Engine) journal(ctx context.Context, id identity, e *recallEntry) error {
	entry := e.jentry.Load()
	if entry == nil {
		_, m, _, err := x.JournalEntry(id)
		if err != nil {
			return err
		}
		h := m.(llms.HumanChatMessage)
		entry = &h
		e.jentry.Store(entry)
	}
	jid := x.journalID(id)
	// The turn is stored: recording it must not end with the caller's
	// context (other replicas would never index it), only with its own
	// time limit (the in-memory store answers at once: it needs none).
	jctx := context.WithoutCancel(ctx)
	if !x.memStore {
		var cancel context.CancelFunc
		jctx, cancel = context.WithTimeout(jctx, journalTimeout)
		defer cancel()
	}
	if err := x.cfg.Append(jctx, jid, *entry); err != nil {
		return fmt.Errorf("memstack: turn stored; recording it in the recall journal: %w", err)
	}
	x.journaled(ctx, jid)
	return nil
}

// journaled counts a journal entry recorded, and now and then trims the
// journal jid.
func (x *Engine) journaled(ctx context.Context, jid identity) {
	if x.journalN.Add(1)%64 == 0 {
		x.trimJournal(context.WithoutCancel(ctx), jid)
	}
}

// trimJournal removes the oldest entries of the journal jid once it holds
// twice recallJournalKeep, recording first where it cut, so a replica
// behind the cut rebuilds. Failures leave the journal whole.
func (x *Engine) trimJournal(ctx context.Context, jid identity) {
	s := x.cfg.Store
	st, err := s.Stat(ctx, jid)
	if err != nil || st.Count <= 2*recallJournalKeep {
		return
	}
	keep, err := s.Last(ctx, jid, recallJournalKeep)
	if err != nil || len(keep) == 0 {
		return
	}
	through := keep[0].Seq - 1
	old, err := s.GetState(ctx, jid, recallJournalTrimmed)
	if err != nil {
		return
	}
	if old.Exists() {
		// Another replica trimmed further: never record a smaller cut.
		if prev, err := strconv.ParseInt(string(old.Value), 10, 64); err == nil && prev > through {
			through = prev
		}
	}
	if _, err := s.PutState(ctx, jid, recallJournalTrimmed, []byte(strconv.FormatInt(through, 10)), old.Version); err != nil {
		return
	}
	_, _ = s.RemovePrefix(ctx, jid, through)
}

// syncScope brings the index of id's scope up to date with the store: on
// first use (or when this process fell behind a trimmed journal, or the
// journal was forgotten) it indexes every conversation of the scope;
// afterwards it indexes the conversations the journal names since it last
// looked — one Stat when nothing changed (none when known, the journal's
// Stat read during this load, is given). The caller holds the scope
// entry u.
func (x *Engine) syncScope(ctx context.Context, id identity, u *recallScopeEntry, known *store.Stat) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if x.feed != nil {
		return x.syncFromFeed(ctx, id, u)
	}
	s := x.cfg.Store
	jid := x.journalID(id)
	var st store.Stat
	// A Stat read early in this load (known) is used unless it looks
	// behind what this process has caught up with: another load may have
	// advanced u.seen since it was read, and a stale Stat must not pass
	// for a forgotten journal (a rebuild of the whole scope). It is then
	// read again.
	stale := known != nil && u.built && (known.Count == 0 && u.seen > 0 || known.Count > 0 && known.LastSeq < u.seen)
	if known != nil && !stale {
		st = *known
	} else {
		var err error
		if st, err = s.Stat(ctx, jid); err != nil {
			return fmt.Errorf("memstack: reading the recall journal: %w", err)
		}
	}
	if u.built && (st.Count == 0 && u.seen > 0 || st.Count > 0 && st.LastSeq < u.seen) {
		u.built = false // the journal was forgotten
	}
	if u.built && st.Count > 0 && st.FirstSeq > u.seen {
		behind, err := x.trimmedPast(ctx, jid, u.seen)
		if err != nil {
			return err
		}
		if behind {
			u.built = false // entries this process has not seen were trimmed
		}
	}
	if !u.built {
		return x.buildScope(ctx, id, u, x.journalList(id, st))
	}
	if err := x.retryUnread(ctx, id, u); err != nil {
		return err
	}
	if st.Count == 0 || st.LastSeq == u.seen {
		return nil
	}
	recs, err := s.Tail(ctx, jid, math.MaxInt, u.seen)
	if err != nil {
		return fmt.Errorf("memstack: reading the recall journal: %w", err)
	}
	// A trim between the Stat and the Tail may have taken entries this
	// process has not seen: look again now the entries are read.
	if behind, err := x.trimmedPast(ctx, jid, u.seen); err != nil {
		return err
	} else if behind {
		return x.buildScope(ctx, id, u, x.journalList(id, st))
	}
	named := make([]identity, 0, len(recs))
	for _, r := range recs {
		var e [2]string
		if json.Unmarshal([]byte(r.Message.GetContent()), &e) == nil {
			named = append(named, identity{Tenant: id.Tenant, User: e[0], Conversation: e[1]})
		}
	}
	if err := x.syncConversations(ctx, id, u, named, false); err != nil {
		return err
	}
	u.seen = max(u.seen, st.LastSeq)
	return nil
}

// syncFromFeed is syncScope over a store.ChangeFeed: the first time it
// indexes every conversation the feed lists; afterwards the
// conversations it names as appended to since the mark this process last
// read (one query when nothing changed). A Clear or Forget elsewhere is no
// change: a load checks every conversation it shows against the store, so
// units gone take no place (see scopedHits).
func (x *Engine) syncFromFeed(ctx context.Context, id identity, u *recallScopeEntry) error {
	scope := x.storeScope(id)
	if !u.built {
		return x.buildScope(ctx, id, u, func(ctx context.Context) ([]identity, int64, error) {
			// The feed's mark first, then the scope's conversations (a
			// feed may hold only those appended to since the store
			// followed the scope): what is saved after the mark is
			// caught up from the feed.
			fed, mark, err := x.feed.Changed(ctx, scope, 0)
			if err != nil {
				return nil, 0, err
			}
			ids, err := x.conversations(ctx, id)
			if err != nil {
				return nil, 0, err
			}
			listed := make(map[identity]bool, len(ids))
			for _, cid := range ids {
				listed[cid] = true
			}
			for _, cid := range fed {
				if !listed[cid] {
					ids = append(ids, cid)
				}
			}
			return ids, mark, nil
		})
	}
	if err := x.retryUnread(ctx, id, u); err != nil {
		return err
	}
	ids, next, err := x.feed.Changed(ctx, scope, u.seen)
	if err != nil {
		return fmt.Errorf("memstack: reading what changed in %s: %w", scope, err)
	}
	if err := x.syncConversations(ctx, id, u, ids, false); err != nil {
		return err
	}
	u.seen = max(u.seen, next)
	return nil
}

// retryUnread indexes again the conversations the scope's last sync
// could not read or index (see cannotRead).
func (x *Engine) retryUnread(ctx context.Context, id identity, u *recallScopeEntry) error {
	retry := u.retry
	u.retry = nil
	return x.syncConversations(ctx, id, u, retry, true)
}

// syncConversations indexes what each of cids (named by the journal or
// the feed, or to retry) has stored that is not indexed yet — with all,
// every unit again — once each, skipping those outside id's scope and
// derived identities; one that cannot be read or indexed is retried at
// the scope's next sync (cannotRead). u.mu is held.
func (x *Engine) syncConversations(ctx context.Context, id identity, u *recallScopeEntry, cids []identity, all bool) error {
	scope := x.storeScope(id)
	done := make(map[identity]bool, len(cids))
	for _, cid := range cids {
		if done[cid] || storekit.Derived(cid) || !scope.Contains(cid) {
			continue
		}
		done[cid] = true
		if err := x.syncConversation(ctx, cid, all); err != nil {
			if err := x.cannotRead(ctx, u, cid, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// conversations lists the conversations of id's scope (store.Users).
func (x *Engine) conversations(ctx context.Context, id identity) ([]identity, error) {
	users, ok := x.cfg.Store.(store.Users)
	if !ok {
		return nil, errCannotList(x.cfg.Store)
	}
	return users.Identities(ctx, x.storeScope(id))
}

// errCannotList is the error of a scoped Recall over a store that cannot
// list conversations.
func errCannotList(s store.Store) error {
	return fmt.Errorf("memstack: the store %T cannot list conversations (store.Users)", s)
}

// journalList returns buildScope's list for a scope followed through its
// journal: the scope's conversations, and the journal's last Seq read
// before them (st): what is saved after that is caught up from the
// journal.
func (x *Engine) journalList(id identity, st store.Stat) func(ctx context.Context) ([]identity, int64, error) {
	return func(ctx context.Context) ([]identity, int64, error) {
		ids, err := x.conversations(ctx, id)
		return ids, st.LastSeq, err
	}
}

// cannotRead handles the failure to index conversation cid while a scope
// syncs: ctx's end is an error, anything else is reported and cid retried
// at the scope's next sync (one unreadable conversation does not fail the
// user's loads).
func (x *Engine) cannotRead(ctx context.Context, u *recallScopeEntry, cid identity, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if retrieval.Permanent(err) {
		return err
	}
	if !errors.As(err, new(syncError)) { // a syncError was reported
		x.report(cid, OpIndex, 0, 0, err)
	}
	if !slices.Contains(u.retry, cid) {
		u.retry = append(u.retry, cid)
	}
	return nil
}

// trimmedPast reports whether the journal jid was trimmed past seen: it
// lost entries after the newest one this process caught up with.
func (x *Engine) trimmedPast(ctx context.Context, jid identity, seen int64) (bool, error) {
	trimmed, err := x.cfg.Store.GetState(ctx, jid, recallJournalTrimmed)
	if err != nil {
		return false, fmt.Errorf("memstack: reading the recall journal: %w", err)
	}
	if !trimmed.Exists() {
		return false, nil
	}
	through, err := strconv.ParseInt(string(trimmed.Value), 10, 64)
	if err != nil {
		return false, fmt.Errorf("memstack: the recall journal's trim mark %q is not a Seq: %w", trimmed.Value, err)
	}
	return through > seen, nil
}

// buildScope indexes every conversation of id's scope, starting from an
// empty in-process index: list, called once the index is reset, returns
// the conversations and the mark the scope's entry has caught up with
// (the journal's last Seq read before the listing, or the change feed's
// mark of the same read): what is saved after it is caught up from the
// journal or the feed.
func (x *Engine) buildScope(ctx context.Context, id identity, u *recallScopeEntry, list func(context.Context) ([]identity, int64, error)) error {
	if _, ok := x.cfg.Store.(store.Users); !ok {
		return errCannotList(x.cfg.Store)
	}
	if x.durable == nil {
		// Start from an empty in-process index: the docs of
		// conversations cleared meanwhile must not take hits' places.
		ns := x.ns(id)
		if _, _, err := indexCall(x, ctx, "delete", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, x.cfg.Index.Delete(ctx, ns)
		}, nil); err != nil {
			err = fmt.Errorf("memstack: resetting the recall index: %w", err)
			x.report(id, OpIndex, 0, 0, err)
			return recallResetError{err}
		}
		u.omu.Lock()
		u.owner, u.convs = nil, nil
		u.omu.Unlock()
	}
	ids, seen, err := list(ctx)
	if err != nil {
		return fmt.Errorf("memstack: listing the conversations of %s: %w", x.storeScope(id), err)
	}
	u.retry = nil
	// Read every conversation first, then index them oldest first (by
	// their first Seq): the index takes units in Seq order as appends,
	// not as insertions.
	type pending struct {
		id   identity
		e    *recallEntry
		recs []store.Record
	}
	var all []pending
	defer func() {
		for _, p := range all {
			x.release(p.e)
		}
	}()
	for _, cid := range ids {
		if storekit.Derived(cid) {
			continue
		}
		e := x.acquire(cid)
		all = append(all, pending{id: cid, e: e})
		p := &all[len(all)-1]
		e.mu.Lock()
		e.ready, e.seen = false, 0
		recs, err := x.refreshExchanges(ctx, cid, e, nil)
		if err == nil && recs == nil {
			recs, err = loadAll(ctx, x.cfg.Store, cid)
		}
		e.mu.Unlock()
		if err != nil && !errors.As(err, new(recallResetError)) {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			// One conversation that cannot be read does not fail the
			// user's loads: reported, left out, retried at the next load.
			x.report(cid, OpIndex, 0, 0, err)
			u.retry = append(u.retry, cid)
			continue
		}
		p.recs = recs
	}
	slices.SortStableFunc(all, func(a, b pending) int {
		first := func(p pending) int64 {
			if len(p.recs) == 0 {
				return math.MaxInt64
			}
			return p.recs[0].Seq
		}
		return cmp.Compare(first(a), first(b))
	})
	for _, p := range all {
		p.e.mu.Lock()
		err := x.syncLocked(ctx, p.id, p.e, p.recs)
		p.e.mu.Unlock()
		if err != nil && retrieval.Permanent(err) {
			return fmt.Errorf("memstack: recall index: %w", err)
		}
	}
	u.built, u.seen = true, seen
	return nil
}

// syncConversation indexes what cid has stored that is not indexed yet;
// with all, every unit of cid again (the scope's index is being rebuilt).
func (x *Engine) syncConversation(ctx context.Context, cid identity, all bool) error {
	e := x.acquire(cid)
	defer x.release(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	if all {
		e.ready, e.seen = false, 0
	}
	recs, err := x.refreshExchanges(ctx, cid, e, nil)
	if err != nil && !errors.As(err, new(recallResetError)) {
		return err
	}
	if err := x.syncLocked(ctx, cid, e, recs); err != nil {
		if retrieval.Permanent(err) {
			return fmt.Errorf("memstack: recall index: %w", err)
		}
		if errors.As(err, new(syncError)) {
			return err // the caller retries cid (cannotRead)
		}
	}
	return nil
}

// removeUnits removes seqs, units of id, from a scoped Recall's index
// where the index can remove single docs (an index that cannot keeps
// them; a load never shows a unit the store does not hold).
func (x *Engine) removeUnits(ctx context.Context, id identity, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	docs := x.disown(id, seqs)
	r, ok := x.cfg.Index.(retrieval.Remover)
	if !ok || len(docs) == 0 {
		return nil
	}
	_, _, err := indexCall(x, ctx, "remove", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, r.Remove(ctx, x.ns(id), docs)
	}, nil)
	if errors.Is(err, retrieval.ErrCannotRemove) {
		return nil
	}
	return err
}

// unitSeqs returns the first Seqs of exs.
func unitSeqs(exs []Unit) []int64 {
	out := make([]int64, len(exs))
	for i, x := range exs {
		out[i] = x.seq
	}
	return out
}

// otherUnits reads the units of conversation cid for a load. known, when
// not nil, is cid's Stat read during this load (store.MultiStat): units
// read at that Stat are current without another round trip.
func (x *Engine) otherUnits(ctx context.Context, cid identity, known *store.Stat) ([]Unit, error) {
	e := x.acquire(cid)
	defer x.release(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := x.refreshExchanges(ctx, cid, e, known); err != nil && !errors.As(err, new(recallResetError)) {
		return nil, err
	}
	return e.exs, nil
}

// readParallel bounds the other conversations a load reads at once.
const readParallel = 8

// readOthers reads the units of the conversations convs for a load,
// each as runs of consecutive units (segments): segs[i] and errs[i] are
// convs[i]'s. spans are the stretches around each conversation's units
// found: when the store's index gave one for each of them
// (store.RecallHit's From and To) and the store is a store.RangeReader,
// only those stretches are read, all in one call — a load reads what it
// may show, not whole conversations, and keeps nothing of them in
// process. A conversation with no unit found (the load's own, when its
// hits are all elsewhere) is not read. Otherwise a conversation is read
// whole (otherUnits), as one segment — and so is every ranged one, each
// on its own, when the one ReadRanges fails (one conversation's bad row
// then leaves out that conversation only).
//
// Over a networked store a load costs about what it shows, not a round
// trip per conversation one after another: a store.MultiStat checks them
// all in one round trip (and only those that changed are read again);
// another store's are read up to readParallel at once (the in-memory
// store, which answers in microseconds, one after another). A panic in a
// read (a store's bug) does not end the process from a goroutine the
// caller cannot guard: it is the load's error, as it would have been in
// the caller's goroutine.
func (x *Engine) readOthers(ctx context.Context, convs []identity, spans map[identity][]store.SeqRange) (segs [][][]Unit, errs []error, fatal error) {
	segs, errs = make([][][]Unit, len(convs)), make([]error, len(convs))
	whole := make([]identity, 0, len(convs))
	var wholeAt []int
	var ranges []store.SeqRange
	var rangeOf []int // rangeOf[j]: the conversation of ranges[j]
	for i, cid := range convs {
		ss := spans[cid]
		if len(ss) == 0 {
			continue // no unit of it found (the current conversation): nothing to read
		}
		if x.ranger == nil || slices.ContainsFunc(ss, func(r store.SeqRange) bool { return r.To == 0 }) {
			whole, wholeAt = append(whole, cid), append(wholeAt, i)
			continue
		}
		for _, r := range mergeSpans(ss) {
			r.ID = cid
			ranges, rangeOf = append(ranges, r), append(rangeOf, i)
		}
	}
	if len(ranges) > 0 {
		recs, err := x.ranger.ReadRanges(ctx, ranges)
		if err == nil && len(recs) != len(ranges) {
			err = fmt.Errorf("memstack: the store read %d of %d ranges", len(recs), len(ranges))
		}
		if err != nil && ctx.Err() == nil {
			// One conversation's failure (a row that does not decode) must
			// not hide the others: read them whole, each on its own.
			for j, ci := range rangeOf {
				if j == 0 || rangeOf[j-1] != ci {
					whole, wholeAt = append(whole, convs[ci]), append(wholeAt, ci)
				}
			}
		} else {
			for j, ci := range rangeOf {
				if err != nil {
					errs[ci] = fmt.Errorf("memstack: loading history: %w", err)
					continue
				}
				if us := x.units(recs[j]); len(us) > 0 {
					segs[ci] = append(segs[ci], us)
				}
			}
		}
	}
	units, werrs, fatal := x.readWhole(ctx, whole)
	for k, i := range wholeAt {
		segs[i], errs[i] = [][]Unit{units[k]}, werrs[k]
	}
	return segs, errs, fatal
}

// mergeSpans returns spans sorted, those that overlap or touch merged (a
// span that starts where another ends continues it: the units are
// consecutive).
func mergeSpans(spans []store.SeqRange) []store.SeqRange {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b store.SeqRange) int { return cmp.Compare(a.From, b.From) })
	out := spans[:0]
	for _, r := range spans {
		if n := len(out); n > 0 && r.From <= out[n-1].To {
			out[n-1].To = max(out[n-1].To, r.To)
			continue
		}
		out = append(out, r)
	}
	return out
}

// readWhole reads every unit of each of convs (otherUnits): units[i] and
// errs[i] are convs[i]'s (see readOthers).
func (x *Engine) readWhole(ctx context.Context, convs []identity) (units [][]Unit, errs []error, fatal error) {
	units, errs = make([][]Unit, len(convs)), make([]error, len(convs))
	if len(convs) == 0 {
		return units, errs, nil
	}
	var stats []store.Stat
	if ms, ok := x.cfg.Store.(store.MultiStat); ok && len(convs) > 1 {
		var err error
		if stats, err = ms.StatMany(ctx, convs); err != nil || len(stats) != len(convs) {
			stats = nil // each conversation is checked on its own below
		}
	}
	if len(convs) <= 1 || x.memStore || stats != nil {
		for i, cid := range convs {
			var known *store.Stat
			if stats != nil {
				known = &stats[i]
			}
			units[i], errs[i] = x.otherUnits(ctx, cid, known)
		}
		return units, errs, nil
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		panics []error
	)
	sem := make(chan struct{}, readParallel)
	for i, cid := range convs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() {
				<-sem
				if p := recover(); p != nil {
					mu.Lock()
					panics = append(panics, fmt.Errorf("memstack: reading a conversation's history panicked: %v", p))
					mu.Unlock()
				}
			}()
			units[i], errs[i] = x.otherUnits(ctx, cid, nil)
		})
	}
	wg.Wait()
	return units, errs, errors.Join(panics...)
}

// scopedHits searches the scope's index for q and gathers the units the
// hits (and q's dated units) belong to. cur is the current conversation's
// units (from its entry, synced), first the first of them that is recent;
// journal, when not nil, the Stat of the scope's journal read during this
// load (see syncScope).
func (x *Engine) scopedHits(ctx context.Context, id identity, cur []Unit, first int, q Query, journal *store.Stat) (View, error) {
	ns := x.ns(id)
	u := x.scopes.Acquire(ns)
	defer x.scopes.Release(ns)
	if err := x.syncScope(ctx, id, u, journal); err != nil {
		if errors.As(err, new(recallResetError)) {
			return View{}, nil // a transient index failure, reported
		}
		return View{}, err
	}
	// Units no longer stored (cleared or forgotten by another process
	// since this one indexed them) are found by the search like any
	// other, and taken out of the index when the load sees they are gone.
	// When they filled the hits asked for, they may have crowded out
	// units still stored: the search runs again, asking for four times as
	// many, until the hits are not crowded or maxSearch are asked for (at
	// most six searches; each takes the gone units it found out, so the
	// next load finds fewer).
	ask := q.Want + len(cur) - first
	for {
		v, crowded, err := x.scopedView(ctx, id, u, cur, first, q, ask)
		if err != nil || !crowded || ask >= maxSearch {
			return v, err
		}
		ask = min(4*ask, maxSearch)
	}
}

// scopedView is one search of scopedHits, asking the index for ask hits.
// crowded reports that every hit asked for came back and some were not
// shown: of units no longer stored (now taken out of the index), or docs
// this process does not know.
func (x *Engine) scopedView(ctx context.Context, id identity, u *recallScopeEntry, cur []Unit, first int, q Query, ask int) (v View, crowded bool, err error) {
	var hits []retrieval.Hit
	if strings.TrimSpace(q.Text) != "" {
		hits, err = x.search(ctx, id, q.Text, ask)
		if err != nil && !retrieval.Permanent(err) && ctx.Err() == nil {
			err = nil // transient, reported: use what came back
		}
		if err != nil {
			return View{}, false, err
		}
	}
	u.omu.Lock()
	owners := make(map[int64]recallOwner, len(hits))
	unknown := 0 // hits of docs this process does not know (see crowded)
	for _, h := range hits {
		if o, ok := u.owner[h.Seq]; ok {
			owners[h.Seq] = o
		} else {
			unknown++
		}
	}
	var dated []int64
	if q.Date != nil {
		if u.days.stale(len(u.owner)) {
			u.days.reset()
			for doc, o := range u.owner {
				u.days.add(o.at, doc)
			}
		}
		u.days.each(*q.Date, func(doc int64) {
			if o, ok := u.owner[doc]; ok && q.Date.Matches(o.at) {
				owners[doc] = o
				dated = append(dated, doc)
			}
		})
	}
	u.omu.Unlock()
	return x.viewOf(ctx, id, current{units: cur, first: first}, q, ask, hits, owners, dated, unknown, true)
}

// current is the load's own conversation as viewOf sees it: its units,
// read before the search (those from first on are recent); or, ranged,
// nothing read before: the stretches around its units found are read
// after the search as another conversation's are, and its units from Seq
// from on are the recent ones.
type current struct {
	units  []Unit
	first  int
	ranged bool
	from   int64
}

// recent reports whether unit u, at i in its segment, is one of the
// recent units.
func (c current) recent(i int, u Unit) bool {
	if c.ranged {
		return u.seq >= c.from
	}
	return i >= c.first
}

// viewOf builds a scoped load's View from its hits (Seq: a doc number),
// each doc's unit (owners) and the dated docs: the units around them,
// read from the store for the other conversations (and for the current
// one too when c is ranged: see current). unknown counts hits
// of docs with no unit; remove, whether units found gone are taken out
// of the in-process index (not when the store searched its own).
func (x *Engine) viewOf(ctx context.Context, id identity, c current, q Query, ask int, hits []retrieval.Hit, owners map[int64]recallOwner, dated []int64, unknown int, remove bool) (v View, crowded bool, err error) {
	// The units by conversation (a doc ID the entry does not know any
	// more was removed meanwhile): the other conversations oldest first
	// (by their oldest unit), the current one last.
	byConv := map[identity][]int64{}
	for _, o := range owners {
		byConv[o.id()] = append(byConv[o.id()], o.seq)
	}
	convs := make([]identity, 0, len(byConv)+1)
	for cid := range byConv {
		if cid != id {
			convs = append(convs, cid)
		}
	}
	slices.SortFunc(convs, func(a, b identity) int {
		if p, q := slices.Min(byConv[a]), slices.Min(byConv[b]); p != q {
			return cmp.Compare(p, q)
		}
		return cmp.Compare(a.Key(), b.Key())
	})
	convs = append(convs, id)
	// The view holds, of each conversation, only the units around those
	// found (recallViewReach on either side: the neighbours and partners
	// a selection may show), one run per stretch of them: a load reads and
	// copies what it may show, not the conversations.
	v = View{cur: id, single: !x.scoped()}
	if len(hits) > 0 {
		v.Top = hits[0].Score // also a unit gone: see View.Top
	}
	// Each unit found with reach units on either side: recallViewReach
	// (the store read no more than the search's reach of another
	// conversation), or in a conversation as many as the selection shows.
	reach := recallViewReach
	if !x.scoped() {
		reach = x.viewReach(q.Reach)
	}
	// At most 2·reach+1 units around each unit found: a capacity hint
	// only, bounded (a conversation's reach is WithNeighbours', which may
	// be any size: the view holds no more than was read).
	most := (2*min(reach, recallViewReach) + 1) * len(owners)
	v.Units, v.src, v.excl = make([]Unit, 0, most), make([]int, 0, most), make([]bool, 0, most)
	// Where each unit found is in v.Units, by its conversation's index in
	// convs and its Seq.
	type unitPos struct {
		conv int
		seq  int64
	}
	at := make(map[unitPos]int, len(owners))
	convAt := make(map[identity]int, len(convs))
	for ci, cid := range convs {
		convAt[cid] = ci
	}
	gone := map[identity][]int64{}
	spans := map[identity][]store.SeqRange{}
	for _, o := range owners {
		spans[o.id()] = append(spans[o.id()], o.span)
	}
	read := convs[:len(convs)-1]
	if c.ranged {
		read = convs // the current conversation's stretches too
	}
	others, oerrs, fatal := x.readOthers(ctx, read, spans)
	if fatal != nil {
		return View{}, false, fatal
	}
	if err := ctx.Err(); err != nil {
		return View{}, false, err
	}
	for ci, cid := range convs {
		segs := [][]Unit{c.units}
		if cid != id || c.ranged {
			if oerrs[ci] != nil {
				if cid == id && !x.scoped() {
					// A conversation's own load fails when its
					// conversation cannot be read, as over the
					// in-process index.
					return View{}, false, oerrs[ci]
				}
				continue // that conversation's units are left out; the rest stand
			}
			segs = others[ci]
		}
		found := make([]bool, len(byConv[cid]))
		for _, exs := range segs {
			var pos []int
			for j, seq := range byConv[cid] {
				if i, ok := unitAt(exs, seq); ok {
					pos = append(pos, i)
					found[j] = true
				}
			}
			slices.Sort(pos)
			p := 0 // the next of pos to note in at
			for k := 0; k < len(pos); {
				// (pos+reach may overflow: compared as len(exs)-1-pos.)
				end := func(p int) int { return p + min(reach, len(exs)-1-p) }
				lo, hi := max(pos[k]-reach, 0), end(pos[k])
				for k++; k < len(pos) && pos[k]-reach <= hi+1; k++ {
					hi = end(pos[k])
				}
				for i := lo; i <= hi; i++ {
					for p < len(pos) && pos[p] < i {
						p++
					}
					if p < len(pos) && pos[p] == i {
						at[unitPos{ci, exs[i].seq}] = len(v.Units)
					}
					v.Units = append(v.Units, exs[i])
					v.src = append(v.src, len(v.ids))
					v.excl = append(v.excl, cid == id && c.recent(i, exs[i]))
				}
				v.ids = append(v.ids, cid)
			}
		}
		for j, seq := range byConv[cid] {
			if !found[j] && (cid != id || c.ranged || len(c.units) > 0 && seq < c.units[len(c.units)-1].seq) {
				// Read after the search: a unit it found that is not
				// stored any more is gone. (The current conversation's
				// units, unless ranged, were read before the search: a
				// unit saved since, by any replica, is not gone — but one
				// below its newest unit is: Seqs are never reused.)
				gone[cid] = append(gone[cid], seq)
			}
		}
	}
	index := func(doc int64) (int, bool) {
		o, ok := owners[doc]
		if !ok {
			return 0, false
		}
		i, ok := at[unitPos{convAt[o.id()], o.seq}]
		return i, ok
	}
	for _, h := range hits {
		if i, ok := index(h.Seq); ok {
			v.Hits = append(v.Hits, retrieval.Hit{Seq: int64(i), Score: h.Score})
		}
	}
	for _, doc := range dated {
		if i, ok := index(doc); ok {
			v.Dated = append(v.Dated, i)
		}
	}
	slices.Sort(v.Dated)
	v.Dated = slices.Compact(v.Dated) // a doc the day index holds twice
	if len(gone) > 0 && remove {
		// Units no longer stored (cleared here or in another replica):
		// out of the index, so they take no hit's place again. Their
		// Seqs are never reused, so the removal may end later: from a
		// durable index (a store call per doc) it runs in the background,
		// bounded by the index timeout, and the load does not wait.
		remove := func(ctx context.Context) {
			for cid, seqs := range gone {
				_ = x.removeUnits(ctx, cid, seqs)
			}
		}
		if x.durable == nil {
			remove(context.WithoutCancel(ctx))
		} else {
			go func() {
				ictx, cancel := x.indexCtx(context.WithoutCancel(ctx))
				defer cancel()
				remove(ictx)
			}()
		}
	}
	// Crowded: every hit asked for came back, fewer than wanted can be
	// shown, and some are not — units gone, or docs this process does not
	// know (in a durable index shared by replicas: another process's,
	// indexed since this one synced, or one of a conversation forgotten at
	// the store).
	shown := 0
	for i := range v.Hits {
		if !v.excl[v.Hits[i].Seq] {
			shown++
		}
	}
	return v, (len(gone) > 0 || unknown > 0) && len(hits) >= ask && shown < q.Want, nil
}

// recallViewReach is how many units on either side of a hit a scoped
// load's view holds: the neighbours (WithNeighbours, 1 under a budget) and
// partners a selection may show. A WithNeighbours above it shows at most
// this many around a hit of a scoped load (a conversation's load shows as
// many as asked: Engine.viewReach).
const recallViewReach = 2
