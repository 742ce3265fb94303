package redisstore

import (
	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// keys are the Redis keys of one identity (see the package documentation).
type keys struct {
	base                 string // <prefix>:{<identity key>}:
	msgs, state, cleared string
	sys                  string // the index of the system messages in msgs
	seq, nss             string
	ops, opq             string // the identity's recent write tokens
	forgotten            string // the forgotten key of the identity's hash slot
}

func (s *Store) keysOf(id memstack.Identity) keys {
	key := id.Key()
	base := s.prefix + ":{" + key + "}:"
	return keys{
		base:      base,
		msgs:      base + s.ns + ":msgs",
		state:     base + s.ns + ":state",
		cleared:   base + s.ns + ":cleared",
		sys:       base + s.ns + ":sys",
		seq:       base + "seq",
		nss:       base + "nss",
		ops:       base + "ops",
		opq:       base + "opq",
		forgotten: s.prefix + ":{" + slotTag(hashSlot(key)) + "}:forgotten",
	}
}

// all returns the keys every prelude script takes, in its KEYS order.
func (k keys) all() []string {
	return []string{k.msgs, k.state, k.seq, k.nss, k.cleared, k.forgotten, k.ops, k.opq, k.sys}
}

// inNamespace returns the msgs, state, cleared and sys keys of namespace
// ns.
func (k keys) inNamespace(ns string) (msgs, state, cleared, sys string) {
	return k.base + ns + ":msgs", k.base + ns + ":state", k.base + ns + ":cleared", k.base + ns + ":sys"
}

// feedKeys returns the keys of the change feed of the user tenant/user
// (see Changed): the sorted set of the user's conversations, each scored
// with the mark of its last append in any namespace of the prefix, and
// the tenant's counter the marks are drawn from. Neither is a key of an
// identity (no "{" right after the prefix), so no scan of identities
// finds them; the counter names only the tenant, so forgetting a user
// leaves it, and marks only grow.
func (s *Store) feedKeys(tenant, user string) (set, counter string) {
	return s.prefix + ":feed{" + store.UserScope(tenant, user).KeyPrefix() + "}",
		s.prefix + ":feedn{" + store.TenantScope(tenant).KeyPrefix() + "}"
}

// feeds reports whether the store keeps change feeds (writes them on each
// append and reads them in Changed): on one server that keeps no Cluster
// slots (a feed lives in another slot than the user's conversations),
// evicts no keys (an evicted feed would lose changes), for a store without
// a TTL (a feed would name conversations that expired).
func (s *Store) feeds() bool { return !s.slotted && !s.evicting && !s.ttl }

// cleansFeeds reports whether Forget and ForgetScope take conversations
// out of their users' feeds: on any server that keeps no Cluster slots,
// whatever the store's own options, since another Store of the prefix may
// have written them.
func (s *Store) cleansFeeds() bool { return !s.slotted }

// appendKeys returns the KEYS of the append script for id: the prelude's,
// then, when the store keeps change feeds, the feed of id's user and the
// tenant's counter.
func (s *Store) appendKeys(id memstack.Identity) []string {
	ks := s.keysOf(id).all()
	if s.feeds() {
		set, counter := s.feedKeys(id.Tenant, id.User)
		ks = append(ks, set, counter)
	}
	return ks
}
