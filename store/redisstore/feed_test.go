package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
)

var (
	feedAna  = store.UserScope("acme", "ana")
	feedConv = memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}
)

// TestChangeFeedOnlyWhereItHolds: a store without a TTL on one plain
// server keeps its users' change feeds (no expiry: they name
// conversations that do not expire either); a store with a TTL (a feed
// would name conversations that expired), one that may evict keys (an
// evicted feed would lose changes) and a plain client of a server in
// cluster mode (the feed lives in another slot than the conversation)
// keep none, say so (Follows false, Changed errors.ErrUnsupported), and
// append and forget as before; a tenant's scope is never followed.
func TestChangeFeedOnlyWhereItHolds(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	raw := rawClient(t, addr)

	prefix := uniquePrefix()
	s := open(t, addr, redisstore.WithKeyPrefix(prefix))
	require.True(t, s.Follows(feedAna))
	require.False(t, s.Follows(store.TenantScope("acme")), "a tenant's scope is not followed")
	_, _, err := s.Changed(ctx, store.TenantScope("acme"), 0)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.NoError(t, s.Append(ctx, feedConv, human("q"), ai("a")))
	ids, mark, err := s.Changed(ctx, feedAna, 0)
	require.NoError(t, err)
	assert.Equal(t, []memstack.Identity{feedConv}, ids)
	assert.Positive(t, mark)
	set, counter := feedKeysOf(prefix, feedConv)
	for _, key := range []string{set, counter} {
		pttl, err := raw.PTTL(ctx, key).Result()
		require.NoError(t, err)
		assert.Equal(t, time.Duration(-1), pttl, "%s exists and never expires", key)
	}

	cluster := testsvc.StartRedisCluster(t)
	for name, open := range map[string]func(prefix string) *redisstore.Store{
		"TTL": func(p string) *redisstore.Store {
			return open(t, addr, redisstore.WithKeyPrefix(p), redisstore.WithTTL(time.Hour))
		},
		"eviction allowed": func(p string) *redisstore.Store {
			return open(t, addr, redisstore.WithKeyPrefix(p), redisstore.WithEvictionAllowed())
		},
		"server in cluster mode": func(p string) *redisstore.Store {
			return open(t, cluster.Addr(), redisstore.WithKeyPrefix(p))
		},
	} {
		t.Run(name, func(t *testing.T) {
			prefix := uniquePrefix()
			s := open(prefix)
			require.False(t, s.Follows(feedAna))
			require.NoError(t, s.Append(ctx, feedConv, human("q"), ai("a")), "Append")
			_, _, err := s.Changed(ctx, feedAna, 0)
			require.ErrorIs(t, err, errors.ErrUnsupported)
			all, err := s.All(ctx, feedConv)
			require.NoError(t, err)
			assert.Len(t, all, 2)
			require.NoError(t, s.Forget(ctx, feedConv), "Forget")
			_, err = s.ForgetScope(ctx, feedAna)
			require.NoError(t, err, "ForgetScope")
			if name != "server in cluster mode" {
				set, counter := feedKeysOf(prefix, feedConv)
				n, err := raw.Exists(ctx, set, counter).Result()
				require.NoError(t, err)
				assert.Zero(t, n, "no feed is written")
			}
		})
	}
}

// TestChangeFeedForgottenEverywhere: a conversation forgotten through a
// Store of another namespace, or of one that keeps no feed itself (a TTL,
// eviction allowed), leaves its user's feed; a user forgotten whole leaves
// no feed. Nothing names the conversation afterwards.
func TestChangeFeedForgottenEverywhere(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	raw := rawClient(t, addr)
	for name, opts := range map[string][]redisstore.Option{
		"another namespace": {redisstore.WithNamespace("other")},
		"a TTL":             {redisstore.WithNamespace("other"), redisstore.WithTTL(time.Hour)},
		"eviction allowed":  {redisstore.WithEvictionAllowed()},
	} {
		t.Run(name, func(t *testing.T) {
			prefix := uniquePrefix()
			s := open(t, addr, redisstore.WithKeyPrefix(prefix))
			forgetter := open(t, addr, append([]redisstore.Option{redisstore.WithKeyPrefix(prefix)}, opts...)...)
			secret := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "secret-diagnosis"}
			require.NoError(t, s.Append(ctx, secret, human("q")))
			require.NoError(t, s.Append(ctx, feedConv, human("q")))
			require.NoError(t, forgetter.Forget(ctx, secret))
			set, _ := feedKeysOf(prefix, secret)
			_, err := raw.ZScore(ctx, set, secret.Key()).Result()
			require.Error(t, err, "the forgotten conversation is out of the feed")
			ids, _, err := s.Changed(ctx, feedAna, 0)
			require.NoError(t, err)
			assert.Equal(t, []memstack.Identity{feedConv}, ids)

			_, err = forgetter.ForgetScope(ctx, feedAna)
			require.NoError(t, err)
			n, err := raw.Exists(ctx, set).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "no feed of a forgotten user")
		})
	}
}

// TestChangeFeedMarksOnlyGrow: marks are drawn from the tenant's counter,
// so forgetting a user leaves the counter and an append after the forget
// gets a mark above every mark a reader holds, even when the counter ran
// ahead of the server's clock; forgetting the tenant deletes the counter
// only once the clock has passed it.
func TestChangeFeedMarksOnlyGrow(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	raw := rawClient(t, addr)
	for _, scope := range []store.Scope{feedAna, store.TenantScope("acme")} {
		t.Run(scope.String(), func(t *testing.T) {
			prefix := uniquePrefix()
			s := open(t, addr, redisstore.WithKeyPrefix(prefix))
			_, counter := feedKeysOf(prefix, feedConv)
			now, err := raw.Time(ctx).Result()
			require.NoError(t, err)
			// The counter ahead of the clock, as after a failover to a
			// host whose clock is behind.
			require.NoError(t, raw.Set(ctx, counter, now.Add(time.Second).UnixMicro(), 0).Err())
			require.NoError(t, s.Append(ctx, feedConv, human("before")))
			_, seen, err := s.Changed(ctx, feedAna, 0)
			require.NoError(t, err)
			_, err = s.ForgetScope(ctx, scope)
			require.NoError(t, err)
			require.NoError(t, s.Append(ctx, feedConv, human("after the forget")))
			ids, _, err := s.Changed(ctx, feedAna, seen)
			require.NoError(t, err)
			assert.Equal(t, []memstack.Identity{feedConv}, ids, "the append after the forget is a change")
		})
	}
}
