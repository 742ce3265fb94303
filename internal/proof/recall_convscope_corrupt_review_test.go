package proof_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
)

// TestReviewS30_ConvScopeUnreadableConversationIsNotSilent: a
// conversation-scoped Recall over SQLite's index whose conversation holds
// a message that does not decode, near the hit. Before the change the
// load read the conversation (refreshExchanges) and failed with the
// store's error wrapping store.ErrCorrupt, as the same Recall over the
// in-process index does. Now the conversation is read as "another
// conversation" of a scoped load (readOthers): the ranged read fails, the
// whole read fails, and the conversation is "left out": the load returns
// no error and recalls nothing (and nothing is reported to the hook).
func TestReviewS30_ConvScopeUnreadableConversationIsNotSilent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bad.db")
	st, err := sqlitestore.Open(ctx, path, sqlitestore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c"}
	for i := range 20 {
		h := fmt.Sprintf("filler question %d", i)
		if i == 8 {
			h = "The Lisbon lease renews in March."
		}
		require.NoError(t, st.Append(ctx, id, llms.HumanChatMessage{Content: h}, llms.AIChatMessage{Content: fmt.Sprintf("answer %d", i)}))
	}
	all, err := st.All(ctx, id)
	require.NoError(t, err)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	// The answer after the hit (in its stretch, far from the tail) no
	// longer decodes.
	_, err = db.Exec(`UPDATE memstack_messages SET message = X'7b7d' WHERE seq = ?`, all[17].Seq)
	require.NoError(t, err)

	var events []memories.RecallEvent
	recall, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallScope(memories.RecallScopeConversation),
		memories.WithExcludeRecent(4), memories.WithRecallHook(func(e memories.RecallEvent) { events = append(events, e) }))
	require.NoError(t, err)
	vars, err := recall.LoadMemoryVariables(memstack.WithIdentity(ctx, id), map[string]any{"input": "When does the Lisbon lease renew?"})
	require.ErrorIs(t, err, store.ErrCorrupt, "the load's result: %v; hook events: %+v", vars, events)
}
