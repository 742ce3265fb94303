package memories_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	lcmemory "github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/vectorstores"
)

var (
	rsWeek1 = memstack.Identity{Tenant: "acme", User: "ana", Conversation: "week1"}
	rsWeek2 = memstack.Identity{Tenant: "acme", User: "ana", Conversation: "week2"}
	rsMay8  = time.Date(2023, 5, 8, 10, 0, 0, 0, time.UTC)
)

// rsSave saves one exchange in id's conversation, dated at.
func rsSave(t testing.TB, m *memories.Recall, id memstack.Identity, at time.Time, in, out string) {
	t.Helper()
	ctx := memstack.WithTime(memstack.WithIdentity(context.Background(), id), at)
	require.NoError(t, m.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}))
}

func TestRecallScope_DefaultsAndRefusals(t *testing.T) {
	hist, err := store.FromHistory(lcmemory.NewChatMessageHistory(), memstack.Identity{})
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		opts  []memories.RecallOption
		scope string // in String(), or "" when NewRecall must fail
		errs  []string
	}{
		{"a store that lists conversations", nil, "scope=user", nil},
		{"asked for the conversation", []memories.RecallOption{memories.WithRecallScope(memories.RecallScopeConversation)}, "scope=conversation", nil},
		{"asked for the tenant", []memories.RecallOption{memories.WithRecallScope(memories.RecallScopeTenant)}, "scope=tenant", nil},
		{"a store that cannot list conversations", []memories.RecallOption{memories.WithStore(hist)}, "scope=conversation", nil},
		{"a durable index", []memories.RecallOption{memories.WithVector(newRCEmbedder(), nil)}, "scope=user", nil},
		{"the user scope over a store that cannot list", []memories.RecallOption{memories.WithStore(hist), memories.WithRecallScope(memories.RecallScopeUser)}, "",
			[]string{"WithRecallScope(user)", "store.Users"}},
		{"the tenant scope with a durable index", []memories.RecallOption{memories.WithHybrid(newRCEmbedder(), nil), memories.WithRecallScope(memories.RecallScopeTenant)}, "scope=tenant", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := memories.NewRecall(tc.opts...)
			if tc.scope == "" {
				require.Error(t, err)
				assert.ErrorIs(t, err, memories.ErrInvalidOption)
				for _, s := range tc.errs {
					assert.Contains(t, err.Error(), s)
				}
				return
			}
			require.NoError(t, err)
			assert.Contains(t, m.String(), tc.scope)
		})
	}
}

func TestRecallScope_NewConversationShowsTheRunDatedAndMarked(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []memories.RecallOption
		want string
	}{
		{"dates", nil, "[8 May 2023, " + memories.RecallOtherConversation + "]\nHuman: Which database for billing?\nAI: We settled on PostgreSQL."},
		{"no dates", []memories.RecallOption{memories.WithRecallDates(false)}, "[" + memories.RecallOtherConversation + "]\nHuman: Which database for billing?\nAI: We settled on PostgreSQL."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := memories.NewRecall(append([]memories.RecallOption{memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(1)}, tc.opts...)...)
			require.NoError(t, err)
			rsSave(t, m, rsWeek1, rsMay8, "Which database for billing?", "We settled on PostgreSQL.")
			rsSave(t, m, rsWeek1, rsMay8.Add(time.Minute), "And the office?", "The office is in Porto.")
			assert.Equal(t, tc.want, rcAsk(t, m, ctIDCtx(rsWeek2), "what did we settle on for the billing database?"))
		})
	}
}

func TestRecallScope_RunsOfTwoConversationsStayApart(t *testing.T) {
	m, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(4), memories.WithNeighbours(1))
	require.NoError(t, err)
	rsSave(t, m, rsWeek1, rsMay8, "Is the billing database chosen?", "Yes, PostgreSQL for billing.")
	later := rsMay8.AddDate(0, 0, 7)
	rsSave(t, m, rsWeek2, later, "Remind me about billing", "Billing runs on PostgreSQL since last week.")
	rsSave(t, m, rsWeek2, later.Add(time.Minute), "Thanks", "Anytime.")
	got := rcAsk(t, m, ctIDCtx(rsWeek2), "billing PostgreSQL")
	// Each conversation's run under its own header; the other
	// conversation's never merged into this one's.
	assert.Equal(t, "[8 May 2023, "+memories.RecallOtherConversation+"]\nHuman: Is the billing database chosen?\nAI: Yes, PostgreSQL for billing."+
		memories.RecallSeparator+
		"[15 May 2023]\nHuman: Remind me about billing\nAI: Billing runs on PostgreSQL since last week.\nHuman: Thanks\nAI: Anytime.", got)
}

func TestRecallScope_ReportsNameEachItemsConversation(t *testing.T) {
	m, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(2))
	require.NoError(t, err)
	rsSave(t, m, rsWeek1, rsMay8, "Which database for billing?", "PostgreSQL for billing.")
	rsSave(t, m, rsWeek2, rsMay8.AddDate(0, 0, 7), "Is billing on PostgreSQL yet?", "Billing moves on Monday.")
	rec := observe.NewRecorder(observe.OpLoad, "recall", "x")
	_ = rcAsk(t, m, observe.WithRecorder(ctIDCtx(rsWeek2), rec), "billing PostgreSQL")
	r := rec.Finish(0, nil)
	require.Len(t, r.Injected, 2)
	got := map[string]bool{}
	for _, it := range r.Injected {
		got[it.Conversation] = true
	}
	assert.Equal(t, map[string]bool{m.HashIdentity(rsWeek1): true, m.HashIdentity(rsWeek2): true}, got)
	for _, it := range r.Injected {
		assert.NotContains(t, it.Conversation, "week", "a hash, never the conversation's name")
	}
}

func TestRecallScope_ClearAndForgetLeaveNothingSearchable(t *testing.T) {
	for _, how := range []string{"Clear", "store.Forget", "ForgetScope"} {
		t.Run(how, func(t *testing.T) {
			st := store.NewInMemory()
			m, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallUnit(memories.RecallExchanges))
			require.NoError(t, err)
			rsSave(t, m, rsWeek1, rsMay8, "My card is 4111 2222", "Noted.")
			require.Contains(t, rcAsk(t, m, ctIDCtx(rsWeek2), "card"), "4111", "warm: week2 recalls the card")
			switch how {
			case "Clear":
				require.NoError(t, m.Clear(ctIDCtx(rsWeek1)))
			case "store.Forget":
				require.NoError(t, st.Forget(context.Background(), rsWeek1))
			case "ForgetScope":
				_, err := st.ForgetScope(context.Background(), store.UserScope("acme", "ana"))
				require.NoError(t, err)
				ids, err := st.Identities(context.Background(), store.UserScope("acme", "ana"))
				require.NoError(t, err)
				assert.Empty(t, ids, "nothing of the user is left, the recall journal included")
			}
			for range 2 { // the second load reads what the first left in the index
				assert.NotContains(t, rcAsk(t, m, ctIDCtx(rsWeek2), "card"), "4111")
			}
			fresh, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallUnit(memories.RecallExchanges))
			require.NoError(t, err)
			assert.NotContains(t, rcAsk(t, fresh, ctIDCtx(rsWeek2), "card"), "4111", "a replica starting now")
		})
	}
}

func TestRecallScope_RetriedSaveJournalsOnce(t *testing.T) {
	st := store.NewInMemory()
	m, err := memories.NewRecall(memories.WithStore(st))
	require.NoError(t, err)
	ctx := memstack.WithSaveKey(ctIDCtx(rsWeek1), "save-1")
	for range 3 {
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "hi"}, map[string]any{"output": "hello"}))
	}
	assert.Len(t, ctStored(t, st, rsWeek1), 2, "the turn once")
	journal := memstack.Identity{Tenant: "acme", User: "ana", Conversation: memories.RecallJournalConversation}
	entries := ctStored(t, st, journal)
	require.Len(t, entries, 1, "the journal entry once")
	assert.NotContains(t, entries[0].GetContent(), "hello", "the journal names the conversation, never the text")
	assert.Contains(t, entries[0].GetContent(), "week1")
}

func TestRecallScope_RefusesTheJournalsIdentity(t *testing.T) {
	st := store.NewInMemory()
	m, err := memories.NewRecall(memories.WithStore(st))
	require.NoError(t, err)
	id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: memories.RecallJournalConversation}
	err = m.SaveContext(ctIDCtx(id), map[string]any{"input": "hi"}, map[string]any{"output": "hello"})
	require.ErrorIs(t, err, memories.ErrInvalidIdentity)
	assert.Empty(t, ctStored(t, st, id), "nothing stored")
}

// A replica that fell behind a trimmed journal rebuilds the user's index
// from the store: it finds the oldest and the newest turns.
func TestRecallScope_ReplicaBehindATrimmedJournalRebuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("saves 8,300 turns")
	}
	st := store.NewInMemory()
	a, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallUnit(memories.RecallExchanges))
	require.NoError(t, err)
	b, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallUnit(memories.RecallExchanges))
	require.NoError(t, err)
	rsSave(t, a, rsWeek1, rsMay8, "The first code is zebra", "ok")
	require.Contains(t, rcAsk(t, b, ctIDCtx(rsWeek2), "zebra"), "zebra", "b is warm")
	const n = 8300
	for i := range n {
		conv := rsWeek1
		conv.Conversation = fmt.Sprintf("c%d", i%50)
		rsSave(t, a, conv, rsMay8.Add(time.Duration(i)*time.Second), fmt.Sprintf("filler %d", i), "ok")
	}
	rsSave(t, a, rsWeek1, rsMay8.AddDate(0, 1, 0), "The last code is quokka", "ok")
	journal := memstack.Identity{Tenant: "acme", User: "ana", Conversation: memories.RecallJournalConversation}
	assert.Less(t, len(ctStored(t, st, journal)), n, "the journal was trimmed")
	got := rcAsk(t, b, ctIDCtx(rsWeek2), "quokka zebra")
	assert.True(t, strings.Contains(got, "quokka") && strings.Contains(got, "zebra"), "got %q", got)
}

// A Recall with a durable index (WithVector, WithHybrid) searches the
// user's conversations too: a second replica over the same message store
// and the same vector store recalls, in a new conversation, what the
// first saved in another, marked as such; after a Clear of that
// conversation on the first replica neither the warm replica nor a cold
// one shows it, and the vector store holds nothing of it.
func TestRecallScope_DurableIndexSearchesTheUsersConversations(t *testing.T) {
	for name, opt := range map[string]func(vs *retrieval.Chromem) memories.RecallOption{
		"vector": func(vs *retrieval.Chromem) memories.RecallOption { return memories.WithVector(newRCEmbedder(), vs) },
		"hybrid": func(vs *retrieval.Chromem) memories.RecallOption { return memories.WithHybrid(newRCEmbedder(), vs) },
	} {
		t.Run(name, func(t *testing.T) {
			mem := store.NewInMemory()
			vs := rcChromemAt(t, t.TempDir())
			replica := func() *memories.Recall {
				m, err := memories.NewRecall(memories.WithStore(mem), opt(vs))
				require.NoError(t, err)
				require.Contains(t, m.String(), "scope=user")
				return m
			}
			r1, r2 := replica(), replica()
			rsSave(t, r1, rsWeek1, rsMay8, "Which database for the billing service?", "We settled on PostgreSQL for billing.")
			rsSave(t, r1, rsWeek1, rsMay8, "And the frontend framework?", "We picked Svelte for the frontend.")
			week3 := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "week3"}
			other := memstack.Identity{Tenant: "acme", User: "bob", Conversation: "week1"}
			rsSave(t, r1, other, rsMay8, "Which database for the billing service?", "Bob's billing runs on MySQL.")

			got := rcAsk(t, r2, memstack.WithIdentity(context.Background(), rsWeek2), "which database did we pick for billing?")
			assert.Contains(t, got, "PostgreSQL", "the new conversation recalls the user's other conversation")
			assert.Contains(t, got, memories.RecallOtherConversation)
			assert.NotContains(t, got, "MySQL", "never another user's")

			require.NoError(t, r1.Clear(memstack.WithIdentity(context.Background(), rsWeek1)))
			assert.NotContains(t, rcAsk(t, r2, memstack.WithIdentity(context.Background(), rsWeek2), "which database did we pick for billing?"), "PostgreSQL", "cleared on another replica")
			assert.NotContains(t, rcAsk(t, replica(), memstack.WithIdentity(context.Background(), week3), "which database did we pick for billing?"), "PostgreSQL", "a cold replica")
			docs, err := vs.SimilaritySearch(context.Background(), "PostgreSQL billing database", 50, vectorstores.WithEmbedder(newRCEmbedder()))
			require.NoError(t, err)
			require.NotEmpty(t, docs, "the store holds the other turns")
			for _, d := range docs {
				assert.NotContains(t, d.PageContent, "PostgreSQL", "the vector store keeps nothing of the cleared conversation")
			}
		})
	}
}

// A hybrid searching the user's conversations keys its docs by hashes
// (WithVector), whose order is not the conversation's: its lexical part
// weighs no neighbours there; scoped to the conversation it does.
func TestRecallScope_HybridLexicalPartWeighsNeighboursOnlyInAConversation(t *testing.T) {
	user, err := memories.NewRecall(memories.WithHybrid(newRCEmbedder(), nil))
	require.NoError(t, err)
	assert.Contains(t, user.String(), "scope=user")
	assert.NotContains(t, user.String(), "neighbours 0.5")
	conv, err := memories.NewRecall(memories.WithHybrid(newRCEmbedder(), nil), memories.WithRecallScope(memories.RecallScopeConversation))
	require.NoError(t, err)
	assert.Contains(t, conv.String(), "neighbours 0.5/0.25")
}
