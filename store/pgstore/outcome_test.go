package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
)

// lockMessages holds a share lock on the messages table of prefix in a
// transaction of its own until the returned func is called, so every
// write of the store waits for it (statements already prepared on the
// connection: the lock lets them be described, not run).
func lockMessages(t *testing.T, prefix string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testsvc.Postgres(t))
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{prefix + "messages"}.Sanitize()+" IN SHARE MODE")
	require.NoError(t, err)
	released := false
	release = func() {
		if !released {
			released = true
			_ = tx.Rollback(ctx)
			_ = conn.Close(ctx)
		}
	}
	t.Cleanup(release)
	return release
}

// TestOutcomeUnknownAfterADeadline: a pool of the caller's own (New) keeps
// pgx's default context handling, which drops the connection when the
// call's context ends; the server may then run, and commit, what it has
// received once the lock it waited for is released. The call's error must
// say that the outcome is unknown, and a retry under the same append key
// stores the turn once. (TestFaultsKeyedAppendRetried checks an Append
// that failed after it committed, deterministically.)
func TestOutcomeUnknownAfterADeadline(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("outcome")
	// One connection, so the statements the warm-up prepares are the
	// Append's.
	pool, err := pgxpool.New(ctx, testsvc.Postgres(t)+"&pool_max_conns=1")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool, pgstore.WithTablePrefix(prefix))
	require.NoError(t, err)
	id := memstack.Identity{Tenant: "acme", User: "outcome", Conversation: "deadline"}
	kctx := store.WithAppendKey(ctx, "turn-1")
	require.NoError(t, s.Append(store.WithAppendKey(ctx, "warm-up"), id, human("before"), ai("ok")))

	release := lockMessages(t, prefix)
	cctx, cancel := context.WithTimeout(kctx, 300*time.Millisecond)
	err = s.Append(cctx, id, human("q"), ai("a"))
	cancel()
	require.Error(t, err, "the table was locked past the deadline")
	t.Logf("the Append's error: %v", err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, store.ErrOutcomeUnknown, "an Append whose batch the server received may commit after the call returned")
	release()

	// The server may commit what it received (it runs the batch once the
	// lock is released, unless it notices first that the client is gone);
	// the retry under the same key stores the turn only if it did not.
	time.Sleep(200 * time.Millisecond)
	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	t.Logf("the Append the call gave up on committed: %t", len(rs) == 4)
	require.NoError(t, s.Append(kctx, id, human("q"), ai("a")), "the retry under the same key")
	time.Sleep(200 * time.Millisecond)
	rs, err = s.All(ctx, id)
	require.NoError(t, err)
	got := make([]string, len(rs))
	for i, r := range rs {
		got[i] = r.Message.GetContent()
	}
	assert.Equal(t, []string{"before", "ok", "q", "a"}, got, "the turn is stored exactly once")
}

// TestErrorsThatKnowTheOutcome: an error before anything was sent, an
// error the server reported (the transaction rolled back), or a
// cancellation the server answered (Open's pools ask it to cancel and
// wait for its answer) says nothing was stored: it does not wrap
// store.ErrOutcomeUnknown.
func TestErrorsThatKnowTheOutcome(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("known")
	s := open(t, pgstore.WithTablePrefix(prefix))
	id := memstack.Identity{Tenant: "acme", User: "outcome", Conversation: "known"}
	require.NoError(t, s.Append(ctx, id, human("before")))
	require.NoError(t, s.Append(ctx, id, human("warm-up"))) // the statements are prepared
	unknown := func(t *testing.T, err error, what string) {
		t.Helper()
		require.Error(t, err, what)
		assert.False(t, errors.Is(err, store.ErrOutcomeUnknown), "%s: %v", what, err)
	}
	stored := func(t *testing.T) int {
		t.Helper()
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		return len(rs)
	}

	t.Run("a context already done", func(t *testing.T) {
		done, cancel := context.WithCancel(ctx)
		cancel()
		unknown(t, s.Append(done, id, human("q")), "Append")
		_, err := s.PutState(done, id, "summary", []byte("x"), 0)
		unknown(t, err, "PutState")
		unknown(t, s.Clear(done, id), "Clear")
		unknown(t, s.Forget(done, id), "Forget")
	})

	t.Run("the server refuses the transaction", func(t *testing.T) {
		ro, err := pgstore.Open(ctx, testsvc.Postgres(t)+"&default_transaction_read_only=on", pgstore.WithTablePrefix(prefix), pgstore.WithoutDDL())
		require.NoError(t, err)
		defer ro.Close()
		unknown(t, ro.Append(ctx, id, human("q")), "Append in a read-only transaction")
		assert.Equal(t, 2, stored(t))
	})

	t.Run("a cancellation the server answered", func(t *testing.T) {
		release := lockMessages(t, prefix)
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := s.Append(cctx, id, human("q"))
		cancel()
		release()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		t.Logf("the cancelled Append: %v", err)
		unknown(t, err, "Append cancelled by the server")
		assert.Equal(t, 2, stored(t), "the cancelled transaction rolled back")
	})

	t.Run("a closed store", func(t *testing.T) {
		c := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithoutDDL())
		require.NoError(t, c.Close())
		unknown(t, c.Append(ctx, id, human("q")), "Append on a closed store")
	})
}
