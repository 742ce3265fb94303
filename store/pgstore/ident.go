package pgstore

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/jackc/pgx/v5"

	"github.com/memstack/memstack"
)

// lockKey returns the 64-bit advisory lock key of parts.
func lockKey(parts ...string) int64 {
	h := sha256.New()
	h.Write([]byte("memstack/pgstore"))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)))
}

// ident is an identity as the queries take it.
type ident struct {
	key  string
	hash []byte
}

func identOf(id memstack.Identity) ident { return identOfKey(id.Key()) }

func identOfKey(k string) ident {
	h := sha256.Sum256([]byte(k))
	return ident{key: k, hash: h[:]}
}

// lockIdentity queues the transaction-scoped advisory lock of identity k,
// which every write of k's rows takes first (see the package
// documentation).
func (s *Store) lockIdentity(b *pgx.Batch, k ident) {
	b.Queue("SELECT pg_advisory_xact_lock($1)", s.identityLock(k))
}

func (s *Store) identityLock(k ident) int64 { return lockKey("identity", s.prefix, k.key) }
