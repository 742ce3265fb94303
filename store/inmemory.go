package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/internal/kit"
	"github.com/tmc/langchaingo/llms"
)

// InMemory is a Store that keeps messages in this process's memory. It is
// the default store of every memory type. Its data lives as long as the
// value; use a persistent backend to survive restarts or to share memory
// between processes.
//
// Appends, reads and Stat of one identity cost O(1) plus the number of
// messages copied; different identities do not contend on one lock.
//
// Every message keeps the time of its Append (storekit.AppendTime) as given:
// the same instant, location and all, with no rounding.
type InMemory struct {
	mu    sync.RWMutex
	convs map[memstack.Identity]*conversation
	// seq is the store-wide counter Seqs, state versions and absent
	// versions come from, so none is ever reused, not even after Forget.
	seq atomic.Int64
	// forgotten holds the absent versions Forget and ForgetScope draw from
	// seq, one per bucket of users (ForgetBucket): the absent version of
	// identities without a Clear mark.
	// Forget, it is the absent version of identities without a Clear mark.
	forgotten [kit.ForgetBuckets]atomic.Int64
}

type conversation struct {
	mu      sync.RWMutex
	records []Record
	// system holds the Seqs of the system messages in records, in order,
	// so Tail finds them without scanning every record.
	system []int64
	// keys maps the append keys of the stored units to the Seq of each
	// unit's first message (see WithAppendKey).
	keys    map[string]int64
	state   map[string]State
	cleared int64 // the Clear mark: id's absent version, 0 if never cleared
	dead    bool  // set by Forget: writers must fetch the identity's new entry
}

// absent returns the absent version of id, whose conversation is c (c may
// be nil; c.mu is held if it is not): its Clear mark, else the forgotten
// version of its bucket.
func (s *InMemory) absent(id memstack.Identity, c *conversation) int64 {
	if c != nil && c.cleared != 0 {
		return c.cleared
	}
	return s.forgotten[kit.ForgetBucket(id.Tenant, id.User)].Load()
}

// forgetBucket moves the forgotten version of the bucket of tenant and
// user; s.mu is held.
func (s *InMemory) forgetBucket(tenant, user string) {
	s.forgotten[kit.ForgetBucket(tenant, user)].Store(s.seq.Add(1))
}

// lockLive returns id's conversation, created if needed, locked for
// writing, and never one that Forget has removed.
func (s *InMemory) lockLive(id memstack.Identity) *conversation {
	for {
		c := s.conv(id, true)
		c.mu.Lock()
		if !c.dead {
			return c
		}
		c.mu.Unlock()
	}
}

var _ Store = (*InMemory)(nil)

// NewInMemory returns an empty in-memory store.
func NewInMemory() *InMemory {
	return &InMemory{convs: make(map[memstack.Identity]*conversation)}
}

func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// conv returns id's conversation, creating it when create is set; it
// returns nil when there is none and create is not set.
func (s *InMemory) conv(id memstack.Identity, create bool) *conversation {
	s.mu.RLock()
	c := s.convs[id]
	s.mu.RUnlock()
	if c != nil || !create {
		return c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c = s.convs[id]; c == nil {
		c = &conversation{}
		s.convs[id] = c
	}
	return c
}

// Append implements Store.
func (s *InMemory) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	// The time is checked as the encoding backends check it, so an Append
	// that fails on them fails here too.
	at := kit.AppendTime(ctx)
	if err := kit.CheckTime(at); err != nil {
		return err
	}
	key, keyed, err := kit.CheckAppendKeyOf(ctx)
	if err != nil {
		return err
	}
	recs := make([]Record, len(msgs))
	for i, m := range msgs {
		if kit.IsNil(m) {
			return fmt.Errorf("%w: message %d of %d is nil", ErrInvalidArgument, i+1, len(msgs))
		}
		recs[i].Message = kit.CloneMessage(m)
		recs[i].Time = at
	}
	c := s.lockLive(id)
	defer c.mu.Unlock()
	if keyed {
		if _, dup := c.keys[key]; dup {
			return nil // stored already, under this key
		}
	}
	// Seqs are taken under the conversation's lock, so they increase in
	// append order within the conversation.
	last := s.seq.Add(int64(len(recs)))
	for i := range recs {
		recs[i].Seq = last - int64(len(recs)-1-i)
	}
	c.add(recs)
	if keyed {
		if c.keys == nil {
			c.keys = make(map[string]int64)
		}
		c.keys[key] = recs[0].Seq
	}
	return nil
}

// add appends recs to c (c.mu held for writing), noting system messages.
func (c *conversation) add(recs []Record) {
	for _, r := range recs {
		if r.Message.GetType() == llms.ChatMessageTypeSystem {
			c.system = append(c.system, r.Seq)
		}
	}
	c.records = append(c.records, recs...)
}

// reset empties c (c.mu held for writing).
func (c *conversation) reset() {
	c.records, c.system, c.keys, c.state = nil, nil, nil, nil
}

// pruned drops what c notes of records that are no longer stored: system
// Seqs and append keys of units whose first message is gone. c.mu is held
// for writing.
func (c *conversation) pruned() {
	c.system = c.system[:0]
	for _, r := range c.records {
		if r.Message.GetType() == llms.ChatMessageTypeSystem {
			c.system = append(c.system, r.Seq)
		}
	}
	for k, seq := range c.keys {
		if _, ok := findSeq(c.records, seq); !ok {
			delete(c.keys, k)
		}
	}
}

// findSeq returns the index of the record with Seq seq in rs (sorted by
// Seq) and whether there is one.
func findSeq(rs []Record, seq int64) (int, bool) {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].Seq >= seq })
	return i, i < len(rs) && rs[i].Seq == seq
}

// Tail implements Store: the system messages through their noted Seqs,
// the rest by walking back from the newest record, so it costs what it
// returns (and a binary search per system message).
func (s *InMemory) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]Record, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: Tail(n=%d): n must be at least 1", ErrInvalidArgument, n)
	}
	c := s.conv(id, false)
	if c == nil {
		return []Record{}, nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var tail []Record
	for i := len(c.records) - 1; i >= 0 && len(tail) < n; i-- {
		r := c.records[i]
		if r.Seq <= after {
			break
		}
		if r.Message.GetType() != llms.ChatMessageTypeSystem {
			tail = append(tail, r)
		}
	}
	slices.Reverse(tail)
	sys := make([]Record, 0, len(c.system))
	for _, seq := range c.system {
		if i, ok := findSeq(c.records, seq); ok {
			sys = append(sys, c.records[i])
		}
	}
	return cloneRecords(mergeBySeq(sys, tail)), nil
}

// Last implements Store.
func (s *InMemory) Last(ctx context.Context, id memstack.Identity, n int) ([]Record, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: Last(n=%d): n must be at least 1", ErrInvalidArgument, n)
	}
	c := s.conv(id, false)
	if c == nil {
		return []Record{}, nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	start := max(len(c.records)-n, 0)
	return cloneRecords(c.records[start:]), nil
}

// All implements Store.
func (s *InMemory) All(ctx context.Context, id memstack.Identity) ([]Record, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	c := s.conv(id, false)
	if c == nil {
		return []Record{}, nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return cloneRecords(c.records), nil
}

// Stat implements Store.
func (s *InMemory) Stat(ctx context.Context, id memstack.Identity) (Stat, error) {
	if err := ctxErr(ctx); err != nil {
		return Stat{}, err
	}
	c := s.conv(id, false)
	if c == nil {
		return Stat{}, nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.records) == 0 {
		return Stat{}, nil
	}
	return Stat{
		Count:    len(c.records),
		FirstSeq: c.records[0].Seq,
		LastSeq:  c.records[len(c.records)-1].Seq,
	}, nil
}

// RemovePrefix implements Store.
func (s *InMemory) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	if err := ctxErr(ctx); err != nil {
		return 0, err
	}
	c := s.conv(id, false)
	if c == nil {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := removePrefix(&c.records, through)
	if n > 0 {
		c.pruned()
	}
	return n, nil
}

// removePrefix removes, in place, the non-system records with Seq <= through
// and returns how many it removed.
func removePrefix(records *[]Record, through int64) int {
	rs := *records
	// Find the end of the affected prefix.
	end := 0
	for end < len(rs) && rs[end].Seq <= through {
		end++
	}
	kept := make([]Record, 0, len(rs)-end+4)
	for _, r := range rs[:end] {
		if r.Message.GetType() == llms.ChatMessageTypeSystem {
			kept = append(kept, r)
		}
	}
	removed := end - len(kept)
	if removed == 0 {
		return 0
	}
	kept = append(kept, rs[end:]...)
	*records = kept
	return removed
}

// Clear implements Store.
func (s *InMemory) Clear(ctx context.Context, id memstack.Identity) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	// The identity's entry is created if needed: a commit may have read
	// its absent version before any message was stored.
	c := s.lockLive(id)
	defer c.mu.Unlock()
	c.reset()
	c.cleared = s.seq.Add(1)
	return nil
}

// Forget implements Store: it removes id's messages, state and Clear mark.
// An InMemory store has one namespace, so Forget is Clear that also drops
// the identity's entry; the absent version of id's bucket (storekit.ForgetBucket)
// is drawn before the entry is dropped, so a PutState on the identity's
// next entry never matches an absent version read before.
func (s *InMemory) Forget(ctx context.Context, id memstack.Identity) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	s.forgetBucket(id.Tenant, id.User)
	c := s.convs[id]
	delete(s.convs, id)
	s.mu.Unlock()
	if c != nil {
		// A writer that fetched c before the delete sees it dead and
		// writes to the identity's new entry instead.
		c.mu.Lock()
		c.reset()
		c.dead = true
		c.mu.Unlock()
	}
	return nil
}

// GetState implements Store.
func (s *InMemory) GetState(ctx context.Context, id memstack.Identity, name string) (State, error) {
	if err := ctxErr(ctx); err != nil {
		return State{}, err
	}
	if err := kit.CheckStateName(name); err != nil {
		return State{}, err
	}
	c := s.conv(id, false)
	if c == nil {
		return State{Version: s.absent(id, nil)}, nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	st, ok := c.state[name]
	if !ok {
		return State{Version: s.absent(id, c)}, nil
	}
	st.Value = bytes.Clone(st.Value)
	return st, nil
}

// PutState implements Store.
func (s *InMemory) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	if err := ctxErr(ctx); err != nil {
		return 0, err
	}
	if err := kit.CheckStateName(name); err != nil {
		return 0, err
	}
	c := s.lockLive(id)
	defer c.mu.Unlock()
	cur, ok := c.state[name]
	if !ok {
		cur.Version = s.absent(id, c)
	}
	if cur.Version != expect {
		return 0, fmt.Errorf("%w: state %q of %s is at version %d, not %d", ErrConflict, name, id.Key(), cur.Version, expect)
	}
	if value == nil {
		delete(c.state, name)
		return s.absent(id, c), nil
	}
	if c.state == nil {
		c.state = make(map[string]State)
	}
	v := s.seq.Add(1)
	c.state[name] = State{Value: bytes.Clone(value), Version: v}
	return v, nil
}

var (
	_ Rewriter = (*InMemory)(nil)
	_ Users    = (*InMemory)(nil)
)

// Rewrite implements Rewriter, under the identity's lock.
func (s *InMemory) Rewrite(ctx context.Context, id memstack.Identity, through int64, reset bool, msgs ...llms.ChatMessage) (int, error) {
	if err := ctxErr(ctx); err != nil {
		return 0, err
	}
	at := kit.AppendTime(ctx)
	if len(msgs) > 0 {
		if err := kit.CheckTime(at); err != nil {
			return 0, err
		}
	}
	recs := make([]Record, len(msgs))
	for i, m := range msgs {
		if kit.IsNil(m) {
			return 0, fmt.Errorf("%w: message %d of %d is nil", ErrInvalidArgument, i+1, len(msgs))
		}
		recs[i].Message = kit.CloneMessage(m)
		recs[i].Time = at
	}
	c := s.lockLive(id)
	defer c.mu.Unlock()
	end := 0
	for end < len(c.records) && c.records[end].Seq <= through {
		end++
	}
	kept := make([]Record, 0, len(c.records)-end+len(recs))
	kept = append(kept, c.records[end:]...)
	if len(recs) > 0 {
		last := s.seq.Add(int64(len(recs)))
		for i := range recs {
			recs[i].Seq = last - int64(len(recs)-1-i)
		}
		kept = append(kept, recs...)
	}
	c.records = kept
	c.pruned()
	if reset {
		c.state = nil
		c.cleared = s.seq.Add(1)
	}
	return end, nil
}

// Identities implements Users. An InMemory store has one namespace.
func (s *InMemory) Identities(ctx context.Context, scope Scope) ([]memstack.Identity, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if err := scope.Check(); err != nil {
		return nil, err
	}
	var out []memstack.Identity
	for _, id := range s.scoped(scope) {
		c := s.conv(id, false)
		if c == nil {
			continue
		}
		c.mu.RLock()
		held := len(c.records) > 0 || len(c.state) > 0 || c.cleared != 0
		c.mu.RUnlock()
		if held {
			out = append(out, id)
		}
	}
	return out, nil
}

// scoped returns the identities with an entry within scope, by Key.
func (s *InMemory) scoped(scope Scope) []memstack.Identity {
	s.mu.RLock()
	var ids []memstack.Identity
	for id := range s.convs {
		if scope.Contains(id) {
			ids = append(ids, id)
		}
	}
	s.mu.RUnlock()
	sortIdentities(ids)
	return ids
}

// Export implements Users: the single namespace is "".
func (s *InMemory) Export(ctx context.Context, scope Scope) (Export, error) {
	ids, err := s.Identities(ctx, scope)
	if err != nil {
		return Export{}, err
	}
	out := Export{Scope: scope}
	for _, id := range ids {
		c := s.conv(id, false)
		if c == nil {
			continue
		}
		c.mu.RLock()
		ne := NamespaceExport{Messages: cloneRecords(c.records), States: make(map[string]State, len(c.state)), Cleared: c.cleared != 0}
		for name, st := range c.state {
			ne.States[name] = State{Value: bytes.Clone(st.Value), Version: st.Version}
		}
		c.mu.RUnlock()
		out.Identities = append(out.Identities, IdentityExport{Identity: id, Namespaces: []NamespaceExport{ne}})
	}
	return out, nil
}

// ForgetScope implements Users: in one step under the store's lock, it
// draws a fresh absent version for the scope — the user's bucket
// (storekit.ForgetBucket), which the user's derived identities share, or, for a
// tenant, every bucket — and removes every identity within scope, so no
// commit can land on part of the scope in between.
func (s *InMemory) ForgetScope(ctx context.Context, scope Scope) (int, error) {
	ids, err := s.Identities(ctx, scope)
	if err != nil {
		return 0, err
	}
	held := make(map[memstack.Identity]bool, len(ids))
	for _, id := range ids {
		held[id] = true
	}
	s.mu.Lock()
	if scope.AllUsers {
		for b := range s.forgotten {
			s.forgotten[b].Store(s.seq.Add(1))
		}
	} else {
		s.forgetBucket(scope.Tenant, scope.User)
	}
	var gone []*conversation
	n := 0
	for id, c := range s.convs {
		if scope.Contains(id) {
			gone = append(gone, c)
			delete(s.convs, id)
			if held[id] {
				n++
			}
		}
	}
	s.mu.Unlock()
	// A writer that fetched an entry before the delete sees it dead and
	// writes to the identity's new entry, which carries the new absent
	// version.
	for _, c := range gone {
		c.mu.Lock()
		c.reset()
		c.dead = true
		c.mu.Unlock()
	}
	return n, nil
}

func sortIdentities(ids []memstack.Identity) {
	sort.Slice(ids, func(i, j int) bool { return ids[i].Key() < ids[j].Key() })
}

func recordSeq(r Record) int64                { return r.Seq }
func recordMessage(r Record) llms.ChatMessage { return r.Message }

// mergeBySeq is storekit.MergeBySeq.
func mergeBySeq(a, b []Record) []Record { return kit.MergeBySeq(a, b, recordSeq) }

// tailOf is storekit.TailOf.
func tailOf(rs []Record, n int, after int64) []Record {
	return kit.TailOf(rs, n, after, recordSeq, recordMessage)
}
