package pgstore

// TailSQL returns the statement Tail runs, for the tests of its plan.
func (s *Store) TailSQL() string { return s.q.tail }

// SetAfterBackfill sets the hook called after each conversation the
// recall index's backfill indexed, and returns a function restoring the
// previous one.
func SetAfterBackfill(f func()) (restore func()) {
	old := afterBackfillTx
	afterBackfillTx = f
	return func() { afterBackfillTx = old }
}

// LockKey is the advisory lock key of parts (lockKey).
func LockKey(parts ...string) int64 { return lockKey(parts...) }
