package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// busy reports whether err is SQLite's "database is locked" (another
// connection holds the write lock past the busy timeout).
func busy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	return false
}

// lockSQL is the first statement of every write transaction: a write that
// changes nothing, so the transaction takes the write lock (waiting up to
// the busy timeout) before it reads anything — what BEGIN IMMEDIATE does,
// whatever BEGIN the driver issued (New's database may have any _txlock).
// A transaction that read first could find, at its first write, that
// another connection wrote since its snapshot (SQLITE_BUSY_SNAPSHOT, which
// no busy timeout waits out).
const lockSQL = `DELETE FROM memstack_schema WHERE 0`

// write runs fn in a transaction that holds the write lock from its first
// statement and commits it, retrying the whole transaction while the
// database is locked by another connection and ctx allows. fn must be safe
// to run more than once.
func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	select {
	case s.writer <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writer }()
	return s.writeLocked(ctx, fn)
}

// writeLocked is write for a caller that holds the writer semaphore.
func (s *Store) writeLocked(ctx context.Context, fn func(*sql.Tx) error) error {
	lock := func(tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, s.stmtLock).ExecContext(ctx)
		return err
	}
	return s.retry(ctx, func() error { return s.tryWrite(ctx, lock, fn) })
}

// retry runs attempt until it succeeds, fails with an error other than
// SQLite's busy, or ctx is done, backing off between attempts.
func (s *Store) retry(ctx context.Context, attempt func() error) error {
	backoff := time.Millisecond
	for {
		err := attempt()
		if err == nil || !busy(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up waiting for the write lock: %w)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// tryWrite runs lock, then fn, in one transaction, and commits it.
func (s *Store) tryWrite(ctx context.Context, lock, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := lock(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
