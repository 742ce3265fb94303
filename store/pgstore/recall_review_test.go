package pgstore_test

// Regression tests of the recall index in PostgreSQL, from the review of
// its first commit (a1ca2ea).
// Each failed on a1ca2ea, before the fixes they name.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
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
	"github.com/memstack/memstack/store/storetest"
)

// waitLockWaiter waits until a session waits on a heavyweight lock while
// running a statement that mentions what.
func waitLockWaiter(t *testing.T, pool *pgxpool.Pool, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := pool.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0", what).Scan(&n)
		return err == nil && n > 0
	}, 20*time.Second, 5*time.Millisecond, "no session waits on a lock in a statement naming %s", what)
}

// TestRecallGuardRacesEnable: a Store that last saw the index off appends
// with the guard while a WithRecallIndex Open (another process) turns the
// index on between the guard and the COMMIT. When the guard was a plain
// SELECT of the meta row, the enable (complete = NOT EXISTS a
// conversation with messages) did not see the uncommitted turn: the index
// was marked on and complete with the turn unindexed, and since the
// conversation then had messages and no index state, every later Append
// left it to a backfill that never came. Now the guard holds the recall
// lock shared and the enable takes it exclusively, then reads.
func TestRecallGuardRacesEnable(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("guardrace")
	a := open(t, pgstore.WithTablePrefix(prefix)) // last saw the index off
	pool := rawPool(t)
	id := memstack.Identity{Tenant: "t", User: "u", Conversation: "c"}
	// Warm a's statement cache (a statement being prepared would wait
	// for the lock below before the guard runs), leaving no messages.
	warm := memstack.Identity{Tenant: "t", User: "u", Conversation: "warm"}
	for range 3 {
		require.NoError(t, a.Append(ctx, warm, llms.HumanChatMessage{Content: "warm up"}))
	}
	require.NoError(t, a.Clear(ctx, warm))

	// Hold a's INSERT after its guard: a lock on the messages table.
	hold, err := pool.Begin(ctx)
	require.NoError(t, err)
	messages := pgx.Identifier{prefix + "messages"}.Sanitize()
	_, err = hold.Exec(ctx, "LOCK TABLE "+messages+" IN SHARE MODE")
	require.NoError(t, err)
	appended := make(chan error, 1)
	go func() { appended <- a.Append(ctx, id, llms.HumanChatMessage{Content: "the invoice for paris"}) }()
	waitLockWaiter(t, pool, prefix+"messages")

	// Another process turns the index on meanwhile: its Open returns, or
	// (a fixed build) waits for a's transaction.
	opened := make(chan *pgstore.Store, 1)
	go func() { opened <- open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex()) }()
	var b *pgstore.Store
	deadline := time.Now().Add(20 * time.Second)
	for b == nil && time.Now().Before(deadline) {
		select {
		case b = <-opened:
		case <-time.After(200 * time.Millisecond):
			var n int
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory'").Scan(&n))
			if n > 0 {
				deadline = time.Time{} // the Open waits for a: release a
			}
		}
	}
	require.NoError(t, hold.Rollback(ctx))
	require.NoError(t, <-appended)
	if b == nil {
		b = <-opened
	}

	waitReady(t, b)
	q := indexkit.Query{Terms: indexkit.QueryTerms("invoice paris"), Near: [2]float64{0.5, 0.25}, K: 10}
	hits, err := b.SearchRecall(ctx, store.RecallScope{Conversation: &id}, q)
	require.NoError(t, err)
	assert.Len(t, hits, 1, "the turn a committed is stored: the complete index must find it")

	// And the conversation's later turns, appended the indexed way.
	require.NoError(t, b.Append(ctx, id, llms.HumanChatMessage{Content: "another invoice"}))
	hits, err = b.SearchRecall(ctx, store.RecallScope{Conversation: &id}, q)
	require.NoError(t, err)
	assert.Len(t, hits, 2, "a later Append to the conversation is indexed")
}

// rollbackBreaker is a pgx tracer that breaks the connection when a
// statement outside a batch named "rollback" starts, as a connection lost
// right after a COMMIT's reply arrived would.
type rollbackBreaker struct {
	armed  atomic.Bool
	broken atomic.Int32
}

func (r *rollbackBreaker) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.EqualFold(strings.TrimSpace(data.SQL), "rollback") && r.armed.Load() {
		r.broken.Add(1)
		_ = conn.PgConn().Conn().Close()
	}
	return ctx
}

func (r *rollbackBreaker) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestRecallIndexedAppendRollsBackAfterCommit: an indexed Append commits
// in its second batch (pgx.Conn.SendBatch, not the transaction that
// Batch.BeginTx made), so the pgx.Tx of the first batch never learns the
// transaction ended. writeTx used to send a ROLLBACK after every
// successful COMMIT — a third round trip — and, when the connection
// failed then, returned its error: a failure not wrapping
// store.ErrOutcomeUnknown although the turn was stored. A committed
// write now returns at once.
func TestRecallIndexedAppendRollsBackAfterCommit(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testsvc.Postgres(t))
	require.NoError(t, err)
	tracer := &rollbackBreaker{}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool, pgstore.WithTablePrefix(freshPrefix("rbafter")), pgstore.WithRecallIndex())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	id := memstack.Identity{Tenant: "t", User: "u", Conversation: "c"}

	tracer.armed.Store(true)
	err = s.Append(ctx, id, llms.HumanChatMessage{Content: "the invoice for paris"})
	tracer.armed.Store(false)
	assert.Zero(t, tracer.broken.Load(), "an Append that committed sent a ROLLBACK after its COMMIT")
	recs, rerr := s.All(ctx, id)
	require.NoError(t, rerr)
	if len(recs) == 1 && err != nil {
		assert.ErrorIs(t, err, store.ErrOutcomeUnknown, "the Append committed, yet it failed with an error that does not say its outcome is unknown")
	}
	assert.NoError(t, err)
}

// TestRecallFaultsKeyedAppendIndexed is TestFaultsKeyedAppendRetried with
// the recall index on: lost replies at every point of an indexed Append.
func TestRecallFaultsKeyedAppendIndexed(t *testing.T) {
	u, err := url.Parse(testsvc.Postgres(t))
	require.NoError(t, err)
	p := storetest.NewFaultProxy(t, u.Host)
	pu := *u
	pu.Host = p.Addr()
	ctx := context.Background()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(octx, pu.String(), pgstore.WithTablePrefix(freshPrefix("faultidx")), pgstore.WithRecallIndex())
	require.NoError(t, err)
	defer s.Close()

	id := memstack.Identity{Tenant: "acme", User: "faults", Conversation: "keyed"}
	require.NoError(t, s.Append(store.WithAppendKey(ctx, "warm-up"), id, human("warm up"), ai("ok")), "the proxy passes traffic")
	for n := 1; n <= 8; n++ {
		w := fmt.Sprintf("turn %d", n)
		kctx := store.WithAppendKey(ctx, fmt.Sprint("turn-", n))
		cctx, cancel := context.WithTimeout(kctx, 20*time.Second)
		p.DropReply(n)
		err := s.Append(cctx, id, human(w), ai(w))
		p.Disarm()
		cancel()
		if err != nil && count(t, s, id, w) == 2 {
			assert.ErrorIs(t, err, store.ErrOutcomeUnknown, "lost reply %d: the Append failed although it committed", n)
		}
		if err != nil {
			require.Eventually(t, func() bool { return s.Append(kctx, id, human(w), ai(w)) == nil },
				10*time.Second, 10*time.Millisecond, "lost reply %d: the retry under the same key succeeds", n)
		}
		assert.Equal(t, 2, count(t, s, id, w), "lost reply %d", n)
	}
}

// TestRecallBackfillResurrectsForgotten: the backfill lists up to 64
// conversations with messages and no index state, then indexes each in a
// transaction of its own. A conversation forgotten between the listing
// and its turn must not get a fresh index state row (recall_conv, with
// its identity key): ForgetScope, which finds identities through the
// conversations and state tables, would never find it again. Under the
// identity's lock the backfill now checks the conversation still has
// messages.
func TestRecallBackfillResurrectsForgotten(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("bfforget")
	s := open(t, pgstore.WithTablePrefix(prefix))
	var ids []memstack.Identity
	for c := range 4 {
		id := memstack.Identity{Tenant: "acme", User: "gone", Conversation: fmt.Sprint("c", c)}
		ids = append(ids, id)
		require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: "the invoice for paris"}))
	}
	require.NoError(t, s.Close())

	paused, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	restore := pgstore.SetAfterBackfill(func() {
		if first.CompareAndSwap(false, true) {
			close(paused)
			<-release
		}
	})
	defer restore()
	b := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	<-paused
	// One conversation is indexed, the other three are listed: forget them.
	pool := rawPool(t)
	conv := recallTables(prefix)[0]
	var indexed string
	require.NoError(t, pool.QueryRow(ctx, "SELECT id_key FROM "+conv).Scan(&indexed))
	for _, id := range ids {
		if id.Key() != indexed {
			require.NoError(t, b.Forget(ctx, id))
		}
	}
	close(release)
	waitReady(t, b)
	_, err := b.ForgetScope(ctx, store.UserScope("acme", "gone"))
	require.NoError(t, err)
	var left []string
	rows, err := pool.Query(ctx, "SELECT id_key FROM "+conv)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Empty(t, left, "index rows of identities forgotten (Forget, then ForgetScope of their user)")
}

// TestRecallRandomOpsMatchFreshIndex: random writes through two Stores
// (Append with and without keys, keys repeated, system messages,
// AppendBatches with an identity twice, RemovePrefix, Rewrite, Clear,
// Forget) leave an index that searches as the same messages indexed
// afresh.
func TestRecallRandomOpsMatchFreshIndex(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomOps(t, seed, 3, 1) })
	}
}

// TestRecallConcurrentOpsMatchFreshIndex is the same with the writes of
// four goroutines at once, over users of 40 conversations, numbered in
// order first (the 32 newest have groups of their own: conversations 32
// to 39 share their rows with 0 to 7): the
// index searches as the same messages indexed afresh, and holds exactly
// their postings — none of a conversation cleared, forgotten or cut,
// none lost.
func TestRecallConcurrentOpsMatchFreshIndex(t *testing.T) {
	for seed := range uint64(2) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomOps(t, 10+seed, 40, 4) })
	}
}

// postingSet is every posting the recall index's rows under prefix hold:
// term, conversation, Seq and count.
func postingSet(t *testing.T, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	pool := rawPool(t)
	type num struct {
		user   string
		convno int32
	}
	keys := map[num]string{}
	rows, err := pool.Query(ctx, "SELECT scope_u, convno, id_key FROM "+pgx.Identifier{prefix + "recall_conv"}.Sanitize())
	require.NoError(t, err)
	var u []byte
	var n int32
	var key string
	_, err = pgx.ForEachRow(rows, []any{&u, &n, &key}, func() error {
		keys[num{string(u), n}] = key
		return nil
	})
	require.NoError(t, err)
	rows, err = pool.Query(ctx, "SELECT term, scope_u, data FROM "+pgx.Identifier{prefix + "recall_posts"}.Sanitize())
	require.NoError(t, err)
	var term string
	var data []byte
	var out []string
	_, err = pgx.ForEachRow(rows, []any{&term, &u, &data}, func() error {
		require.Zero(t, len(data)%16, "a posting row of %d bytes", len(data))
		for i := 0; i < len(data); i += 16 {
			k, ok := keys[num{string(u), int32(binary.BigEndian.Uint32(data[i:]))}]
			require.True(t, ok, "a posting of term %q of no conversation indexed", term)
			out = append(out, fmt.Sprintf("%s %s %d %d", term, k, binary.BigEndian.Uint64(data[i+4:]), binary.BigEndian.Uint32(data[i+12:])))
		}
		return nil
	})
	require.NoError(t, err)
	slices.Sort(out)
	return out
}

func randomOps(t *testing.T, seed uint64, convsPer, workers int) {
	ctx := context.Background()
	prefix := freshPrefix("randops")
	b := open(t, pgstore.WithTablePrefix(prefix)) // last sees the index off: its first write meets the guard
	a := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	words := []string{"invoice", "refund", "paris", "hotel", "battery", "charger", "seat", "window", "visa", "passport"}
	var ids []memstack.Identity
	for u := range 3 {
		for c := range convsPer {
			ids = append(ids, memstack.Identity{Tenant: "acme", User: fmt.Sprint("u", u), Conversation: fmt.Sprint("c", c)})
		}
	}
	// Numbered in order (see postGroup): a first message each.
	for _, id := range ids {
		require.NoError(t, a.Append(ctx, id, llms.HumanChatMessage{Content: words[len(id.Conversation)%len(words)]}))
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { randomWrites(t, a, b, ids, words, newRng(seed*100+uint64(w)), 300/workers) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	search := func(s *pgstore.Store) []store.RecallHit {
		var out []store.RecallHit
		scopes := []store.RecallScope{{Scope: store.TenantScope("acme")}}
		for u := range 3 {
			scopes = append(scopes, store.RecallScope{Scope: store.UserScope("acme", fmt.Sprint("u", u))})
		}
		for i := range ids {
			scopes = append(scopes, store.RecallScope{Conversation: &ids[i]})
		}
		for _, kind := range []indexkit.Kind{indexkit.Turns, indexkit.Exchanges} {
			for _, w := range words {
				for _, in := range scopes {
					hits, err := s.SearchRecall(ctx, in, indexkit.Query{Terms: indexkit.QueryTerms(w + " hotel"), Kind: kind, Near: [2]float64{0.3, 0.1}, K: 50})
					require.NoError(t, err)
					out = append(out, hits...)
				}
			}
		}
		return out
	}
	got := search(a)
	require.NotEmpty(t, got)
	held := postingSet(t, prefix)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	makeV3(t, prefix)
	c := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	waitReady(t, c)
	assert.Equal(t, search(c), got)
	assert.Equal(t, postingSet(t, prefix), held, "the postings the index held, and the same messages' indexed afresh")
}

// randomWrites runs n random writes through a and b (see
// TestRecallRandomOpsMatchFreshIndex).
// randomWrites runs n random writes through a and b (see
// TestRecallRandomOpsMatchFreshIndex).
func randomWrites(t *testing.T, a, b *pgstore.Store, ids []memstack.Identity, words []string, rng *rand.Rand, n int) {
	ctx := context.Background()
	// Run in goroutines of their own: a failure is reported (assert), and
	// ends the writes.
	ok := func(err error, what ...any) bool { return assert.NoError(t, err, what...) }
	text := func() string {
		n := 1 + rng.IntN(5)
		var p []string
		for range n {
			p = append(p, words[rng.IntN(len(words))])
		}
		return strings.Join(p, " ")
	}
	msgs := func() []llms.ChatMessage {
		var out []llms.ChatMessage
		for range 1 + rng.IntN(3) {
			switch rng.IntN(6) {
			case 0:
				out = append(out, llms.SystemChatMessage{Content: text()})
			case 1, 2:
				out = append(out, llms.AIChatMessage{Content: text()})
			default:
				out = append(out, llms.HumanChatMessage{Content: text()})
			}
		}
		return out
	}
	for i := range n {
		s := a
		if rng.IntN(2) == 0 {
			s = b
		}
		id := ids[rng.IntN(len(ids))]
		switch op := rng.IntN(20); {
		case op < 8:
			c := ctx
			if rng.IntN(2) == 0 {
				c = store.WithAppendKey(ctx, fmt.Sprint("k", rng.IntN(10)))
			}
			if !ok(s.Append(c, id, msgs()...), "op %d", i) {
				return
			}
		case op < 12:
			id2 := ids[rng.IntN(len(ids))]
			if !ok(s.AppendBatches(ctx,
				store.Batch{ID: id, Messages: msgs()},
				store.Batch{ID: id2, Messages: msgs(), Key: fmt.Sprint("b", rng.IntN(5))},
				store.Batch{ID: id, Messages: msgs()}), "op %d", i) {
				return
			}
		case op < 15:
			recs, err := s.All(ctx, id)
			if !ok(err) {
				return
			}
			if len(recs) > 0 {
				if _, err = s.RemovePrefix(ctx, id, recs[rng.IntN(len(recs))].Seq); !ok(err, "op %d", i) {
					return
				}
			}
		case op < 17:
			recs, err := s.All(ctx, id)
			if !ok(err) {
				return
			}
			var through int64
			if len(recs) > 0 {
				through = recs[rng.IntN(len(recs))].Seq
			}
			if _, err = s.Rewrite(ctx, id, through, rng.IntN(2) == 0, msgs()...); !ok(err, "op %d", i) {
				return
			}
		case op < 19:
			if !ok(s.Clear(ctx, id), "op %d", i) {
				return
			}
		default:
			if !ok(s.Forget(ctx, id), "op %d", i) {
				return
			}
		}
	}
}

func newRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed+1)) }

// TestRecallEmptyRewriteLeavesIndexRow: a Rewrite that removes and
// appends nothing, of an identity with nothing stored, writes no index
// state row (as sqlitestore): with no conversations or state row beside
// it, ForgetScope of the user would never find one.
func TestRecallEmptyRewriteLeavesIndexRow(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("emptyrw")
	s := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex())
	id := memstack.Identity{Tenant: "acme", User: "nobody", Conversation: "c"}
	n, err := s.Rewrite(ctx, id, 0, false)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = s.ForgetScope(ctx, store.UserScope("acme", "nobody"))
	require.NoError(t, err)
	var left int
	require.NoError(t, rawPool(t).QueryRow(ctx, "SELECT count(*) FROM "+recallTables(prefix)[0]).Scan(&left))
	assert.Zero(t, left, "index rows of an identity with nothing stored, after ForgetScope of its user")
}

// TestRecallNewConversationsAtOnce: a user's conversations first indexed
// at the same moment, from several Stores, get numbers of their own (the
// user's lock orders them), so each one's postings stay its own.
func TestRecallNewConversationsAtOnce(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("newconvs")
	var stores []*pgstore.Store
	for range 4 {
		stores = append(stores, open(t, pgstore.WithTablePrefix(prefix), pgstore.WithRecallIndex()))
	}
	waitReady(t, stores[0])
	const n = 24
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: fmt.Sprint("c", i)}
			assert.NoError(t, stores[i%len(stores)].Append(ctx, id, llms.HumanChatMessage{Content: fmt.Sprintf("word%d shared", i)}))
		})
	}
	close(start)
	wg.Wait()
	var numbers []int32
	rows, err := rawPool(t).Query(ctx, "SELECT convno FROM "+pgx.Identifier{prefix + "recall_conv"}.Sanitize())
	require.NoError(t, err)
	numbers, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	slices.Sort(numbers)
	require.Len(t, numbers, n)
	assert.Len(t, slices.Compact(numbers), n, "every conversation a number of its own: %v", numbers)
	for i := range n {
		id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: fmt.Sprint("c", i)}
		hits, err := stores[0].SearchRecall(ctx, store.RecallScope{Conversation: &id}, indexkit.Query{Terms: indexkit.QueryTerms("shared"), K: 5})
		require.NoError(t, err)
		require.Len(t, hits, 1, "conversation %d finds its own message only", i)
		assert.Equal(t, id, hits[0].ID)
	}
}
