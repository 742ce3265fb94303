package pgstore_test

// Regression tests of pgstore schema 5 (the recall index's postings by
// groups of a user's conversations), from the review of 57148a5. Each
// failed on 57148a5.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/pgstore"
)

// deadlockTracer records the deadlocks (SQLSTATE 40P01) the server
// reported to a pool's connections, in statements or batches.
type deadlockTracer struct {
	mu   sync.Mutex
	seen []string
}

func (d *deadlockTracer) note(sql string, err error) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "40P01" {
		d.mu.Lock()
		d.seen = append(d.seen, pe.Message+" (in "+sql+")")
		d.mu.Unlock()
	}
}

func (d *deadlockTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (d *deadlockTracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	d.note("a statement", data.Err)
}
func (d *deadlockTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (d *deadlockTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	d.note(data.SQL, data.Err)
}
func (d *deadlockTracer) TraceBatchEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	d.note("a batch", data.Err)
}

func (d *deadlockTracer) deadlocks() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.seen...)
}

// TestRecallSharedRowsNoDeadlock: appends (single and batched, over
// several users), Clear, Forget, RemovePrefix, Rewrite and ForgetScope of
// conversations whose postings share rows, all at once from several
// Stores: every write locks the posting rows it changes in one order, so
// the server never finds a deadlock (SQLSTATE 40P01, which the store's
// retry would hide: a tracer on the pool sees it). (The review of
// 57148a5 found Forget and ForgetScope of one user deadlocking on the
// user's lock and a bucket's row; the user's lock now only numbers new
// conversations.)
func TestRecallSharedRowsNoDeadlock(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("shareddl")
	tracer := &deadlockTracer{}
	var stores []*pgstore.Store
	for range 3 {
		stores = append(stores, tracedStoreWith(t, prefix, tracer))
	}
	// Two users of 256 conversations, numbered in order: the writes go to
	// 16 of each, two groups' (n and n+32k share rows).
	fillUsers(t, stores[0], 2, 256, 1)
	var shared []int
	for k := range 8 {
		shared = append(shared, 32*k, 32*k+1)
	}
	words := []string{"invoice", "refund", "paris", "hotel", "battery", "charger"}
	id := func(u, c int) memstack.Identity {
		return memstack.Identity{Tenant: "acme", User: fmt.Sprint("u", u), Conversation: fmt.Sprint("c", c)}
	}
	text := func(r *rand.Rand) string {
		return words[r.IntN(len(words))] + " " + words[r.IntN(len(words))] + " " + words[r.IntN(len(words))]
	}
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			r := newRng(uint64(w) + 40)
			s := stores[w%len(stores)]
			for i := range 60 {
				u, c := r.IntN(2), shared[r.IntN(len(shared))]
				var err error
				switch op := r.IntN(10); {
				case op < 5:
					err = s.Append(ctx, id(u, c), llms.HumanChatMessage{Content: text(r)}, llms.AIChatMessage{Content: text(r)})
				case op < 7:
					err = s.AppendBatches(ctx,
						store.Batch{ID: id(1-u, shared[r.IntN(len(shared))]), Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: text(r)}}},
						store.Batch{ID: id(u, c), Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: text(r)}}})
				case op == 7:
					var recs []store.Record
					if recs, err = s.All(ctx, id(u, c)); err == nil && len(recs) > 0 {
						_, err = s.RemovePrefix(ctx, id(u, c), recs[r.IntN(len(recs))].Seq)
					}
				case op == 8:
					if r.IntN(2) == 0 {
						err = s.Clear(ctx, id(u, c))
					} else {
						err = s.Forget(ctx, id(u, c))
					}
				default:
					if r.IntN(4) == 0 {
						_, err = s.ForgetScope(ctx, store.UserScope("acme", fmt.Sprint("u", u)))
					} else {
						_, err = s.Rewrite(ctx, id(u, c), 0, false, llms.HumanChatMessage{Content: text(r)})
					}
				}
				if !assert.NoError(t, err, "worker %d, op %d", w, i) {
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Empty(t, tracer.deadlocks(), "writes of conversations sharing posting rows deadlocked")
}

// TestRecallCorruptPostingRowGoesWithForget: a posting row changed behind
// the store's back (bytes that are not a whole entry) makes every search
// of the user and of the tenant fail with ErrCorrupt, and goes with its
// conversation's entries, as version 4's rows went with their
// conversation: the statements that take a conversation's entries out of
// a group's rows (buildRecallSQL, posts) take a tail that is not a whole
// entry too. (On 57148a5 they kept it: the row outlived every
// conversation of the user, and a later conversation given the number
// again appended its entries after the stray bytes, misaligned.)
func TestRecallCorruptPostingRowGoesWithForget(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("corruptpost")
	s := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	waitReady(t, s)
	x := memstack.Identity{Tenant: "t", User: "u", Conversation: "x"}
	y := memstack.Identity{Tenant: "t", User: "u", Conversation: "y"}
	require.NoError(t, s.Append(ctx, x, llms.HumanChatMessage{Content: "invoice paris"}))
	pool := rawPool(t)
	posts := pgx.Identifier{prefix + "recall_posts"}.Sanitize()
	_, err := pool.Exec(ctx, "UPDATE "+posts+" SET data = data || '\\x0102'::bytea")
	require.NoError(t, err)
	q := indexkit.Query{Terms: indexkit.QueryTerms("invoice"), K: 5}
	_, err = s.SearchRecall(ctx, store.RecallScope{Scope: store.UserScope("t", "u")}, q)
	require.ErrorIs(t, err, store.ErrCorrupt, "the row does not decode")

	// The only conversation of the user is forgotten, another one starts.
	require.NoError(t, s.Forget(ctx, x))
	require.NoError(t, s.Append(ctx, y, llms.HumanChatMessage{Content: "invoice paris"}))
	for _, in := range []store.RecallScope{{Conversation: &y}, {Scope: store.UserScope("t", "u")}, {Scope: store.TenantScope("t")}} {
		hits, err := s.SearchRecall(ctx, in, q)
		if assert.NoError(t, err, "%s: a row of a forgotten conversation", in) {
			assert.Len(t, hits, 1, in.String())
		}
	}
}
