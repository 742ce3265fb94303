package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxAttempts bounds how often a call runs a transaction, or a read, that
// the server rolled back for a serialization failure or a deadlock (see
// the package documentation, Transactions).
const maxAttempts = 4

// rollbackTimeout bounds the ROLLBACK that ends a transaction a statement
// failed in: it runs even when the call's context is done, so the
// connection goes back to the pool clean (or is closed).
const rollbackTimeout = 5 * time.Second

// The SQLSTATEs of a transaction the server rolled back that may succeed
// when run again: serialization_failure and deadlock_detected.
const (
	sqlstateSerialization = "40001"
	sqlstateDeadlock      = "40P01"
	sqlstatePrivilege     = "42501" // insufficient_privilege
)

// rolledBack reports whether err is the server's report that it rolled
// the transaction back for a serialization failure or a deadlock: nothing
// of it was applied, so running it again applies it at most once.
func rolledBack(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == sqlstateSerialization || pe.Code == sqlstateDeadlock)
}

// retry runs attempt until it succeeds, fails otherwise than rolledBack,
// has run maxAttempts times or ctx is done, pausing a few random
// milliseconds between runs so that transactions that collided do not
// collide again. It returns attempt's last error, which wraps ctx.Err()
// when ctx is done (a cancelled statement's error is the server's).
func (s *Store) retry(ctx context.Context, attempt func() error) error {
	for n := 1; ; n++ {
		err := attempt()
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		if err == nil || n == maxAttempts || !rolledBack(err) {
			return err
		}
		pause := time.Duration(n)*time.Millisecond + rand.N(5*time.Millisecond)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// write runs the statements queue adds to a batch as one transaction at
// read committed — whatever default_transaction_isolation the server,
// database or role sets — in one round trip: BEGIN ISOLATION LEVEL READ
// COMMITTED (pgx.Batch.BeginTx), the statements, COMMIT. The advisory
// locks the statements take rely on read committed: each statement sees
// what was committed when it started, so the statements after a lock see
// everything its previous holder committed.
//
// A transaction the server rolled back for a serialization failure or a
// deadlock is run again (retry): queue is called anew, so callbacks that
// scan results overwrite what a failed run left. Nothing else is run
// twice: after a lost reply or a broken connection the outcome is unknown
// and write returns the error.
func (s *Store) write(ctx context.Context, queue func(b *pgx.Batch)) error {
	return s.retry(ctx, func() error {
		b := &pgx.Batch{}
		b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		queue(b)
		b.Queue("COMMIT")
		br := s.pool.SendBatch(ctx, b)
		tx := br.Tx()
		err := br.Close()
		// After the COMMIT the transaction is closed, and Rollback only
		// hands the connection back to the pool; after a statement
		// failed, the rest of the batch was skipped and Rollback ends the
		// aborted transaction (or, if that fails, closes the connection).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if rerr := tx.Rollback(rctx); err == nil && rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			err = rerr
		}
		return err
	})
}
