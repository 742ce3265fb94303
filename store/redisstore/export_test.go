package redisstore

import (
	"context"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// TailRead is Tail that also returns how many list elements its script
// read, from the index of system messages and from the message list: what
// the tests of Tail's cost count.
func (s *Store) TailRead(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, int64, error) {
	return s.tail(ctx, id, n, after)
}
