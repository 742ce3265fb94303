package pgstore_test

// Regression tests of pgstore schema 5 (the recall index's postings in
// rows shared by a group of a user's conversations, written with no
// user's lock), from the review of 80d4543. Each failed on 80d4543.
//
// Every test makes the interleaving that deadlocks happen for sure: a
// plain transaction holds a lock (a posting row, or the advisory locks
// of the users' numbering) while the store's transactions queue behind
// it (waitLockWaits sees them wait), then lets them go. A deadlock is
// retried by the store, so the calls succeed: a tracer on the pool sees
// the server's SQLSTATE 40P01.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/pgstore"
)

// tracedStore opens a Store with the recall index on tables under
// prefix, through a pool whose tracer records the deadlocks.
func tracedStore(t *testing.T, prefix string) (*pgstore.Store, *deadlockTracer) {
	tracer := &deadlockTracer{}
	return tracedStoreWith(t, prefix, tracer), tracer
}

// tracedStoreWith is tracedStore with a pool of its own whose tracer is
// tracer (several Stores may share one).
func tracedStoreWith(t *testing.T, prefix string, tracer *deadlockTracer) *pgstore.Store {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testsvc.Postgres(t))
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = tracer
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	waitReady(t, s)
	return s
}

// appendNumbered appends a message to conversations 0 to n-1 of id, one
// after the other, so that each is numbered in its user as it is named:
// texts[c], or "filler".
func appendNumbered(t *testing.T, s *pgstore.Store, id func(int) memstack.Identity, n int, texts map[int]string) {
	t.Helper()
	for c := range n {
		text, ok := texts[c]
		if !ok {
			text = "filler"
		}
		require.NoError(t, s.Append(context.Background(), id(c), llms.HumanChatMessage{Content: text}))
	}
}

// waitLockWaits waits until n backends other than pool's wait for a
// heavyweight lock (a row's, a transaction's, an advisory lock) and
// count says they are the test's: count is a condition on pg_stat_activity
// (a) and pg_locks (l) of the waiting backend, with args.
func waitLockWaits(t *testing.T, pool *pgxpool.Pool, n int, count string, args ...any) {
	t.Helper()
	q := "SELECT count(DISTINCT a.pid) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted" +
		" WHERE a.wait_event_type = 'Lock' AND a.pid <> pg_backend_pid() AND (" + count + ")"
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		require.NoError(t, pool.QueryRow(context.Background(), q, args...).Scan(&got))
		if got >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d of %d transactions wait", got, n)
		time.Sleep(10 * time.Millisecond)
	}
}

// convNumber reads id's number in its user (recall_conv.convno).
func convNumberOf(t *testing.T, pool *pgxpool.Pool, prefix string, id memstack.Identity) int32 {
	t.Helper()
	var n int32
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT convno FROM "+pgx.Identifier{prefix + "recall_conv"}.Sanitize()+" WHERE id_key = $1", id.Key()).Scan(&n))
	return n
}

// TestRecallRewriteLocksPostingRowsInOrder: a Rewrite of a conversation
// whose group another conversation appends to at the same time. Rewrite
// indexes the conversation afresh (reindex): its removal statements lock
// the rows of its old entries in order (SELECT … FOR UPDATE), then its
// upsert locks the rows of its new entries in order — a second pass
// that starts again from the group's first term, so the transaction
// holds (grp, "paris") and then waits for (grp, "battery"), against the
// global order (ns, scope_u, grp, term, chunk) that the append of the
// other conversation follows (battery, hotel, paris): a deadlock.
func TestRecallRewriteLocksPostingRowsInOrder(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("rwdl")
	s, tracer := tracedStore(t, prefix)
	pool := rawPool(t)
	id := func(c int) memstack.Identity {
		return memstack.Identity{Tenant: "acme", User: "u", Conversation: fmt.Sprint("c", c)}
	}
	// Conversations 0 and 32 of the user: group 0 both (groupOf).
	appendNumbered(t, s, id, 33, map[int]string{0: "paris", 32: "hotel"})
	x, y := id(0), id(32)
	require.Equal(t, int32(0), convNumberOf(t, pool, prefix, x))
	require.Equal(t, int32(32), convNumberOf(t, pool, prefix, y))
	posts := pgx.Identifier{prefix + "recall_posts"}.Sanitize()

	// A plain transaction holds the row (group 0, hotel).
	m, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = m.Rollback(ctx) }()
	tag, err := m.Exec(ctx, "SELECT FROM "+posts+" WHERE grp = 0 AND term = $1 FOR UPDATE", indexkit.QueryTerms("hotel")[0])
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	ours := "strpos(a.query, $1) > 0"
	var wg sync.WaitGroup
	var errY, errX error
	// y's append inserts (0, battery), then waits for (0, hotel).
	wg.Go(func() {
		errY = s.Append(ctx, y, llms.HumanChatMessage{Content: "battery hotel paris"})
	})
	waitLockWaits(t, pool, 1, ours, posts)
	// x's Rewrite locks (0, paris), its old entry's row, then waits for
	// (0, battery), which y's append inserted.
	wg.Go(func() {
		_, errX = s.Rewrite(ctx, x, 0, false, llms.HumanChatMessage{Content: "battery paris"})
	})
	waitLockWaits(t, pool, 2, ours, posts)
	// y's append takes (0, hotel) and waits for (0, paris).
	require.NoError(t, m.Commit(ctx))
	wg.Wait()
	require.NoError(t, errY)
	require.NoError(t, errX)
	assert.Empty(t, tracer.deadlocks(), "a Rewrite and an append to conversations of one group deadlocked")
}

// TestRecallAppendBatchesNumbersUsersInOrder: two AppendBatches, each
// starting a conversation of the users u1 and u2, in opposite orders.
// newConvNumber takes a user's numbering lock (userLock) as it comes to
// the user's first new conversation, in the order of the batches, and
// holds it to the end of the transaction: one transaction holds u1's and
// waits for u2's, the other holds u2's and waits for u1's — a deadlock.
// (The identities' locks are sorted; the users' are not.)
func TestRecallAppendBatchesNumbersUsersInOrder(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("numdl")
	s, tracer := tracedStore(t, prefix)
	pool := rawPool(t)
	id := func(u, c string) memstack.Identity {
		return memstack.Identity{Tenant: "acme", User: u, Conversation: c}
	}
	msg := []llms.ChatMessage{llms.HumanChatMessage{Content: "invoice paris"}}
	// The users' numbering locks (recall.go, userLock), as pg_locks shows
	// a bigint key: classid the high half, objid the low.
	var keys, hi, lo []int64
	for _, u := range []string{"acme:u1:", "acme:u2:"} {
		k := pgstore.LockKey("recall-user", prefix, u)
		keys = append(keys, k)
		hi, lo = append(hi, int64(uint64(k)>>32)), append(lo, int64(uint64(k)&0xffffffff))
	}
	numbering := "l.locktype = 'advisory' AND EXISTS (SELECT FROM unnest($1::bigint[], $2::bigint[]) AS k (hi, lo) WHERE k.hi = l.classid::bigint AND k.lo = l.objid::bigint)"
	for round := range 3 {
		// A plain transaction holds both users' numbering locks while
		// the two AppendBatches come to them.
		m, err := pool.Begin(ctx)
		require.NoError(t, err)
		for _, k := range keys {
			_, err := m.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", k)
			require.NoError(t, err)
		}
		var wg sync.WaitGroup
		var errA, errB error
		wg.Go(func() {
			errA = s.AppendBatches(ctx,
				store.Batch{ID: id("u1", fmt.Sprint("a", round)), Messages: msg},
				store.Batch{ID: id("u2", fmt.Sprint("b", round)), Messages: msg})
		})
		wg.Go(func() {
			errB = s.AppendBatches(ctx,
				store.Batch{ID: id("u2", fmt.Sprint("c", round)), Messages: msg},
				store.Batch{ID: id("u1", fmt.Sprint("d", round)), Messages: msg})
		})
		waitLockWaits(t, pool, 2, numbering, hi, lo)
		require.NoError(t, m.Commit(ctx))
		wg.Wait()
		require.NoError(t, errA)
		require.NoError(t, errB)
		if len(tracer.deadlocks()) > 0 {
			break
		}
	}
	assert.Empty(t, tracer.deadlocks(), "AppendBatches numbering new conversations of two users deadlocked")
}

// TestRecallAppendBatchesReindexLocksInOrder: an AppendBatches of a
// conversation whose index state does not decode (indexed afresh:
// reindex) and of another conversation of a group before its own. The
// afresh indexing queues its removal and its upsert at once, in the
// batch, before the deferred upserts of the other groups (postRows.queue):
// the transaction locks group 1's rows, then group 0's, against the
// global order that another AppendBatches over both groups follows.
func TestRecallAppendBatchesReindexLocksInOrder(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("reidxdl")
	s, tracer := tracedStore(t, prefix)
	pool := rawPool(t)
	id := func(c int) memstack.Identity {
		return memstack.Identity{Tenant: "acme", User: "u", Conversation: fmt.Sprint("c", c)}
	}
	// Numbers 0 and 32 are group 0; 1 and 33 group 1.
	appendNumbered(t, s, id, 34, map[int]string{1: "paris", 32: "hotel"})
	for c := range 34 {
		require.Equal(t, int32(c), convNumberOf(t, pool, prefix, id(c)))
	}
	y, x, z, w := id(0), id(1), id(32), id(33) // groups 0, 1, 0, 1
	conv := pgx.Identifier{prefix + "recall_conv"}.Sanitize()
	posts := pgx.Identifier{prefix + "recall_posts"}.Sanitize()
	_, err := pool.Exec(ctx, "UPDATE "+conv+" SET state = '\\x02'::bytea WHERE id_key = $1", x.Key())
	require.NoError(t, err)

	m, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = m.Rollback(ctx) }()
	tag, err := m.Exec(ctx, "SELECT FROM "+posts+" WHERE grp = 0 AND term = $1 FOR UPDATE", indexkit.QueryTerms("hotel")[0])
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())

	ours := "strpos(a.query, $1) > 0"
	var wg sync.WaitGroup
	var errA, errB error
	// z and w: inserts (0, battery), waits for (0, hotel); then (1, paris).
	wg.Go(func() {
		errA = s.AppendBatches(ctx,
			store.Batch{ID: z, Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: "battery hotel"}}},
			store.Batch{ID: w, Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: "paris"}}})
	})
	waitLockWaits(t, pool, 1, ours, posts)
	// x afresh: locks (1, paris); then y: waits for (0, battery).
	wg.Go(func() {
		errB = s.AppendBatches(ctx,
			store.Batch{ID: x, Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: "paris"}}},
			store.Batch{ID: y, Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: "battery"}}})
	})
	waitLockWaits(t, pool, 2, ours, posts)
	require.NoError(t, m.Commit(ctx))
	wg.Wait()
	require.NoError(t, errA)
	require.NoError(t, errB)
	assert.Empty(t, tracer.deadlocks(), "an AppendBatches indexing a conversation afresh deadlocked with another")
}
