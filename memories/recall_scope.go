package memories

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
	"github.com/tmc/langchaingo/llms"
)

// RecallScope is whose conversations a Recall searches (WithRecallScope).
type RecallScope int

// The scopes a Recall can search.
const (
	// RecallScopeUser searches every conversation of the identity's user
	// (same tenant, same user), the current one included: a user who
	// comes back in a new conversation gets the relevant past of the
	// earlier ones. The default, over a store that can list a user's
	// conversations (store.Users: every store of memstack).
	RecallScopeUser RecallScope = iota
	// RecallScopeConversation searches the current conversation only.
	RecallScopeConversation
	// RecallScopeTenant searches every conversation of every user of the
	// identity's tenant: knowledge a tenant's users share (the agent's
	// past decisions). Opt in only: it shows one user's turns to another.
	RecallScopeTenant
)

// String returns "user", "conversation" or "tenant".
func (s RecallScope) String() string {
	switch s {
	case RecallScopeConversation:
		return "conversation"
	case RecallScopeTenant:
		return "tenant"
	}
	return "user"
}

// WithRecallScope sets whose conversations a Recall searches:
// RecallScopeUser (the default), RecallScopeConversation or
// RecallScopeTenant (see Recall, "Across conversations"). Any other value
// is an error, and so is RecallScopeUser or RecallScopeTenant over a store
// that cannot list conversations (one that does not implement
// store.Users, such as store.FromHistory); without this option a Recall
// over such a store searches the conversation.
func WithRecallScope(s RecallScope) RecallOption {
	return recallOpt(func(c *config) {
		if s != RecallScopeUser && s != RecallScopeConversation && s != RecallScopeTenant {
			c.bad("WithRecallScope(%d): the scope must be RecallScopeUser, RecallScopeConversation or RecallScopeTenant", int(s))
			return
		}
		c.recall.scope, c.recall.scopeSet = s, true
	})
}

// RecallJournalConversation is the Conversation part of the identity
// {Tenant, User, RecallJournalConversation} under which a Recall searching
// a user's conversations keeps the user's recall journal: one small
// message per save naming the conversation saved to (never the turn's
// text), so that every replica finds, with one Stat, the turns other
// replicas saved to the user's other conversations. A tenant-wide Recall
// keeps its journal under {Tenant, "", RecallJournalConversation +
// "-tenant"}. It is derived data: store.Forget of a conversation leaves it
// (it names no text), a user-wide ForgetScope removes it (storekit.DerivedOf
// names it).
const RecallJournalConversation = store.UserRecallJournalConversation

// RecallOtherConversation marks, in string mode, a run of units a scoped
// Recall shows from another conversation than the load's, after the run's
// date: "[8 May 2023, another conversation]" (or, with dates off,
// "[another conversation]").
const RecallOtherConversation = "another conversation"

// recallJournalKeep is how many journal entries a save keeps when it trims
// the journal (once it holds twice as many); a replica that has not caught
// up for longer rebuilds the scope's index from the store.
const recallJournalKeep = 4096

// recallJournalTrimmed is the name of the journal's state that records the
// Seq through which the journal was trimmed.
const recallJournalTrimmed = "recall-journal-trimmed"

// recallScopeEntry is what a Recall knows about one scope's index (a
// user's or a tenant's), in a worker.Registry keyed by the namespace.
type recallScopeEntry struct {
	mu    sync.Mutex // held while building the index or catching up
	built bool       // every conversation of the scope was indexed
	seen  int64      // the Seq of the newest journal entry caught up with

	omu sync.Mutex
	// A scope's index holds units of many conversations, whose Seqs may
	// coincide (a store's Seqs are unique per identity only), so each
	// unit gets a doc ID of the scope's own, in the order it is first
	// indexed: docs maps a unit to its doc ID, owner a doc ID to its
	// unit. The IDs live as long as the entry and its in-process index
	// (a scope wider than the conversation needs one: WithRecallScope).
	next  int64
	docs  map[recallUnitKey]int64
	owner map[int64]recallOwner
}

// recallUnitKey names a unit: its conversation and its first Seq.
type recallUnitKey struct {
	id  identity
	seq int64
}

// recallOwner is the unit a doc ID stands for, and its time.
type recallOwner struct {
	id  identity
	seq int64
	at  time.Time
}

// scoped reports whether m searches more than the conversation.
func (m *Recall) scoped() bool { return m.scope != RecallScopeConversation }

// ns is the index scope (retrieval's namespace) id's units are kept under:
// the conversation's Key, or the user's or tenant's key prefix, marked.
func (m *Recall) ns(id identity) string {
	switch m.scope {
	case RecallScopeUser:
		return "user\x00" + store.UserScope(id.Tenant, id.User).KeyPrefix()
	case RecallScopeTenant:
		return "tenant\x00" + store.TenantScope(id.Tenant).KeyPrefix()
	}
	return id.Key()
}

// stateScope names m's scope in a durable index's recorded state: "" for
// the conversation, else the scope's name.
func (m *Recall) stateScope() string {
	if !m.scoped() {
		return ""
	}
	return m.scope.String()
}

// storeScope is the store.Scope a scoped Recall searches for id.
func (m *Recall) storeScope(id identity) store.Scope {
	if m.scope == RecallScopeTenant {
		return store.TenantScope(id.Tenant)
	}
	return store.UserScope(id.Tenant, id.User)
}

// journalID is the identity of the journal of id's scope.
func (m *Recall) journalID(id identity) identity {
	if m.scope == RecallScopeTenant {
		return identity{Tenant: id.Tenant, Conversation: RecallJournalConversation + "-tenant"}
	}
	return identity{Tenant: id.Tenant, User: id.User, Conversation: RecallJournalConversation}
}

// checkScopeID refuses the identities a scoped Recall keeps its journal
// under.
func (m *Recall) checkScopeID(id identity) error {
	if m.scoped() && storekit.Derived(id) {
		return fmt.Errorf("%w: conversation %q is reserved for memstack's derived data", ErrInvalidIdentity, id.Conversation)
	}
	return nil
}

// scopeEntry returns the entry of id's scope, marked in use; the caller
// releases it with m.scopes.Release(m.ns(id)).
func (m *Recall) scopeEntry(id identity) *recallScopeEntry {
	return m.scopes.Acquire(m.ns(id))
}

// assign gives docs, units of conversation id (Seq: the unit's first
// Seq; at their times), the doc IDs of id's scope, in place.
func (m *Recall) assign(id identity, docs []retrieval.Doc, at map[int64]time.Time) {
	ns := m.ns(id)
	u := m.scopes.Acquire(ns)
	defer m.scopes.Release(ns)
	u.omu.Lock()
	defer u.omu.Unlock()
	if u.owner == nil {
		u.owner, u.docs = make(map[int64]recallOwner), make(map[recallUnitKey]int64)
	}
	for i, d := range docs {
		k := recallUnitKey{id, d.Seq}
		doc, ok := u.docs[k]
		if !ok {
			u.next++
			doc = u.next
			u.docs[k] = doc
		}
		u.owner[doc] = recallOwner{id: id, seq: d.Seq, at: at[d.Seq]}
		docs[i].Seq = doc
	}
}

// owned returns the first Seqs of the units of conversation id that the
// scope's entry holds.
func (m *Recall) owned(id identity) []int64 {
	ns := m.ns(id)
	u := m.scopes.Acquire(ns)
	defer m.scopes.Release(ns)
	u.omu.Lock()
	defer u.omu.Unlock()
	var out []int64
	for k := range u.docs {
		if k.id == id {
			out = append(out, k.seq)
		}
	}
	return out
}

// disown forgets the units seqs of conversation id and returns their doc
// IDs.
func (m *Recall) disown(id identity, seqs []int64) []int64 {
	ns := m.ns(id)
	u := m.scopes.Acquire(ns)
	defer m.scopes.Release(ns)
	u.omu.Lock()
	defer u.omu.Unlock()
	var docs []int64
	for _, s := range seqs {
		k := recallUnitKey{id, s}
		if doc, ok := u.docs[k]; ok {
			docs = append(docs, doc)
			delete(u.docs, k)
			delete(u.owner, doc)
		}
	}
	return docs
}

// journal records, after a save to id, that id changed: one message in
// the scope's journal (under the save's append key, so a retried save
// records it once), and now and then trims the journal.
func (m *Recall) journal(ctx context.Context, id identity) error {
	entry, err := json.Marshal([2]string{id.User, id.Conversation})
	if err != nil {
		return fmt.Errorf("memstack: encoding the recall journal entry of %s: %w", id.Key(), err)
	}
	jid := m.journalID(id)
	if _, err := m.appendQuiet(ctx, jid, llms.HumanChatMessage{Content: string(entry)}); err != nil {
		return fmt.Errorf("memstack: turn stored; recording it in the recall journal: %w", err)
	}
	if m.journalN.Add(1)%64 == 0 {
		m.trimJournal(context.WithoutCancel(ctx), jid)
	}
	return nil
}

// trimJournal removes the oldest entries of the journal jid once it holds
// twice recallJournalKeep, recording first where it cut, so a replica
// behind the cut rebuilds. Failures leave the journal whole.
func (m *Recall) trimJournal(ctx context.Context, jid identity) {
	s := m.cfg.store
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
	if _, err := s.PutState(ctx, jid, recallJournalTrimmed, []byte(fmt.Sprint(through)), old.Version); err != nil {
		return
	}
	_, _ = s.RemovePrefix(ctx, jid, through)
}

// syncScope brings the index of id's scope up to date with the store: on
// first use (or when this process fell behind a trimmed journal, or the
// journal was forgotten) it indexes every conversation of the scope;
// afterwards it indexes the conversations the journal names since it last
// looked — one Stat when nothing changed. The caller holds the scope
// entry u.
func (m *Recall) syncScope(ctx context.Context, id identity, u *recallScopeEntry) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := m.cfg.store
	jid := m.journalID(id)
	st, err := s.Stat(ctx, jid)
	if err != nil {
		return fmt.Errorf("memstack: reading the recall journal: %w", err)
	}
	if u.built && (st.Count == 0 && u.seen > 0 || st.Count > 0 && st.LastSeq < u.seen) {
		u.built = false // the journal was forgotten
	}
	if u.built && st.Count > 0 && st.FirstSeq > u.seen && u.seen > 0 {
		trimmed, err := s.GetState(ctx, jid, recallJournalTrimmed)
		if err != nil {
			return fmt.Errorf("memstack: reading the recall journal: %w", err)
		}
		var through int64
		if trimmed.Exists() {
			_, _ = fmt.Sscan(string(trimmed.Value), &through)
		}
		if through > u.seen {
			u.built = false // entries this process has not seen were trimmed
		}
	}
	if !u.built {
		return m.buildScope(ctx, id, u, st)
	}
	if st.Count == 0 || st.LastSeq == u.seen {
		return nil
	}
	recs, err := s.Tail(ctx, jid, math.MaxInt, u.seen)
	if err != nil {
		return fmt.Errorf("memstack: reading the recall journal: %w", err)
	}
	seen := make(map[identity]bool)
	for _, r := range recs {
		var e [2]string
		if json.Unmarshal([]byte(r.Message.GetContent()), &e) != nil {
			continue
		}
		cid := identity{Tenant: id.Tenant, User: e[0], Conversation: e[1]}
		if seen[cid] || !m.storeScope(id).Contains(cid) {
			continue
		}
		seen[cid] = true
		if err := m.syncConversation(ctx, cid, false); err != nil {
			return err
		}
	}
	u.seen = max(u.seen, st.LastSeq)
	return nil
}

// buildScope indexes every conversation of id's scope (st is the journal's
// Stat, read before the conversations are listed: what is saved after
// that is caught up from the journal).
func (m *Recall) buildScope(ctx context.Context, id identity, u *recallScopeEntry, st store.Stat) error {
	users, ok := m.cfg.store.(store.Users)
	if !ok {
		return fmt.Errorf("memstack: the store %T cannot list conversations (store.Users)", m.cfg.store)
	}
	if m.durable == nil {
		// Start from an empty in-process index: the docs of
		// conversations cleared meanwhile must not take hits' places.
		ns := m.ns(id)
		if _, _, err := indexCall(m, ctx, "delete", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, m.idx.Delete(ctx, ns)
		}, nil); err != nil {
			err = fmt.Errorf("memstack: resetting the recall index: %w", err)
			m.report(id, RecallOpIndex, 0, 0, err)
			return recallResetError{err}
		}
		u.omu.Lock()
		u.owner, u.docs = nil, nil
		u.omu.Unlock()
	}
	ids, err := users.Identities(ctx, m.storeScope(id))
	if err != nil {
		return fmt.Errorf("memstack: listing the conversations of %s: %w", m.storeScope(id), err)
	}
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
			m.release(p.e)
		}
	}()
	for _, cid := range ids {
		if storekit.Derived(cid) {
			continue
		}
		e := m.acquire(cid)
		all = append(all, pending{id: cid, e: e})
		p := &all[len(all)-1]
		e.mu.Lock()
		e.ready, e.seen = false, 0
		recs, err := m.refreshExchanges(ctx, cid, e)
		if err == nil && recs == nil {
			recs, err = loadAll(ctx, m.cfg.store, cid)
		}
		e.mu.Unlock()
		if err != nil && !errors.As(err, new(recallResetError)) {
			return err
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
		err := m.syncLocked(ctx, p.id, p.e, p.recs)
		p.e.mu.Unlock()
		if err != nil && retrieval.Permanent(err) {
			return fmt.Errorf("memstack: recall index: %w", err)
		}
	}
	u.built, u.seen = true, st.LastSeq
	return nil
}

// syncConversation indexes what cid has stored that is not indexed yet;
// with all, every unit of cid again (the scope's index is being rebuilt).
func (m *Recall) syncConversation(ctx context.Context, cid identity, all bool) error {
	e := m.acquire(cid)
	defer m.release(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	if all {
		e.ready, e.seen = false, 0
	}
	recs, err := m.refreshExchanges(ctx, cid, e)
	if err != nil && !errors.As(err, new(recallResetError)) {
		return err
	}
	if err := m.syncLocked(ctx, cid, e, recs); err != nil && retrieval.Permanent(err) {
		return fmt.Errorf("memstack: recall index: %w", err)
	}
	return nil
}

// removeUnits removes seqs, units of id, from a scoped Recall's index
// where the index can remove single docs (an index that cannot keeps
// them; a load never shows a unit the store does not hold).
func (m *Recall) removeUnits(ctx context.Context, id identity, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	docs := m.disown(id, seqs)
	r, ok := m.idx.(retrieval.Remover)
	if !ok || len(docs) == 0 {
		return nil
	}
	_, _, err := indexCall(m, ctx, "remove", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, r.Remove(ctx, m.ns(id), docs)
	}, nil)
	if errors.Is(err, retrieval.ErrCannotRemove) {
		return nil
	}
	return err
}

// unitSeqs returns the first Seqs of exs.
func unitSeqs(exs []recallExchange) []int64 {
	out := make([]int64, len(exs))
	for i, x := range exs {
		out[i] = x.seq
	}
	return out
}

// scopedView is what a scoped load shows from: the units around the hits,
// in runs of one conversation each, in order, the other conversations'
// first (oldest first), the current conversation's last.
type scopedView struct {
	exs  []recallExchange
	src  []int           // src[i] is the range of exs[i]: one run of units of a conversation
	ids  []identity      // the conversation of each range
	excl []bool          // excl[i]: exs[i] is among the current conversation's recent units (WithExcludeRecent)
	cur  identity        // the load's conversation
	hits []retrieval.Hit // the hits, their Seqs replaced by indexes in exs
}

// otherUnits reads the units of conversation cid for a load.
func (m *Recall) otherUnits(ctx context.Context, cid identity) ([]recallExchange, error) {
	e := m.acquire(cid)
	defer m.release(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := m.refreshExchanges(ctx, cid, e); err != nil && !errors.As(err, new(recallResetError)) {
		return nil, err
	}
	return e.exs, nil
}

// scopedHits searches the scope's index for query and gathers the units
// the hits belong to. cur is the current conversation's units (from its
// entry, synced). want is how many hits the selection needs.
func (m *Recall) scopedHits(ctx context.Context, id identity, cur []recallExchange, firstExcl int, query string, want int, date *queryDate) (scopedView, error) {
	ns := m.ns(id)
	u := m.scopes.Acquire(ns)
	defer m.scopes.Release(ns)
	if err := m.syncScope(ctx, id, u); err != nil {
		if errors.As(err, new(recallResetError)) {
			return scopedView{}, nil // a transient index failure, reported
		}
		return scopedView{}, err
	}
	var hits []retrieval.Hit
	var err error
	if query != "" {
		hits, err = m.search(ctx, id, query, want)
		if err != nil && !retrieval.Permanent(err) && ctx.Err() == nil {
			err = nil // transient, reported: use what came back
		}
		if err != nil {
			return scopedView{}, err
		}
	}
	u.omu.Lock()
	owners := make(map[int64]recallOwner, len(hits))
	for _, h := range hits {
		if o, ok := u.owner[h.Seq]; ok {
			owners[h.Seq] = o
		}
	}
	if date != nil {
		var dated []recallExchange
		for seq, o := range u.owner {
			if date.matches(o.at) {
				owners[seq] = o
				dated = append(dated, recallExchange{seq: seq, at: o.at})
			}
		}
		u.omu.Unlock()
		hits = m.dateBoost(dated, hits, *date)
	} else {
		u.omu.Unlock()
	}
	// The hits' units by conversation (a hit whose doc ID the entry
	// does not know any more was removed meanwhile): the others oldest
	// first (by their oldest hit), the current one last.
	byConv := map[identity][]int64{}
	for _, h := range hits {
		if o, ok := owners[h.Seq]; ok {
			byConv[o.id] = append(byConv[o.id], o.seq)
		}
	}
	convs := make([]identity, 0, len(byConv)+1)
	for cid := range byConv {
		if cid != id {
			convs = append(convs, cid)
		}
	}
	slices.SortFunc(convs, func(a, b identity) int {
		if x, y := slices.Min(byConv[a]), slices.Min(byConv[b]); x != y {
			return cmp.Compare(x, y)
		}
		return cmp.Compare(a.Key(), b.Key())
	})
	convs = append(convs, id)
	// The view holds, of each conversation, only the units around its
	// hits (recallViewReach on either side: the neighbours and partners
	// a selection may show), one range per run of them: a load reads and
	// copies what it may show, not the conversations.
	v := scopedView{cur: id}
	at := map[recallUnitKey]int{}
	gone := map[identity][]int64{}
	for _, cid := range convs {
		exs := cur
		if cid != id {
			var err error
			if exs, err = m.otherUnits(ctx, cid); err != nil {
				if cerr := ctx.Err(); cerr != nil {
					return scopedView{}, cerr
				}
				continue // that conversation's hits are left out; the rest stand
			}
		}
		var pos []int
		for _, seq := range byConv[cid] {
			if i, ok := unitAt(exs, seq); ok {
				pos = append(pos, i)
			} else {
				gone[cid] = append(gone[cid], seq)
			}
		}
		slices.Sort(pos)
		for k := 0; k < len(pos); {
			lo, hi := max(pos[k]-recallViewReach, 0), min(pos[k]+recallViewReach, len(exs)-1)
			for k++; k < len(pos) && pos[k]-recallViewReach <= hi+1; k++ {
				hi = min(pos[k]+recallViewReach, len(exs)-1)
			}
			for i := lo; i <= hi; i++ {
				at[recallUnitKey{cid, exs[i].seq}] = len(v.exs)
				v.exs = append(v.exs, exs[i])
				v.src = append(v.src, len(v.ids))
				v.excl = append(v.excl, cid == id && i >= firstExcl)
			}
			v.ids = append(v.ids, cid)
		}
	}
	for _, h := range hits {
		if o, ok := owners[h.Seq]; ok {
			if i, ok := at[recallUnitKey{o.id, o.seq}]; ok {
				v.hits = append(v.hits, retrieval.Hit{Seq: int64(i), Score: h.Score})
			}
		}
	}
	for cid, seqs := range gone {
		// Units no longer stored (cleared here or in another replica):
		// out of the in-process index, so they take no hit's place again.
		_ = m.removeUnits(context.WithoutCancel(ctx), cid, seqs)
	}
	return v, nil
}

// recallViewReach is how many units on either side of a hit a scoped
// load's view holds: the neighbours (WithNeighbours, 1 under a budget) and
// partners a selection may show. A WithNeighbours above it shows at most
// this many around a hit of a scoped load.
const recallViewReach = 2

// conversation returns the hash of the conversation of unit i, for
// reports: "" for a load of one conversation.
func (v scopedView) conversation(m *Recall, i int) string {
	if v.src == nil {
		return ""
	}
	return m.HashIdentity(v.ids[v.src[i]])
}

// elsewhere reports whether unit i is of another conversation than the
// load's.
func (v scopedView) elsewhere(i int) bool {
	return v.src != nil && v.ids[v.src[i]] != v.cur
}

// sameConv reports whether units i and j are of one run of one
// conversation (neighbours in it).
func (v scopedView) sameConv(i, j int) bool {
	return v.src == nil || v.src[i] == v.src[j]
}
