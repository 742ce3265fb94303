package proof_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

// TestEarlierSummaries_NextConversationOnAnotherReplica: on every backend,
// a Summary with WithEarlierSummaries on one replica keeps a user's first
// conversation; when the user's next conversation starts on another
// replica, that one completes the first (once: a third replica finds it
// done) and shows its summary, dated; Clear of the first conversation on
// any replica removes it, and a user-wide ForgetScope leaves nothing.
func TestEarlierSummaries_NextConversationOnAnotherReplica(t *testing.T) {
	week1 := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "week1"}
	week2 := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "week2"}
	may8 := time.Date(2023, 5, 8, 9, 0, 0, 0, time.UTC)
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			space := b.space(t)
			replica := func() *memories.Summary {
				m, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(space("summary")), memories.WithEarlierSummaries(1))
				require.NoError(t, err)
				t.Cleanup(func() { _ = m.Close() })
				return m
			}
			save := func(m *memories.Summary, id memstack.Identity, at time.Time, in, out string) {
				ctx := memstack.WithTime(memstack.WithIdentity(context.Background(), id), at)
				require.NoError(t, m.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}))
			}
			load := func(m *memories.Summary, id memstack.Identity) string {
				vars, err := m.LoadMemoryVariables(memstack.WithIdentity(context.Background(), id), nil)
				require.NoError(t, err)
				return vars[m.GetMemoryKey(context.Background())].(string)
			}
			a, b2 := replica(), replica()
			save(a, week1, may8, "We settled on the blue plan for the clinic.", "Great: the blue plan, from March.")
			save(b2, week2, may8.AddDate(0, 0, 7), "Hello again.", "Hi Ana.")
			got := load(b2, week2)
			assert.Contains(t, got, memories.EarlierSummaryPrefix+" (8 May 2023): ")
			assert.Contains(t, got, "blue plan")
			assert.Contains(t, load(replica(), week2), "blue plan", "a third replica shows it too")

			require.NoError(t, a.Clear(memstack.WithIdentity(context.Background(), week1)))
			assert.NotContains(t, load(b2, week2), "blue plan", "cleared on one replica, gone on the other")

			save(a, week1, may8.AddDate(0, 0, 1), "My card is 4111 2222.", "Noted.")
			require.NoError(t, a.Complete(memstack.WithIdentity(context.Background(), week1)))
			require.Contains(t, load(b2, week2), "4111")
			users, ok := space("summary").(store.Users)
			require.True(t, ok)
			_, err := users.ForgetScope(context.Background(), store.UserScope("acme", "ana"))
			require.NoError(t, err)
			ids, err := users.Identities(context.Background(), store.UserScope("acme", "ana"))
			require.NoError(t, err)
			assert.Empty(t, ids, "nothing of the user is left, the summaries included")
			assert.Empty(t, load(b2, week2))
		})
	}
}
