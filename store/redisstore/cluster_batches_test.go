package redisstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// On a plain client of a server in cluster mode the store now keeps no
// feed, so a user-scoped Recall journals, through AppendBatches (the turn
// and the journal entry, two identities: two slots). AppendBatches should
// refuse with errors.ErrUnsupported (the Recall then appends one by one)
// or succeed; a CROSSSLOT failure fails every save.
func TestAppendBatchesOnAServerInClusterMode(t *testing.T) {
	cluster := testsvc.StartRedisCluster(t)
	s := open(t, cluster.Addr(), redisstore.WithKeyPrefix(uniquePrefix()))
	require.False(t, s.Follows(store.UserScope("acme", "ana")))
	a := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}
	j := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "journal"}
	err := s.AppendBatches(context.Background(),
		store.Batch{ID: a, Messages: []llms.ChatMessage{human("q"), ai("a")}},
		store.Batch{ID: j, Messages: []llms.ChatMessage{human("entry")}})
	if err != nil {
		require.ErrorIs(t, err, errors.ErrUnsupported, "AppendBatches failed otherwise: %v", err)
	}
}
