package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/sqlitestore"
)

// makeV3 turns a file written by this build into one of schema version 3
// with the same messages: no recall index.
func makeV3(t *testing.T, path string) {
	db := rawDB(t, path)
	for _, q := range []string{
		`DROP TABLE memstack_recall_conv`, `DROP TABLE memstack_recall_units`, `DROP TABLE memstack_recall_terms`,
		`DROP TABLE memstack_recall_meta`, `UPDATE memstack_schema SET version = 3`,
	} {
		_, err := db.Exec(q)
		require.NoError(t, err, q)
	}
	require.NoError(t, db.Close())
}

// searchAll runs the same searches on s: every user's scope and every
// conversation, for a few queries.
func searchAll(t *testing.T, s *sqlitestore.Store, users []string, convs []memstack.Identity) []store.RecallHit {
	t.Helper()
	ctx := context.Background()
	var out []store.RecallHit
	for _, q := range []string{"invoice refund", "paris hotel", "battery", "turn 7"} {
		query := indexkit.Query{Terms: indexkit.QueryTerms(q), Near: [2]float64{0.5, 0.25}, K: 20}
		for _, u := range users {
			hits, err := s.SearchRecall(ctx, store.RecallScope{Scope: store.UserScope("acme", u)}, query)
			require.NoError(t, err)
			out = append(out, hits...)
		}
		for _, c := range convs {
			hits, err := s.SearchRecall(ctx, store.RecallScope{Conversation: &c}, query)
			require.NoError(t, err)
			out = append(out, hits...)
		}
	}
	return out
}

// waitReady waits until s's recall index is complete.
func waitReady(t *testing.T, s *sqlitestore.Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.SearchRecall(context.Background(), store.RecallScope{Scope: store.UserScope("acme", "u0")}, indexkit.Query{Terms: []string{"x"}, K: 1})
		if !errors.Is(err, store.ErrRecallNotReady) {
			require.NoError(t, err)
			return
		}
		require.True(t, time.Now().Before(deadline), "the backfill did not finish")
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRecallBackfillResumes: a file of version 3 is indexed by the
// migration in the background, resumably — stopped part-way (its Store
// closed), the next Open goes on — while appends go on: to conversations
// already indexed (indexed at once), not yet indexed (left to the
// backfill) and new ones. Until it is done SearchRecall says
// ErrRecallNotReady; then it finds exactly what the same file indexed as
// it was written finds.
func TestRecallBackfillResumes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	s := open(t, path)
	var users []string
	var convs []memstack.Identity
	words := []string{"invoice refund", "paris hotel", "battery charger", "seat window", "visa passport"}
	for u := range 4 {
		users = append(users, fmt.Sprint("u", u))
		for c := range 5 {
			id := memstack.Identity{Tenant: "acme", User: fmt.Sprint("u", u), Conversation: fmt.Sprint("c", c)}
			convs = append(convs, id)
			for i := range 12 {
				require.NoError(t, s.Append(ctx, id,
					llms.HumanChatMessage{Content: fmt.Sprintf("turn %d about %s", i, words[(u+c+i)%len(words)])},
					llms.AIChatMessage{Content: fmt.Sprintf("answer %d: %s", i, words[(u*c+i)%len(words)])}))
			}
		}
	}
	require.NoError(t, s.Close())
	makeV3(t, path)

	// Stop the backfill after two transactions of one conversation each.
	var txs atomic.Int32
	stopped := make(chan struct{})
	restore := sqlitestore.SetBackfill(1, func() {
		if txs.Add(1) == 2 {
			close(stopped)
		}
	})
	s = open(t, path)
	<-stopped
	_, err := s.SearchRecall(ctx, store.RecallScope{Scope: store.UserScope("acme", "u0")}, indexkit.Query{Terms: []string{"invoic"}, K: 3})
	require.ErrorIs(t, err, store.ErrRecallNotReady, "searching a file not yet indexed")
	require.NoError(t, s.Close())
	restore()
	db := rawDB(t, path)
	var indexed, total int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM memstack_recall_conv`).Scan(&indexed))
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM memstack_stat`).Scan(&total))
	assert.Greater(t, indexed, 0, "the first Open indexed some conversations")
	assert.Less(t, indexed, total, "and stopped before the end")

	// The next Open goes on; appends meanwhile.
	restore = sqlitestore.SetBackfill(30, nil)
	defer restore()
	s = open(t, path)
	extra := memstack.Identity{Tenant: "acme", User: "u1", Conversation: "new"}
	for _, id := range []memstack.Identity{convs[0], convs[len(convs)-1], extra} {
		require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: "invoice refund for the paris hotel"}, llms.AIChatMessage{Content: "refund sent"}))
	}
	waitReady(t, s)
	got := searchAll(t, s, users, append(convs, extra))
	require.NotEmpty(t, got)
	require.NoError(t, s.Close())

	// The same messages indexed afresh (the whole file by the backfill)
	// rank the same.
	makeV3(t, path)
	s = open(t, path)
	waitReady(t, s)
	assert.Equal(t, searchAll(t, s, users, append(convs, extra)), got)
}
