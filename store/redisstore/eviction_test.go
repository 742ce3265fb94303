package redisstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store/redisstore"
)

// scanKeys returns every key matching pattern.
func scanKeys(t *testing.T, raw *redis.Client, pattern string) []string {
	t.Helper()
	var out []string
	iter := raw.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	require.NoError(t, iter.Err())
	return out
}

// TestEvictingServer runs against a server configured as a cache
// (maxmemory-policy allkeys-lru): New refuses it without
// WithEvictionAllowed, naming the policy; with it, Forget still removes
// every namespace of the identity after the identity's namespace set was
// evicted (a DEL stands for the eviction).
func TestEvictingServer(t *testing.T) {
	t.Parallel() // its own server
	srv := testsvc.StartRedis(t)
	ctx := context.Background()
	raw := rawClient(t, srv.Addr())
	require.NoError(t, raw.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	prefix := uniquePrefix()

	t.Run("refused without the option", func(t *testing.T) {
		for _, name := range []string{"Open", "New"} {
			var err error
			if name == "Open" {
				_, err = redisstore.Open(ctx, srv.Addr(), redisstore.WithKeyPrefix(prefix))
			} else {
				_, err = redisstore.New(ctx, raw, redisstore.WithKeyPrefix(prefix))
			}
			require.ErrorIs(t, err, redisstore.ErrEvictionPolicy, name)
			assert.Contains(t, err.Error(), `maxmemory-policy is "allkeys-lru"`, name)
			assert.Contains(t, err.Error(), "noeviction", name)
			assert.Contains(t, err.Error(), "WithEvictionAllowed", name)
		}
	})

	t.Run("Forget finds every namespace without the namespace set", func(t *testing.T) {
		var stores []*redisstore.Store
		for _, ns := range []string{"recent", "facts", "summary"} {
			stores = append(stores, open(t, srv.Addr(), redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace(ns), redisstore.WithEvictionAllowed()))
		}
		for _, id := range []memstack.Identity{alice, alice10, bob} {
			for _, s := range stores {
				require.NoError(t, s.Append(ctx, id, human("hi "+id.User), ai("hello")))
				create(t, s, id, "summary", []byte("likes tea"))
			}
		}
		require.NoError(t, stores[2].Clear(ctx, alice)) // a namespace with only a mark
		before := map[string]string{}
		for _, key := range scanKeys(t, raw, prefix+":*") {
			before[key] = dump(t, raw, key)
		}
		// Evicted: the set that names alice's namespaces.
		require.NoError(t, raw.Del(ctx, keysOf(prefix, "recent", alice).nss).Err())

		require.NoError(t, stores[0].Forget(ctx, alice))

		assert.Empty(t, scanKeys(t, raw, prefix+":{"+alice.Key()+"}*"), "no key of alice is left in any namespace")
		for key, d := range before {
			if isKeyOf(key, prefix, alice) || key == keysOf(prefix, "", alice).forgotten {
				continue
			}
			assert.Equal(t, d, dump(t, raw, key), "%s is untouched", key)
		}
		for _, s := range stores {
			rs, err := s.All(ctx, alice10)
			require.NoError(t, err)
			assert.Equal(t, []string{"hi alice", "hello"}, contents(rs))
		}
	})
}

// TestPolicyThatCannotBeRead connects as a user that may not run CONFIG,
// as on managed services that refuse it: New cannot tell whether the
// server evicts and refuses it unless WithEvictionAllowed is given.
func TestPolicyThatCannotBeRead(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	admin := rawClient(t, addr)
	user := "memstack-" + randomHex(6)
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", user, "on", ">secret", "~*", "&*", "+@all", "-config").Err())
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", user).Err() })
	url := "redis://" + user + ":secret@" + addr

	_, err := redisstore.Open(ctx, url, redisstore.WithKeyPrefix(uniquePrefix()))
	require.ErrorIs(t, err, redisstore.ErrEvictionPolicy)
	assert.Contains(t, err.Error(), "cannot read maxmemory-policy")
	assert.Contains(t, err.Error(), "WithEvictionAllowed")

	s, err := redisstore.Open(ctx, url, redisstore.WithKeyPrefix(uniquePrefix()), redisstore.WithEvictionAllowed())
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Append(ctx, alice, human("hi")))
	require.NoError(t, s.Forget(ctx, alice))
	rs, err := s.All(ctx, alice)
	require.NoError(t, err)
	assert.Empty(t, rs)
}

// dump returns the serialized value of key (DUMP): equal dumps are equal
// values, byte for byte.
func dump(t *testing.T, raw *redis.Client, key string) string {
	t.Helper()
	d, err := raw.Dump(context.Background(), key).Result()
	require.NoError(t, err, "DUMP %s", key)
	return d
}

// isKeyOf reports whether key is one of id's keys under prefix.
func isKeyOf(key, prefix string, id memstack.Identity) bool {
	tag := prefix + ":{" + id.Key() + "}:"
	return len(key) >= len(tag) && key[:len(tag)] == tag
}

// TestClearAndForgetOnAFullServer fills a noeviction server past its
// maxmemory: writes that add data fail with Redis's OOM error, but Clear
// and Forget still run — they delete before they write their version — so
// an operator can free memory, and a user can be forgotten, on a full
// server.
func TestClearAndForgetOnAFullServer(t *testing.T) {
	t.Parallel() // its own server
	srv := testsvc.StartRedis(t)
	ctx := context.Background()
	raw := rawClient(t, srv.Addr())
	prefix := uniquePrefix()
	s := open(t, srv.Addr(), redisstore.WithKeyPrefix(prefix))
	big := strings.Repeat("x", 100_000)
	for _, id := range []memstack.Identity{alice, bob} {
		for range 10 {
			require.NoError(t, s.Append(ctx, id, human(big)))
		}
		create(t, s, id, "summary", []byte("s"))
	}
	require.NoError(t, raw.ConfigSet(ctx, "maxmemory", "1mb").Err())
	t.Cleanup(func() { _ = raw.ConfigSet(context.Background(), "maxmemory", "0").Err() })

	err := s.Append(ctx, alice, human("more"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "OOM", "Redis's own error")
	assert.NotErrorIs(t, err, context.Canceled)

	// Tail reads on a full server, also a list from before the index,
	// whose index it cannot store: the next Tail tries again.
	bobSys := keysOf(prefix, "default", bob).sys
	require.NoError(t, raw.Del(ctx, bobSys).Err())
	for range 2 {
		rs, err := s.Tail(ctx, bob, 2, 0)
		require.NoError(t, err, "Tail on a full server")
		assert.Len(t, rs, 2)
		assert.Zero(t, raw.Exists(ctx, bobSys).Val(), "no index stored on a full server")
	}
	rs, err := s.Tail(ctx, alice, 2, 0)
	require.NoError(t, err)
	assert.Len(t, rs, 2)

	require.NoError(t, s.Clear(ctx, alice), "Clear runs on a full server")
	rs, err = s.All(ctx, alice)
	require.NoError(t, err)
	assert.Empty(t, rs)
	st, err := s.GetState(ctx, alice, "summary")
	require.NoError(t, err)
	assert.False(t, st.Exists())

	require.NoError(t, s.Forget(ctx, bob), "Forget runs on a full server")
	assert.Empty(t, scanKeys(t, raw, prefix+":{"+bob.Key()+"}*"))
	f, err := raw.Get(ctx, keysOf(prefix, "", bob).forgotten).Int64()
	require.NoError(t, err, "the forgotten version is stored")
	assert.Positive(t, f)
}
