package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memstack/memstack"
)

// Clear implements store.Store: the messages and state of id in this
// store's namespace are removed and its Clear mark moved to a fresh
// version, in one transaction under the identity's lock.
func (s *Store) Clear(ctx context.Context, id memstack.Identity) error {
	if err := s.check(ctx, "Clear", id); err != nil {
		return err
	}
	k := identOf(id)
	err := s.write(ctx, func(b *pgx.Batch) {
		s.lockIdentity(b, k)
		b.Queue(s.q.clearMessages, k.hash, s.ns, k.key)
		b.Queue(s.q.clearConv, k.hash, s.ns, k.key)
		s.queueDeleteIndex(b, k, false)
		s.queueReset(b, k)
	})
	if err != nil {
		return s.wrap("Clear", k, err)
	}
	return nil
}

// queueReset queues the removal of k's state values in this store's
// namespace and the move of its Clear mark to a fresh version — also for
// an identity with no rows: a commit may have read its absent version
// before anything was stored.
func (s *Store) queueReset(b *pgx.Batch, k ident) {
	b.Queue(s.q.clearState, k.hash, s.ns, k.key)
	b.Queue(s.q.setMark, k.hash, s.ns, k.key)
}

// Forget implements store.Store: in one transaction under the identity's
// lock, the forgotten version of the bucket of id's user
// (storekit.ForgetBucket) moves to a fresh version, then the messages, state
// and Clear marks of id in every namespace under this store's table
// prefix are removed. The absent versions of users of other buckets do
// not move, so their first commits are not disturbed.
func (s *Store) Forget(ctx context.Context, id memstack.Identity) error {
	if err := s.check(ctx, "Forget", id); err != nil {
		return err
	}
	k := identOf(id)
	err := s.write(ctx, func(b *pgx.Batch) {
		s.lockIdentity(b, k)
		b.Queue(s.q.setForgotten, bucketName(id.Tenant, id.User))
		s.queueForget(b, k, nil)
	})
	if err != nil {
		return s.wrap("Forget", k, err)
	}
	return nil
}

// queueForget queues the deletes of every row of k under the table
// prefix. Unless removed is nil, the messages, state values and Clear
// marks deleted are added to it (not the conversations row, which holds
// nothing by itself).
func (s *Store) queueForget(b *pgx.Batch, k ident, removed *int64) {
	messages := b.Queue(s.q.forgetMessages, k.hash, k.key)
	b.Queue(s.q.forgetConv, k.hash, k.key)
	state := b.Queue(s.q.forgetState, k.hash, k.key)
	s.queueDeleteIndex(b, k, true)
	if removed != nil {
		count := func(ct pgconn.CommandTag) error {
			*removed += ct.RowsAffected()
			return nil
		}
		messages.Exec(count)
		state.Exec(count)
	}
}
