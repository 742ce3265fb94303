package memstack

import (
	"context"
	"time"
)

type timeKey struct{}

// WithTime returns a copy of ctx that carries t as the time of the
// messages saved with it: a memory's SaveContext or AddMessage called with
// the returned context stores its messages dated t instead of now. Use it
// to import an existing history, or to replay one, at the times its turns
// were said:
//
//	ctx = memstack.WithTime(ctx, turn.At)
//	err := mem.SaveContext(ctx, inputs, outputs)
//
// langchaingo chains pass their context to the memory, so
// chains.Call(memstack.WithTime(ctx, t), chain, inputs) dates the turn the
// chain saves. The time travels like the Identity (see WithIdentity): the
// chain and the memory need no other change. A zero t means "now", as
// without WithTime. Its monotonic clock reading is stripped; its location
// is kept, so a date shown from it (memories.Recall) is the caller's date.
func WithTime(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, timeKey{}, t.Round(0))
}

// TimeFrom returns the time carried by ctx (see WithTime) and whether
// there was a non-zero one.
func TimeFrom(ctx context.Context) (time.Time, bool) {
	if ctx == nil {
		return time.Time{}, false
	}
	t, ok := ctx.Value(timeKey{}).(time.Time)
	return t, ok && !t.IsZero()
}
