package proof_test

import (
	"context"
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

// TestReviewS30_ConvScopeManyNeighbours: WithNeighbours accepts any n >= 0
// ("show the whole context"). A conversation-scoped Recall over the
// store's index sizes its view as (2n+1) units per unit found
// (viewOf: most := (2*reach+1)*len(owners)), not by what it read: with a
// large n the load panics (makeslice: cap out of range) — or, for n such
// as math.MaxInt32, asks the runtime for terabytes (a fatal out of
// memory that no recover catches). The same Recall over the in-process
// index, and before the change over SQLite, loads fine.
func TestReviewS30_ConvScopeManyNeighbours(t *testing.T) {
	ctx := context.Background()
	lite, err := sqlitestore.Open(openCtx(t), filepath.Join(t.TempDir(), "n.db"), sqlitestore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = lite.Close() })
	mem := store.NewInMemory()
	id := memstack.Identity{User: "ana", Conversation: "c"}
	for i := range 30 {
		for _, st := range []store.Store{mem, lite} {
			require.NoError(t, st.Append(ctx, id, llms.HumanChatMessage{Content: fmt.Sprintf("question %d about the rocket launch", i)},
				llms.AIChatMessage{Content: fmt.Sprintf("answer %d", i)}))
		}
	}
	here := memstack.WithIdentity(ctx, id)
	load := func(st store.Store) (vars map[string]any, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		recall, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallScope(memories.RecallScopeConversation),
			memories.WithNeighbours(1<<46), memories.WithK(2), memories.WithExcludeRecent(4))
		require.NoError(t, err)
		return recall.LoadMemoryVariables(here, map[string]any{"input": "rocket launch 7"})
	}
	want, err := load(mem)
	require.NoError(t, err)
	got, err := load(lite)
	require.NoError(t, err)
	require.Equal(t, want, got)
}
