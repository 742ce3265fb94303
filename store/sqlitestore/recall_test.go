package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
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
	s := open(t, path, sqlitestore.WithRecallIndex())
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
	s = open(t, path, sqlitestore.WithRecallIndex())
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
	s = open(t, path, sqlitestore.WithRecallIndex())
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
	s = open(t, path, sqlitestore.WithRecallIndex())
	waitReady(t, s)
	assert.Equal(t, searchAll(t, s, users, append(convs, extra)), got)
}

// TestRecallCorruptIndexRowsAreRebuilt: an index row changed behind the
// store's back (a state or a unit chunk that does not decode) fails no
// write — not an Append to another conversation in the same group commit,
// not an Append or a RemovePrefix of its own conversation — and is
// rebuilt from the messages: the search then finds what the same file
// indexed afresh finds.
func TestRecallCorruptIndexRowsAreRebuilt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "corrupt.db")
	s := open(t, path, sqlitestore.WithRecallIndex())
	x := memstack.Identity{Tenant: "t", User: "u", Conversation: "x"}
	y := memstack.Identity{Tenant: "t", User: "v", Conversation: "y"}
	for i := range 10 {
		require.NoError(t, s.Append(ctx, x, llms.HumanChatMessage{Content: fmt.Sprint("invoice ", i)}, llms.AIChatMessage{Content: "refund paris"}))
	}
	db := rawDB(t, path)
	_, err := db.Exec(`UPDATE memstack_recall_conv SET state = X'02' WHERE identity = ?`, x.Key())
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Go(func() { errs <- s.Append(ctx, y, llms.HumanChatMessage{Content: fmt.Sprint("memo ", i)}) })
		wg.Go(func() { errs <- s.Append(ctx, x, llms.HumanChatMessage{Content: fmt.Sprint("invoice again ", i)}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	search := func(s *sqlitestore.Store) []store.RecallHit {
		t.Helper()
		var out []store.RecallHit
		for _, in := range []store.RecallScope{{Conversation: &x}, {Scope: store.TenantScope("t")}} {
			hits, err := s.SearchRecall(ctx, in, indexkit.Query{Terms: indexkit.QueryTerms("invoice paris memo"), Near: [2]float64{0.5, 0.25}, K: 100})
			require.NoError(t, err)
			out = append(out, hits...)
		}
		return out
	}
	afresh := func() []store.RecallHit {
		t.Helper()
		require.NoError(t, s.Close())
		makeV3(t, path)
		s = open(t, path, sqlitestore.WithRecallIndex())
		waitReady(t, s)
		return search(s)
	}
	got := search(s)
	require.Len(t, got, 40+40+20, "x's 40 turns, and y's 20 in the tenant's scope")
	assert.Equal(t, afresh(), got)

	// A unit chunk that does not decode: RemovePrefix rebuilds.
	db = rawDB(t, path)
	_, err = db.Exec(`UPDATE memstack_recall_units SET data = X'0102' WHERE identity = ?`, x.Key())
	require.NoError(t, err)
	recs, err := s.All(ctx, x)
	require.NoError(t, err)
	n, err := s.RemovePrefix(ctx, x, recs[9].Seq)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	got = search(s)
	require.Len(t, got, 30+30+20)
	assert.Equal(t, afresh(), got)
}

// TestRecallSearchNeverTakesTheWriteLock: over a database whose
// transactions BEGIN IMMEDIATE by default (New's caller chooses), a
// search reads while another connection holds the write lock.
func TestRecallSearchNeverTakesTheWriteLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "immediate.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(2000)&_txlock=immediate")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	s, err := sqlitestore.New(db, sqlitestore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	id := memstack.Identity{Tenant: "t", User: "u", Conversation: "c"}
	require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: "invoice"}))
	holder := rawDB(t, path)
	tx, err := holder.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.Exec(`DELETE FROM memstack_schema WHERE 0`) // takes the write lock
	require.NoError(t, err)
	defer tx.Rollback() //nolint:errcheck
	start := time.Now()
	hits, err := s.SearchRecall(ctx, store.RecallScope{Conversation: &id}, indexkit.Query{Terms: indexkit.QueryTerms("invoice"), K: 1})
	require.NoError(t, err)
	assert.Len(t, hits, 1)
	assert.Less(t, time.Since(start), time.Second, "the search waited for the write lock")
}

// TestRecallIndexIsTheFiles: without WithRecallIndex a file keeps no
// recall index (an Append writes no index row, SearchRecall says
// ErrRecallNotReady); a Store opening it with the option turns it on for
// the file — the messages already there are indexed in the background —
// and from then on every Store on the file keeps it, also one opened
// without the option (another process), whose appends are found.
func TestRecallIndexIsTheFiles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "off.db")
	a := open(t, path)
	c1 := memstack.Identity{Tenant: "t", User: "u", Conversation: "c1"}
	c2 := memstack.Identity{Tenant: "t", User: "u", Conversation: "c2"}
	require.NoError(t, a.Append(ctx, c1, llms.HumanChatMessage{Content: "the invoice for paris"}, llms.AIChatMessage{Content: "sent"}))
	db := rawDB(t, path)
	for _, table := range []string{"memstack_recall_conv", "memstack_recall_units", "memstack_recall_terms", "memstack_recall_days"} {
		var n int
		require.NoError(t, db.QueryRow(`SELECT count(*) FROM `+table).Scan(&n))
		assert.Zero(t, n, "%s: rows written with the index off", table)
	}
	user := store.RecallScope{Scope: store.UserScope("t", "u")}
	q := indexkit.Query{Terms: indexkit.QueryTerms("invoice paris lisbon"), Near: [2]float64{0.5, 0.25}, K: 10}
	_, err := a.SearchRecall(ctx, user, q)
	require.ErrorIs(t, err, store.ErrRecallNotReady)

	b := open(t, path, sqlitestore.WithRecallIndex())
	waitReady(t, b)
	require.NoError(t, a.Append(ctx, c1, llms.HumanChatMessage{Content: "and the lisbon invoice"}))
	require.NoError(t, a.Append(ctx, c2, llms.HumanChatMessage{Content: "lisbon, in a new conversation"}))
	got, err := b.SearchRecall(ctx, user, q)
	require.NoError(t, err)
	require.Len(t, got, 4, "every turn, the ones the Store without the option appended too")
	again, err := a.SearchRecall(ctx, user, q)
	require.NoError(t, err, "the Store without the option searches the file's index too")
	assert.Equal(t, got, again)

	// What a fresh index of the same messages finds.
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	makeV3(t, path)
	c := open(t, path, sqlitestore.WithRecallIndex())
	waitReady(t, c)
	fresh, err := c.SearchRecall(ctx, user, q)
	require.NoError(t, err)
	assert.Equal(t, fresh, got)

	_, err = sqlitestore.Open(ctx, path, sqlitestore.WithReadOnly(), sqlitestore.WithRecallIndex())
	require.ErrorIs(t, err, store.ErrInvalidArgument)
}
