package proof_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/benchcorpus"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/tmc/langchaingo/llms"
)

// indexedBackends are the backends that keep the recall index in their
// database (store.RecallSearcher), each as a function that opens a Store
// with the index on over the database named by db (a file, a table
// prefix): two calls with the same db are two processes' Stores over one
// database.
func indexedBackends() []struct {
	name string
	open func(t *testing.T, db string) store.Store
} {
	return []struct {
		name string
		open func(t *testing.T, db string) store.Store
	}{
		{"sqlite", func(t *testing.T, db string) store.Store {
			s, err := sqlitestore.Open(openCtx(t), filepath.Join(t.TempDir(), "..", db+".db"), sqlitestore.WithRecallIndex())
			return closeLater(t, "sqlitestore.Open", s, err)
		}},
		{"postgres", func(t *testing.T, db string) store.Store {
			dsn := testsvc.Postgres(t) + "&pool_max_conns=8"
			s, err := pgstore.Open(openCtx(t), dsn, pgstore.WithTablePrefix("ri_"+db+"_"), pgstore.WithRecallIndex())
			return closeLater(t, "pgstore.Open", s, err)
		}},
	}
}

// TestRecall_StoreSearchesItsOwnIndex: a Recall with the default index
// over SQLite or PostgreSQL searches the index the store keeps beside its
// messages, and
// shows exactly what the same Recall shows over the in-memory store (the
// in-process index): for a conversation, and for a user whose past is one
// conversation, in turns and in exchanges. A replica that never saw the
// user (a fresh process: another Store and Recall over the file) recalls
// a turn another replica saved, indexing nothing in process.
func TestRecall_StoreSearchesItsOwnIndex(t *testing.T) {
	for _, be := range indexedBackends() {
		t.Run(be.name, func(t *testing.T) { testStoreSearchesItsOwnIndex(t, be.open) })
	}
}

func testStoreSearchesItsOwnIndex(t *testing.T, open func(t *testing.T, db string) store.Store) {
	ctx := context.Background()
	run := randomHex(4)
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for _, unit := range []memories.RecallUnit{memories.RecallTurns, memories.RecallExchanges} {
		for _, scope := range []memories.RecallScope{memories.RecallScopeConversation, memories.RecallScopeUser} {
			t.Run(fmt.Sprint(unit, "/", scope), func(t *testing.T) {
				sq := open(t, fmt.Sprintf("r%s_%d_%d", run, unit, scope))
				opts := []memories.RecallOption{memories.WithRecallUnit(unit), memories.WithRecallScope(scope), memories.WithK(4)}
				mem := store.NewInMemory()
				inProcess := newUserRecall(t, mem, opts...)
				var mu sync.Mutex
				ops := map[string]int{}
				inDB := newUserRecall(t, sq, append(opts, memories.WithRecallHook(func(e memories.RecallEvent) {
					mu.Lock()
					defer mu.Unlock()
					ops[e.Op] += max(e.Exchanges, 1)
				}))...)
				id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}
				for i := range 120 {
					at := memstack.WithIdentity(memstack.WithTime(ctx, start.Add(time.Duration(i)*time.Minute)), id)
					for _, m := range []*memories.Recall{inProcess, inDB} {
						require.NoError(t, m.SaveContext(at, map[string]any{"input": benchcorpus.Human(i)}, map[string]any{"output": benchcorpus.AI(i)}))
					}
				}
				for q := range 25 {
					input := benchcorpus.Human(1000 + 37*q)
					assert.Equal(t, recalled(t, inProcess, id, input), recalled(t, inDB, id, input), "query %q", input)
				}
				// With a recent window left out (its units known, over the
				// store's index, from the conversation's tail), and a
				// tool call in the last turns.
				call := []llms.ChatMessage{llms.HumanChatMessage{Content: benchcorpus.Human(500)},
					llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "t1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"}}}},
					llms.ToolChatMessage{ID: "t1", Content: benchcorpus.AI(501)}, llms.AIChatMessage{Content: benchcorpus.AI(500)}}
				require.NoError(t, mem.Append(ctx, id, call...))
				require.NoError(t, sq.Append(ctx, id, call...))
				for _, exclude := range []int{1, 3, 6, 40} {
					o := append(slices.Clone(opts), memories.WithExcludeRecent(exclude))
					ip, db := newUserRecall(t, mem, o...), newUserRecall(t, sq, o...)
					for _, turn := range []int{500, 119, 118, 117, 115, 110, 100} {
						input := benchcorpus.Human(turn)
						assert.Equal(t, recalled(t, ip, id, input), recalled(t, db, id, input), "exclude %d, turn %d", exclude, turn)
					}
				}
				mu.Lock()
				assert.Zero(t, ops[memories.RecallOpIndex], "the Recall over the file indexed in process")
				assert.Positive(t, ops[memories.RecallOpSearch], "the Recall over the file searched it")
				mu.Unlock()
			})
		}
	}

	// A question naming a date, in a new conversation of the user: the
	// store's day index brings that day's turns of the user's earlier
	// conversation, which share no word with the question, as the
	// in-process day index does.
	t.Run("dated", func(t *testing.T) {
		for _, unit := range []memories.RecallUnit{memories.RecallTurns, memories.RecallExchanges} {
			sq := open(t, fmt.Sprintf("d%s_%d", run, unit))
			inProcess := newUserRecall(t, store.NewInMemory(), memories.WithRecallUnit(unit))
			inDB := newUserRecall(t, sq, memories.WithRecallUnit(unit))
			zone := time.FixedZone("UTC-7", -7*3600)
			earlier := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "march"}
			for i := range 30 {
				day := time.Date(2026, 3, 1+i/10, 23, i, 0, 0, zone) // late evening: another UTC day
				human, ai := benchcorpus.Human(i), benchcorpus.AI(i)
				if i == 14 {
					// The one turn of its day.
					day = time.Date(2026, 3, 5, 23, 0, 0, 0, zone)
					human, ai = "We picked the blue logo for the Porto shop.", "Blue logo it is."
				}
				at := memstack.WithIdentity(memstack.WithTime(ctx, day), earlier)
				for _, m := range []*memories.Recall{inProcess, inDB} {
					require.NoError(t, m.SaveContext(at, map[string]any{"input": human}, map[string]any{"output": ai}))
				}
			}
			now := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "today"}
			for _, q := range []string{"What did we settle on 5 March 2026?", "Remind me what happened in March 2026"} {
				got := recalled(t, inDB, now, q)
				assert.Equal(t, recalled(t, inProcess, now, q), got, "%s: %q", unit, q)
				if q[0] == 'W' {
					assert.Contains(t, got, "blue logo", "%s: the day's turns", unit)
				}
			}
		}
	})

	// Another process: a Store and a Recall of their own over the file.
	a, b := open(t, "p"+run), open(t, "p"+run)
	ra := newUserRecall(t, a)
	var mu sync.Mutex
	indexed := 0
	rb := newUserRecall(t, b, memories.WithRecallHook(func(e memories.RecallEvent) {
		mu.Lock()
		defer mu.Unlock()
		if e.Op == memories.RecallOpIndex {
			indexed += e.Exchanges
		}
	}))
	old := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "earlier"}
	for i := range 40 {
		saveTurn(t, ra, old, benchcorpus.Human(i), benchcorpus.AI(i))
	}
	saveTurn(t, ra, old, "We settled it: the Lisbon office renews the lease in March.", "Noted: Lisbon lease, March renewal.")
	next := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "today"}
	saveTurn(t, rb, next, "Hello again", "Hi Ana")
	got := recalled(t, rb, next, "When does the Lisbon lease renew?")
	assert.Contains(t, got, "Lisbon office renews the lease in March")
	// A turn saved by the first replica after the second's first load is
	// found by the second's next load.
	saveTurn(t, ra, old, "Also: the Porto warehouse closes in June.", "Noted: Porto closes in June.")
	assert.Contains(t, recalled(t, rb, next, "When does the Porto warehouse close?"), "Porto warehouse closes in June")
	mu.Lock()
	assert.Zero(t, indexed, "the second replica indexed units in process")
	mu.Unlock()
}

// TestRecall_StoreIndexFailuresNeverFailTheChain: a search of the store's
// index that fails — a row that does not decode, a timeout — is reported
// and the load goes on without hits, as a failed in-process search does.
func TestRecall_StoreIndexFailuresNeverFailTheChain(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "failing.db")
	sq, err := sqlitestore.Open(ctx, path, sqlitestore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sq.Close() })
	var mu sync.Mutex
	var failed []error
	m := newUserRecall(t, sq, memories.WithRecallHook(func(e memories.RecallEvent) {
		if e.Err != nil {
			mu.Lock()
			failed = append(failed, e.Err)
			mu.Unlock()
		}
	}))
	a := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "a"}
	b := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "b"}
	saveTurn(t, m, a, "The Lisbon lease renews in March.", "Noted.")
	saveTurn(t, m, b, "The Porto lease renews in June.", "Noted.")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(`UPDATE memstack_recall_conv SET state = X'02' WHERE identity = ?`, b.Key())
	require.NoError(t, err)
	got := recalled(t, m, a, "When does the Lisbon lease renew?") // no error: recalled requires none
	assert.NotContains(t, got, "Porto")
	mu.Lock()
	require.NotEmpty(t, failed, "the failed search was reported")
	assert.ErrorIs(t, failed[0], store.ErrCorrupt)
	mu.Unlock()

	short := newUserRecall(t, sq, memories.WithRecallTimeout(time.Nanosecond))
	_ = recalled(t, short, a, "When does the Lisbon lease renew?") // a timed-out search: no error either
}

// notReady is a store whose recall index is never ready: a Recall over it
// works as over any store (its in-process index and, without a change
// feed, the user's recall journal).
type notReady struct{ *store.InMemory }

func (notReady) SearchRecall(context.Context, store.RecallScope, indexkit.Query) ([]store.RecallHit, error) {
	return nil, store.ErrRecallNotReady
}

func (notReady) RecallDated(context.Context, store.RecallScope, indexkit.Kind, int32, int32) ([]store.RecallHit, error) {
	return nil, store.ErrRecallNotReady
}

// TestRecall_StoreIndexNotReadyKeepsTheJournal: until a store's index is
// ready a user-scoped Recall over a store without a change feed records
// its saves in the user's journal, so another replica's warm index sees
// them.
func TestRecall_StoreIndexNotReadyKeepsTheJournal(t *testing.T) {
	st := notReady{store.NewInMemory()}
	ra, rb := newUserRecall(t, st), newUserRecall(t, st)
	old := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "earlier"}
	next := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "today"}
	saveTurn(t, ra, old, "We settled it: the Lisbon office renews the lease in March.", "Noted.")
	saveTurn(t, rb, next, "Hello again", "Hi Ana")
	assert.Contains(t, recalled(t, rb, next, "When does the Lisbon lease renew?"), "Lisbon office renews")
	saveTurn(t, ra, old, "Also: the Porto warehouse closes in June.", "Noted: Porto closes in June.")
	assert.Contains(t, recalled(t, rb, next, "When does the Porto warehouse close?"), "Porto warehouse closes in June")
}

// TestRecall_StoreIndexShowsNoDerivedConversation: a derived conversation
// of the user (the recall journal, written by an older version or by
// hand) is in the file's index like any other, and never shown.
func TestRecall_StoreIndexShowsNoDerivedConversation(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "derived.db"), sqlitestore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sq.Close() })
	journal := memstack.Identity{Tenant: "acme", User: "ana", Conversation: memories.RecallJournalConversation}
	require.NoError(t, sq.Append(ctx, journal, llms.HumanChatMessage{Content: `["ana","lisbon-lease-march"]`}))
	m := newUserRecall(t, sq)
	here := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "today"}
	saveTurn(t, m, here, "Hello", "Hi")
	for _, q := range []string{"lisbon lease march", "What happened in " + time.Now().Format("January 2006") + "?"} {
		assert.NotContains(t, recalled(t, m, here, q), "lisbon-lease-march", q)
	}
}

// wholeReads is a store with its recall index whose reads of stretches of
// conversations are hidden (not a store.RangeReader): a Recall over it
// reads each conversation it shows whole.
type wholeReads struct {
	store.Store
	store.RecallSearcher
	store.Users
}

// TestRecall_StoreIndexReadsOnlyTheStretchesItShows: over a store that
// searches its own index, a user-scoped load reads of each other
// conversation only the units around its hits (store.RangeReader), and
// shows exactly what the same Recall shows reading those conversations
// whole — with tool calls and results, system messages between turns,
// hits close together and far apart in one conversation, a prefix
// removed, for turns and exchanges, each number of neighbours, from a
// new conversation and from one of the user's.
func TestRecall_StoreIndexReadsOnlyTheStretchesItShows(t *testing.T) {
	ctx := context.Background()
	for _, be := range indexedBackends() {
		t.Run(be.name, func(t *testing.T) {
			st := be.open(t, "ranges"+randomHex(4))
			whole := wholeReads{st, st.(store.RecallSearcher), st.(store.Users)}
			_, isRanger := any(whole).(store.RangeReader)
			require.False(t, isRanger)
			user := func(c int) memstack.Identity {
				return memstack.Identity{Tenant: "acme", User: "ana", Conversation: fmt.Sprintf("c%d", c)}
			}
			k := 0
			for c := range 6 {
				for i := range 30 {
					k++
					msgs := []llms.ChatMessage{llms.HumanChatMessage{Content: benchcorpus.Human(k)}}
					switch {
					case k%7 == 3:
						msgs = append(msgs,
							llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: fmt.Sprint("call", k), Type: "function", FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{"q":"invoice"}`}}}},
							llms.ToolChatMessage{ID: fmt.Sprint("call", k), Content: benchcorpus.AI(k + 1000)})
					case k%11 == 5:
						msgs = append(msgs, llms.SystemChatMessage{Content: "Be brief."})
					}
					msgs = append(msgs, llms.AIChatMessage{Content: benchcorpus.AI(k)})
					if i == 0 && c%2 == 1 {
						msgs = append([]llms.ChatMessage{llms.SystemChatMessage{Content: "You help with paperwork."}}, msgs...)
					}
					require.NoError(t, st.Append(ctx, user(c), msgs...))
				}
			}
			all, err := st.All(ctx, user(2))
			require.NoError(t, err)
			_, err = st.RemovePrefix(ctx, user(2), all[20].Seq)
			require.NoError(t, err)
			for _, unit := range []memories.RecallUnit{memories.RecallTurns, memories.RecallExchanges} {
				for _, n := range []int{0, 1, 2} {
					opts := []memories.RecallOption{memories.WithRecallUnit(unit), memories.WithNeighbours(n), memories.WithK(6)}
					ranged, wholly := newUserRecall(t, st, opts...), newUserRecall(t, whole, opts...)
					for q := range 12 {
						input := benchcorpus.Human(3 + 13*q)
						for _, here := range []memstack.Identity{user(9), user(q % 6)} {
							want := recalled(t, wholly, here, input)
							require.NotEmpty(t, want)
							assert.Equal(t, want, recalled(t, ranged, here, input), "%s, %d neighbours, in %s: %q", unit, n, here.Conversation, input)
						}
					}
				}
			}
		})
	}
}
