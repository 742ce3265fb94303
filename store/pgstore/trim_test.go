package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
)

// fillConversation appends n messages to id (with system, a system
// prompt first), 1000 to an Append.
func fillConversation(tb testing.TB, s store.Store, id memstack.Identity, n int, system bool) {
	tb.Helper()
	ctx := context.Background()
	done := 0
	if system {
		require.NoError(tb, s.Append(ctx, id, llms.SystemChatMessage{Content: "You are terse."}))
		done++
	}
	for done < n {
		msgs := make([]llms.ChatMessage, 0, 1000)
		for ; len(msgs) < 1000 && done < n; done++ {
			msgs = append(msgs, human(fmt.Sprintf("message %d: what did we decide about the launch date?", done)))
		}
		require.NoError(tb, s.Append(ctx, id, msgs...))
	}
}

// indexBlocks returns the buffer accesses (hits and reads) counted for the
// primary key of prefix's messages table, after flushing the statistics
// of the one session of pool (pg_stat_force_next_flush, PostgreSQL 15).
func indexBlocks(t *testing.T, pool *pgxpool.Pool, prefix string) int64 {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	require.NoError(t, err)
	var n int64
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT idx_blks_hit + idx_blks_read FROM pg_statio_user_indexes WHERE indexrelname = $1",
		prefix+"messages_pkey").Scan(&n))
	return n
}

// TestAppendCostAfterLargeRemovePrefix removes a large prefix of a
// conversation and checks that an Append afterwards does not look at the
// removed rows: their index entries stay until VACUUM (disabled here, as
// it would be on a busy table between its runs), and an Append that
// reads min(seq) over them touches every index page they fill. The count
// is PostgreSQL's own (pg_statio_user_indexes), from the store's only
// session, so it does not depend on the machine's speed.
func TestAppendCostAfterLargeRemovePrefix(t *testing.T) {
	for _, system := range []bool{false, true} {
		t.Run(fmt.Sprint("system prompt=", system), func(t *testing.T) { appendCostAfterRemovePrefix(t, system) })
	}
}

func appendCostAfterRemovePrefix(t *testing.T, system bool) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testsvc.Postgres(t))
	require.NoError(t, err)
	cfg.MaxConns = 1 // one session: the statistics flushed are the store's
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	var hasFlush bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_proc WHERE proname = 'pg_stat_force_next_flush')").Scan(&hasFlush))
	if !hasFlush {
		t.Skip("needs PostgreSQL 15 or newer (pg_stat_force_next_flush)")
	}
	prefix := freshPrefix("trim")
	s, err := pgstore.New(ctx, pool, pgstore.WithTablePrefix(prefix))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ALTER TABLE "+prefix+"messages SET (autovacuum_enabled = false)")
	require.NoError(t, err)

	const n = 20000
	id := memstack.Identity{Tenant: "acme", User: "trim", Conversation: "long"}
	fillConversation(t, s, id, n, system)
	st, err := s.Stat(ctx, id)
	require.NoError(t, err)
	require.Equal(t, n, st.Count)
	removed, err := s.RemovePrefix(ctx, id, st.LastSeq-10)
	require.NoError(t, err)
	kept := 10
	if system {
		kept++
	}
	require.Equal(t, n-kept, removed, "every message but the system prompt and the last 10")

	// The first scan after the delete marks the dead entries; measure the
	// appends after it, which is what every later turn pays.
	require.NoError(t, s.Append(ctx, id, human("first after"), ai("ok")))
	for i := range 3 {
		before := indexBlocks(t, pool, prefix)
		require.NoError(t, s.Append(ctx, id, human(fmt.Sprint("turn ", i)), ai("ok")))
		touched := indexBlocks(t, pool, prefix) - before
		assert.LessOrEqual(t, touched, int64(40),
			"turn %d: an Append touched %d pages of the messages index after a RemovePrefix of %d messages", i, touched, removed)
	}
	before := indexBlocks(t, pool, prefix)
	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	assert.Len(t, rs, kept+2+6)
	if touched := indexBlocks(t, pool, prefix) - before; system {
		t.Logf("All with a system prompt pinned below the removed rows touched %d pages of the messages index", touched)
	} else {
		assert.LessOrEqual(t, touched, int64(40), "All touched %d pages of the messages index", touched)
	}
	st, err = s.Stat(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, statOf(rs), st)

	// RemovePrefix of a few more (what a window memory does now and then)
	// keeps the system prompt. Like All, without one it starts at the
	// conversation's first Seq and costs little; with a system prompt
	// pinned below the removed rows both still step over their index
	// entries until VACUUM removes them (see the package documentation,
	// Performance), which this only reports.
	before = indexBlocks(t, pool, prefix)
	got, err := s.RemovePrefix(ctx, id, rs[2].Seq)
	require.NoError(t, err)
	want := 3 // rs[0:3], or rs[1:3] after the pinned system prompt
	if system {
		want = 2
	}
	assert.Equal(t, want, got)
	touched := indexBlocks(t, pool, prefix) - before
	if system {
		t.Logf("a small RemovePrefix below which a system prompt is pinned touched %d pages of the messages index", touched)
	} else {
		assert.LessOrEqual(t, touched, int64(40), "a small RemovePrefix touched %d pages of the messages index", touched)
	}
	rs, err = s.All(ctx, id)
	require.NoError(t, err)
	st, err = s.Stat(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, statOf(rs), st)
	if system {
		assert.Equal(t, llms.ChatMessageTypeSystem, rs[0].Message.GetType(), "the system prompt stays")
	}
}

// BenchmarkAppendAfterRemovePrefix measures an Append of one turn to a
// conversation whose older messages (all but a system prompt and the last
// 10) were removed, at 1k and 100k messages before the removal, with
// autovacuum off so the removed rows' index entries stay, as they do
// between VACUUM runs. "before" is the same conversation before the
// removal.
func BenchmarkAppendAfterRemovePrefix(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			prefix := freshPrefix("bench_trim")
			s := open(b, pgstore.WithTablePrefix(prefix))
			pool, err := pgxpool.New(ctx, testsvc.Postgres(b))
			require.NoError(b, err)
			defer pool.Close()
			_, err = pool.Exec(ctx, "ALTER TABLE "+prefix+"messages SET (autovacuum_enabled = false)")
			require.NoError(b, err)
			id := memstack.Identity{Tenant: "acme", User: "bench", Conversation: "trim"}
			fillConversation(b, s, id, n, false)
			appendTurns := func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					if err := s.Append(ctx, id, human(fmt.Sprint("turn ", i)), ai("ok")); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/append")
			}
			b.Run("before", appendTurns)
			st, err := s.Stat(ctx, id)
			require.NoError(b, err)
			_, err = s.RemovePrefix(ctx, id, st.LastSeq-10)
			require.NoError(b, err)
			require.NoError(b, s.Append(ctx, id, human("first after"), ai("ok")))
			time.Sleep(100 * time.Millisecond)
			b.Run("after", appendTurns)
		})
	}
}
