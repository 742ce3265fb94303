package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// GetState implements store.Store: one statement, so the value, its
// version and the absent version come from one snapshot, all from before
// or all from after any Clear or Forget.
func (s *Store) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	if err := s.check(ctx, "GetState", id); err != nil {
		return store.State{}, err
	}
	if err := storekit.CheckStateName(name); err != nil {
		return store.State{}, fmt.Errorf("pgstore: GetState of identity %q: %w", id.Key(), err)
	}
	k := identOf(id)
	var (
		value   []byte
		version *int64
		absent  int64
	)
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.q.getState, k.hash, s.ns, k.key, name, bucketName(id.Tenant, id.User)).Scan(&value, &version, &absent)
	})
	if err != nil {
		return store.State{}, s.wrap(fmt.Sprintf("GetState(%q)", name), k, err)
	}
	if version == nil {
		return store.State{Version: absent}, nil
	}
	if value == nil {
		value = []byte{} // a stored empty value is a value
	}
	return store.State{Value: value, Version: *version}, nil
}

// PutState implements store.Store: a compare-and-set in one statement,
// under the identity's advisory lock, in one transaction and one round
// trip. A transaction the server rolls back for a serialization failure
// or a deadlock wrote nothing; it is run again a few times (see the
// package documentation, Transactions) and then reported as an error
// wrapping store.ErrConflict, so a caller's retry loop retries it.
//
// Why the lock: at read committed, a statement sees what was committed
// when it started, and it waits only for rows it writes. A plain UPDATE of
// a value that exists would be safe without more (it waits for a
// concurrent Clear's DELETE of the row, then finds nothing), but a first
// commit compares the absent version and inserts a row Clear never saw:
// run while a Clear has moved the mark but not yet committed, it reads the
// old mark, matches, and inserts a value that outlives the Clear (so does
// this statement's upsert when the row it found is deleted under it).
// Locking the mark row cannot help: there is none before the first Clear.
// So PutState takes the same per-identity transaction-scoped lock as
// Clear, Forget, Append, RemovePrefix and Rewrite (pg_advisory_xact_lock,
// the first statement of the transaction): PutState, Clear and Forget of
// one identity run one after the other, and the compare-and-set
// statement, which starts after the lock is granted, sees every commit of
// the lock's previous holders (PostgreSQL makes a transaction visible
// before it releases its locks). A PutState before a Clear is then
// removed by it; one after it reads the new mark and conflicts unless it
// expected that mark.
//
// The forgotten version of the identity's bucket (storekit.ForgetBucket) is
// not always moved under this identity's lock: a Forget of another
// identity of the same bucket moves it under that identity's lock, and
// ForgetScope draws it first under none. PutState may then read it as it
// was, and is ordered before that move. A Forget of another identity
// removes nothing of this one; after ForgetScope's draw, the identity's
// rows are deleted under its lock, so a commit ordered before the draw
// lands before that delete and goes with it. The next commit that expects
// the old version conflicts, as the package store documents. Forgets of
// users of other buckets move rows PutState does not read: their first
// commits go on. ForgetScope's last step — each derived identity of the
// scope's users (storekit.DerivedOf) forgotten under its own lock, its
// user's bucket moved in the same transaction — is covered by the lock:
// a commit to it lands before and is removed, or runs after and
// conflicts unless it read after that step.
func (s *Store) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	if err := s.check(ctx, "PutState", id); err != nil {
		return 0, err
	}
	if err := storekit.CheckStateName(name); err != nil {
		return 0, fmt.Errorf("pgstore: PutState of identity %q: %w", id.Key(), err)
	}
	k := identOf(id)
	bucket := bucketName(id.Tenant, id.User)
	var (
		written *int64 // the new version; nil when nothing was written
		current int64  // the version before: the value's or the absent one
		absent  int64  // after a delete: the absent version
	)
	err := s.write(ctx, func(b *pgx.Batch) {
		s.lockIdentity(b, k)
		if value == nil {
			b.Queue(s.q.deleteState, k.hash, s.ns, k.key, name, expect, bucket).QueryRow(func(r pgx.Row) error {
				return r.Scan(&current, &absent)
			})
		} else {
			b.Queue(s.q.putState, k.hash, s.ns, k.key, name, value, expect, bucket).QueryRow(func(r pgx.Row) error {
				return r.Scan(&written, &current)
			})
		}
	})
	op := fmt.Sprintf("PutState(%q)", name)
	if rolledBack(err) {
		return 0, fmt.Errorf("%w: %w", store.ErrConflict, s.wrap(op, k, fmt.Errorf("the server rolled the compare-and-set back %d times: %w", maxAttempts, err)))
	}
	if err != nil {
		return 0, s.wrap(op, k, err)
	}
	if current != expect || value != nil && written == nil {
		return 0, s.conflict(k, name, current, expect)
	}
	if value == nil {
		return absent, nil
	}
	return *written, nil
}

func (s *Store) conflict(k ident, name string, current, expect int64) error {
	return fmt.Errorf("%w: pgstore: state %q of identity %q is at version %d, not %d", store.ErrConflict, name, k.key, current, expect)
}
