package memories

import (
	"context"
	"errors"
	"fmt"

	"github.com/memstack/memstack/memories/internal/worker"
)

// The layers whose work runs in a worker.Pool (Summary, Facts) share their
// Clear and the mapping of the pool's errors.

// clearExclusive is the Clear of a layer whose work runs in pool: it
// cancels the identity's running pass, waits for it, and with no pass in
// flight clears the identity's messages in the store, then runs then
// (the layer's own state). closed is the layer's error after Close.
func (b *base) clearExclusive(ctx context.Context, pool *worker.Pool[identity], closed error, then func(identity) error) error {
	id, err := b.begin(ctx)
	if err != nil {
		return err
	}
	if pool.Closed() {
		return closed
	}
	err = pool.Exclusive(ctx, id, func() error {
		if err := b.cfg.store.Clear(ctx, id); err != nil {
			return fmt.Errorf("memstack: clearing: %w", err)
		}
		return then(id)
	})
	return poolErr(err, ctx, "clearing", closed)
}

// poolErr turns the error of a worker.Pool call made for op ("clearing",
// "flush") into the layer's: closed for worker.ErrClosed, op wrapping
// ctx's error when the call ended on ctx, else err as it is.
func poolErr(err error, ctx context.Context, op string, closed error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, worker.ErrClosed):
		return closed
	case err == ctx.Err():
		return fmt.Errorf("memstack: %s: %w", op, err)
	}
	return err
}
