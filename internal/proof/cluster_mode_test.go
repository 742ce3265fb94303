package proof_test

import (
	"context"
	"testing"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/stretchr/testify/require"
)

// A user-scoped Recall (the default) over a plain client of a Redis
// server in cluster mode: 8fd8b34 drops the feed there, so saves journal
// through AppendBatches, which fails with CROSSSLOT: every save fails.
func TestUserRecall_OnAServerInClusterMode(t *testing.T) {
	cluster := testsvc.StartRedisCluster(t)
	s, err := redisstore.Open(context.Background(), cluster.Addr())
	require.NoError(t, err)
	defer s.Close()
	r, err := memories.NewRecall(memories.WithStore(s))
	require.NoError(t, err)
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"})
	require.NoError(t, r.SaveContext(ctx, map[string]any{"input": "hello"}, map[string]any{"output": "hi"}))
}
