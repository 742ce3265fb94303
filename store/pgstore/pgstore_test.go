package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/memstack/memstack/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.StopAll()
	os.Exit(code)
}

var (
	alice = memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob   = memstack.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
)

var prefixCounter atomic.Int64

// freshPrefix returns a table prefix no other test of this run uses.
func freshPrefix(what string) string {
	return fmt.Sprintf("t_%s_%d_%d_", what, os.Getpid()%100000, prefixCounter.Add(1))
}

// open opens a store with its own pool on the shared test server.
func open(tb testing.TB, opts ...pgstore.Option) *pgstore.Store {
	tb.Helper()
	dsn := testsvc.Postgres(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(ctx, dsn, opts...)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// opener gives every kit subtest its own table prefix (Forget and the
// Users methods cross namespaces, so subtests sharing tables would not be
// independent) and every call its own pool, so two calls are two
// independent clients. The kit's second namespace of a subtest (its ns
// with "_b" appended: ClearVersusForgetAcrossNamespaces and the Users
// cases) is namespace "b" under the same prefix, so that those cases see
// two namespaces of one store. The pool has pgxpool's default size;
// PGSTORE_BENCH_CONNS=n sets pool_max_conns, to compare pool sizes with
// BenchmarkPostgres.
func opener(tb testing.TB, ns string) (store.Store, error) { return openKit(tb, ns) }

// openKit is opener with more options.
func openKit(tb testing.TB, ns string, opts ...pgstore.Option) (store.Store, error) {
	dsn := testsvc.Postgres(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if v := os.Getenv("PGSTORE_BENCH_CONNS"); v != "" {
		dsn += "&pool_max_conns=" + v
	}
	base, layer := ns, pgstore.DefaultNamespace
	if b, ok := strings.CutSuffix(ns, "_b"); ok {
		base, layer = b, "b"
	}
	return pgstore.Open(ctx, dsn, append([]pgstore.Option{pgstore.WithTablePrefix(kitPrefix(base)), pgstore.WithNamespace(layer)}, opts...)...)
}

// kitPrefix maps a kit namespace to a valid table prefix.
func kitPrefix(ns string) string {
	var b strings.Builder
	b.WriteString("k_")
	for _, r := range strings.ToLower(ns) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	p := b.String()
	if len(p) > 30 {
		p = p[:30]
	}
	return p + "_"
}

func TestConformance(t *testing.T) {
	storetest.Run(t, opener)
}

func BenchmarkPostgres(b *testing.B) {
	storetest.Bench(b, opener)
}

func human(s string) llms.ChatMessage { return llms.HumanChatMessage{Content: s} }
func ai(s string) llms.ChatMessage    { return llms.AIChatMessage{Content: s} }

func contents(rs []store.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Message.GetContent()
	}
	return out
}

func TestOptionsValidated(t *testing.T) {
	ctx := context.Background()
	// Options are checked before anything is dialled: port 1 is never
	// reached.
	const dsn = "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable"
	tests := []struct {
		name   string
		opt    pgstore.Option
		option string
		value  string
	}{
		{"empty prefix", pgstore.WithTablePrefix(""), "WithTablePrefix", `""`},
		{"upper case", pgstore.WithTablePrefix("Memstack_"), "WithTablePrefix", `"Memstack_"`},
		{"leading digit", pgstore.WithTablePrefix("1a"), "WithTablePrefix", `"1a"`},
		{"dash", pgstore.WithTablePrefix("a-b"), "WithTablePrefix", `"a-b"`},
		{"injection", pgstore.WithTablePrefix(`a"; DROP TABLE x; --`), "WithTablePrefix", `DROP`},
		{"32 bytes", pgstore.WithTablePrefix(strings.Repeat("a", 32)), "WithTablePrefix", strings.Repeat("a", 32)},
		{"empty namespace", pgstore.WithNamespace(""), "WithNamespace", `""`},
		{"namespace newline", pgstore.WithNamespace("a\nb"), "WithNamespace", `"a\nb"`},
		{"namespace NUL", pgstore.WithNamespace("a\x00"), "WithNamespace", `"a\x00"`},
		{"namespace unicode", pgstore.WithNamespace("é"), "WithNamespace", "byte 0"},
		{"namespace 201 bytes", pgstore.WithNamespace(strings.Repeat("n", 201)), "WithNamespace", "200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := pgstore.Open(ctx, dsn, tt.opt)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tt.option)
			assert.Contains(t, err.Error(), tt.value)
		})
	}

	_, err := pgstore.New(ctx, nil)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = pgstore.Open(ctx, "postgres://[::1")
	assert.ErrorContains(t, err, "DSN")
}

func TestOptionsAccepted(t *testing.T) {
	ctx := context.Background()
	for _, p := range []string{"_", "a9", "x_1", strings.Repeat("z", 31)} {
		s := open(t, pgstore.WithTablePrefix(p), pgstore.WithNamespace("layer one/!~"))
		id := memstack.Identity{User: freshPrefix("accepted")}
		require.NoError(t, s.Append(ctx, id, human("hi")), "prefix %q", p)
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, []string{"hi"}, contents(rs))
	}
}

func TestDefaultsWork(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	id := memstack.Identity{User: freshPrefix("defaults")}
	require.NoError(t, s.Append(ctx, id, human("hello"), ai("hi")))
	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{"hello", "hi"}, contents(rs))
	require.NoError(t, s.Forget(ctx, id))
}

func TestNamespacesAndForget(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("ns")
	recent := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithNamespace("recent"))
	facts := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithNamespace("facts"))
	other := open(t, pgstore.WithTablePrefix(freshPrefix("nsother")))

	for _, s := range []*pgstore.Store{recent, facts, other} {
		require.NoError(t, s.Append(ctx, alice, human("a1"), ai("a2")))
		require.NoError(t, s.Append(ctx, bob, human("b1")))
		mustCreate(t, s, alice, "summary", []byte("alice"))
		mustCreate(t, s, bob, "summary", []byte("bob"))
	}

	// Namespaces under one prefix are apart.
	require.NoError(t, recent.Append(ctx, alice, human("only recent")))
	rs, err := facts.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"a1", "a2"}, contents(rs))

	// Clear is one namespace.
	require.NoError(t, recent.Clear(ctx, alice))
	st, err := recent.Stat(ctx, alice)
	require.NoError(t, err)
	assert.Zero(t, st.Count)
	st, err = facts.Stat(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Count, "Clear of one namespace leaves the others")
	gs, err := facts.GetState(ctx, alice, "summary")
	require.NoError(t, err)
	assert.Equal(t, []byte("alice"), gs.Value)
	factsBefore := gs
	cleared, err := recent.GetState(ctx, alice, "summary")
	require.NoError(t, err)
	assert.False(t, cleared.Exists(), "Clear removed alice's state in recent")
	assert.Positive(t, cleared.Version, "Clear gave alice a mark in recent")
	facts2, err := facts.GetState(ctx, alice, "never_set")
	require.NoError(t, err)
	assert.Equal(t, store.State{}, facts2, "the mark is recent's only: facts has had no Clear or Forget")

	// Forget is every namespace under the prefix, and only that identity.
	require.NoError(t, recent.Append(ctx, alice, human("again")))
	require.NoError(t, recent.Forget(ctx, alice))
	var forgotten []store.State
	for name, s := range map[string]*pgstore.Store{"recent": recent, "facts": facts} {
		st, err := s.Stat(ctx, alice)
		require.NoError(t, err)
		assert.Zero(t, st.Count, "Forget removed alice's messages in %s", name)
		gs, err := s.GetState(ctx, alice, "summary")
		require.NoError(t, err)
		assert.Nil(t, gs.Value, "Forget removed alice's state in %s", name)
		assert.False(t, gs.Exists(), "Forget removed alice's state in %s", name)
		assert.NotContains(t, []int64{0, cleared.Version, factsBefore.Version}, gs.Version,
			"after Forget alice's absent version in %s is a fresh one", name)
		forgotten = append(forgotten, gs)
		st, err = s.Stat(ctx, bob)
		require.NoError(t, err)
		assert.Equal(t, 1, st.Count, "Forget kept bob in %s", name)
		gs, err = s.GetState(ctx, bob, "summary")
		require.NoError(t, err)
		assert.Equal(t, []byte("bob"), gs.Value)
	}
	assert.Equal(t, forgotten[0], forgotten[1], "Forget removed recent's Clear mark: both namespaces report the forgotten version of alice's bucket")
	// Another table prefix is another store.
	st, err = other.Stat(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Count, "Forget stays under its own table prefix")
	gs, err = other.GetState(ctx, alice, "summary")
	require.NoError(t, err)
	assert.Equal(t, []byte("alice"), gs.Value, "Forget stays under its own table prefix")
	gs, err = other.GetState(ctx, alice, "never_set")
	require.NoError(t, err)
	assert.Equal(t, store.State{}, gs, "another table prefix has its own forgotten version")
}

// mustCreate stores value under a name that has none, expecting the absent
// version GetState reports, and returns the new version.
func mustCreate(t *testing.T, s store.Store, id memstack.Identity, name string, value []byte) int64 {
	t.Helper()
	ctx := context.Background()
	st, err := s.GetState(ctx, id, name)
	require.NoError(t, err)
	require.False(t, st.Exists(), "state %q of %s exists already", name, id)
	v, err := s.PutState(ctx, id, name, value, st.Version)
	require.NoError(t, err)
	return v
}

func TestConcurrentSchemaCreation(t *testing.T) {
	dsn := testsvc.Postgres(t)
	prefix := freshPrefix("schema")
	const n = 6
	stores := make([]*pgstore.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stores[i], errs[i] = pgstore.Open(ctx, dsn, pgstore.WithTablePrefix(prefix))
		})
	}
	close(start)
	wg.Wait()
	ctx := context.Background()
	for i := range n {
		require.NoError(t, errs[i], "Open %d", i)
		defer stores[i].Close()
		require.NoError(t, stores[i].Append(ctx, alice, human(fmt.Sprint(i))))
	}
	rs, err := stores[0].All(ctx, alice)
	require.NoError(t, err)
	assert.Len(t, rs, n, "every store writes to the same tables")
}

func TestNewKeepsCallersPool(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testsvc.Postgres(t))
	require.NoError(t, err)
	defer pool.Close()
	s, err := pgstore.New(ctx, pool, pgstore.WithTablePrefix(freshPrefix("new")))
	require.NoError(t, err)
	require.NoError(t, s.Append(ctx, alice, human("x")))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")

	err = s.Append(ctx, alice, human("y"))
	assert.ErrorIs(t, err, pgstore.ErrClosed)
	_, err = s.Last(ctx, alice, 1)
	assert.ErrorIs(t, err, pgstore.ErrClosed)
	assert.NoError(t, pool.Ping(ctx), "closing a store from New leaves the caller's pool open")
}

func TestClosedOwnPool(t *testing.T) {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, testsvc.Postgres(t), pgstore.WithTablePrefix(freshPrefix("closed")))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for name, call := range map[string]func() error{
		"Append":   func() error { return s.Append(ctx, alice, human("x")) },
		"All":      func() error { _, err := s.All(ctx, alice); return err },
		"Stat":     func() error { _, err := s.Stat(ctx, alice); return err },
		"Forget":   func() error { return s.Forget(ctx, alice) },
		"PutState": func() error { _, err := s.PutState(ctx, alice, "s", []byte("v"), 0); return err },
	} {
		err := call()
		assert.ErrorIs(t, err, pgstore.ErrClosed, name)
		assert.ErrorContains(t, err, alice.Key(), name)
	}
}

func TestUnreachableServer(t *testing.T) {
	t.Run("nothing listening", func(t *testing.T) {
		port, err := testsvc.FreePort()
		require.NoError(t, err)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		t0 := time.Now()
		s, err := pgstore.Open(ctx, "postgres://postgres@"+addr+"/postgres?sslmode=disable")
		require.Error(t, err)
		assert.Nil(t, s)
		assert.Contains(t, err.Error(), addr, "the error names the address")
		assert.Less(t, time.Since(t0), 5*time.Second)
	})
	t.Run("server never answers", func(t *testing.T) {
		// A listener that accepts and never speaks: the connection attempt
		// can only end by the context's deadline.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		var conns []net.Conn
		var mu sync.Mutex
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				c.Close()
			}
		}()
		addr := l.Addr().String()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		_, err = pgstore.Open(ctx, "postgres://postgres@"+addr+"/postgres?sslmode=disable")
		elapsed := time.Since(t0)
		require.Error(t, err)
		assert.Contains(t, err.Error(), addr)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, elapsed, 3*time.Second, "bounded by ctx")
	})
	t.Run("connect_timeout without a deadline", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				defer c.Close()
			}
		}()
		t0 := time.Now()
		_, err = pgstore.Open(context.Background(), "postgres://postgres@"+l.Addr().String()+"/postgres?sslmode=disable&connect_timeout=1")
		require.Error(t, err)
		assert.Less(t, time.Since(t0), 5*time.Second)
	})
}

func TestCorruptValue(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("corrupt")
	s := open(t, pgstore.WithTablePrefix(prefix))
	require.NoError(t, s.Append(ctx, alice, human("one"), ai("two"), human("three")))
	require.NoError(t, s.Append(ctx, bob, human("bob's")))
	rs, err := s.All(ctx, alice)
	require.NoError(t, err)
	bad := rs[1].Seq

	pool, err := pgxpool.New(ctx, testsvc.Postgres(t))
	require.NoError(t, err)
	defer pool.Close()
	for _, body := range [][]byte{
		[]byte("secret-content not json"),
		[]byte(`{"v":1,"type":"martian","content":"secret-content"}`),
		{},
	} {
		_, err = pool.Exec(ctx, "UPDATE "+prefix+"messages SET body = $1 WHERE seq = $2", body, bad)
		require.NoError(t, err)

		for name, call := range map[string]func() error{
			"All":     func() error { _, err := s.All(ctx, alice); return err },
			"Last(2)": func() error { _, err := s.Last(ctx, alice, 2); return err },
		} {
			var err error
			require.NotPanics(t, func() { err = call() }, name)
			require.ErrorIs(t, err, store.ErrCorrupt, name)
			assert.Contains(t, err.Error(), alice.Key(), "%s names the identity", name)
			assert.Contains(t, err.Error(), fmt.Sprintf("Seq %d", bad), "%s names the position", name)
			assert.NotContains(t, err.Error(), "secret-content", "%s never shows the value", name)
		}
		// Everything else is still readable.
		last, err := s.Last(ctx, alice, 1)
		require.NoError(t, err)
		assert.Equal(t, []string{"three"}, contents(last))
		st, err := s.Stat(ctx, alice)
		require.NoError(t, err)
		assert.Equal(t, 3, st.Count)
		rs, err = s.All(ctx, bob)
		require.NoError(t, err)
		assert.Equal(t, []string{"bob's"}, contents(rs))
	}
	// The corrupt row can be removed like any other.
	n, err := s.RemovePrefix(ctx, alice, bad)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	rs, err = s.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"three"}, contents(rs))
}

func TestAppendRejectsUnencodable(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgstore.WithTablePrefix(freshPrefix("enc")))
	err := s.Append(ctx, alice, human("ok"), human("bad \xff utf-8"))
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "message 2 of 2")
	st, err := s.Stat(ctx, alice)
	require.NoError(t, err)
	assert.Zero(t, st.Count, "nothing of the turn is stored")
}

// TestServerKilledMidRun crashes the server under a running store and
// brings it back: calls fail (no panic, no hang past their deadline) while
// it is down, every acknowledged append is there after the restart, and the
// same Store value works again.
func TestServerKilledMidRun(t *testing.T) {
	srv := testsvc.StartPostgres(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, srv.DSN(), pgstore.WithTablePrefix("fault_"))
	require.NoError(t, err)
	defer s.Close()

	// Writers append until told to stop and record what was acknowledged.
	const writers = 4
	var (
		mu    sync.Mutex
		acked = map[memstack.Identity][]string{}
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		fails atomic.Int64
	)
	for w := range writers {
		id := memstack.Identity{User: fmt.Sprint("writer", w)}
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				t0 := time.Now()
				var err error
				assert.NotPanics(t, func() { err = s.Append(cctx, id, human(fmt.Sprint(i))) })
				cancel()
				if d := time.Since(t0); d > 4*time.Second {
					t.Errorf("Append took %v with a 2s deadline", d)
				}
				if err != nil {
					fails.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				acked[id] = append(acked[id], fmt.Sprint(i))
				mu.Unlock()
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, srv.Kill())

	// While the server is down every call errors within its deadline.
	down := map[string]func(context.Context) error{
		"Append":   func(c context.Context) error { return s.Append(c, alice, human("x")) },
		"Last":     func(c context.Context) error { _, err := s.Last(c, alice, 3); return err },
		"Stat":     func(c context.Context) error { _, err := s.Stat(c, alice); return err },
		"GetState": func(c context.Context) error { _, err := s.GetState(c, alice, "s"); return err },
		"Forget":   func(c context.Context) error { return s.Forget(c, alice) },
	}
	for name, call := range down {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		t0 := time.Now()
		err := call(cctx)
		cancel()
		assert.Error(t, err, "%s with the server down", name)
		assert.Less(t, time.Since(t0), 3*time.Second, "%s returns by its deadline", name)
	}
	time.Sleep(200 * time.Millisecond)

	require.NoError(t, srv.Restart())
	// The same Store recovers: pgxpool drops broken connections and dials
	// new ones. A call may still meet one broken idle connection.
	require.Eventually(t, func() bool {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return s.Append(cctx, alice, human("after restart")) == nil
	}, 15*time.Second, 50*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // writers succeed again too
	close(stop)
	wg.Wait()
	assert.Positive(t, fails.Load(), "writers saw the outage")

	for id, want := range acked {
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		got := contents(rs)
		// Every acknowledged append is there, in order. An append whose
		// commit reached the server but whose acknowledgement was lost may
		// also be there; it is the only kind of extra allowed.
		assert.Subset(t, got, want, "acknowledged appends of %s survive the crash", id)
		assertSubsequence(t, got, want)
		for i := 1; i < len(rs); i++ {
			assert.Greater(t, rs[i].Seq, rs[i-1].Seq)
		}
	}
	rs, err := s.All(ctx, alice)
	require.NoError(t, err)
	assert.Contains(t, contents(rs), "after restart")
}

// assertSubsequence checks that want appears in got in order.
func assertSubsequence(t *testing.T, got, want []string) {
	t.Helper()
	j := 0
	for _, g := range got {
		if j < len(want) && g == want[j] {
			j++
		}
	}
	assert.Equal(t, len(want), j, "acknowledged appends keep their order")
}

// TestCancelledMidCall cancels calls while they run: they return an error
// wrapping the context's, and the store keeps working.
func TestCancelledMidCall(t *testing.T) {
	ctx := context.Background()
	s := open(t, pgstore.WithTablePrefix(freshPrefix("cancel")))
	big := strings.Repeat("y", 1<<20)
	failed := 0
	for range 5 {
		cctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		err := s.Append(cctx, alice, human(big))
		cancel()
		if err != nil {
			failed++
			assert.True(t, errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout"),
				"the error says the deadline passed: %v", err)
			assert.ErrorContains(t, err, alice.Key())
		}
	}
	assert.Positive(t, failed, "a 1 ms deadline cuts a 1 MB append short")
	// Whatever was cut short is absent or whole, never partial.
	rs, err := s.All(ctx, alice)
	require.NoError(t, err)
	for _, r := range rs {
		assert.Len(t, r.Message.GetContent(), len(big))
	}
	require.NoError(t, s.Append(ctx, alice, human("still works")))
	last, err := s.Last(ctx, alice, 1)
	require.NoError(t, err)
	assert.Equal(t, []string{"still works"}, contents(last))
}

// statOf computes what Stat must say from the records themselves.
func statOf(rs []store.Record) store.Stat {
	if len(rs) == 0 {
		return store.Stat{}
	}
	return store.Stat{Count: len(rs), FirstSeq: rs[0].Seq, LastSeq: rs[len(rs)-1].Seq}
}

// TestStatMatchesRows drives one conversation through a random mix of
// writes (Rewrite and keyed Appends included), checking after each that the O(1) Stat (the conversations row)
// agrees with the rows themselves and that the contents match the
// reference in-memory store.
func TestStatMatchesRows(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { statMatchesRows(t, seed) })
	}
}

func statMatchesRows(t *testing.T, seed uint64) {
	ctx := context.Background()
	s := open(t, pgstore.WithTablePrefix(freshPrefix("stat")))
	ref := store.NewInMemory()
	rng := rand.New(rand.NewPCG(seed, 2))
	n := 0
	msg := func() llms.ChatMessage {
		n++
		if rng.IntN(5) == 0 {
			return llms.SystemChatMessage{Content: fmt.Sprint("s", n)}
		}
		return human(fmt.Sprint("m", n))
	}
	for step := range 120 {
		var op string
		switch r := rng.IntN(12); {
		case r < 6:
			op = "Append"
			msgs := make([]llms.ChatMessage, 1+rng.IntN(3))
			for i := range msgs {
				msgs[i] = msg()
			}
			// Half of them under an append key of a few, so some store
			// nothing, and must leave the conversations row alone.
			actx := ctx
			if rng.IntN(2) == 0 {
				op = "keyed Append"
				actx = store.WithAppendKey(ctx, fmt.Sprint("key-", rng.IntN(6)))
			}
			require.NoError(t, s.Append(actx, alice, msgs...))
			require.NoError(t, ref.Append(actx, alice, msgs...))
		case r < 8:
			op = "RemovePrefix"
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			refRs, err := ref.All(ctx, alice)
			require.NoError(t, err)
			if len(rs) == 0 {
				continue
			}
			i := rng.IntN(len(rs))
			got, err := s.RemovePrefix(ctx, alice, rs[i].Seq)
			require.NoError(t, err)
			want, err := ref.RemovePrefix(ctx, alice, refRs[i].Seq)
			require.NoError(t, err)
			assert.Equal(t, want, got, "step %d: RemovePrefix count", step)
		case r < 10:
			op = "Rewrite"
			rs, err := s.All(ctx, alice)
			require.NoError(t, err)
			refRs, err := ref.All(ctx, alice)
			require.NoError(t, err)
			// Through nothing, a stored message, or everything.
			var through, refThrough int64
			if i := rng.IntN(len(rs)+2) - 1; i == len(rs) {
				through, refThrough = math.MaxInt64, math.MaxInt64
			} else if i >= 0 {
				through, refThrough = rs[i].Seq, refRs[i].Seq
			}
			reset := rng.IntN(2) == 0
			msgs := make([]llms.ChatMessage, rng.IntN(3))
			for i := range msgs {
				msgs[i] = msg()
			}
			got, err := s.Rewrite(ctx, alice, through, reset, msgs...)
			require.NoError(t, err)
			want, err := ref.Rewrite(ctx, alice, refThrough, reset, msgs...)
			require.NoError(t, err)
			assert.Equal(t, want, got, "step %d: Rewrite count", step)
		case r < 11:
			op = "Clear"
			require.NoError(t, s.Clear(ctx, alice))
			require.NoError(t, ref.Clear(ctx, alice))
		default:
			op = "Forget"
			require.NoError(t, s.Forget(ctx, alice))
			require.NoError(t, ref.Forget(ctx, alice))
		}
		rs, err := s.All(ctx, alice)
		require.NoError(t, err)
		st, err := s.Stat(ctx, alice)
		require.NoError(t, err)
		require.Equal(t, statOf(rs), st, "step %d after %s", step, op)
		refRs, err := ref.All(ctx, alice)
		require.NoError(t, err)
		require.Equal(t, contents(refRs), contents(rs), "step %d after %s", step, op)
	}
}

// TestStatUnderConcurrentWriters has two clients append and remove
// prefixes of one conversation at once; afterwards Stat still agrees with
// the rows and no acknowledged message that RemovePrefix could not have
// removed is missing.
func TestStatUnderConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("statc")
	c1 := open(t, pgstore.WithTablePrefix(prefix))
	c2 := open(t, pgstore.WithTablePrefix(prefix))
	var wg sync.WaitGroup
	for w, s := range []*pgstore.Store{c1, c2} {
		wg.Go(func() {
			for i := range 40 {
				assert.NoError(t, s.Append(ctx, alice, human(fmt.Sprint(w, "-", i)), ai("ok")))
				if i%7 == 6 {
					st, err := s.Stat(ctx, alice)
					assert.NoError(t, err)
					_, err = s.RemovePrefix(ctx, alice, st.FirstSeq+2)
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	rs, err := c1.All(ctx, alice)
	require.NoError(t, err)
	for _, s := range []*pgstore.Store{c1, c2} {
		st, err := s.Stat(ctx, alice)
		require.NoError(t, err)
		assert.Equal(t, statOf(rs), st)
	}
	last := rs[len(rs)-1].Message.GetContent()
	assert.Equal(t, "ok", last)
}

// TestConformanceRecallIndex runs the conformance kit with the recall
// index on (WithRecallIndex), on tables of their own: every contract
// holds with the index kept in the same transactions, and the
// RecallSearch case checks the index itself against retrieval.BM25.
func TestConformanceRecallIndex(t *testing.T) {
	storetest.Run(t, func(tb testing.TB, ns string) (store.Store, error) {
		return openKit(tb, "r"+ns, pgstore.WithRecallIndex())
	})
}
