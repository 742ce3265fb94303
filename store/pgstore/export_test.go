package pgstore

// TailSQL returns the statement Tail runs, for the tests of its plan.
func (s *Store) TailSQL() string { return s.q.tail }
