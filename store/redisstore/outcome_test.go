package redisstore_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/storetest"
)

// A write whose reply never came may have been applied: its error says so
// (store.ErrOutcomeUnknown), and a retry under the same append key stores
// the turn exactly once.

// TestOutcomeUnknownWhenTheReplyIsLost loses the reply of each kind of
// write after the server ran its script, on a client that does not send
// it again (MaxRetries -1), so the call fails although the write was
// applied.
func TestOutcomeUnknownWhenTheReplyIsLost(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	kctx := store.WithAppendKey(ctx, "turn-1")
	var version int64 // of the state "summary" each case starts with
	cases := []struct {
		name string
		run  func(s *redisstore.Store) error
		// check runs after the lost reply, on a store whose client
		// retries, and checks the write was applied.
		check func(t *testing.T, s *redisstore.Store)
	}{
		{"Append under an append key", func(s *redisstore.Store) error {
			return s.Append(kctx, alice, human("q"), ai("a"))
		}, func(t *testing.T, s *redisstore.Store) {
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, []string{"before", "q", "a"}, contents(rs), "the lost Append was applied")
			require.NoError(t, s.Append(kctx, alice, human("q"), ai("a")), "the retry under the same key")
			rs, err = s.All(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, []string{"before", "q", "a"}, contents(rs), "the retry under the same key stores the turn once")
		}},
		{"PutState", func(s *redisstore.Store) error {
			// The version create returned (the reply lost is the PutState's).
			_, err := s.PutState(ctx, alice, "summary", []byte("new"), version)
			return err
		}, func(t *testing.T, s *redisstore.Store) {
			st, err := s.GetState(ctx, alice, "summary")
			require.NoError(t, err)
			assert.Equal(t, "new", string(st.Value))
		}},
		{"Clear", func(s *redisstore.Store) error {
			return s.Clear(ctx, alice)
		}, func(t *testing.T, s *redisstore.Store) {
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			assert.Empty(t, rs)
		}},
		{"RemovePrefix", func(s *redisstore.Store) error {
			_, err := s.RemovePrefix(ctx, alice, math.MaxInt64)
			return err
		}, func(t *testing.T, s *redisstore.Store) {
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			assert.Empty(t, rs)
		}},
		{"Rewrite", func(s *redisstore.Store) error {
			_, err := s.Rewrite(ctx, alice, math.MaxInt64, false, human("q2"))
			return err
		}, func(t *testing.T, s *redisstore.Store) {
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, []string{"q2"}, contents(rs))
		}},
		{"Forget", func(s *redisstore.Store) error {
			return s.Forget(ctx, alice)
		}, func(t *testing.T, s *redisstore.Store) {
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			assert.Empty(t, rs)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prefix := uniquePrefix()
			p := storetest.NewFaultProxy(t, addr)
			client := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = client.Close() })
			s, err := redisstore.New(ctx, client, redisstore.WithKeyPrefix(prefix))
			require.NoError(t, err)
			warmScripts(t, s)
			require.NoError(t, s.Append(ctx, alice, human("before")))
			version = create(t, s, alice, "summary", []byte("old"))
			if c.name == "Forget" {
				// Forget reads the namespaces first: lose the script's reply.
				p.DropReply(2)
			} else {
				p.DropReply(1)
			}
			err = c.run(s)
			require.True(t, p.Disarm(), "the reply was lost")
			require.Error(t, err, "the call heard no reply")
			assert.ErrorIs(t, err, store.ErrOutcomeUnknown, "a write whose reply was lost may have been applied: %v", err)
			c.check(t, open(t, addr, redisstore.WithKeyPrefix(prefix)))
		})
	}
}

// TestOutcomeUnknownAfterADeadline sends an Append under an append key to
// a server busy with a long script: the call returns at its deadline, the
// server runs the Append afterwards (what made 237 Appends that returned
// "context deadline exceeded" stored), and a retry under the same key
// stores the turn once.
func TestOutcomeUnknownAfterADeadline(t *testing.T) {
	t.Parallel() // blocks its own server
	srv := testsvc.StartRedis(t)
	s := open(t, srv.Addr())
	raw := rawClient(t, srv.Addr())
	ctx := context.Background()
	kctx := store.WithAppendKey(ctx, "turn-1")
	warmScripts(t, s)
	require.NoError(t, s.Append(ctx, alice, human("before")))

	busy := make(chan error, 1)
	go func() {
		busy <- raw.Eval(ctx, `
local t = redis.call('TIME')
local start = tonumber(t[1]) * 1000000 + tonumber(t[2])
repeat
  t = redis.call('TIME')
until tonumber(t[1]) * 1000000 + tonumber(t[2]) - start > 1000000
return 1`, nil).Err()
	}()
	// Wait until the script runs: the server answers nobody.
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = probe.Close() })
	require.Eventually(t, func() bool {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		defer cancel()
		return probe.Ping(pctx).Err() != nil
	}, 5*time.Second, time.Millisecond, "the busy script runs")
	cctx, cancel := context.WithTimeout(kctx, 200*time.Millisecond)
	err := s.Append(cctx, alice, human("q"), ai("a"))
	cancel()
	require.Error(t, err, "the server was busy past the deadline")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, store.ErrOutcomeUnknown, "an Append sent before its deadline may have been applied: %v", err)
	t.Logf("the Append's error: %v", err)
	require.NoError(t, <-busy)

	rs, err := s.All(ctx, alice)
	require.NoError(t, err)
	t.Logf("after the busy script: %q", contents(rs))
	assert.Contains(t, [][]string{{"before"}, {"before", "q", "a"}}, contents(rs), "stored whole or not at all")
	require.NoError(t, s.Append(kctx, alice, human("q"), ai("a")), "the retry under the same key")
	rs, err = s.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"before", "q", "a"}, contents(rs), "the turn is stored exactly once")
}

// TestErrorsThatKnowTheOutcome: an error before anything was sent, or the
// server's error reply from within the script, says nothing was applied:
// it does not wrap store.ErrOutcomeUnknown.
func TestErrorsThatKnowTheOutcome(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	s := open(t, addr, redisstore.WithKeyPrefix(prefix))
	raw := rawClient(t, addr)
	require.NoError(t, s.Append(ctx, alice, human("before")))
	st, err := s.GetState(ctx, alice, "summary")
	require.NoError(t, err)

	done, cancel := context.WithCancel(ctx)
	cancel()
	writes := map[string]func(ctx context.Context) error{
		"Append": func(ctx context.Context) error { return s.Append(ctx, alice, human("q")) },
		"PutState": func(ctx context.Context) error {
			_, err := s.PutState(ctx, alice, "summary", []byte("x"), st.Version)
			return err
		},
		"Clear":  func(ctx context.Context) error { return s.Clear(ctx, alice) },
		"Forget": func(ctx context.Context) error { return s.Forget(ctx, alice) },
		"RemovePrefix": func(ctx context.Context) error {
			_, err := s.RemovePrefix(ctx, alice, math.MaxInt64)
			return err
		},
		"Rewrite": func(ctx context.Context) error {
			_, err := s.Rewrite(ctx, alice, 0, false, human("q"))
			return err
		},
	}
	for name, w := range writes {
		err := w(done)
		require.ErrorIs(t, err, context.Canceled, name)
		assert.False(t, errors.Is(err, store.ErrOutcomeUnknown), "%s with a context already done: %v", name, err)
	}

	// An invalid append key is refused before anything is sent.
	err = s.Append(store.WithAppendKey(ctx, "no spaces"), alice, human("q"))
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	assert.False(t, errors.Is(err, store.ErrOutcomeUnknown), "%v", err)

	// The server refuses a command inside the script (the list is not a
	// list): the script ran, and changed nothing.
	k := keysOf(prefix, redisstore.DefaultNamespace, alice)
	require.NoError(t, raw.Del(ctx, k.msgs, k.sys).Err())
	require.NoError(t, raw.Set(ctx, k.msgs, "not a list", 0).Err())
	err = s.Append(ctx, alice, human("q"))
	require.Error(t, err)
	assert.False(t, errors.Is(err, store.ErrOutcomeUnknown), "an error reply from within the script: %v", err)

	// A closed store sends nothing.
	require.NoError(t, s.Close())
	err = s.Append(ctx, alice, human("q"))
	require.ErrorIs(t, err, redisstore.ErrClosed)
	assert.False(t, errors.Is(err, store.ErrOutcomeUnknown), "%v", err)
}
