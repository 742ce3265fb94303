package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/pgstore"
)

// rawPool is a pool of its own on the test server, closed at the end of
// the test.
func rawPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testsvc.Postgres(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// recallTables are the recall index's tables under prefix.
func recallTables(prefix string) []string {
	var out []string
	for _, t := range []string{"recall_conv", "recall_units", "recall_posts", "recall_days"} {
		out = append(out, pgx.Identifier{prefix + t}.Sanitize())
	}
	return out
}

// fillUsers appends, through s, turns turns to each of convs
// conversations of each of users users of tenant "acme", conversation by
// conversation (so their numbers in their users follow their names), and
// returns the users' names and the conversations.
func fillUsers(t *testing.T, s *pgstore.Store, users, convs, turns int) ([]string, []memstack.Identity) {
	t.Helper()
	ctx := context.Background()
	var names []string
	var ids []memstack.Identity
	words := []string{"invoice refund", "paris hotel", "battery charger", "seat window", "visa passport"}
	for u := range users {
		names = append(names, fmt.Sprint("u", u))
		for c := range convs {
			id := memstack.Identity{Tenant: "acme", User: fmt.Sprint("u", u), Conversation: fmt.Sprint("c", c)}
			ids = append(ids, id)
			for i := range turns {
				require.NoError(t, s.Append(ctx, id,
					llms.HumanChatMessage{Content: fmt.Sprintf("turn %d about %s", i, words[(u+c+i)%len(words)])},
					llms.AIChatMessage{Content: fmt.Sprintf("answer %d: %s", i, words[(u*c+i)%len(words)])}))
			}
		}
	}
	return names, ids
}

// makeV3 turns tables written by this build into tables of schema version
// 3 with the same messages: no recall index.
func makeV3(t *testing.T, prefix string) {
	t.Helper()
	pool := rawPool(t)
	for _, q := range append(
		func() (out []string) {
			for _, table := range append(recallTables(prefix), pgx.Identifier{prefix + "recall_meta"}.Sanitize()) {
				out = append(out, "DROP TABLE "+table)
			}
			return out
		}(),
		"UPDATE "+pgx.Identifier{prefix + "schema"}.Sanitize()+" SET version = 3",
	) {
		_, err := pool.Exec(context.Background(), q)
		require.NoError(t, err, q)
	}
}

// searchAll runs the same searches on s: every user's scope, the tenant
// and every conversation, for a few queries.
func searchAll(t *testing.T, s *pgstore.Store, users []string, convs []memstack.Identity) []store.RecallHit {
	t.Helper()
	ctx := context.Background()
	var out []store.RecallHit
	for _, q := range []string{"invoice refund", "paris hotel", "battery", "turn 7"} {
		query := indexkit.Query{Terms: indexkit.QueryTerms(q), Near: [2]float64{0.5, 0.25}, K: 20}
		scopes := []store.RecallScope{{Scope: store.TenantScope("acme")}}
		for _, u := range users {
			scopes = append(scopes, store.RecallScope{Scope: store.UserScope("acme", u)})
		}
		for _, c := range convs {
			scopes = append(scopes, store.RecallScope{Conversation: &c})
		}
		for _, in := range scopes {
			hits, err := s.SearchRecall(ctx, in, query)
			require.NoError(t, err, in.String())
			out = append(out, hits...)
		}
	}
	return out
}

// waitReady waits until s's recall index is complete.
func waitReady(t *testing.T, s *pgstore.Store) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
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

// TestRecallBackfillResumes: tables of schema version 3 are indexed by
// the migration in the background, resumably — stopped part-way (its
// Store closed), the next Open goes on — while appends go on: to
// conversations already indexed (indexed at once), not yet indexed (left
// to the backfill) and new ones. Until it is done SearchRecall says
// ErrRecallNotReady; then it finds exactly what the same tables indexed
// as they were written find.
func TestRecallBackfillResumes(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("backfill")
	s := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	users, convs := fillUsers(t, s, 4, 5, 12)
	written := searchAll(t, s, users, convs)
	require.NotEmpty(t, written)
	require.NoError(t, s.Close())
	makeV3(t, prefix)

	// Hold the backfill after two conversations, then close its Store.
	var done atomic.Int32
	stopped, release := make(chan struct{}), make(chan struct{})
	restore := pgstore.SetAfterBackfill(func() {
		if n := done.Add(1); n == 2 {
			close(stopped)
		}
		if done.Load() >= 2 {
			<-release
		}
	})
	s = open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	<-stopped
	_, err := s.SearchRecall(ctx, store.RecallScope{Scope: store.UserScope("acme", "u0")}, indexkit.Query{Terms: []string{"invoic"}, K: 3})
	require.ErrorIs(t, err, store.ErrRecallNotReady, "searching tables not yet indexed")
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }() // cancels the backfill, then waits for it
	time.Sleep(50 * time.Millisecond)
	close(release)
	require.NoError(t, <-closed)
	restore()
	pool := rawPool(t)
	var indexed int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+recallTables(prefix)[0]).Scan(&indexed))
	assert.GreaterOrEqual(t, indexed, 2, "the first Open indexed some conversations")
	assert.Less(t, indexed, len(convs), "and stopped before the end")

	// The same searches agree with the index written with the messages
	// (before any more appends).
	s = open(t, pgstore.WithTablePrefix(prefix))
	waitReady(t, s)
	assert.Equal(t, written, searchAll(t, s, users, convs), "the backfill's index ranks as the one written with the messages")

	// Appends during a backfill: to an indexed conversation, one not yet
	// indexed and a new one.
	makeV3(t, prefix)
	var first atomic.Bool
	hold, release2 := make(chan struct{}), make(chan struct{})
	restore = pgstore.SetAfterBackfill(func() {
		if first.CompareAndSwap(false, true) {
			close(hold)
			<-release2
		}
	})
	defer restore()
	s2 := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	<-hold
	extra := memstack.Identity{Tenant: "acme", User: "u1", Conversation: "new"}
	for _, id := range []memstack.Identity{convs[0], convs[len(convs)-1], extra} {
		require.NoError(t, s2.Append(ctx, id, llms.HumanChatMessage{Content: "invoice refund for the paris hotel"}, llms.AIChatMessage{Content: "refund sent"}))
	}
	close(release2)
	waitReady(t, s2)
	got := searchAll(t, s2, users, append(convs, extra))
	require.NoError(t, s2.Close())

	// The same messages indexed afresh rank the same.
	makeV3(t, prefix)
	s3 := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	waitReady(t, s3)
	assert.Equal(t, searchAll(t, s3, users, append(convs, extra)), got)
}

// TestRecallCorruptIndexRowsAreRebuilt: an index row changed behind the
// store's back (a state or a unit chunk that does not decode) fails no
// write — not an Append of another conversation in the same
// AppendBatches, not concurrent Appends or a RemovePrefix of its own
// conversation — and is rebuilt from the messages: the search then finds
// what the same tables indexed afresh find.
func TestRecallCorruptIndexRowsAreRebuilt(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("corrupt")
	s := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	x := memstack.Identity{Tenant: "t", User: "u", Conversation: "x"}
	y := memstack.Identity{Tenant: "t", User: "v", Conversation: "y"}
	for i := range 10 {
		require.NoError(t, s.Append(ctx, x, llms.HumanChatMessage{Content: fmt.Sprint("invoice ", i)}, llms.AIChatMessage{Content: "refund paris"}))
	}
	pool := rawPool(t)
	_, err := pool.Exec(ctx, "UPDATE "+recallTables(prefix)[0]+" SET state = '\\x02'::bytea WHERE id_key = $1", x.Key())
	require.NoError(t, err)
	require.NoError(t, s.AppendBatches(ctx,
		store.Batch{ID: y, Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: "memo first"}}},
		store.Batch{ID: x, Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: "invoice in a batch"}}}))
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 19 {
		wg.Go(func() { errs <- s.Append(ctx, y, llms.HumanChatMessage{Content: fmt.Sprint("memo ", i)}) })
		wg.Go(func() { errs <- s.Append(ctx, x, llms.HumanChatMessage{Content: fmt.Sprint("invoice again ", i)}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	search := func(s *pgstore.Store) []store.RecallHit {
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
		makeV3(t, prefix)
		s = open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
		waitReady(t, s)
		return search(s)
	}
	got := search(s)
	require.Len(t, got, 40+40+20, "x's 40 turns, and y's 20 in the tenant's scope")
	assert.Equal(t, afresh(), got)

	// A unit chunk that does not decode: RemovePrefix rebuilds.
	_, err = pool.Exec(ctx, "UPDATE "+recallTables(prefix)[1]+" SET data = '\\x0102'::bytea WHERE id_hash = (SELECT id_hash FROM "+recallTables(prefix)[0]+" WHERE id_key = $1)", x.Key())
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

// TestRecallIndexIsTheTables: without WithRecallIndex the tables keep no
// recall index (an Append writes no index row, SearchRecall says
// ErrRecallNotReady); a Store opening them with the option turns it on —
// the messages already there are indexed in the background — and from
// then on every Store on them keeps it, also one opened before without
// the option (another process, which last saw the index off): its
// Append, AppendBatches, RemovePrefix and Rewrite are indexed, and found.
func TestRecallIndexIsTheTables(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("off")
	a := open(t, pgstore.WithTablePrefix(prefix))
	c1 := memstack.Identity{Tenant: "t", User: "u", Conversation: "c1"}
	c2 := memstack.Identity{Tenant: "t", User: "u", Conversation: "c2"}
	c3 := memstack.Identity{Tenant: "t", User: "u", Conversation: "c3"}
	require.NoError(t, a.Append(ctx, c1, llms.HumanChatMessage{Content: "the invoice for paris"}, llms.AIChatMessage{Content: "sent"}))
	pool := rawPool(t)
	for _, table := range recallTables(prefix) {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n))
		assert.Zero(t, n, "%s: rows written with the index off", table)
	}
	user := store.RecallScope{Scope: store.UserScope("t", "u")}
	q := indexkit.Query{Terms: indexkit.QueryTerms("invoice paris lisbon"), Near: [2]float64{0.5, 0.25}, K: 10}
	_, err := a.SearchRecall(ctx, user, q)
	require.ErrorIs(t, err, store.ErrRecallNotReady)

	b := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	waitReady(t, b)
	// a still believes the index off: each of its writes is refused by
	// the guard and done again the indexed way.
	require.NoError(t, a.Append(ctx, c1, llms.HumanChatMessage{Content: "and the lisbon invoice"}))
	require.NoError(t, a.AppendBatches(ctx, store.Batch{ID: c2, Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: "lisbon, in a new conversation"}}}))
	require.NoError(t, a.Append(ctx, c3, llms.HumanChatMessage{Content: "paris again"}, llms.AIChatMessage{Content: "lisbon then"}))
	recs, err := a.All(ctx, c3)
	require.NoError(t, err)
	_, err = a.RemovePrefix(ctx, c3, recs[0].Seq)
	require.NoError(t, err)
	_, err = a.Rewrite(ctx, c2, 0, false, llms.HumanChatMessage{Content: "a rewritten paris note"})
	require.NoError(t, err)
	got, err := b.SearchRecall(ctx, user, q)
	require.NoError(t, err)
	again, err := a.SearchRecall(ctx, user, q)
	require.NoError(t, err, "the Store without the option searches the tables' index too")
	assert.Equal(t, got, again)

	// What a fresh index of the same messages finds.
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	makeV3(t, prefix)
	c := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	waitReady(t, c)
	fresh, err := c.SearchRecall(ctx, user, q)
	require.NoError(t, err)
	require.Len(t, fresh, 6, "c1's three turns, c2's two, c3's one left")
	assert.Equal(t, fresh, got)
}

// TestRecallSearchInEveryQueryMode: a search reads its rows in place when
// pgx receives bytea in binary (the default query mode) and scans them
// when it receives text (the simple protocol, as behind a pooler in
// transaction mode): the same hits, with their spans, either way.
func TestRecallSearchInEveryQueryMode(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("modes")
	st := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	for c := range 4 {
		id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: fmt.Sprintf("c%d", c)}
		for i := range 6 {
			require.NoError(t, st.Append(ctx, id, llms.HumanChatMessage{Content: fmt.Sprintf("lease %d in Lisbon, offsite %d", i, c)},
				llms.AIChatMessage{Content: fmt.Sprintf("noted: lease %d", i*c)}))
		}
	}
	q := indexkit.Query{Terms: indexkit.QueryTerms("Lisbon lease offsite 3"), Kind: indexkit.Exchanges, Near: [2]float64{0.5, 0.25}, K: 10, Reach: 2}
	scope := store.RecallScope{Scope: store.UserScope("acme", "ana")}
	want, err := st.SearchRecall(ctx, scope, q)
	require.NoError(t, err)
	require.Len(t, want, 10)
	for _, mode := range []string{"simple_protocol", "exec", "describe_exec", "cache_describe"} {
		s, err := pgstore.Open(ctx, testsvc.Postgres(t)+"&default_query_exec_mode="+mode, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
		require.NoError(t, err, mode)
		got, err := s.SearchRecall(ctx, scope, q)
		require.NoError(t, err, mode)
		assert.Equal(t, want, got, mode)
		_ = s.Close()
	}
}

// makeV4 turns tables written by this build, with the recall index on and
// complete, into tables of schema version 4 with the same messages and an
// index kept the version-4 way (its postings by conversation: here one
// row, the migration reads none of them).
func makeV4(t *testing.T, prefix string) {
	t.Helper()
	pool := rawPool(t)
	name := func(s string) string { return pgx.Identifier{prefix + s}.Sanitize() }
	for _, q := range []string{
		"DROP TABLE " + name("recall_posts"),
		"ALTER TABLE " + name("recall_conv") + " DROP COLUMN convno",
		"CREATE TABLE " + name("recall_terms") + ` (ns text NOT NULL, term text COLLATE "C" NOT NULL, scope_t bytea NOT NULL, scope_u bytea NOT NULL,
	id_hash bytea NOT NULL, chunk bigint NOT NULL, data bytea NOT NULL, PRIMARY KEY (ns, term, scope_t, scope_u, id_hash, chunk))`,
		"CREATE INDEX " + name("recall_terms_conv") + " ON " + name("recall_terms") + " (id_hash, ns, chunk)",
		"INSERT INTO " + name("recall_terms") + " SELECT ns, 'invoic', scope_t, scope_u, id_hash, 0, '\\x'::bytea FROM " + name("recall_conv") + " LIMIT 1",
		"UPDATE " + name("schema") + " SET version = 4",
	} {
		_, err := pool.Exec(context.Background(), q)
		require.NoError(t, err, q)
	}
}

// TestRecallMigratesVersion4: tables of schema version 4 with the index
// on are migrated to version 5 by Open — the conversations' postings
// table gives way to the groups' — and their index is rebuilt from the
// messages by the backfill, after which every search finds exactly what
// the same tables indexed as they were written find.
func TestRecallMigratesVersion4(t *testing.T) {
	prefix := freshPrefix("v4")
	s := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	waitReady(t, s)
	// More conversations per user than the 32 whose posting groups are
	// their own: the later ones share rows with the first.
	users, convs := fillUsers(t, s, 2, 40, 3)
	written := searchAll(t, s, users, convs)
	require.NotEmpty(t, written)
	require.NoError(t, s.Close())
	makeV4(t, prefix)

	s = open(t, pgstore.WithTablePrefix(prefix))
	admin := adminConn(t)
	assert.Equal(t, pgstore.SchemaVersion, schemaVersion(t, admin, prefix))
	assert.NotContains(t, tablesOf(t, admin, prefix), prefix+"recall_terms", "version 4's postings are dropped")
	waitReady(t, s)
	assert.Equal(t, written, searchAll(t, s, users, convs), "searches after the migration")
}
