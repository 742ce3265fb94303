package memories_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// batching is a real in-memory store that is also a store.MultiAppender:
// AppendBatches appends each batch under its key (the store's own
// Append, one after another: enough to see what a Recall asks of it) and
// counts the calls, as Append's are counted.
type batching struct {
	*store.InMemory
	appends, batches atomic.Int64
}

func (s *batching) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	s.appends.Add(1)
	return s.InMemory.Append(ctx, id, msgs...)
}

func (s *batching) AppendBatches(ctx context.Context, batches ...store.Batch) error {
	s.batches.Add(1)
	for _, b := range batches {
		if len(b.Messages) == 0 {
			continue
		}
		if err := s.InMemory.Append(store.WithAppendKey(ctx, b.Key), b.ID, b.Messages...); err != nil {
			return err
		}
	}
	return nil
}

// A Recall searching the user's conversations, over a store.MultiAppender,
// stores a turn and its journal entry in one AppendBatches (no Append);
// another replica then finds the turn from a new conversation. Under a
// save key, in a stack sharing the store, a retried save stores neither
// again.
func TestRecall_TurnAndJournalEntryAreOneWrite(t *testing.T) {
	s := &batching{InMemory: store.NewInMemory()}
	m, err := memories.NewRecall(memories.WithStore(s))
	require.NoError(t, err)
	rsSave(t, m, rsWeek1, rsMay8, "Which database for billing?", "We settled on PostgreSQL.")
	assert.EqualValues(t, 1, s.batches.Load())
	assert.Zero(t, s.appends.Load())
	journal := memstack.Identity{Tenant: rsWeek1.Tenant, User: rsWeek1.User, Conversation: store.UserRecallJournalConversation}
	entries, err := s.All(context.Background(), journal)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Contains(t, entries[0].Message.GetContent(), rsWeek1.Conversation)

	other, err := memories.NewRecall(memories.WithStore(s))
	require.NoError(t, err)
	vars, err := other.LoadMemoryVariables(memstack.WithIdentity(context.Background(), rsWeek2), map[string]any{"input": "which database did we pick for billing?"})
	require.NoError(t, err)
	assert.Contains(t, fmt.Sprint(vars), "We settled on PostgreSQL.")

	// A stack on one store, a save key, the save retried.
	recent, err := memories.NewRecentN(4, memories.WithStore(s))
	require.NoError(t, err)
	ctx := memstack.WithSaveKey(memstack.WithIdentity(context.Background(), rsWeek2), "save-1")
	for range 2 {
		require.NoError(t, recent.SaveContext(ctx, map[string]any{"input": "And the office?"}, map[string]any{"output": "Porto."}))
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "And the office?"}, map[string]any{"output": "Porto."}))
	}
	turns, err := s.All(context.Background(), rsWeek2)
	require.NoError(t, err)
	assert.Len(t, turns, 2, "the turn once")
	entries, err = s.All(context.Background(), journal)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "its journal entry once")
}

// refusing is a store.MultiAppender that cannot append these identities in
// one step (a Redis Cluster): it refuses with errors.ErrUnsupported.
type refusing struct{ *batching }

func (s refusing) AppendBatches(context.Context, ...store.Batch) error {
	s.batches.Add(1)
	return fmt.Errorf("refused: %w", errors.ErrUnsupported)
}

// A MultiAppender that refuses the call stores nothing; the Recall then
// appends the turn and its journal entry one by one, and the save
// succeeds.
func TestRecall_RefusedBatchFallsBackToTwoWrites(t *testing.T) {
	s := refusing{&batching{InMemory: store.NewInMemory()}}
	m, err := memories.NewRecall(memories.WithStore(s))
	require.NoError(t, err)
	rsSave(t, m, rsWeek1, rsMay8, "Which database for billing?", "We settled on PostgreSQL.")
	assert.EqualValues(t, 1, s.batches.Load())
	assert.EqualValues(t, 2, s.appends.Load(), "the turn, then its journal entry")
	journal := memstack.Identity{Tenant: rsWeek1.Tenant, User: rsWeek1.User, Conversation: store.UserRecallJournalConversation}
	entries, err := s.All(context.Background(), journal)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
	turns, err := s.All(context.Background(), rsWeek1)
	require.NoError(t, err)
	assert.Len(t, turns, 2)
}
