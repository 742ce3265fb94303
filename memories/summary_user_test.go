package memories_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	lcmemory "github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"
)

// suNotes is a summarizer double: the summary is the previous one and the
// human messages' contents, joined by "; ". It counts its calls.
type suNotes struct{ calls atomic.Int64 }

func (s *suNotes) Summarize(_ context.Context, prev string, msgs []llms.ChatMessage) (string, error) {
	s.calls.Add(1)
	var parts []string
	if prev != "" {
		parts = append(parts, prev)
	}
	for _, m := range msgs {
		if m.GetType() == llms.ChatMessageTypeHuman {
			parts = append(parts, m.GetContent())
		}
	}
	return strings.Join(parts, "; "), nil
}

func suSave(t testing.TB, m schema.Memory, id memstack.Identity, at time.Time, in, out string) {
	t.Helper()
	ctx := memstack.WithTime(memstack.WithIdentity(context.Background(), id), at)
	require.NoError(t, m.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}))
}

func suLoad(t testing.TB, m schema.Memory, id memstack.Identity) string {
	t.Helper()
	vars, err := m.LoadMemoryVariables(memstack.WithIdentity(context.Background(), id), map[string]any{"input": "q"})
	require.NoError(t, err)
	s, _ := vars[m.GetMemoryKey(context.Background())].(string)
	return s
}

func TestSummary_NewConversationShowsTheEarlierOneDated(t *testing.T) {
	sum := &suNotes{}
	m, err := memories.NewSummary(sum, memories.WithEarlierSummaries(1))
	require.NoError(t, err)
	suSave(t, m, rsWeek1, rsMay8, "We pick the blue plan", "Noted.")
	suSave(t, m, rsWeek1, rsMay8.Add(time.Minute), "Training in June", "Fine.")
	assert.Equal(t, "Human: We pick the blue plan\nAI: Noted.\nHuman: Training in June\nAI: Fine.", suLoad(t, m, rsWeek1),
		"no earlier conversation yet")
	calls := sum.calls.Load()

	later := rsMay8.AddDate(0, 0, 7)
	suSave(t, m, rsWeek2, later, "Hello again", "Hi Ana.")
	assert.Equal(t, calls+1, sum.calls.Load(), "the earlier conversation is completed in one call when the next starts")
	assert.Equal(t, memories.EarlierSummaryPrefix+" (8 May 2023): We pick the blue plan; Training in June\nHuman: Hello again\nAI: Hi Ana.",
		suLoad(t, m, rsWeek2))

	suSave(t, m, rsWeek2, later.Add(time.Minute), "And the invoice?", "Monthly.")
	assert.Equal(t, calls+1, sum.calls.Load(), "once per conversation: later saves complete nothing")

	// Another user sees none of it.
	bob := memstack.Identity{Tenant: "acme", User: "bob", Conversation: "week2"}
	suSave(t, m, bob, later, "Hi", "Hello Bob.")
	assert.NotContains(t, suLoad(t, m, bob), "blue plan")
}

func TestSummary_EarlierSummariesMessagesMode(t *testing.T) {
	m, err := memories.NewSummary(&suNotes{}, memories.WithEarlierSummaries(2), memories.WithReturnMessages(true))
	require.NoError(t, err)
	suSave(t, m, rsWeek1, rsMay8, "We pick the blue plan", "Noted.")
	suSave(t, m, rsWeek2, rsMay8.AddDate(0, 0, 7), "Hello again", "Hi Ana.")
	vars, err := m.LoadMemoryVariables(memstack.WithIdentity(context.Background(), rsWeek2), nil)
	require.NoError(t, err)
	msgs := vars[m.GetMemoryKey(context.Background())].([]llms.ChatMessage)
	require.Len(t, msgs, 3)
	assert.Equal(t, llms.SystemChatMessage{Content: memories.EarlierSummaryPrefix + " (8 May 2023): We pick the blue plan"}, msgs[0])
}

func TestSummary_EarlierSummaryIsDroppedWholeFirstUnderABudget(t *testing.T) {
	m, err := memories.NewSummary(&suNotes{}, memories.WithEarlierSummaries(1))
	require.NoError(t, err)
	suSave(t, m, rsWeek1, rsMay8, "We pick the blue plan with the long name "+strings.Repeat("word ", 60), "Noted.")
	suSave(t, m, rsWeek2, rsMay8.AddDate(0, 0, 7), "Hello again", "Hi Ana.")
	roomy, err := combined.New([]schema.Memory{m}, combined.WithTokenBudget(1000))
	require.NoError(t, err)
	require.Contains(t, suLoad(t, roomy, rsWeek2), memories.EarlierSummaryPrefix, "shown when it fits")
	mem, err := combined.New([]schema.Memory{m}, combined.WithTokenBudget(20))
	require.NoError(t, err)
	got := suLoad(t, mem, rsWeek2)
	assert.Equal(t, "Human: Hello again\nAI: Hi Ana.", got, "the earlier summary goes whole, the conversation stays")
}

func TestSummary_EarlierSummariesAreGoneWhenTheirConversationIs(t *testing.T) {
	for _, how := range []string{"Summary.Clear", "store.Forget", "ForgetScope"} {
		t.Run(how, func(t *testing.T) {
			st := store.NewInMemory()
			m, err := memories.NewSummary(&suNotes{}, memories.WithStore(st), memories.WithEarlierSummaries(1))
			require.NoError(t, err)
			suSave(t, m, rsWeek1, rsMay8, "My card is 4111", "Noted.")
			suSave(t, m, rsWeek2, rsMay8.AddDate(0, 0, 7), "Hello again", "Hi Ana.")
			require.Contains(t, suLoad(t, m, rsWeek2), "4111")
			ctx := context.Background()
			switch how {
			case "Summary.Clear":
				require.NoError(t, m.Clear(memstack.WithIdentity(ctx, rsWeek1)))
				u, err := st.GetState(ctx, memstack.Identity{Tenant: "acme", User: "ana", Conversation: memories.UserSummariesConversation}, memories.UserSummariesStateName)
				require.NoError(t, err)
				assert.NotContains(t, string(u.Value), "4111", "the user's summaries no longer hold it")
			case "store.Forget":
				require.NoError(t, st.Forget(ctx, rsWeek1))
			case "ForgetScope":
				_, err := st.ForgetScope(ctx, store.UserScope("acme", "ana"))
				require.NoError(t, err)
				ids, err := st.Identities(ctx, store.UserScope("acme", "ana"))
				require.NoError(t, err)
				assert.Empty(t, ids, "nothing of the user is left, the summaries included")
			}
			assert.NotContains(t, suLoad(t, m, rsWeek2), "4111")
		})
	}
}

func TestSummary_Complete(t *testing.T) {
	sum := &suNotes{}
	st := store.NewInMemory()
	m, err := memories.NewSummary(sum, memories.WithStore(st), memories.WithEarlierSummaries(1))
	require.NoError(t, err)
	suSave(t, m, rsWeek1, rsMay8, "We pick the blue plan", "Noted.")
	require.NoError(t, m.Complete(memstack.WithIdentity(context.Background(), rsWeek1)))
	// Another replica, in the user's next conversation, shows it without
	// completing anything itself.
	other, err := memories.NewSummary(sum, memories.WithStore(st), memories.WithEarlierSummaries(1))
	require.NoError(t, err)
	calls := sum.calls.Load()
	suSave(t, other, rsWeek2, rsMay8.AddDate(0, 0, 7), "Hello again", "Hi Ana.")
	assert.Equal(t, calls, sum.calls.Load(), "completed already")
	assert.Contains(t, suLoad(t, other, rsWeek2), memories.EarlierSummaryPrefix+" (8 May 2023): We pick the blue plan")

	plain, err := memories.NewSummary(sum)
	require.NoError(t, err)
	err = plain.Complete(memstack.WithIdentity(context.Background(), rsWeek1))
	require.ErrorIs(t, err, memories.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithEarlierSummaries")
}

func TestSummary_EarlierSummariesNeedAStoreThatLists(t *testing.T) {
	hist, err := store.FromHistory(lcmemory.NewChatMessageHistory(), memstack.Identity{})
	require.NoError(t, err)
	_, err = memories.NewSummary(&suNotes{}, memories.WithStore(hist), memories.WithEarlierSummaries(1))
	require.ErrorIs(t, err, memories.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithEarlierSummaries(1)")
}

// A new conversation's completion of the earlier ones checks the user's
// conversations with one StatMany over a store.MultiStat, not a Stat each:
// a user with many conversations costs a round trip.
func TestSummary_EarlierConversationsCheckedInOneCall(t *testing.T) {
	s := multiStatCounting{&statCounting{InMemory: store.NewInMemory()}}
	sum := &suNotes{}
	m, err := memories.NewSummary(sum, memories.WithStore(s), memories.WithEarlierSummaries(2))
	require.NoError(t, err)
	for c := range 8 {
		id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c" + string(rune('a'+c))}
		suSave(t, m, id, rsMay8.Add(time.Duration(c)*time.Hour), "Topic "+id.Conversation, "Noted.")
	}
	s.stats.Store(0)
	s.manys.Store(0)
	suSave(t, m, rsWeek2, rsMay8.AddDate(0, 0, 7), "Hello again", "Hi Ana.")
	assert.EqualValues(t, 1, s.manys.Load())
	assert.Less(t, s.stats.Load(), int64(8), "no Stat per earlier conversation")
	shown := suLoad(t, m, rsWeek2)
	assert.Contains(t, shown, "Topic ch")
	assert.Contains(t, shown, "Topic cg")
	assert.NotContains(t, shown, "Topic ca", "the two most recent only")
}
