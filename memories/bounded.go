package memories

import (
	"context"
	"fmt"
	"sync/atomic"
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
	v, end, err := runBounded(ctx, func() string { return what }, f, nil)
	var zero T
	switch end {
	case boundedInTime:
		return v, err
	case boundedLate:
		if err == nil {
			err = ctx.Err() // too late: the answer is not used
		}
	}
	return zero, err
}

// boundedEnd tells how a call run by runBounded ended for its caller.
type boundedEnd int

const (
	// boundedInTime: the call answered before its context ended.
	boundedInTime boundedEnd = iota
	// boundedLate: the call answered after its context ended, within
	// abandonGrace.
	boundedLate
	// boundedAbandoned: the call had not answered abandonGrace after its
	// context ended; it goes on in its goroutine.
	boundedAbandoned
)

// runBounded is callBounded's engine, for callers that decide themselves
// what a late answer is worth and that must act when an abandoned call
// ends. It runs f on a goroutine of its own and returns f's answer as
// given (a panic is an error naming what(), called only then) with how the
// call ended; for an abandoned call, the zero value and an error saying
// so, wrapping ctx's error. When the call is abandoned and late is not nil, late is called on
// the call's goroutine with its answer once f returns (or panics), and
// never otherwise; it may run before runBounded has returned, so whatever
// it needs must be set up before the call.
func runBounded[T any](ctx context.Context, what func() string, f func(context.Context) (T, error), late func(T, error)) (T, boundedEnd, error) {
	type answer struct {
		v   T
		err error
	}
	const (
		running int32 = iota
		answered
		abandoned
	)
	var state atomic.Int32
	done := make(chan answer, 1) // never blocks the call
	go func() {
		var a answer
		func() {
			defer func() {
				if p := recover(); p != nil {
					a = answer{err: fmt.Errorf("%s panicked: %v", what(), p)}
				}
			}()
			a.v, a.err = f(ctx)
		}()
		if state.CompareAndSwap(running, answered) {
			done <- a
			return
		}
		if late != nil {
			late(a.v, a.err)
		}
	}()
	select {
	case a := <-done:
		if ctx.Err() != nil {
			return a.v, boundedLate, a.err
		}
		return a.v, boundedInTime, a.err
	case <-ctx.Done():
	}
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case a := <-done:
		return a.v, boundedLate, a.err
	case <-t.C:
	}
	if !state.CompareAndSwap(running, abandoned) {
		a := <-done // it answered just now
		return a.v, boundedLate, a.err
	}
	var zero T
	return zero, boundedAbandoned, fmt.Errorf("memories: %s abandoned %v after its context ended: %w", what(), abandonGrace, ctx.Err())
}
