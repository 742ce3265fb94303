package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/store/storekit"
)

// planNode is one row of EXPLAIN QUERY PLAN.
type planNode struct {
	id, parent int
	detail     string
}

// checkTailPlan checks the query plan of Tail's statement in db: every
// read of memstack_messages is a SEARCH of an index — the system
// messages from memstack_messages_system, the newest ones by a range of
// memstack_messages_conv — none a SCAN, and no read of the table is
// sorted (a temporary B-tree next to it would sort every row it reads:
// the newest n must come in index order, so LIMIT stops the seek).
func checkTailPlan(t *testing.T, db *sql.DB) {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+sqlitestore.TailSQL, "ns", "key", 0, 10)
	require.NoError(t, err)
	defer rows.Close()
	var plan []planNode
	for rows.Next() {
		var n planNode
		var unused int
		require.NoError(t, rows.Scan(&n.id, &n.parent, &unused, &n.detail))
		plan = append(plan, n)
	}
	require.NoError(t, rows.Err())
	var reads []string
	for _, n := range plan {
		if !strings.Contains(n.detail, "memstack_messages") {
			continue
		}
		reads = append(reads, n.detail)
		for _, m := range plan {
			if m.parent == n.parent && strings.Contains(m.detail, "TEMP B-TREE") {
				t.Errorf("the rows of %q are sorted (%q): Tail would read them all", n.detail, m.detail)
			}
		}
	}
	slices.Sort(reads)
	assert.Equal(t, []string{
		"SEARCH memstack_messages USING INDEX memstack_messages_conv (ns=? AND identity=? AND seq>?)",
		"SEARCH memstack_messages USING INDEX memstack_messages_system (ns=? AND identity=?)",
	}, reads, "Tail reads memstack_messages through its two indexes only; plan: %v", plan)
}

// TestTailQueryPlan: Tail's statement reads only index ranges of the
// conversation, and a file without the partial index of system messages
// cannot be opened — its statement does not prepare — rather than have
// Tail read the whole conversation.
func TestTailQueryPlan(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path)
	require.NoError(t, s.Append(ctx, alice, llms.SystemChatMessage{Content: "s"}, llms.HumanChatMessage{Content: "h"}))
	db := rawDB(t, path)
	checkTailPlan(t, db)
	require.NoError(t, s.Close())

	_, err := db.ExecContext(ctx, `DROP INDEX memstack_messages_system`)
	require.NoError(t, err)
	_, err = sqlitestore.Open(ctx, path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "memstack_messages_system")
}

// fillConversation gives id n messages in the default namespace of the
// file db is open on, as Append stores them, with one statement (through
// a Store, 20,000 messages take seconds under the race detector): a
// system message first and one in the middle, human and AI messages
// otherwise; memstack_stat is brought in step.
func fillConversation(t *testing.T, db *sql.DB, id memstack.Identity, n int) {
	t.Helper()
	ctx := context.Background()
	encode := func(m llms.ChatMessage) []byte {
		data, err := storekit.EncodeMessageAt(m, storekit.AppendTime(ctx))
		require.NoError(t, err)
		return data
	}
	_, err := db.ExecContext(ctx, `WITH RECURSIVE i(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM i WHERE k + 1 < ?3)
		INSERT INTO memstack_messages (ns, identity, system, message)
		SELECT 'default', ?1, k IN (0, ?3 / 2),
			CASE WHEN k IN (0, ?3 / 2) THEN ?4 WHEN k % 2 = 1 THEN ?6 ELSE ?5 END
		FROM i ORDER BY k`,
		id.Key(), nil, n,
		encode(llms.SystemChatMessage{Content: "be brief"}),
		encode(llms.HumanChatMessage{Content: "what did we decide about the launch date?"}),
		encode(llms.AIChatMessage{Content: "launch on the 14th, review on Friday."}))
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT OR REPLACE INTO memstack_stat (ns, identity, count, first_seq, last_seq)
		SELECT ns, identity, count(*), min(seq), max(seq) FROM memstack_messages WHERE ns = 'default' AND identity = ? GROUP BY ns, identity`, id.Key())
	require.NoError(t, err)
}

// TestTailCostsWhatItReturns times Tail(10) on a conversation of 20,000
// messages and on one of 40 in the same file: the same time, give or
// take, where a Tail that read the conversation (the system messages
// found by a scan of it) takes tens of times longer.
func TestTailCostsWhatItReturns(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path)
	db := rawDB(t, path)
	fillConversation(t, db, alice, 20_000)
	fillConversation(t, db, bob, 40)

	all, err := s.All(ctx, bob)
	require.NoError(t, err)
	for _, after := range []int64{0, all[len(all)-3].Seq} {
		got, err := s.Tail(ctx, bob, 10, after)
		require.NoError(t, err)
		assert.Equal(t, storekit.TailOf(all, 10, after), got)
	}
	got, err := s.Tail(ctx, alice, 10, 0)
	require.NoError(t, err)
	last, err := s.Last(ctx, alice, 10)
	require.NoError(t, err)
	require.Len(t, got, 12)
	for _, r := range got[:2] {
		assert.Equal(t, llms.ChatMessageTypeSystem, r.Message.GetType())
	}
	assert.Less(t, got[0].Seq, got[1].Seq)
	assert.Equal(t, last, got[2:], "the system messages, then the newest 10")

	timeTail := func(id memstack.Identity) time.Duration {
		ds := make([]time.Duration, 31)
		for i := range ds {
			t0 := time.Now()
			rs, err := s.Tail(ctx, id, 10, 0)
			ds[i] = time.Since(t0)
			require.NoError(t, err)
			require.Len(t, rs, 12)
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	timeTail(alice) // warm the cache
	big, small := timeTail(alice), timeTail(bob)
	t.Logf("Tail(10): %v at 20,000 messages, %v at 40", big, small)
	assert.Less(t, big, 5*small+time.Millisecond, "Tail costs what it returns, not what the conversation holds")
}

// TestAppendKeysInOneGroupCommit queues eight Appends under one key, and
// one under another, behind a writer that waits for another connection's
// lock, so that one group commit takes them all: the unit is stored once
// and counted once.
func TestAppendKeysInOneGroupCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlitestore.WithBusyTimeout(10*time.Millisecond))
	db := rawDB(t, path)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, 10)
	wg.Go(func() { errs <- s.Append(ctx, alice, llms.HumanChatMessage{Content: "first"}) })
	require.Eventually(t, func() bool { return s.Writing() && s.Queued() == 0 }, 5*time.Second, time.Millisecond,
		"the first Append is the writer, waiting for the lock with its group of one")
	k1, k2 := store.WithAppendKey(ctx, "k1"), store.WithAppendKey(ctx, "k2")
	for i := range 8 {
		wg.Go(func() {
			errs <- s.Append(k1, alice, llms.HumanChatMessage{Content: fmt.Sprint("h ", i)}, llms.AIChatMessage{Content: fmt.Sprint("a ", i)})
		})
	}
	wg.Go(func() { errs <- s.Append(k2, alice, llms.SystemChatMessage{Content: "k2"}) })
	require.Eventually(t, func() bool { return s.Queued() == 9 }, 5*time.Second, time.Millisecond, "nine Appends wait for the writer")
	_, err = conn.ExecContext(ctx, `ROLLBACK`)
	require.NoError(t, err)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	all, err := s.All(ctx, alice)
	require.NoError(t, err)
	got := contents(all)
	require.Len(t, got, 4, "first, one k1 turn, k2: %q", got)
	assert.Equal(t, "first", got[0])
	k1At := slices.IndexFunc(got, func(c string) bool { return strings.HasPrefix(c, "h ") })
	require.GreaterOrEqual(t, k1At, 1, "%q", got)
	require.Less(t, k1At, 3, "%q", got)
	assert.Equal(t, "a"+got[k1At][1:], got[k1At+1], "the k1 turn is whole")
	assert.Contains(t, got, "k2")
	st, err := s.Stat(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, statOf(all), st, "the Appends that stored nothing counted nothing")
	assert.Equal(t, statRows(t, db, countingQuery), statRows(t, db, countedQuery))

	var keys []string
	rows, err := db.QueryContext(ctx, `SELECT unit FROM memstack_messages WHERE unit IS NOT NULL ORDER BY seq`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	assert.ElementsMatch(t, []string{"k1", "k2"}, keys, "each key is on its unit's first message only")
}
