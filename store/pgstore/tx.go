package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memstack/memstack/store"
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
// and write returns the error, wrapping store.ErrOutcomeUnknown (see
// mayHaveCommitted).
func (s *Store) write(ctx context.Context, queue func(b *pgx.Batch)) error {
	return s.retry(ctx, func() error {
		// The connection is acquired first, so that a failure to get one
		// (a context done while waiting for the pool, a server that
		// refuses connections) is known to have sent nothing.
		conn, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release() // after the Rollback below
		b := &pgx.Batch{}
		b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		queue(b)
		b.Queue("COMMIT")
		br := conn.SendBatch(ctx, b)
		tx := br.Tx()
		err = br.Close()
		// After the COMMIT the transaction is closed, and Rollback does
		// nothing; after a statement failed, the rest of the batch was
		// skipped and Rollback ends the aborted transaction (or, if that
		// fails, closes the connection). Release then hands the connection
		// back to the pool, or destroys it if it is broken or still in a
		// transaction.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if rerr := tx.Rollback(rctx); err == nil && rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			err = rerr
		}
		if err != nil && mayHaveCommitted(err) {
			err = fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
		}
		return err
	})
}

// mayHaveCommitted reports whether a write transaction whose batch ended
// in err may have committed: whether err is not one of the errors that
// prove it did not. Those are an error the server reported at severity
// ERROR (a statement failed, so the transaction was aborted and its
// COMMIT, sent in the same batch, rolled it back; or the COMMIT itself
// failed, which rolls back too), an error pgconn knows occurred before
// anything was sent (pgconn.SafeToRetry: a context already done, a busy
// connection), and an error preparing the batch's statements (only their
// descriptions were sent, nothing ran). Every other error — a connection
// that broke or timed out while the batch or its replies were in flight,
// a context that ended while the server ran the statements and did not
// answer the cancel request within cancelDeadline, a FATAL from a server
// shutting down, which may come after the COMMIT's own reply, an error
// reading a statement's result while the COMMIT went on — leaves the
// transaction committed or not.
func mayHaveCommitted(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		sev := pe.SeverityUnlocalized
		if sev == "" {
			sev = pe.Severity
		}
		return sev != "ERROR"
	}
	if pgconn.SafeToRetry(err) {
		return false
	}
	var pre pgx.ErrPreprocessingBatch
	return !errors.As(err, &pre)
}
