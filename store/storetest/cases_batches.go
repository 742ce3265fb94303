package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// testAppendBatches: a store.MultiAppender stores every batch of one
// AppendBatches as Append would — in order after what the identity holds,
// each under its own append key, dated from ctx — or none of them: a
// batch with an invalid key, or a done context, stores nothing of the
// others. A batch whose key its identity has already stores nothing; the
// others of the call still are; an identity given in two batches gets
// both, in order.
func testAppendBatches(t *testing.T, e *env) {
	s := e.store()
	m := optional[store.MultiAppender](t, s, "store.MultiAppender")
	journal := memstack.Identity{Tenant: alice.Tenant, User: alice.User, Conversation: "\x00journal"}
	at := time.Date(2023, 5, 8, 10, 0, 0, 0, time.UTC)
	ctx := memstack.WithTime(e.ctx, at)
	mustAppend(t, s, alice, human("before"))

	err := m.AppendBatches(ctx, store.Batch{ID: bob, Messages: []llms.ChatMessage{human("probe")}}, store.Batch{ID: journal, Messages: []llms.ChatMessage{human("probe")}})
	if errors.Is(err, errors.ErrUnsupported) {
		assert.Empty(t, mustAll(t, s, bob), "a refused call stores nothing")
		t.Skipf("%T cannot append these identities in one step: %v", s, err)
	}
	require.NoError(t, err)
	require.NoError(t, s.Clear(e.ctx, bob))
	require.NoError(t, s.Clear(e.ctx, journal))

	require.NoError(t, m.AppendBatches(ctx,
		store.Batch{ID: alice, Messages: []llms.ChatMessage{human("h1"), ai("a1")}, Key: "turn-1"},
		store.Batch{ID: journal, Messages: []llms.ChatMessage{human("alice")}, Key: "entry-1"},
		store.Batch{ID: bob}, // no messages: skipped
	))
	all := mustAll(t, s, alice)
	require.Len(t, all, 3)
	assert.Equal(t, []string{"before", "h1", "a1"}, contentsOf(all))
	requireTimes(t, at, all[1:], "the batch's messages")
	assert.Equal(t, []string{"alice"}, contentsOf(mustAll(t, s, journal)))
	assert.Empty(t, mustAll(t, s, bob))

	// The same call again (a retried save): every key is there already.
	require.NoError(t, m.AppendBatches(ctx,
		store.Batch{ID: alice, Messages: []llms.ChatMessage{human("h1"), ai("a1")}, Key: "turn-1"},
		store.Batch{ID: journal, Messages: []llms.ChatMessage{human("alice")}, Key: "entry-1"},
	))
	assert.Len(t, mustAll(t, s, alice), 3, "a batch whose key is stored stores nothing")
	assert.Len(t, mustAll(t, s, journal), 1)
	// One key stored already, one new, and a batch without a key: the
	// known one is skipped, the others are stored; the append key in ctx
	// is not used.
	require.NoError(t, m.AppendBatches(store.WithAppendKey(ctx, "entry-9"),
		store.Batch{ID: alice, Messages: []llms.ChatMessage{human("h1"), ai("a1")}, Key: "turn-1"},
		store.Batch{ID: journal, Messages: []llms.ChatMessage{human("alice again")}, Key: "entry-2"},
		store.Batch{ID: bob, Messages: []llms.ChatMessage{human("b1")}},
		store.Batch{ID: bob, Messages: []llms.ChatMessage{ai("b2")}},
	))
	assert.Len(t, mustAll(t, s, alice), 3)
	assert.Equal(t, []string{"alice", "alice again"}, contentsOf(mustAll(t, s, journal)))
	assert.Equal(t, []string{"b1", "b2"}, contentsOf(mustAll(t, s, bob)), "two batches of one identity, in order")

	// A bad batch, or a done context: nothing of the call is stored.
	for _, key := range []string{"has space", string(make([]byte, 201))} {
		err := m.AppendBatches(ctx,
			store.Batch{ID: alice, Messages: []llms.ChatMessage{human("never")}, Key: "turn-bad"},
			store.Batch{ID: journal, Messages: []llms.ChatMessage{human("never")}, Key: key},
		)
		require.Error(t, err, "key %q", key)
		assert.ErrorIs(t, err, store.ErrInvalidArgument, "key %q", key)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	err = m.AppendBatches(done,
		store.Batch{ID: alice, Messages: []llms.ChatMessage{human("never")}, Key: "turn-done"},
		store.Batch{ID: journal, Messages: []llms.ChatMessage{human("never")}, Key: "entry-done"},
	)
	require.ErrorIs(t, err, context.Canceled)
	assert.Len(t, mustAll(t, s, alice), 3, "nothing of a failed call is stored")
	assert.Len(t, mustAll(t, s, journal), 2)
	require.NoError(t, m.AppendBatches(ctx), "no batches")
}
