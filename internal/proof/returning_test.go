package proof_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

// returningStack is the stack a user configures for a returning customer,
// every layer on one store: RecentN(6) for {{.history}}, Summary with the
// earlier conversations' summaries for {{.summary}}, per-user Facts and a
// Recall over the user's conversations, under one token budget.
func returningStack(t *testing.T, st store.Store) schema.Memory {
	t.Helper()
	recent, err := memories.NewRecentN(6, memories.WithStore(st))
	require.NoError(t, err)
	sum, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(st), memories.WithMemoryKey("summary"), memories.WithEarlierSummaries(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sum.Close() })
	patterns, err := extract.NewPatterns()
	require.NoError(t, err)
	facts, err := memories.NewFacts(patterns, memories.WithStore(st), memories.WithFactsPerUser(true))
	require.NoError(t, err)
	t.Cleanup(func() { _ = facts.Close() })
	recall, err := memories.NewRecall(memories.WithStore(st), memories.WithExcludeRecent(6))
	require.NoError(t, err)
	mem, err := combined.New([]schema.Memory{recent, sum, facts, recall}, combined.WithTokenBudget(1000))
	require.NoError(t, err)
	return mem
}

// TestReturningUser_OneStoreTwoReplicasARestart: on every backend, the
// whole stack on one store. A customer settles a plan in a first
// conversation served by one replica; a week later a second replica serves
// their new conversation, and after a restart a third one: each layer
// shows what it should — the recent window only the new conversation, the
// earlier conversation's summary, the user's facts, the recalled decision
// — and another user of the same tenant sees none of it.
func TestReturningUser_OneStoreTwoReplicasARestart(t *testing.T) {
	const ns = "stack"
	may8 := time.Date(2023, 5, 8, 9, 0, 0, 0, time.UTC)
	week1 := memstack.Identity{Tenant: "clinic", User: "ana", Conversation: "week1"}
	week2 := memstack.Identity{Tenant: "clinic", User: "ana", Conversation: "week2"}
	bob := memstack.Identity{Tenant: "clinic", User: "bob", Conversation: "b1"}
	save := func(mem schema.Memory, id memstack.Identity, at time.Time, in, out string) {
		t.Helper()
		ctx := memstack.WithTime(memstack.WithIdentity(context.Background(), id), at)
		require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}))
	}
	load := func(mem schema.Memory, id memstack.Identity, q string) map[string]string {
		t.Helper()
		vars, err := mem.LoadMemoryVariables(memstack.WithIdentity(context.Background(), id), map[string]any{"input": q})
		require.NoError(t, err)
		out := map[string]string{}
		for k, v := range vars {
			out[k], _ = v.(string)
		}
		return out
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			space := b.space(t)
			a := returningStack(t, space(ns))
			save(a, week1, may8, "My name is Ana and I live in Porto.", "Nice to meet you, Ana.")
			save(a, week1, may8.Add(time.Minute), "Which plan should the clinic take?", "We settled on the blue plan, from March.")
			save(a, bob, may8, "I live in Lisbon.", "Noted, Bob.")

			// A week later, another replica, a new conversation.
			r2 := returningStack(t, space(ns))
			later := may8.AddDate(0, 0, 7)
			save(r2, week2, later, "Hello again.", "Hi Ana, welcome back.")
			check := func(mem schema.Memory) {
				t.Helper()
				got := load(mem, week2, "What did we settle on for the plan?")
				assert.Equal(t, "Human: Hello again.\nAI: Hi Ana, welcome back.", got["history"], "the recent window shows this conversation only")
				assert.Contains(t, got["summary"], memories.EarlierSummaryPrefix+" (8 May 2023): ", "the earlier conversation's summary, dated")
				assert.Contains(t, got["facts"], "Porto", "the user's facts")
				assert.Contains(t, got["relevant_history"], "We settled on the blue plan", "the decision, recalled from the earlier conversation")
				assert.Contains(t, got["relevant_history"], memories.RecallOtherConversation)
				for k, v := range got {
					assert.NotContains(t, v, "Lisbon", "%s shows another user's turn", k)
				}
			}
			check(r2)
			// A restart: a new process over the same data.
			check(returningStack(t, space(ns)))

			for k, v := range load(returningStack(t, space(ns)), memstack.Identity{Tenant: "clinic", User: "bob", Conversation: "b2"}, "plan Porto") {
				assert.False(t, strings.Contains(v, "blue plan") || strings.Contains(v, "Porto"), "bob's %s shows Ana's: %q", k, v)
			}
		})
	}
}
