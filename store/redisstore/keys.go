package redisstore

import "github.com/memstack/memstack"

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
