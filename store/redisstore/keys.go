package redisstore

import (
	"github.com/redis/go-redis/v9"

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

// feedKeys returns the keys of the change feed of id's user in namespace
// ns (see Changed): the sorted set of the user's conversations, each
// scored with the mark of its last append, and the counter the marks are
// drawn from. They are not keys of an identity (no "{" right after the
// prefix), so no scan of identities finds them.
func (s *Store) feedKeys(tenant, user, ns string) (set, counter string) {
	base := s.prefix + ":feed{" + store.UserScope(tenant, user).KeyPrefix() + "}:" + ns
	return base, base + ":n"
}

// feeds reports whether the store keeps change feeds: on a client of one
// server (a Cluster or a Ring keeps a user's conversations on other nodes
// than the feed) that evicts no keys (an evicted feed would lose changes).
func (s *Store) feeds() bool {
	_, single := s.client.(*redis.Client)
	return single && !s.evicting
}

// appendKeys returns the KEYS of the append script for id: the prelude's,
// then, when the store keeps change feeds, the feed of id's user in this
// namespace and its counter.
func (s *Store) appendKeys(id memstack.Identity) []string {
	ks := s.keysOf(id).all()
	if s.feeds() {
		set, counter := s.feedKeys(id.Tenant, id.User, s.ns)
		ks = append(ks, set, counter)
	}
	return ks
}
