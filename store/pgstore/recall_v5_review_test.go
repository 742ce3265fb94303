package pgstore_test

// Regression tests of pgstore schema 5 (the recall index's postings by
// groups of a user's conversations), from the review of 57148a5. Each
// failed on 57148a5.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// reviewLockKey is pgstore's advisory lock key of parts (ident.go, lockKey).
func reviewLockKey(parts ...string) int64 {
	h := sha256.New()
	h.Write([]byte("memstack/pgstore"))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)))
}

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

// advisoryWaiters counts the sessions waiting for an advisory lock.
func advisoryWaiters(t *testing.T, pool *pgxpool.Pool) int {
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").Scan(&n))
	return n
}

// TestRecallForgetVersusForgetScopeNoDeadlock: Forget of one of a user's
// conversations and ForgetScope of the user at the same moment. On
// 57148a5 Forget took the identity's lock, moved the bucket's forgotten
// version (a row lock on the bucket's row), and only then the user's
// recall lock (queueDeleteIndex), while ForgetScope's last step takes its
// derived identities' locks, then the user's recall lock (queueLocks),
// then the bucket's row: the two waited for each other in a cycle, and
// the server rolled one back after deadlock_timeout. The package
// documentation promises ForgetScope "never deadlocks ... with a single
// identity's write"; Forget now takes the user's lock right after the
// identity's.
func TestRecallForgetVersusForgetScopeNoDeadlock(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("fsdeadlock")
	cfg, err := pgxpool.ParseConfig(testsvc.Postgres(t))
	require.NoError(t, err)
	tracer := &deadlockTracer{}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	waitReady(t, s)

	conv := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c"}
	// Warm the statements and create the bucket's row.
	require.NoError(t, s.Forget(ctx, conv))
	_, err = s.ForgetScope(ctx, store.UserScope("acme", "ana"))
	require.NoError(t, err)

	raw := rawPool(t)
	hold, err := raw.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(ctx) }()
	_, err = hold.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", reviewLockKey("recall-user", prefix, "acme:ana:"))
	require.NoError(t, err)

	// ForgetScope first: its last step waits for the user's lock.
	scoped := make(chan error, 1)
	go func() {
		_, err := s.ForgetScope(ctx, store.UserScope("acme", "ana"))
		scoped <- err
	}()
	require.Eventually(t, func() bool { return advisoryWaiters(t, raw) == 1 }, 20*time.Second, 5*time.Millisecond)
	// Then Forget: it moves the bucket's version and waits for the
	// user's lock behind ForgetScope.
	forgot := make(chan error, 1)
	go func() { forgot <- s.Forget(ctx, conv) }()
	require.Eventually(t, func() bool { return advisoryWaiters(t, raw) == 2 }, 20*time.Second, 5*time.Millisecond)
	require.NoError(t, hold.Rollback(ctx))

	assert.NoError(t, <-scoped)
	assert.NoError(t, <-forgot)
	assert.Empty(t, tracer.deadlocks(), "Forget and ForgetScope of the same user deadlocked")
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
