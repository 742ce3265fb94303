package memories_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// Search returns what LoadItems offers a budget — the same units, scores
// and priorities — best first, each with its conversation and messages.
func TestRecallSearch_IsLoadItemsWithConversations(t *testing.T) {
	st := store.NewInMemory()
	recall, err := memories.NewRecall(memories.WithStore(st), memories.WithK(2))
	require.NoError(t, err)
	ana := memstack.Identity{Tenant: "acme", User: "ana"}
	day := time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)
	save := func(conv string, at time.Time, in, out string) {
		id := ana
		id.Conversation = conv
		ctx := memstack.WithTime(memstack.WithIdentity(context.Background(), id), at)
		require.NoError(t, recall.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}))
	}
	save("monday", day, "Which database should we use?", "We settled on PostgreSQL.")
	save("monday", day.Add(time.Hour), "What is the budget?", "The budget is 40k euros.")
	save("tuesday", day.AddDate(0, 0, 1), "Lunch?", "Sushi at noon.")
	save("tuesday", day.AddDate(0, 0, 1).Add(time.Hour), "Did we settle the database?", "Yes, PostgreSQL 16.")

	ana.Conversation = "wednesday"
	ctx := memstack.WithIdentity(context.Background(), ana)
	query := "which database did we settle on"
	matches, err := recall.Search(ctx, query)
	require.NoError(t, err)
	items, err := recall.LoadItems(ctx, map[string]any{"input": query})
	require.NoError(t, err)
	require.Len(t, matches, len(items.List), "one match per item offered")
	require.NotEmpty(t, matches)

	byID := map[string]memories.RecallMatch{}
	for i, m := range matches {
		if i > 0 {
			assert.GreaterOrEqual(t, matches[i-1].Score, m.Score, "best first")
		}
		assert.Contains(t, []string{"monday", "tuesday"}, m.Conversation.Conversation)
		assert.Equal(t, "ana", m.Conversation.User)
		byID[m.Conversation.Conversation+"/"+strconv.FormatInt(m.Seq, 10)] = m
	}
	for _, it := range items.List {
		var found *memories.RecallMatch
		for _, m := range matches {
			if strconv.FormatInt(m.Seq, 10) == it.ID && m.Time.Equal(it.Time) {
				found = &m
				break
			}
		}
		if assert.NotNil(t, found, "item %s %q has a match", it.ID, it.Text) {
			assert.Equal(t, it.Priority, found.Score, "item %s", it.ID)
			assert.Equal(t, it.Score != 0, found.Hit, "item %s", it.ID)
		}
	}
	top := matches[0]
	assert.True(t, top.Hit)
	require.NotEmpty(t, top.Messages)
	assert.Contains(t, top.Messages[0].GetContent(), "database", "a turn unit: the question that matched")

	// The matches are copies.
	top.Messages[0] = llms.HumanChatMessage{Content: "changed"}
	again, err := recall.Search(ctx, query)
	require.NoError(t, err)
	assert.NotEqual(t, "changed", again[0].Messages[0].GetContent())

	// Nothing for a blank query or another user.
	none, err := recall.Search(ctx, "  ")
	require.NoError(t, err)
	assert.Empty(t, none)
	bo := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "bo"})
	none, err = recall.Search(bo, query)
	require.NoError(t, err)
	assert.Empty(t, none)
}
