package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// scanBatch is the COUNT of every SCAN the store sends: each call does a
// bounded amount of work on the server.
const scanBatch = 1000

// held is what a SCAN found of one identity under the store's prefix.
type held struct {
	id memstack.Identity
	// namespaces holds every namespace with a msgs, state or cleared key.
	namespaces map[string]bool
	// indexed holds every namespace with a sys key, an index of system
	// messages: a copy, not data of its own, so it does not make the
	// identity one Identities lists or Export reads, but Forget deletes it.
	indexed map[string]bool
	// other holds the identity's keys outside the layout keysOf names
	// (none that this package writes), for Forget to delete too.
	other []string
}

// globEscape escapes s for a SCAN MATCH pattern: Redis globs treat '*',
// '?', '[', ']' and '\' specially, and a backslash makes any of them
// literal. Identity keys never contain them (memstack.Identity.Key); a key
// prefix may.
func globEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// identityPattern matches every key of id under the store's prefix.
func (s *Store) identityPattern(id memstack.Identity) string {
	return globEscape(s.prefix) + ":{" + id.Key() + "}:*"
}

// scopePattern matches every key of every identity within scope under the
// store's prefix (and possibly keys of other tags, which parseKey and
// Scope.Contains sort out).
func (s *Store) scopePattern(scope store.Scope) string {
	return globEscape(s.prefix) + ":{" + scope.KeyPrefix() + "*"
}

// scan runs SCAN with MATCH pattern, in batches of scanBatch, on every
// node that can hold a matching key — the one server, every master of a
// cluster (only the master of slotKey's slot when slotKey is not ""), every
// shard of a ring — and groups the keys of this store's layout by
// identity key.
func (s *Store) scan(ctx context.Context, pattern, slotKey string) (map[string]*held, error) {
	var mu sync.Mutex
	out := map[string]*held{}
	node := func(ctx context.Context, c redis.UniversalClient) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, scanBatch).Result()
			if err != nil {
				return fmt.Errorf("SCAN MATCH %q: %w", pattern, err)
			}
			mu.Lock()
			for _, key := range keys {
				s.note(out, key)
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		if slotKey != "" {
			var m *redis.Client
			if m, err = c.MasterForKey(ctx, slotKey); err == nil {
				err = node(ctx, m)
			}
			break
		}
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return node(ctx, m) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, m *redis.Client) error { return node(ctx, m) })
	default:
		err = node(ctx, s.client)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// note adds key to what out holds of its identity, if it is a key of an
// identity under this store's prefix.
func (s *Store) note(out map[string]*held, key string) {
	rest, ok := strings.CutPrefix(key, s.prefix+":{")
	if !ok {
		return
	}
	end := strings.IndexByte(rest, '}')
	if end < 0 {
		return
	}
	tag, suffix := rest[:end], rest[end+1:]
	id, err := memstack.ParseKey(tag)
	if err != nil || id.Key() != tag || !strings.HasPrefix(suffix, ":") {
		return // not a tag this package writes (a slot tag, another layout)
	}
	suffix = suffix[1:]
	h := out[tag]
	if h == nil {
		h = &held{id: id, namespaces: map[string]bool{}, indexed: map[string]bool{}}
		out[tag] = h
	}
	switch suffix {
	case "seq", "nss", "ops", "opq":
		return
	}
	if ns, kind, ok := strings.Cut(suffix, ":"); ok && validNamespace(ns) {
		switch kind {
		case "msgs", "state", "cleared":
			h.namespaces[ns] = true
			return
		case "sys":
			h.indexed[ns] = true
			return
		}
	}
	h.other = append(h.other, key)
}

func validNamespace(ns string) bool {
	if len(ns) < 1 || len(ns) > 64 {
		return false
	}
	for i := 0; i < len(ns); i++ {
		if !plain(ns[i]) {
			return false
		}
	}
	return true
}

// beginScope checks what every Users call checks first.
func (s *Store) beginScope(ctx context.Context, op string, scope store.Scope) error {
	if s == nil || s.client == nil {
		return fmt.Errorf("%w: redisstore: %s on a nil or zero Store (use New or Open)", store.ErrInvalidArgument, op)
	}
	if ctx == nil {
		return fmt.Errorf("%w: redisstore: %s of %s: nil context", store.ErrInvalidArgument, op, scope)
	}
	if err := scope.Check(); err != nil {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	if s.closed.Load() {
		return fmt.Errorf("redisstore: %s of %s: %w", op, scope, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: %s of %s: %w", op, scope, err)
	}
	return nil
}

// failScope wraps an error of a Users call, as fail does for one identity.
func (s *Store) failScope(ctx context.Context, op string, scope store.Scope, err error) error {
	if s.closed.Load() {
		err = fmt.Errorf("%w (%w)", ErrClosed, err)
	}
	if cerr := ctx.Err(); cerr != nil {
		err = fmt.Errorf("%w (%w)", cerr, err)
	}
	return fmt.Errorf("redisstore: %s of %s under key prefix %q on %s: %w", op, scope, s.prefix, s.addr, err)
}

// scanScope returns what SCAN finds of the identities within scope, by
// identity key.
func (s *Store) scanScope(ctx context.Context, op string, scope store.Scope) ([]*held, error) {
	found, err := s.scan(ctx, s.scopePattern(scope), "")
	if err != nil {
		return nil, s.failScope(ctx, op, scope, err)
	}
	out := make([]*held, 0, len(found))
	for _, h := range found {
		if scope.Contains(h.id) {
			out = append(out, h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id.Key() < out[j].id.Key() })
	return out, nil
}

// Follows implements store.ChangeFeed: a Store follows a user's
// conversations when it keeps change feeds (on one server that keeps no
// Cluster slots and evicts no keys, for a store without a TTL; see
// Changed), never a tenant's.
func (s *Store) Follows(scope store.Scope) bool { return s.feeds() && !scope.AllUsers }

// Changed implements store.ChangeFeed with one ZRANGEBYSCORE of the
// user's feed: a sorted set of the user's conversation keys that every
// Append (and AppendBatches) of a Store keeping feeds scores, in its own
// script, with a mark drawn from the tenant's counter (max(last mark+1,
// the server's clock in microseconds)). Scripts run one at a time on the
// server, so an append this read did not see gets a greater mark than any
// it saw. The feed is one per user for every namespace of the prefix, so
// Changed may also name a conversation appended to in another namespace
// only (a reader then finds nothing new in its own). It holds the
// conversations appended to since Stores kept feeds; Forget takes a
// conversation out of it in its own script and ForgetScope deletes it.
// A tenant's scope, or a store that keeps no feeds (a Cluster or Ring
// client or a server in cluster mode, WithEvictionAllowed, WithTTL), is
// an error wrapping errors.ErrUnsupported.
func (s *Store) Changed(ctx context.Context, scope store.Scope, mark int64) ([]memstack.Identity, int64, error) {
	const op = "Changed"
	if err := s.beginScope(ctx, op, scope); err != nil {
		return nil, 0, err
	}
	if !s.Follows(scope) {
		return nil, 0, fmt.Errorf("redisstore: %s of %s: %w: this store keeps no change feed for it (a tenant's scope, a Cluster, a Ring or a server in cluster mode, WithEvictionAllowed or WithTTL)", op, scope, errors.ErrUnsupported)
	}
	set, _ := s.feedKeys(scope.Tenant, scope.User)
	zs, err := s.client.ZRangeByScoreWithScores(ctx, set, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(mark, 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, 0, s.failScope(ctx, op, scope, err)
	}
	ids := make([]memstack.Identity, 0, len(zs))
	next := mark
	for _, z := range zs {
		key, _ := z.Member.(string)
		id, err := memstack.ParseKey(key)
		if err != nil || !scope.Contains(id) {
			return nil, 0, s.failScope(ctx, op, scope, fmt.Errorf("%w: the change feed holds %q, not a conversation of the scope", store.ErrCorrupt, key))
		}
		ids = append(ids, id)
		next = max(next, int64(z.Score))
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].Key() < ids[j].Key() })
	return ids, next, nil
}

var _ store.ChangeFeed = (*Store)(nil)

// Identities implements store.Users: it finds the keys of the scope with
// SCAN (MATCH on the key layout, in batches of 1000, on every node), not
// through an index that eviction could remove, and returns every identity
// with messages, state values or a Clear mark in any namespace of the
// store's key prefix, ordered by Key. Its cost is O(keys in the database).
func (s *Store) Identities(ctx context.Context, scope store.Scope) ([]memstack.Identity, error) {
	const op = "Identities"
	if err := s.beginScope(ctx, op, scope); err != nil {
		return nil, err
	}
	hs, err := s.scanScope(ctx, op, scope)
	if err != nil {
		return nil, err
	}
	var out []memstack.Identity
	for _, h := range hs {
		if len(h.namespaces) > 0 {
			out = append(out, h.id)
		}
	}
	return out, nil
}

// Export implements store.Users: the identities Identities finds, and for
// each namespace of each one its messages, state values and whether it
// holds a Clear mark, read in one script per namespace (so each namespace
// is seen all before or all after any write).
func (s *Store) Export(ctx context.Context, scope store.Scope) (store.Export, error) {
	const op = "Export"
	if err := s.beginScope(ctx, op, scope); err != nil {
		return store.Export{}, err
	}
	hs, err := s.scanScope(ctx, op, scope)
	if err != nil {
		return store.Export{}, err
	}
	out := store.Export{Scope: scope}
	for _, h := range hs {
		names := make([]string, 0, len(h.namespaces))
		for ns := range h.namespaces {
			names = append(names, ns)
		}
		sort.Strings(names)
		ie := store.IdentityExport{Identity: h.id}
		for _, ns := range names {
			ne, ok, err := s.exportNamespace(ctx, op, h.id, ns)
			if err != nil {
				return store.Export{}, err
			}
			if ok {
				ie.Namespaces = append(ie.Namespaces, ne)
			}
		}
		if len(ie.Namespaces) > 0 {
			out.Identities = append(out.Identities, ie)
		}
	}
	storekit.SortExport(&out)
	return out, nil
}

// exportNamespace reads what namespace ns holds for id; ok is false when
// it holds nothing (any more).
func (s *Store) exportNamespace(ctx context.Context, op string, id memstack.Identity, ns string) (store.NamespaceExport, bool, error) {
	m, st, c, _ := s.keysOf(id).inNamespace(ns)
	res, err := exportScript.Run(ctx, s.client, []string{m, st, c}).Slice()
	if err != nil {
		return store.NamespaceExport{}, false, s.failIn(ctx, op, id, ns, err)
	}
	if len(res) != 3 {
		return store.NamespaceExport{}, false, s.failIn(ctx, op, id, ns, fmt.Errorf("unexpected script reply with %d elements", len(res)))
	}
	elems, _ := res[0].([]any)
	fields, _ := res[1].([]any)
	mark, _ := res[2].(string)
	vals := make([]string, len(elems))
	for i, e := range elems {
		vals[i], _ = e.(string)
	}
	recs, err := s.decodeIn(op, id, ns, vals, 0)
	if err != nil {
		return store.NamespaceExport{}, false, err
	}
	ne := store.NamespaceExport{Namespace: ns, Messages: recs, States: make(map[string]store.State, len(fields)/2), Cleared: mark != ""}
	for i := 0; i+1 < len(fields); i += 2 {
		name, _ := fields[i].(string)
		str, _ := fields[i+1].(string)
		version, value, ok := parseStateValue(str)
		if !ok {
			return store.NamespaceExport{}, false, s.corruptIn(op, id, ns, fmt.Sprintf("state %q has no valid version", name))
		}
		ne.States[name] = store.State{Value: value, Version: version}
	}
	return ne, len(recs) > 0 || len(ne.States) > 0 || ne.Cleared, nil
}

// parseStateValue splits a stored "<version>|<value>" state value.
func parseStateValue(str string) (int64, []byte, bool) {
	bar := strings.IndexByte(str, '|')
	if bar <= 0 || bar > 19 {
		return 0, nil, false
	}
	version, err := strconv.ParseInt(str[:bar], 10, 64)
	if err != nil || version < 1 {
		return 0, nil, false
	}
	value := []byte(str[bar+1:])
	if value == nil {
		value = []byte{} // a present value is never nil, empty or not
	}
	return version, value, true
}

// ForgetScope implements store.Users: it finds every identity within scope
// with SCAN, as Identities does, and runs Forget's script for each, in Key
// order — over the namespaces SCAN found and those of the identity's nss
// set, deleting every key SCAN found of it — so each identity is
// forgotten in one step, its slot's forgotten version moved first (a
// commit that read its state before conflicts). It returns how many of
// them held messages, state or a Clear mark. Identities that held only
// bookkeeping keys (a Seq counter, tokens, an index of system messages)
// are removed too, and last the change feeds of the scope's users (see
// Changed), so nothing of the scope is left under the prefix. An
// error part-way leaves the identities before it forgotten and the rest
// whole; calling ForgetScope again finishes. Writes racing with it may
// create identities it does not find: call it when the scope's traffic has
// stopped, or again.
func (s *Store) ForgetScope(ctx context.Context, scope store.Scope) (int, error) {
	const op = "ForgetScope"
	if err := s.beginScope(ctx, op, scope); err != nil {
		return 0, err
	}
	hs, err := s.scanScope(ctx, op, scope)
	if err != nil {
		return 0, err
	}
	// Derived identities (the user's facts) go last: see storekit.ForgetOrder.
	sort.SliceStable(hs, func(i, j int) bool { return !storekit.Derived(hs[i].id) && storekit.Derived(hs[j].id) })
	n := 0
	for _, h := range hs {
		if err := ctx.Err(); err != nil {
			return n, s.failScope(ctx, op, scope, err)
		}
		if err := s.forget(ctx, op, h.id, h); err != nil {
			return n, err
		}
		if len(h.namespaces) > 0 {
			n++
		}
	}
	// Last, the user's derived identities (storekit.DerivedOf), also those
	// the scan did not find: a per-user Facts extraction in flight may
	// create one after the scan. Forgetting it moves its slot's forgotten
	// version whether it holds anything or not, so such a commit either
	// landed before and is removed now, or conflicts; one that reads after
	// finds the user's conversations gone.
	users := map[string]bool{}
	if !scope.AllUsers {
		users[scope.User] = true
	}
	for _, h := range hs {
		users[h.id.User] = true
	}
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	for _, u := range names {
		for _, d := range storekit.DerivedOf(scope.Tenant, u) {
			if err := ctx.Err(); err != nil {
				return n, s.failScope(ctx, op, scope, err)
			}
			if err := s.forget(ctx, op, d, nil); err != nil {
				return n, err
			}
		}
	}
	if err := s.dropFeeds(ctx, scope); err != nil {
		return n, s.failScope(ctx, op, scope, err)
	}
	return n, nil
}
