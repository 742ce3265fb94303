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

// TestChangeFeedFollowsTheStoresLifetimes: a store with a TTL gives its
// users' change feeds the TTL (they expire with the conversations they
// name), one without gives them none; a store that may evict keys keeps
// no feed and says so (Follows false, Changed errors.ErrUnsupported),
// and its appends write none; a tenant's scope is never followed.
func TestChangeFeedFollowsTheStoresLifetimes(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	raw := rawClient(t, addr)
	id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}
	user := store.UserScope("acme", "ana")
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{{"no TTL", 0}, {"TTL", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := uniquePrefix()
			s := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithTTL(tc.ttl))
			require.True(t, s.Follows(user))
			require.False(t, s.Follows(store.TenantScope("acme")), "a tenant's scope is not followed")
			_, _, err := s.Changed(ctx, store.TenantScope("acme"), 0)
			require.ErrorIs(t, err, errors.ErrUnsupported)

			require.NoError(t, s.Append(ctx, id, human("q"), ai("a")))
			ids, mark, err := s.Changed(ctx, user, 0)
			require.NoError(t, err)
			assert.Equal(t, []memstack.Identity{id}, ids)
			assert.Positive(t, mark)
			set, counter := feedKeysOf(prefix, redisstore.DefaultNamespace, id)
			for _, key := range []string{set, counter} {
				pttl, err := raw.PTTL(ctx, key).Result()
				require.NoError(t, err)
				if tc.ttl == 0 {
					assert.Equal(t, time.Duration(-1), pttl, "%s never expires", key)
				} else {
					assert.InDelta(t, float64(tc.ttl), float64(pttl), float64(time.Minute), "%s expires with the conversation", key)
				}
			}
		})
	}
	t.Run("eviction allowed", func(t *testing.T) {
		prefix := uniquePrefix()
		s := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithEvictionAllowed())
		require.False(t, s.Follows(user))
		require.NoError(t, s.Append(ctx, id, human("q"), ai("a")))
		_, _, err := s.Changed(ctx, user, 0)
		require.ErrorIs(t, err, errors.ErrUnsupported)
		set, counter := feedKeysOf(prefix, redisstore.DefaultNamespace, id)
		n, err := raw.Exists(ctx, set, counter).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "no feed is written")
	})
}
