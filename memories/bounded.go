package memories

import (
	"context"
	"fmt"
	"time"
)

// abandonGrace is how long a model call may go on after its context ended
// before the memory abandons it.
const abandonGrace = 250 * time.Millisecond

// callBounded runs f, a model call (a summarizer, an extractor), so that
// neither its panic nor its ignoring ctx can hurt the memory: a panic is
// an error naming what (what panicked), and when ctx ends first (a
// timeout, Close, Clear, the caller) the call gets abandonGrace to return,
// then is abandoned — it goes on in its goroutine, and its answer is
// discarded when it comes. An answer that arrives after ctx ended is not
// used either: the error is ctx's.
func callBounded[T any](ctx context.Context, what string, f func(context.Context) (T, error)) (T, error) {
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1) // never blocks the abandoned call
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- answer{err: fmt.Errorf("%s panicked: %v", what, p)}
			}
		}()
		v, err := f(ctx)
		done <- answer{v, err}
	}()
	var zero T
	select {
	case a := <-done:
		if a.err == nil && ctx.Err() != nil {
			return zero, ctx.Err() // answered, but after its deadline
		}
		return a.v, a.err
	case <-ctx.Done():
	}
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case a := <-done:
		if a.err == nil {
			a.err = ctx.Err() // too late: the answer is not used
		}
		return zero, a.err
	case <-t.C:
		return zero, fmt.Errorf("memories: %s abandoned %v after its context ended: %w", what, abandonGrace, ctx.Err())
	}
}
