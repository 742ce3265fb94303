package proof_test

import (
	"context"
	"database/sql"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/tmc/langchaingo/llms"
)

// TestReview_RangedReadOneBadConversationHidesTheOthers: with whole reads a
// conversation that cannot be read (here: a corrupt row) is left out and
// the other conversations' hits stand ("that conversation's units are left
// out; the rest stand"). With ranged reads every conversation shares one
// ReadRanges call: one bad conversation hides all of them.
func TestReview_RangedReadOneBadConversationHidesTheOthers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bad.db")
	st, err := sqlitestore.Open(ctx, path, sqlitestore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	id := func(c string) memstack.Identity {
		return memstack.Identity{Tenant: "acme", User: "ana", Conversation: c}
	}
	for i := range 8 {
		require.NoError(t, st.Append(ctx, id("b"), llms.HumanChatMessage{Content: fmt.Sprintf("filler b %d", i)}, llms.AIChatMessage{Content: "ok"}))
		require.NoError(t, st.Append(ctx, id("c"), llms.HumanChatMessage{Content: fmt.Sprintf("filler c %d", i)}, llms.AIChatMessage{Content: "ok"}))
	}
	require.NoError(t, st.Append(ctx, id("b"), llms.HumanChatMessage{Content: "The Lisbon lease renews in March."}, llms.AIChatMessage{Content: "Noted, March."}))
	require.NoError(t, st.Append(ctx, id("c"), llms.HumanChatMessage{Content: "The Lisbon lease deposit is paid."}, llms.AIChatMessage{Content: "Noted, deposit."}))
	cs, err := st.All(ctx, id("c"))
	require.NoError(t, err)

	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	// c's last AI message no longer decodes (it is in c's hit's span).
	_, err = db.Exec(`UPDATE memstack_messages SET message = X'7b7d' WHERE seq = ?`, cs[len(cs)-1].Seq)
	require.NoError(t, err)

	here := id("today")
	whole := wholeReads{st, st, st}
	_, isRanger := any(whole).(store.RangeReader)
	require.False(t, isRanger)
	q := "When does the Lisbon lease renew?"
	want := recalled(t, newUserRecall(t, whole), here, q)
	require.Contains(t, want, "renews in March", "whole reads: b's hit stands, c is left out")
	got := recalled(t, newUserRecall(t, st), here, q)
	assert.Equal(t, want, got, "ranged reads show what whole reads show")
	_ = memories.RecallMemoryKey
}

// hooked runs after once, after the first search with terms: between a
// load's search and its reads.
type hooked struct {
	store.Store
	store.RecallSearcher
	store.Users
	after func()
}

func (h *hooked) SearchRecall(ctx context.Context, in store.RecallScope, q indexkit.Query) ([]store.RecallHit, error) {
	hits, err := h.RecallSearcher.SearchRecall(ctx, in, q)
	if len(q.Terms) > 0 && h.after != nil {
		f := h.after
		h.after = nil
		f()
	}
	return hits, err
}

type hookedRanged struct {
	*hooked
	store.RangeReader
}

// TestReview_RangedEqualsWholeWhenTheStoreChangesBetweenSearchAndRead:
// a change to a hit's conversation between the search and the reads.
func TestReview_RangedEqualsWholeWhenTheStoreChangesBetweenSearchAndRead(t *testing.T) {
	ctx := context.Background()
	id := func(c string) memstack.Identity {
		return memstack.Identity{Tenant: "acme", User: "ana", Conversation: c}
	}
	build := func(t *testing.T) *sqlitestore.Store {
		st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), randomHex(4)+".db"), sqlitestore.WithRecallIndex())
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		for i := range 10 {
			msgs := []llms.ChatMessage{llms.HumanChatMessage{Content: fmt.Sprintf("filler b %d", i)}}
			if i == 4 {
				msgs = append(msgs, llms.SystemChatMessage{Content: "Be brief."})
			}
			if i == 6 {
				msgs = append(msgs, llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{}`}}}},
					llms.ToolChatMessage{ID: "c1", Content: "tool says hi"})
			}
			msgs = append(msgs, llms.AIChatMessage{Content: fmt.Sprintf("answer b %d", i)})
			if i == 5 {
				msgs = []llms.ChatMessage{llms.HumanChatMessage{Content: "The Lisbon lease renews in March."}, llms.AIChatMessage{Content: "Noted, March."}}
			}
			require.NoError(t, st.Append(ctx, id("b"), msgs...))
		}
		return st
	}
	seqOf := func(t *testing.T, st store.Store, content string) int64 {
		all, err := st.All(ctx, id("b"))
		require.NoError(t, err)
		for _, r := range all {
			if r.Message.GetContent() == content {
				return r.Seq
			}
		}
		t.Fatalf("no %q", content)
		return 0
	}
	scenarios := map[string]func(t *testing.T, st *sqlitestore.Store){
		"remove neighbours before": func(t *testing.T, st *sqlitestore.Store) {
			_, err := st.RemovePrefix(ctx, id("b"), seqOf(t, st, "answer b 4"))
			require.NoError(t, err)
		},
		"remove half a unit before": func(t *testing.T, st *sqlitestore.Store) {
			_, err := st.RemovePrefix(ctx, id("b"), seqOf(t, st, "filler b 4"))
			require.NoError(t, err)
		},
		"remove the hit": func(t *testing.T, st *sqlitestore.Store) {
			_, err := st.RemovePrefix(ctx, id("b"), seqOf(t, st, "The Lisbon lease renews in March."))
			require.NoError(t, err)
		},
		"append": func(t *testing.T, st *sqlitestore.Store) {
			require.NoError(t, st.Append(ctx, id("b"), llms.HumanChatMessage{Content: "later"}, llms.AIChatMessage{Content: "later answer"}))
		},
		"clear": func(t *testing.T, st *sqlitestore.Store) {
			require.NoError(t, st.Clear(ctx, id("b")))
		},
		"rewrite": func(t *testing.T, st *sqlitestore.Store) {
			_, err := st.Rewrite(ctx, id("b"), seqOf(t, st, "answer b 3"), false, llms.HumanChatMessage{Content: "rewritten"})
			require.NoError(t, err)
		},
	}
	for name, change := range scenarios {
		for _, unit := range []memories.RecallUnit{memories.RecallTurns, memories.RecallExchanges} {
			t.Run(fmt.Sprint(name, "/", unit), func(t *testing.T) {
				sw, sr := build(t), build(t)
				w := &hooked{Store: sw, RecallSearcher: sw, Users: sw}
				w.after = func() { change(t, sw) }
				r := &hookedRanged{&hooked{Store: sr, RecallSearcher: sr, Users: sr}, sr}
				r.after = func() { change(t, sr) }
				opts := []memories.RecallOption{memories.WithRecallUnit(unit), memories.WithNeighbours(2), memories.WithK(3)}
				q := "When does the Lisbon lease renew?"
				want := recalled(t, newUserRecall(t, w, opts...), id("today"), q)
				got := recalled(t, newUserRecall(t, r, opts...), id("today"), q)
				t.Logf("%q", want)
				assert.Equal(t, want, got)
			})
		}
	}
}

// TestReview_RangedEqualsWholeRandom: random conversations (any message
// kind first, system messages anywhere, tool groups, prefixes removed at
// random points), random queries.
func TestReview_RangedEqualsWholeRandom(t *testing.T) {
	ctx := context.Background()
	words := []string{"lisbon", "lease", "march", "porto", "invoice", "billing", "tax", "deposit", "garden", "kitchen"}
	for _, be := range indexedBackends() {
		for seed := range 3 {
			t.Run(fmt.Sprint(be.name, seed), func(t *testing.T) {
				rng := newRand(uint64(seed))
				st := be.open(t, "rnd"+randomHex(4))
				text := func() string {
					s := ""
					for range 1 + rng.IntN(3) {
						s += words[rng.IntN(len(words))] + " "
					}
					return s
				}
				id := func(c int) memstack.Identity {
					return memstack.Identity{Tenant: "acme", User: "ana", Conversation: fmt.Sprint("c", c)}
				}
				for c := range 5 {
					n := 5 + rng.IntN(25)
					for i := range n {
						var msgs []llms.ChatMessage
						for range 1 + rng.IntN(3) {
							switch rng.IntN(6) {
							case 0:
								msgs = append(msgs, llms.SystemChatMessage{Content: "sys " + text()})
							case 1, 2:
								msgs = append(msgs, llms.HumanChatMessage{Content: text()})
							case 3:
								msgs = append(msgs, llms.AIChatMessage{Content: text()})
							case 4:
								cid := fmt.Sprint("call", c, i)
								msgs = append(msgs, llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: cid, Type: "function", FunctionCall: &llms.FunctionCall{Name: "f", Arguments: `{}`}}}},
									llms.ToolChatMessage{ID: cid, Content: text()})
							case 5:
								msgs = append(msgs, llms.ToolChatMessage{ID: "x", Content: text()})
							}
						}
						require.NoError(t, st.Append(ctx, id(c), msgs...))
					}
					if rng.IntN(2) == 0 {
						all, err := st.All(ctx, id(c))
						require.NoError(t, err)
						_, err = st.RemovePrefix(ctx, id(c), all[rng.IntN(len(all))].Seq)
						require.NoError(t, err)
					}
				}
				whole := wholeReads{st, st.(store.RecallSearcher), st.(store.Users)}
				nonEmpty := 0
				defer func() { t.Logf("non-empty: %d", nonEmpty) }()
				for _, unit := range []memories.RecallUnit{memories.RecallTurns, memories.RecallExchanges} {
					for _, n := range []int{0, 1, 2, 3} {
						for _, k := range []int{3, 20} {
							opts := []memories.RecallOption{memories.WithRecallUnit(unit), memories.WithNeighbours(n), memories.WithK(k)}
							ranged, wholly := newUserRecall(t, st, opts...), newUserRecall(t, whole, opts...)
							for range 6 {
								q := text()
								for _, here := range []memstack.Identity{id(9), id(rng.IntN(5))} {
									want := recalled(t, wholly, here, q)
									if want != "" {
										nonEmpty++
									}
									assert.Equal(t, want, recalled(t, ranged, here, q), "%s, %d neighbours, k %d, in %s: %q", unit, n, k, here.Conversation, q)
								}
							}
						}
					}
				}
			})
		}
	}
}

func newRand(seed uint64) *mrand.Rand { return mrand.New(mrand.NewPCG(seed, 7)) }
