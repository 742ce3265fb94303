package memstack

import "context"

type saveKey struct{}

// WithSaveKey returns a copy of ctx that names the save made with it: a
// memory's SaveContext or AddMessage called with the returned context
// stores its messages at most once per store, however many times — or by
// however many memory layers sharing that store — the save is made with
// the same key and the same messages. Saves with other keys, or none,
// store what they are given.
//
// combined.Memory draws a fresh key for every save that has none, so the
// layers of a stack that share one store keep one transcript there. Set
// one yourself to make a retry safe: a save that returned an error after
// its messages were stored (a summarizer that failed after the turn was
// kept, a reply lost on the way back) can be made again with the same
// key without storing the turn twice.
//
//	ctx = memstack.WithSaveKey(ctx, requestID)
//	err := mem.SaveContext(ctx, inputs, outputs) // retried with the same ctx on error
//
// A key names one save: draw a fresh one per save (a request ID), since a
// later save under the same key with the same messages stores nothing.
// How long a store remembers a key is the store's (package store, "One
// transcript"): in SQLite, PostgreSQL and the in-memory store as long as
// the turn's first message stays stored, in Redis two minutes. An empty
// key means none.
func WithSaveKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, saveKey{}, key)
}

// SaveKeyFrom returns the save key carried by ctx (see WithSaveKey) and
// whether there was a non-empty one.
func SaveKeyFrom(ctx context.Context) (string, bool) {
	if ctx == nil {
		return "", false
	}
	k, ok := ctx.Value(saveKey{}).(string)
	return k, ok && k != ""
}
