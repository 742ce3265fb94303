package proof_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// userRecallNS is the namespace the user-recall suites keep their Recall
// in: every store value opened with it is another replica over the same
// data (on inmemory, the same store value).
const userRecallNS = "recall"

// newUserRecall returns a Recall over st, closed when the test ends if it
// can be closed.
func newUserRecall(t testing.TB, st store.Store, opts ...memories.RecallOption) *memories.Recall {
	t.Helper()
	m, err := memories.NewRecall(append([]memories.RecallOption{memories.WithStore(st)}, opts...)...)
	require.NoError(t, err)
	if c, ok := any(m).(interface{ Close() error }); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	return m
}

// saveTurn saves one exchange to m in conversation id.
func saveTurn(t testing.TB, m *memories.Recall, id memstack.Identity, human, ai string) {
	t.Helper()
	ctx := memstack.WithIdentity(context.Background(), id)
	require.NoError(t, m.SaveContext(ctx, map[string]any{"input": human}, map[string]any{"output": ai}), "save to %s", id)
}

// recalled returns what m shows in conversation id for input.
func recalled(t testing.TB, m *memories.Recall, id memstack.Identity, input string) string {
	t.Helper()
	ctx := memstack.WithIdentity(context.Background(), id)
	vars, err := m.LoadMemoryVariables(ctx, map[string]any{"input": input})
	require.NoError(t, err, "load in %s", id)
	s, ok := vars[memories.RecallMemoryKey].(string)
	require.True(t, ok, "%q is a string: %#v", memories.RecallMemoryKey, vars)
	return s
}

// TestUserRecall_NewConversationRecallsTheUsersPast: what a user settled
// in one conversation, saved by one replica, is recalled in the user's
// next conversation by another replica (another process over the same
// store), marked as from another conversation; and a turn saved later to
// the first conversation reaches the other replica's warm index through
// the store's change feed (SQLite, Redis) or the recall journal (the
// others).
func TestUserRecall_NewConversationRecallsTheUsersPast(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			space := b.space(t)
			a := newUserRecall(t, space(userRecallNS))
			saveTurn(t, a, week1, "Hi, I need help designing the billing service.", "Sure. What are the requirements of the billing service?")
			saveTurn(t, a, week1, "It must keep invoices for ten years. Which database should we use?", "We settled on PostgreSQL for the billing service")
			saveTurn(t, a, week1, "Thanks, let's talk about the frontend tomorrow.", "Good night!")

			bRecall := newUserRecall(t, space(userRecallNS)) // another process
			got := recalled(t, bRecall, week2, "what did we settle on for billing?")
			assert.Contains(t, got, "PostgreSQL", "the new conversation recalls the user's past")
			assert.Contains(t, got, memories.RecallOtherConversation, "the past is marked as from another conversation")

			saveTurn(t, a, week1, "And for caching the sessions?", "We use Redis for the cache of the sessions")
			got = recalled(t, bRecall, week2, "which cache did we use for the sessions?")
			assert.Contains(t, got, "Redis", "the warm replica catches up from the change feed or the journal")
			assert.Contains(t, got, memories.RecallOtherConversation)

			// Over a store with a change feed (SQLite, Redis) a save writes
			// the turn and nothing else; over the others, a journal entry
			// too.
			st := space(userRecallNS)
			journal, err := st.Stat(context.Background(), memstack.Identity{Tenant: "acme", User: "ana", Conversation: memories.RecallJournalConversation})
			require.NoError(t, err)
			if f, ok := st.(store.ChangeFeed); ok && f.Follows(store.UserScope("acme", "ana")) {
				assert.Zero(t, journal.Count, "no journal over a change feed")
			} else {
				assert.Equal(t, 4, journal.Count, "one journal entry per save")
			}
		})
	}
}

// TestUserRecall_OtherUsersAndTenantsNeverSeen: a user's Recall never
// shows another user's turns, nor a tenant-wide Recall another tenant's.
func TestUserRecall_OtherUsersAndTenantsNeverSeen(t *testing.T) {
	type who struct {
		id     memstack.Identity
		secret string
	}
	people := []who{
		{memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}, "zebrafinch"},
		{memstack.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}, "quokkamoon"},
		{memstack.Identity{Tenant: "other", User: "ana", Conversation: "c1"}, "narwhalsky"},
	}
	query := "what was the secret word: zebrafinch or quokkamoon or narwhalsky?"
	for _, scope := range []memories.RecallScope{memories.RecallScopeUser, memories.RecallScopeTenant} {
		for _, b := range backends() {
			t.Run(scope.String()+"/"+b.name, func(t *testing.T) {
				space := b.space(t)
				w := newUserRecall(t, space(userRecallNS), memories.WithRecallScope(scope), memories.WithK(10))
				for _, p := range people {
					saveTurn(t, w, p.id, "Remember my secret word: "+p.secret, "Noted, your secret word is "+p.secret)
				}
				r := newUserRecall(t, space(userRecallNS), memories.WithRecallScope(scope), memories.WithK(10))
				for _, p := range people {
					later := p.id
					later.Conversation = "c2"
					got := recalled(t, r, later, query)
					for _, o := range people {
						visible := o.id == p.id ||
							scope == memories.RecallScopeTenant && o.id.Tenant == p.id.Tenant
						if visible {
							assert.Contains(t, got, o.secret, "%s (scope %s) sees %s's secret", later, scope, o.id)
						} else {
							assert.NotContains(t, got, o.secret, "%s (scope %s) never sees %s's secret", later, scope, o.id)
						}
					}
				}
			})
		}
	}
}

// Ana's conversations in the replica tests.
var (
	week1 = memstack.Identity{Tenant: "acme", User: "ana", Conversation: "week1"}
	week2 = memstack.Identity{Tenant: "acme", User: "ana", Conversation: "week2"}
	week3 = memstack.Identity{Tenant: "acme", User: "ana", Conversation: "week3"}
)

// replicas opens, over b, two user-scoped Recalls (two processes) and a
// third store value (a third process working on the store directly).
func replicas(t *testing.T, b backend) (a, other *memories.Recall, third store.Store) {
	t.Helper()
	space := b.space(t)
	return newUserRecall(t, space(userRecallNS)), newUserRecall(t, space(userRecallNS)), space(userRecallNS)
}

// TestUserRecall_ClearOnAReplicaIsGoneEverywhere: a conversation cleared
// by one replica (Recall.Clear), forgotten at the store by another
// (store.Forget), or a user forgotten whole (ForgetScope) is never shown
// by a replica whose index still holds it.
func TestUserRecall_ClearOnAReplicaIsGoneEverywhere(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			a, bRecall, third := replicas(t, b)
			const query = "what was the codename: marmalade or tangerine or clementine or kumquat?"

			// Recall.Clear on replica A.
			saveTurn(t, a, week1, "The project codename is marmalade.", "Got it, codename marmalade.")
			require.Contains(t, recalled(t, bRecall, week2, query), "marmalade", "B is warm and sees the word")
			require.NoError(t, a.Clear(memstack.WithIdentity(ctx, week1)))
			assert.NotContains(t, recalled(t, bRecall, week2, query), "marmalade", "a Clear on replica A is gone from replica B")

			// store.Forget on a third store value.
			saveTurn(t, a, week1, "The new codename is tangerine.", "Got it, codename tangerine.")
			require.Contains(t, recalled(t, bRecall, week2, query), "tangerine", "B sees the new word")
			require.NoError(t, third.Forget(ctx, week1))
			assert.NotContains(t, recalled(t, bRecall, week2, query), "tangerine", "a store-level Forget is gone from replica B")

			// A user-wide ForgetScope.
			saveTurn(t, a, week1, "The codename is now clementine.", "Got it, codename clementine.")
			saveTurn(t, a, week3, "Another codename: kumquat.", "Got it, codename kumquat.")
			saveTurn(t, bRecall, week2, "What are we naming things today?", "Fruit codenames, as always.")
			got := recalled(t, bRecall, week2, query)
			require.Contains(t, got, "clementine")
			require.Contains(t, got, "kumquat")
			users, ok := third.(store.Users)
			require.True(t, ok, "%T implements store.Users", third)
			_, err := users.ForgetScope(ctx, store.UserScope("acme", "ana"))
			require.NoError(t, err)
			left, err := users.Identities(ctx, store.UserScope("acme", "ana"))
			require.NoError(t, err)
			assert.Empty(t, left, "nothing of the user is left, the journal included")
			got = recalled(t, bRecall, week2, query)
			for _, word := range []string{"marmalade", "tangerine", "clementine", "kumquat", "Fruit codenames", "naming things"} {
				assert.NotContains(t, got, word, "after the user is forgotten, B shows nothing of the user's")
			}
			left, err = users.Identities(ctx, store.UserScope("acme", "ana"))
			require.NoError(t, err)
			assert.Empty(t, left, "a load after the forget leaves nothing of the user's behind")
		})
	}
}

// FuzzUserRecall_NeverAnotherUsersTurn: whatever the user and
// conversation ids (separators, escapes, empty, non-ASCII), a user's
// Recall never shows another user's turn.
func FuzzUserRecall_NeverAnotherUsersTurn(f *testing.F) {
	ids := []string{"a:b", "a", "", "ü", "x\x00y", ":", "a%3Ab"}
	for i, u1 := range ids {
		u2 := ids[(i+1)%len(ids)]
		f.Add(u1, u2, ids[(i+2)%len(ids)], ids[(i+3)%len(ids)])
		f.Add(u1, u2, "c", "c")
	}
	f.Add("a:b", "a", "c", "b:c") // "acme:a:b:c" both ways naively
	f.Add("a", "a:b", "b:c", "c")
	f.Add("a%3Ab", "a:b", "c", "c")
	f.Add("ü", "u", "ü", "u")
	f.Add("x\x00y", "x", "y", "\x00y")
	var fast []backend
	for _, b := range backends() {
		if b.name == "inmemory" || b.name == "sqlite" {
			fast = append(fast, b)
		}
	}
	const marker1, marker2 = "kiwimarker", "mangomarker"
	f.Fuzz(func(t *testing.T, user1, user2, conv1, conv2 string) {
		if user1 == user2 {
			t.Skip("the same user")
		}
		id1 := memstack.Identity{Tenant: "acme", User: user1, Conversation: conv1}
		id2 := memstack.Identity{Tenant: "acme", User: user2, Conversation: conv2}
		for _, b := range fast {
			t.Run(b.name, func(t *testing.T) {
				space := b.space(t)
				m := newUserRecall(t, space(userRecallNS))
				for _, s := range []struct {
					id     memstack.Identity
					marker string
				}{{id1, marker1}, {id2, marker2}} {
					ctx := memstack.WithIdentity(context.Background(), s.id)
					if err := m.SaveContext(ctx, map[string]any{"input": "what is the code?"}, map[string]any{"output": "the code is " + s.marker}); err != nil {
						t.Skipf("save to %q: %v", s.id, err)
					}
				}
				other := newUserRecall(t, space(userRecallNS)) // a cold replica too
				for _, r := range []*memories.Recall{m, other} {
					for _, s := range []struct {
						id         memstack.Identity
						own, their string
					}{{id1, marker1, marker2}, {id2, marker2, marker1}} {
						next := s.id
						next.Conversation += "-next"
						for _, at := range []memstack.Identity{s.id, next} {
							got := recalled(t, r, at, "what is the code")
							assert.NotContains(t, got, s.their, "%q never sees another user's turn", at)
							assert.Contains(t, got, s.own, "%q sees its user's turn", at)
						}
					}
				}
			})
		}
	})
}

// TestUserRecall_ForgottenUserOfManyConversations: after a ForgetScope
// of a user with 200 one-turn conversations that all match the question,
// a warm replica's next load shows the turn saved since: its searches ask
// for more until the forgotten turns no longer crowd the hits.
func TestUserRecall_ForgottenUserOfManyConversations(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			a, bRecall, third := replicas(t, b)
			const query = "what is the codename of the project now?"
			for i := range 200 {
				old := memstack.Identity{Tenant: "acme", User: "ana", Conversation: fmt.Sprintf("old%d", i)}
				saveTurn(t, a, old, fmt.Sprintf("What is the codename of the project now? The codename of the project is fruit%d now.", i), fmt.Sprintf("Got it, the codename of the project is fruit%d now.", i))
			}
			require.Contains(t, recalled(t, bRecall, week2, query), "fruit", "B is warm")
			_, err := third.(store.Users).ForgetScope(ctx, store.UserScope("acme", "ana"))
			require.NoError(t, err)
			saveTurn(t, a, week3, "The codename of the project is kumquat now.", "Got it, kumquat.")
			got := recalled(t, bRecall, week2, query)
			assert.Contains(t, got, "kumquat", "the turn saved after the forget")
			assert.NotContains(t, got, "fruit", "nothing forgotten")
		})
	}
}

// TestUserRecall_ForgottenTurnsTakeNoPlace: a replica whose warm index
// still holds many turns of a user forgotten since (by another process)
// shows the turn the user saved after the forget: the forgotten ones,
// found first by the search, give their places up in the same load.
func TestUserRecall_ForgottenTurnsTakeNoPlace(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			a, bRecall, third := replicas(t, b)
			const query = "what is the codename of the project now?"
			for i := range 12 {
				saveTurn(t, a, week1, fmt.Sprintf("The codename of the project is fruit%d now.", i), fmt.Sprintf("Got it, the project codename is fruit%d now.", i))
			}
			require.Contains(t, recalled(t, bRecall, week2, query), "fruit", "B is warm")
			users, ok := third.(store.Users)
			require.True(t, ok, "%T implements store.Users", third)
			_, err := users.ForgetScope(ctx, store.UserScope("acme", "ana"))
			require.NoError(t, err)
			saveTurn(t, a, week3, "The codename of the project is kumquat now.", "Got it, kumquat.")
			got := recalled(t, bRecall, week2, query)
			assert.Contains(t, got, "kumquat", "the turn saved after the forget is shown")
			assert.NotContains(t, got, "fruit", "nothing forgotten is shown")
		})
	}
}
