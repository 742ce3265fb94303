package sqlitestore

// TailSQL is Tail's statement, for the tests of its query plan.
const TailSQL = tailSQL

// Queued returns how many Appends wait in s's queue for a writer.
func (s *Store) Queued() int {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	return len(s.queue)
}

// Writing reports whether an Append of s holds the writer semaphore.
func (s *Store) Writing() bool { return len(s.writer) == 1 }

// SetBackfill sets how many messages a backfill transaction indexes and
// a function called after each one; it returns a function restoring both.
func SetBackfill(batch int, after func()) func() {
	b, a := backfillBatch, afterBackfillTx
	backfillBatch, afterBackfillTx = batch, after
	return func() { backfillBatch, afterBackfillTx = b, a }
}

// MmapSize returns the mmap_size pragma of one of s's connections.
func (s *Store) MmapSize() (n int64, err error) {
	err = s.db.QueryRow(`PRAGMA mmap_size`).Scan(&n)
	return n, err
}
