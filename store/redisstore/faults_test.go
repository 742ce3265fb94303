package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/storetest"
)

// TestFaults loses replies between go-redis and a real redis-server at
// every point of a write (storetest.RunFaults).
func TestFaults(t *testing.T) {
	addr := testsvc.Redis(t)
	storetest.RunFaults(t, addr, func(tb testing.TB, ns, proxy string) (store.Store, error) {
		return redisstore.Open(context.Background(), proxy, redisstore.WithNamespace(ns))
	})
}

// TestEveryWriteExactlyOnceWhenAReplyIsLost loses the reply of each kind
// of write after the server ran its script (an Append under an append key
// too). Every script is loaded first,
// so the lost reply is the one of the run that changed the data (not a
// NOSCRIPT), and go-redis sends the script again on a new connection: that
// run must change nothing, and the call must report what the first run
// did — for PutState the version it wrote, not a conflict with itself; for
// RemovePrefix and Rewrite the number of messages it removed.
func TestEveryWriteExactlyOnceWhenAReplyIsLost(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	many := func(n int, what string) []llms.ChatMessage {
		out := make([]llms.ChatMessage, n)
		for i := range out {
			out[i] = human(fmt.Sprintf("%s %d", what, i))
		}
		return out
	}
	cases := []struct {
		name string
		// drop is which reply of the call is lost (the chunks of a large
		// RemovePrefix are several scripts).
		drop int
		run  func(t *testing.T, s *redisstore.Store, arm func())
	}{
		{"Append", 1, func(t *testing.T, s *redisstore.Store, arm func()) {
			arm()
			require.NoError(t, s.Append(ctx, alice, human("q"), ai("a")))
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, []string{"before", "q", "a"}, contents(rs), "the turn is stored once")
		}},
		{"Append under an append key", 1, func(t *testing.T, s *redisstore.Store, arm func()) {
			kctx := store.WithAppendKey(ctx, "turn-1")
			arm()
			require.NoError(t, s.Append(kctx, alice, human("q"), ai("a")))
			require.NoError(t, s.Append(kctx, alice, human("q"), ai("a")), "the key's second Append")
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, []string{"before", "q", "a"}, contents(rs), "the turn is stored once")
		}},
		{"PutState creates", 1, func(t *testing.T, s *redisstore.Store, arm func()) {
			st, err := s.GetState(ctx, alice, "new")
			require.NoError(t, err)
			arm()
			v, err := s.PutState(ctx, alice, "new", []byte("value"), st.Version)
			require.NoError(t, err, "a lost reply is not a conflict with the call's own write")
			got, err := s.GetState(ctx, alice, "new")
			require.NoError(t, err)
			assert.Equal(t, store.State{Value: []byte("value"), Version: v}, got)
		}},
		{"PutState updates", 1, func(t *testing.T, s *redisstore.Store, arm func()) {
			st, err := s.GetState(ctx, alice, "summary")
			require.NoError(t, err)
			arm()
			v, err := s.PutState(ctx, alice, "summary", []byte("updated"), st.Version)
			require.NoError(t, err, "a lost reply is not a conflict with the call's own write")
			got, err := s.GetState(ctx, alice, "summary")
			require.NoError(t, err)
			assert.Equal(t, store.State{Value: []byte("updated"), Version: v}, got)
		}},
		{"PutState deletes", 1, func(t *testing.T, s *redisstore.Store, arm func()) {
			st, err := s.GetState(ctx, alice, "summary")
			require.NoError(t, err)
			arm()
			v, err := s.PutState(ctx, alice, "summary", nil, st.Version)
			require.NoError(t, err, "a lost reply is not a conflict with the call's own delete")
			got, err := s.GetState(ctx, alice, "summary")
			require.NoError(t, err)
			assert.Equal(t, store.State{Version: v}, got)
		}},
		{"Clear", 1, func(t *testing.T, s *redisstore.Store, arm func()) {
			arm()
			require.NoError(t, s.Clear(ctx, alice))
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			assert.Empty(t, rs)
			got, err := s.GetState(ctx, alice, "summary")
			require.NoError(t, err)
			assert.False(t, got.Exists())
		}},
		{"RemovePrefix", 1, func(t *testing.T, s *redisstore.Store, arm func()) {
			require.NoError(t, s.Append(ctx, alice, system("pinned"), human("q"), ai("a")))
			arm()
			n, err := s.RemovePrefix(ctx, alice, math.MaxInt64)
			require.NoError(t, err)
			assert.Equal(t, 3, n, "the count of the run that removed them")
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, []string{"pinned"}, contents(rs))
		}},
		{"Rewrite", 1, func(t *testing.T, s *redisstore.Store, arm func()) {
			require.NoError(t, s.Append(ctx, alice, human("q"), ai("a")))
			arm()
			n, err := s.Rewrite(ctx, alice, math.MaxInt64, false, human("q2"), ai("a2"))
			require.NoError(t, err)
			assert.Equal(t, 3, n, "the count of the run that removed them")
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, []string{"q2", "a2"}, contents(rs), "appended once")
		}},
	}
	// A RemovePrefix of 2,500 messages is three chunks: lose the reply of
	// each in turn.
	for drop := 1; drop <= 3; drop++ {
		cases = append(cases, struct {
			name string
			drop int
			run  func(t *testing.T, s *redisstore.Store, arm func())
		}{fmt.Sprintf("RemovePrefix in chunks, reply %d lost", drop), drop, func(t *testing.T, s *redisstore.Store, arm func()) {
			require.NoError(t, s.Append(ctx, alice, many(2500, "old")...))
			require.NoError(t, s.Append(ctx, alice, human("kept")))
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			arm()
			n, err := s.RemovePrefix(ctx, alice, rs[len(rs)-2].Seq)
			require.NoError(t, err)
			assert.Equal(t, 2501, n, "every chunk counted once") // "before" too
			rs, err = s.All(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, []string{"kept"}, contents(rs))
		}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := storetest.NewFaultProxy(t, addr)
			s := open(t, p.Addr(), redisstore.WithKeyPrefix(uniquePrefix()))
			warmScripts(t, s)
			require.NoError(t, s.Append(ctx, alice, human("before")))
			create(t, s, alice, "summary", []byte("old"))
			armed := false
			c.run(t, s, func() { p.DropReply(c.drop); armed = true })
			require.True(t, armed, "the case arms the proxy")
			assert.True(t, p.Disarm(), "the reply was lost")
		})
	}
}

// warmScripts runs every script of the store once, on an identity of its
// own, so the server has them all cached.
func warmScripts(t *testing.T, s *redisstore.Store) {
	t.Helper()
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		w := alice
		w.Conversation = "warm-" + id
		require.NoError(t, s.Append(ctx, w, human("x")))
		st, err := s.GetState(ctx, w, "x")
		require.NoError(t, err)
		_, err = s.PutState(ctx, w, "x", []byte("x"), st.Version)
		require.NoError(t, err)
		_, err = s.Stat(ctx, w)
		require.NoError(t, err)
		_, err = s.Tail(ctx, w, 1, 0)
		require.NoError(t, err)
		_, err = s.RemovePrefix(ctx, w, math.MaxInt64)
		require.NoError(t, err)
		_, err = s.Rewrite(ctx, w, 0, false, human("y"))
		require.NoError(t, err)
		require.NoError(t, s.Clear(ctx, w))
		require.NoError(t, s.Forget(ctx, w))
	}
}
