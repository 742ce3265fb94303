package proof_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/benchcorpus"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
)

// TestRecall_SQLiteSearchesItsOwnIndex: a Recall with the default index
// over SQLite searches the index the store keeps beside its messages, and
// shows exactly what the same Recall shows over the in-memory store (the
// in-process index): for a conversation, and for a user whose past is one
// conversation, in turns and in exchanges. A replica that never saw the
// user (a fresh process: another Store and Recall over the file) recalls
// a turn another replica saved, indexing nothing in process.
func TestRecall_SQLiteSearchesItsOwnIndex(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for _, unit := range []memories.RecallUnit{memories.RecallTurns, memories.RecallExchanges} {
		for _, scope := range []memories.RecallScope{memories.RecallScopeConversation, memories.RecallScopeUser} {
			t.Run(fmt.Sprint(unit, "/", scope), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "recall.db")
				sq, err := sqlitestore.Open(ctx, path, sqlitestore.WithRecallIndex())
				require.NoError(t, err)
				t.Cleanup(func() { _ = sq.Close() })
				opts := []memories.RecallOption{memories.WithRecallUnit(unit), memories.WithRecallScope(scope), memories.WithK(4)}
				inProcess := newUserRecall(t, store.NewInMemory(), opts...)
				inDB := newUserRecall(t, sq, opts...)
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
			})
		}
	}

	// Another process: a Store and a Recall of their own over the file.
	path := filepath.Join(t.TempDir(), "replicas.db")
	a, err := sqlitestore.Open(ctx, path, sqlitestore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b, err := sqlitestore.Open(ctx, path, sqlitestore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
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
