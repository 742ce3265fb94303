// Package bounded runs calls into code a memory does not control — a
// summarizer, an extractor, an index or its embedder — so that neither a
// panic nor a call that ignores its context can hurt the memory: a panic
// is an error naming what panicked, and a call that outlives its context
// by Grace is abandoned (it goes on in its goroutine; its answer is
// discarded, or handed to a callback).
package bounded

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Grace is how long a model call may go on after its context ended
// before the memory abandons it.
const Grace = 250 * time.Millisecond

// Call runs f, a model call (a summarizer, an extractor), so that
// neither its panic nor its ignoring ctx can hurt the memory: a panic is
// an error naming what (what panicked), and when ctx ends first (a
// timeout, Close, Clear, the caller) the call gets Grace to return,
// then is abandoned — it goes on in its goroutine, and its answer is
// discarded when it comes. An answer that arrives after ctx ended is not
// used either: the error is ctx's.
func Call[T any](ctx context.Context, what string, f func(context.Context) (T, error)) (T, error) {
	v, end, err := Run(ctx, func() string { return what }, f, nil)
	var zero T
	switch end {
	case InTime:
		return v, err
	case Late:
		if err == nil {
			err = ctx.Err() // too late: the answer is not used
		}
	}
	return zero, err
}

// End tells how a call run by Run ended for its caller.
type End int

const (
	// InTime: the call answered before its context ended.
	InTime End = iota
	// Late: the call answered after its context ended, within
	// Grace.
	Late
	// Abandoned: the call had not answered Grace after its
	// context ended; it goes on in its goroutine.
	Abandoned
)

// Run is Call's engine, for callers that decide themselves
// what a late answer is worth and that must act when an abandoned call
// ends. It runs f on a goroutine of its own and returns f's answer as
// given (a panic is an error naming what(), called only then) with how the
// call ended; for an abandoned call, the zero value and an error saying
// so, wrapping ctx's error. When the call is abandoned and late is not nil, late is called on
// the call's goroutine with its answer once f returns (or panics), and
// never otherwise; it may run before Run has returned, so whatever
// it needs must be set up before the call.
func Run[T any](ctx context.Context, what func() string, f func(context.Context) (T, error), late func(T, error)) (T, End, error) {
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
			return a.v, Late, a.err
		}
		return a.v, InTime, a.err
	case <-ctx.Done():
	}
	t := time.NewTimer(Grace)
	defer t.Stop()
	select {
	case a := <-done:
		return a.v, Late, a.err
	case <-t.C:
	}
	if !state.CompareAndSwap(running, abandoned) {
		a := <-done // it answered just now
		return a.v, Late, a.err
	}
	var zero T
	return zero, Abandoned, fmt.Errorf("memories: %s abandoned %v after its context ended: %w", what(), Grace, ctx.Err())
}
