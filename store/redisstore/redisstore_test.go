package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/store/storetest"
)

// Packages using testsvc stop its servers once all tests are done.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // go-redis logs every failed dial
	code := m.Run()
	testsvc.StopAll()
	os.Exit(code)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

var (
	alice = memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob   = memstack.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	// alice10's key has alice's key as a prefix: a glob or prefix Forget
	// of alice would wrongly take it too.
	alice10 = memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c10"}
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// uniquePrefix returns a key prefix no other test uses.
func uniquePrefix() string { return "rt-" + randomHex(6) }

func open(t *testing.T, addr string, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(context.Background(), addr, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func rawClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// keyNames is the documented key layout.
type keyNames struct{ msgs, state, cleared, sys, seq, nss, ops, opq, forgotten string }

func keysOf(prefix, ns string, id memstack.Identity) keyNames {
	base := prefix + ":{" + id.Key() + "}:"
	return keyNames{msgs: base + ns + ":msgs", state: base + ns + ":state", cleared: base + ns + ":cleared", sys: base + ns + ":sys",
		seq: base + "seq", nss: base + "nss", ops: base + "ops", opq: base + "opq",
		forgotten: prefix + ":{" + slotTag(slot(id.Key())) + "}:forgotten"}
}

// feedKeysOf returns the documented keys of the change feed of id's user:
// the user's sorted set and the tenant's counter of marks.
func feedKeysOf(prefix string, id memstack.Identity) (set, counter string) {
	return prefix + ":feed{" + store.UserScope(id.Tenant, id.User).KeyPrefix() + "}",
		prefix + ":feedn{" + store.TenantScope(id.Tenant).KeyPrefix() + "}"
}

// slotTag is the documented tag of a slot's forgotten key: the first of
// f0, f1, f2, … that hashes to the slot.
func slotTag(want int) string {
	for n := 0; ; n++ {
		if tag := fmt.Sprint("f", n); slot(tag) == want {
			return tag
		}
	}
}

// create stores value under a name that has none, expecting the absent
// version GetState reports, and returns the new version.
func create(t *testing.T, s store.Store, id memstack.Identity, name string, value []byte) int64 {
	t.Helper()
	ctx := context.Background()
	st, err := s.GetState(ctx, id, name)
	require.NoError(t, err)
	require.False(t, st.Exists(), "state %q of %s exists already", name, id)
	v, err := s.PutState(ctx, id, name, value, st.Version)
	require.NoError(t, err)
	return v
}

func human(s string) llms.ChatMessage  { return llms.HumanChatMessage{Content: s} }
func ai(s string) llms.ChatMessage     { return llms.AIChatMessage{Content: s} }
func system(s string) llms.ChatMessage { return llms.SystemChatMessage{Content: s} }

func contents(rs []store.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Message.GetContent()
	}
	return out
}

func maxSeq(rs []store.Record) int64 {
	var m int64
	for _, r := range rs {
		m = max(m, r.Seq)
	}
	return m
}

// kitLayout maps a namespace of the kit onto a key prefix and a namespace
// of this store: a subtest's namespace ns and its second namespace ns+"_b"
// (storetest's secondNamespace) are two namespaces of one key prefix, so
// Forget and the store.Users calls reach both of them and no other
// subtest's data.
func kitLayout(ns string) (prefix, namespace string) {
	return strings.TrimSuffix(ns, "_b"), ns
}

func TestConformance(t *testing.T) {
	addr := testsvc.Redis(t)
	storetest.Run(t, func(_ testing.TB, ns string) (store.Store, error) {
		// A new client on every call: two calls are two independent
		// connection pools over the same data.
		prefix, namespace := kitLayout(ns)
		return redisstore.Open(context.Background(), addr, redisstore.WithKeyPrefix("t-"+prefix), redisstore.WithNamespace(namespace))
	})
}

// TestConformanceWithTTLNoCacheAndEviction runs the kit with a TTL,
// without the decode cache, and with WithEvictionAllowed, so Forget finds
// the identity's keys with SCAN as well as through its namespace set.
func TestConformanceWithTTLNoCacheAndEviction(t *testing.T) {
	addr := testsvc.Redis(t)
	storetest.Run(t, func(_ testing.TB, ns string) (store.Store, error) {
		prefix, namespace := kitLayout(ns)
		return redisstore.Open(context.Background(), addr, redisstore.WithKeyPrefix("ttl-"+prefix),
			redisstore.WithNamespace("recent-"+namespace), redisstore.WithTTL(time.Hour), redisstore.WithDecodeCache(0),
			redisstore.WithEvictionAllowed())
	})
}

// TestConformanceCluster runs the kit through a cluster client against a
// one-node Redis Cluster: the node refuses any command or script whose keys
// are in different slots (CROSSSLOT), so passing shows that every key of
// one identity shares one hash slot.
func TestConformanceCluster(t *testing.T) {
	t.Parallel() // waits on its own server or the clock
	srv := testsvc.StartRedisCluster(t)
	storetest.Run(t, func(tb testing.TB, ns string) (store.Store, error) {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}, ContextTimeoutEnabled: true})
		tb.Cleanup(func() { _ = c.Close() })
		prefix, namespace := kitLayout(ns)
		return redisstore.New(context.Background(), c, redisstore.WithKeyPrefix("c-"+prefix), redisstore.WithNamespace(namespace))
	})
	storetest.RunFaults(t, srv.Addr(), func(tb testing.TB, ns, proxy string) (store.Store, error) {
		// The node announces its own address in CLUSTER SLOTS; give the
		// client the proxy as the node of every slot instead.
		c := redis.NewClusterClient(&redis.ClusterOptions{
			ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
				return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: proxy}}}}, nil
			},
			ContextTimeoutEnabled: true,
		})
		tb.Cleanup(func() { _ = c.Close() })
		return redisstore.New(context.Background(), c, redisstore.WithKeyPrefix("cf-"+ns))
	})

	t.Run("ForgetRacingCommitsLeavesNothingOlder", func(t *testing.T) {
		prefix := uniquePrefix()
		var clients [2]store.Store
		for i := range clients {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			s, err := redisstore.New(context.Background(), c, redisstore.WithKeyPrefix(prefix))
			require.NoError(t, err)
			clients[i] = s
		}
		forgetRacingCommits(t, clients)
	})

	t.Run("ForgetWithEvictionAllowedScansTheIdentitysNode", func(t *testing.T) {
		ctx := context.Background()
		prefix := uniquePrefix()
		raw := rawClient(t, srv.Addr())
		var stores []*redisstore.Store
		for _, ns := range []string{"a", "b"} {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr()}, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			s, err := redisstore.New(ctx, c, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace(ns), redisstore.WithEvictionAllowed())
			require.NoError(t, err)
			stores = append(stores, s)
			require.NoError(t, s.Append(ctx, alice, human("hi")))
			require.NoError(t, s.Append(ctx, alice10, human("hi")))
		}
		require.NoError(t, raw.Del(ctx, keysOf(prefix, "a", alice).nss).Err()) // evicted
		require.NoError(t, stores[0].Forget(ctx, alice))
		assert.Empty(t, scanKeys(t, raw, prefix+":{"+alice.Key()+"}*"))
		rs, err := stores[1].All(ctx, alice10)
		require.NoError(t, err)
		assert.Equal(t, []string{"hi"}, contents(rs))
	})

	// The slot function of TestKeyLayoutAndHashTags is Redis Cluster's:
	// check it against the server's CLUSTER KEYSLOT.
	ctx := context.Background()
	raw := rawClient(t, srv.Addr())
	for _, id := range []memstack.Identity{alice, {Tenant: "{x}", User: "}{"}, {Tenant: "ünï"}, {}} {
		k := keysOf("p", "recent", id)
		for _, key := range []string{k.msgs, k.state, k.cleared, k.seq, k.nss, k.ops, k.opq, k.forgotten} {
			n, err := raw.ClusterKeySlot(ctx, key).Result()
			require.NoError(t, err)
			assert.Equal(t, int64(slot(id.Key())), n, "CLUSTER KEYSLOT %q", key)
		}
	}
}

func TestOptionsAreChecked(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		opt  redisstore.Option
		want string
	}{
		{"empty namespace", redisstore.WithNamespace(""), "WithNamespace"},
		{"namespace with colon", redisstore.WithNamespace("a:b"), "WithNamespace"},
		{"namespace with brace", redisstore.WithNamespace("a{b}"), "WithNamespace"},
		{"long namespace", redisstore.WithNamespace(strings.Repeat("n", 65)), "WithNamespace"},
		{"empty prefix", redisstore.WithKeyPrefix(""), "WithKeyPrefix"},
		{"prefix with open brace", redisstore.WithKeyPrefix("app{"), "WithKeyPrefix"},
		{"prefix with close brace", redisstore.WithKeyPrefix("app}"), "WithKeyPrefix"},
		{"prefix with space", redisstore.WithKeyPrefix("my app"), "WithKeyPrefix"},
		{"long prefix", redisstore.WithKeyPrefix(strings.Repeat("p", 129)), "WithKeyPrefix"},
		{"negative TTL", redisstore.WithTTL(-time.Second), "WithTTL"},
		{"TTL below a second", redisstore.WithTTL(500 * time.Millisecond), "WithTTL"},
		{"negative cache", redisstore.WithDecodeCache(-1), "WithDecodeCache"},
		{"nil option", nil, "option 1 of 1 is nil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Options are checked before connecting: the address is never
			// dialled.
			start := time.Now()
			s, err := redisstore.Open(ctx, "127.0.0.1:1", c.opt)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "connecting")
			assert.Less(t, time.Since(start), 100*time.Millisecond)
		})
	}

	t.Run("valid options", func(t *testing.T) {
		addr := testsvc.Redis(t)
		s, err := redisstore.Open(ctx, addr, redisstore.WithNamespace("Recent-1.x_y"),
			redisstore.WithKeyPrefix("app:mem/v1"), redisstore.WithTTL(0), redisstore.WithDecodeCache(0))
		require.NoError(t, err)
		require.NoError(t, s.Close())
	})

	t.Run("nil client and nil context", func(t *testing.T) {
		_, err := redisstore.New(ctx, nil)
		require.ErrorIs(t, err, store.ErrInvalidArgument)
		var nilCtx context.Context
		_, err = redisstore.Open(nilCtx, "127.0.0.1:1")
		require.ErrorIs(t, err, store.ErrInvalidArgument)
		_, err = redisstore.Open(ctx, "")
		require.ErrorIs(t, err, store.ErrInvalidArgument)
		_, err = redisstore.Open(ctx, "redis://127.0.0.1:6379/notadb")
		require.ErrorIs(t, err, store.ErrInvalidArgument)
	})
}

func TestOpenURL(t *testing.T) {
	addr := testsvc.Redis(t)
	s := open(t, "redis://"+addr+"/0", redisstore.WithKeyPrefix(uniquePrefix()))
	ctx := context.Background()
	require.NoError(t, s.Append(ctx, alice, human("hi")))
	rs, err := s.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"hi"}, contents(rs))
	assert.Contains(t, s.String(), addr)
}

// silentServer accepts TCP connections on loopback and never answers: a
// server that hangs.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
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
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

func TestUnreachableServerFailsFast(t *testing.T) {
	t.Parallel() // waits on its own server or the clock
	port, err := testsvc.FreePort()
	require.NoError(t, err)
	closed := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))

	t.Run("nothing listening", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		s, err := redisstore.Open(ctx, closed)
		require.Error(t, err)
		assert.Nil(t, s)
		assert.Less(t, time.Since(start), 3500*time.Millisecond, "bounded by ctx")
		assert.Contains(t, err.Error(), closed, "the error names the address")
	})

	t.Run("server that never answers", func(t *testing.T) {
		addr := silentServer(t)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := redisstore.Open(ctx, addr)
		require.Error(t, err)
		assert.Less(t, time.Since(start), 1500*time.Millisecond, "no hang past the ctx deadline")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), addr)
	})

	t.Run("caller's client without context timeouts", func(t *testing.T) {
		addr := silentServer(t)
		// This client alone would wait ReadTimeout (10 s) for the answer.
		c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 10 * time.Second, MaxRetries: -1})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := redisstore.New(ctx, c)
		require.Error(t, err)
		assert.Less(t, time.Since(start), 1500*time.Millisecond, "New is bounded by ctx whatever the client")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), addr)
	})
}

func TestKeyLayoutAndHashTags(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	recent := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("recent"))
	facts := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("facts"))
	raw := rawClient(t, addr)

	ids := []memstack.Identity{
		alice,
		{Tenant: "{x}", User: "}{", Conversation: "{"},
		{Tenant: "a:b", User: "*", Conversation: "%7B"},
		{Tenant: "ünï", User: "", Conversation: "{}"},
		{},
	}
	want := map[string]bool{}
	for _, id := range ids {
		// Identity.Key percent-encodes braces, so the hash tag is always
		// exactly the identity key.
		require.False(t, strings.ContainsAny(id.Key(), "{}"), "key %q", id.Key())
		for _, s := range []*redisstore.Store{recent, facts} {
			require.NoError(t, s.Append(ctx, id, system("sys"), human("q"), ai("a")))
			create(t, s, id, "summary", []byte("s"))
		}
		for _, ns := range []string{"recent", "facts"} {
			k := keysOf(prefix, ns, id)
			want[k.msgs], want[k.state], want[k.seq], want[k.nss] = true, true, true, true
			want[k.sys] = true                    // the index of the system messages
			want[k.ops], want[k.opq] = true, true // the tokens of the last writes
		}
		set, counter := feedKeysOf(prefix, id)
		want[set], want[counter] = true, true // the user's change feed, the tenant's counter
	}
	// A Clear leaves the namespace's mark behind; a Forget leaves no key
	// of the identity but sets the forgotten version of its slot.
	cleared, forgotten := memstack.Identity{User: "cleared"}, memstack.Identity{User: "forgotten"}
	require.NoError(t, facts.Append(ctx, cleared, human("q")))
	require.NoError(t, facts.Clear(ctx, cleared))
	c := keysOf(prefix, "facts", cleared)
	want[c.cleared], want[c.seq], want[c.nss], want[c.ops], want[c.opq] = true, true, true, true, true
	set, counter := feedKeysOf(prefix, cleared)
	want[set], want[counter] = true, true // a Clear is no change: the feed still names it
	require.NoError(t, recent.Append(ctx, forgotten, human("q")))
	require.NoError(t, recent.Forget(ctx, forgotten))
	want[keysOf(prefix, "recent", forgotten).forgotten] = true
	// The Forget took the conversation out of its user's feed (which,
	// empty, is gone); the tenant's counter stays.
	_, counter = feedKeysOf(prefix, forgotten)
	want[counter] = true
	ids = append(ids, cleared, forgotten)

	got := map[string]bool{}
	iter := raw.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		got[iter.Val()] = true
	}
	require.NoError(t, iter.Err())
	assert.Equal(t, want, got, "exactly the documented keys")

	// All keys of one identity hash to one cluster slot: the first '{' of
	// every key opens the tag and the tag is the identity key. The
	// forgotten key its scripts read has another tag, in the same slot.
	for _, id := range ids {
		tag := "{" + id.Key() + "}"
		wantSlot := slot(id.Key())
		for _, ns := range []string{"recent", "facts"} {
			k := keysOf(prefix, ns, id)
			for _, key := range []string{k.msgs, k.state, k.cleared, k.sys, k.seq, k.nss, k.ops, k.opq, k.forgotten} {
				open := strings.IndexByte(key, '{')
				close := strings.IndexByte(key[open:], '}')
				if key == k.forgotten {
					assert.NotContains(t, key, id.Key(), "the forgotten key names no identity")
				} else {
					require.Equal(t, tag, key[open:open+close+1], "hash tag of %q", key)
				}
				assert.Equal(t, wantSlot, slot(key[open+1:open+close]), "slot of %q", key)
			}
		}
	}
}

// slot is Redis Cluster's hash slot of a hash tag: CRC-16/XMODEM mod 16384.
func slot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

func TestSlotIsRedisCRC16(t *testing.T) {
	// The CRC-16/XMODEM check value, and the example of the Redis Cluster
	// specification.
	assert.Equal(t, 0x31C3, slot("123456789"))
}

func TestForgetRemovesEveryNamespaceAndNothingElse(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	recent := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("recent"))
	facts := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("facts"), redisstore.WithTTL(time.Hour))
	other := open(t, addr, redisstore.WithKeyPrefix(prefix+"x"), redisstore.WithNamespace("recent"))
	raw := rawClient(t, addr)

	for _, id := range []memstack.Identity{alice, bob, alice10} {
		for _, s := range []*redisstore.Store{recent, facts, other} {
			require.NoError(t, s.Append(ctx, id, system("rules"), human("hi "+id.User), ai("hello")))
			create(t, s, id, "facts", []byte("likes tea"))
		}
	}
	// A namespace holding only a Clear mark is forgotten too.
	marked := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("marked"))
	require.NoError(t, marked.Clear(ctx, alice))
	before, err := recent.All(ctx, alice)
	require.NoError(t, err)
	stBefore, err := facts.GetState(ctx, alice, "facts")
	require.NoError(t, err)

	require.NoError(t, recent.Forget(ctx, alice))

	var absent []int64
	for _, s := range []*redisstore.Store{recent, facts, marked} {
		rs, err := s.All(ctx, alice)
		require.NoError(t, err)
		assert.Empty(t, rs)
		st, err := s.GetState(ctx, alice, "facts")
		require.NoError(t, err)
		assert.Nil(t, st.Value, "%s", s)
		assert.Greater(t, st.Version, stBefore.Version, "%s: the absent version is new", s)
		absent = append(absent, st.Version)
	}
	// Every namespace reports the slot's forgotten version (no mark is
	// left), and that is what the forgotten key holds.
	assert.Equal(t, []int64{absent[0], absent[0], absent[0]}, absent)
	f, err := raw.Get(ctx, keysOf(prefix, "recent", alice).forgotten).Int64()
	require.NoError(t, err)
	assert.Equal(t, absent[0], f)
	n, err := raw.Exists(ctx, keysOf(prefix, "recent", alice).msgs, keysOf(prefix, "recent", alice).state,
		keysOf(prefix, "facts", alice).msgs, keysOf(prefix, "facts", alice).state,
		keysOf(prefix, "marked", alice).cleared,
		keysOf(prefix, "x", alice).seq, keysOf(prefix, "x", alice).nss,
		keysOf(prefix, "x", alice).ops, keysOf(prefix, "x", alice).opq).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "no key of alice is left under the prefix")
	keys, err := raw.Keys(ctx, prefix+":{"+alice.Key()+"}*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys)

	// Everything else is untouched: other identities (alice10 included),
	// and alice under another prefix.
	for _, c := range []struct {
		s  *redisstore.Store
		id memstack.Identity
	}{{recent, bob}, {facts, bob}, {recent, alice10}, {facts, alice10}, {other, alice}} {
		rs, err := c.s.All(ctx, c.id)
		require.NoError(t, err)
		assert.Equal(t, []string{"rules", "hi " + c.id.User, "hello"}, contents(rs), "%s %s", c.s, c.id)
		st, err := c.s.GetState(ctx, c.id, "facts")
		require.NoError(t, err)
		assert.Equal(t, "likes tea", string(st.Value))
	}

	// Seqs and versions go on past every one handed out before Forget.
	require.NoError(t, facts.Append(ctx, alice, human("again")))
	rs, err := facts.All(ctx, alice)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.Greater(t, rs[0].Seq, maxSeq(before))
	_, err = facts.PutState(ctx, alice, "facts", []byte("stale"), stBefore.Version)
	assert.ErrorIs(t, err, store.ErrConflict, "a version from before Forget conflicts")
	v := create(t, facts, alice, "facts", []byte("new"))
	assert.Greater(t, v, absent[0])

	// Forgetting an identity with nothing stored is fine.
	require.NoError(t, recent.Forget(ctx, memstack.Identity{User: "nobody"}))
}

func TestForgetRacingCommitsLeavesNothingOlder(t *testing.T) {
	addr := testsvc.Redis(t)
	prefix := uniquePrefix()
	forgetRacingCommits(t, [2]store.Store{
		open(t, addr, redisstore.WithKeyPrefix(prefix)),
		open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("other")),
	})
}

// forgetRacingCommits is the kit's ClearRacingCommitsLeavesNothingOlder
// with Forget: writers read and commit (a create or a delete) in a loop,
// from two clients, while Forgets run on either; no commit whose read
// finished before a Forget began may land when it started after that
// Forget returned. Forget leaves nothing of the identity, so only the
// forgotten version can defeat them.
func forgetRacingCommits(t *testing.T, clients [2]store.Store) {
	ctx := context.Background()
	base := time.Now()
	now := func() int64 { return time.Since(base).Nanoseconds() }
	type commit struct{ readDone, putStart int64 }
	type span struct{ start, end int64 }
	var mu sync.Mutex
	var commits []commit
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		c := clients[w%2]
		name := fmt.Sprint("race", w) // a name of its own: no other writer's create hides a stale one
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				st, err := c.GetState(ctx, alice, name)
				if !assert.NoError(t, err) {
					return
				}
				done := now()
				if i%3 == 0 {
					time.Sleep(time.Millisecond) // a commit that spans a Forget
				}
				// Deleting every value it finds, a writer reads the name
				// absent half the time: a first commit is what only the
				// forgotten version defeats.
				var value []byte
				if !st.Exists() {
					value = []byte("v")
				}
				start := now()
				_, err = c.PutState(ctx, alice, name, value, st.Version)
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				commits = append(commits, commit{done, start})
				mu.Unlock()
			}
		})
	}
	var forgets []span
	for round := range 100 {
		time.Sleep(time.Millisecond)
		sp := span{start: now()}
		require.NoError(t, clients[round%2].Forget(ctx, alice))
		sp.end = now()
		forgets = append(forgets, sp)
	}
	close(stop)
	wg.Wait()
	require.NotEmpty(t, commits, "no commit succeeded: the test proves nothing")
	bad := 0
	for _, c := range commits {
		for _, sp := range forgets {
			if c.readDone < sp.start && c.putStart > sp.end {
				bad++
				break
			}
		}
	}
	assert.Zero(t, bad, "%d of %d commits read before a Forget began, started after it returned, and still landed", bad, len(commits))
}

func TestSeqsSharedAcrossNamespaces(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	a := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("a"))
	b := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("b"))
	var last int64
	for i := range 5 {
		for _, s := range []*redisstore.Store{a, b} {
			require.NoError(t, s.Append(ctx, alice, human(fmt.Sprint(i))))
			rs, err := s.Last(ctx, alice, 1)
			require.NoError(t, err)
			require.Greater(t, rs[0].Seq, last)
			last = rs[0].Seq
			v := create(t, s, alice, fmt.Sprint("n", i), []byte("x"))
			require.Greater(t, v, last, "versions come from the same counter")
			last = v
		}
	}
	// The counter is at least the server clock in microseconds.
	now := time.Now().UnixMicro()
	assert.InDelta(t, float64(now), float64(last), float64(time.Minute.Microseconds()))
}

// A turn of many messages takes Seqs faster than the clock moves; Forget
// waits for the clock so the next Seq is still new.
func TestForgetAfterBurstNeverReusesSeqs(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	s := open(t, addr, redisstore.WithKeyPrefix(uniquePrefix()))
	msgs := make([]llms.ChatMessage, 3000)
	for i := range msgs {
		msgs[i] = human(fmt.Sprint(i))
	}
	require.NoError(t, s.Append(ctx, alice, msgs...))
	st, err := s.Stat(ctx, alice)
	require.NoError(t, err)
	require.Equal(t, 3000, st.Count)
	require.Equal(t, st.FirstSeq+2999, st.LastSeq, "one turn takes consecutive Seqs")

	start := time.Now()
	require.NoError(t, s.Forget(ctx, alice))
	assert.Less(t, time.Since(start), time.Second)
	require.NoError(t, s.Append(ctx, alice, human("after")))
	rs, err := s.All(ctx, alice)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.Greater(t, rs[0].Seq, st.LastSeq)
}

func pttl(t *testing.T, raw *redis.Client, key string) time.Duration {
	t.Helper()
	d, err := raw.PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	return d
}

func TestTTL(t *testing.T) {
	t.Parallel() // waits on its own server or the clock
	addr := testsvc.Redis(t)
	ctx := context.Background()
	raw := rawClient(t, addr)
	prefix := uniquePrefix()
	const ttl = 10 * time.Second
	recent := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("recent"), redisstore.WithTTL(ttl))
	k := keysOf(prefix, "recent", alice)
	within := func(t *testing.T, key string, d time.Duration) {
		t.Helper()
		got := pttl(t, raw, key)
		assert.True(t, got > d-2*time.Second && got <= d, "PTTL of %s is %v, want about %v", key, got, d)
	}

	t.Run("every key of the identity gets it", func(t *testing.T) {
		require.NoError(t, recent.Append(ctx, alice, human("hi"), ai("hello")))
		create(t, recent, alice, "summary", []byte("greeting"))
		for _, key := range []string{k.msgs, k.state, k.seq, k.nss} {
			within(t, key, ttl)
		}
	})

	t.Run("a Clear mark expires with the conversation", func(t *testing.T) {
		id := memstack.Identity{User: "cleared"}
		c := keysOf(prefix, "recent", id)
		require.NoError(t, recent.Append(ctx, id, human("hi")))
		require.NoError(t, raw.PExpire(ctx, c.seq, 3*time.Second).Err())
		require.NoError(t, recent.Clear(ctx, id))
		for _, key := range []string{c.cleared, c.seq, c.nss} {
			within(t, key, ttl)
		}
		require.NoError(t, raw.PExpire(ctx, c.cleared, 3*time.Second).Err())
		require.NoError(t, recent.Append(ctx, id, human("again")))
		within(t, c.cleared, ttl)
	})

	t.Run("refreshed on every append", func(t *testing.T) {
		for _, key := range []string{k.msgs, k.state, k.seq, k.nss} {
			require.NoError(t, raw.PExpire(ctx, key, 3*time.Second).Err())
		}
		require.NoError(t, recent.Append(ctx, alice, human("still there?")))
		for _, key := range []string{k.msgs, k.state, k.seq, k.nss} {
			within(t, key, ttl)
		}
	})

	t.Run("RemovePrefix keeps it", func(t *testing.T) {
		require.NoError(t, recent.Append(ctx, alice, system("pinned")))
		rs, err := recent.All(ctx, alice)
		require.NoError(t, err)
		n, err := recent.RemovePrefix(ctx, alice, maxSeq(rs))
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		rs, err = recent.All(ctx, alice)
		require.NoError(t, err)
		assert.Equal(t, []string{"pinned"}, contents(rs))
		within(t, k.msgs, ttl)
	})

	t.Run("a namespace without TTL keeps the shared keys forever", func(t *testing.T) {
		facts := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("facts"))
		require.NoError(t, facts.Append(ctx, alice, human("remember me")))
		f := keysOf(prefix, "facts", alice)
		assert.Equal(t, time.Duration(-1), pttl(t, raw, f.msgs))
		assert.Equal(t, time.Duration(-1), pttl(t, raw, k.seq))
		assert.Equal(t, time.Duration(-1), pttl(t, raw, k.nss))
		// A later write with TTL does not give them an expiry again.
		require.NoError(t, recent.Append(ctx, alice, human("hi")))
		assert.Equal(t, time.Duration(-1), pttl(t, raw, k.seq))
		assert.Equal(t, time.Duration(-1), pttl(t, raw, k.nss))
		within(t, k.msgs, ttl)
	})

	t.Run("shared keys keep the longest TTL", func(t *testing.T) {
		long := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("long"), redisstore.WithTTL(time.Hour))
		require.NoError(t, long.Append(ctx, bob, human("hi")))
		require.NoError(t, recent.Append(ctx, bob, human("hi")))
		b := keysOf(prefix, "recent", bob)
		within(t, b.msgs, ttl)
		within(t, keysOf(prefix, "long", bob).msgs, time.Hour)
		within(t, b.seq, time.Hour)
		within(t, b.nss, time.Hour)
	})

	t.Run("expired conversations are gone and Seqs go on", func(t *testing.T) {
		short := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("short"), redisstore.WithTTL(time.Second))
		id := memstack.Identity{User: "short-lived"}
		require.NoError(t, short.Append(ctx, id, human("soon gone")))
		rs, err := short.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, rs, 1)
		s := keysOf(prefix, "short", id)
		require.Eventually(t, func() bool {
			n, err := raw.Exists(ctx, s.msgs, s.seq, s.nss).Result()
			return err == nil && n == 0
		}, 5*time.Second, 50*time.Millisecond, "every key expires")
		got, err := short.All(ctx, id)
		require.NoError(t, err)
		assert.Empty(t, got)
		require.NoError(t, short.Append(ctx, id, human("new")))
		got, err = short.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Greater(t, got[0].Seq, rs[0].Seq)
	})
}

func TestServerKilledMidRunThenRestarted(t *testing.T) {
	t.Parallel()                 // waits on its own server or the clock
	srv := testsvc.StartRedis(t) // append-only file, fsync always
	ctx := context.Background()
	s := open(t, srv.Addr())
	require.NoError(t, s.Append(ctx, alice, human("before"), ai("the crash")))
	v1 := create(t, s, alice, "summary", []byte("acknowledged"))

	// Writers are appending turns to carol's conversation when the server
	// is killed.
	carol := memstack.Identity{Tenant: "acme", User: "carol"}
	const writers = 4
	acked := make([][]string, writers)
	failed := make([]int, writers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				label := fmt.Sprintf("w%d-%03d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := s.Append(ctx, carol, human(label+" q"), ai(label+" a"))
				cancel()
				if err == nil {
					acked[w] = append(acked[w], label)
				} else {
					failed[w]++
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(150 * time.Millisecond)
	require.NoError(t, srv.Kill())
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	for w := range writers {
		require.NotEmpty(t, acked[w], "writer %d appended before the kill", w)
		require.NotZero(t, failed[w], "writer %d saw the server die", w)
	}

	calls := map[string]func(context.Context) error{
		"Append": func(ctx context.Context) error { return s.Append(ctx, alice, human("lost?")) },
		"Last":   func(ctx context.Context) error { _, err := s.Last(ctx, alice, 5); return err },
		"All":    func(ctx context.Context) error { _, err := s.All(ctx, alice); return err },
		"Stat":   func(ctx context.Context) error { _, err := s.Stat(ctx, alice); return err },
		"RemovePrefix": func(ctx context.Context) error {
			_, err := s.RemovePrefix(ctx, alice, 1)
			return err
		},
		"Clear":    func(ctx context.Context) error { return s.Clear(ctx, bob) },
		"Forget":   func(ctx context.Context) error { return s.Forget(ctx, bob) },
		"GetState": func(ctx context.Context) error { _, err := s.GetState(ctx, alice, "summary"); return err },
		"PutState": func(ctx context.Context) error {
			_, err := s.PutState(ctx, alice, "summary", []byte("x"), v1)
			return err
		},
	}
	const deadline = time.Second
	for name, call := range calls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			err := call(ctx)
			elapsed := time.Since(start)
			assert.Error(t, err, "%s while the server is down", name)
			assert.Less(t, elapsed, deadline+500*time.Millisecond, "%s returned %v after its deadline", name, elapsed-deadline)
			if err != nil {
				assert.Contains(t, err.Error(), name, "the error names the operation")
				assert.Contains(t, err.Error(), srv.Addr(), "the error names the server")
			}
		})
	}
	wg.Wait()

	require.NoError(t, srv.Restart())
	// The same Store value works again once go-redis reconnects: retry the
	// call, as a caller would.
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return s.Append(ctx, alice, human("after"), ai("the restart")) == nil
	}, 15*time.Second, 100*time.Millisecond)

	rs, err := s.All(ctx, alice)
	require.NoError(t, err)
	got := contents(rs)
	// The writes acknowledged before the crash are there (the failed
	// Append may or may not have reached the server before it died: it
	// was sent after the kill, so it did not).
	assert.Equal(t, []string{"before", "the crash", "after", "the restart"}, got)
	for i := 1; i < len(rs); i++ {
		assert.Greater(t, rs[i].Seq, rs[i-1].Seq)
	}
	st, err := s.GetState(ctx, alice, "summary")
	require.NoError(t, err)
	assert.Equal(t, store.State{Value: []byte("acknowledged"), Version: v1}, st)

	// Every turn acknowledged before the crash survived it, whole and in
	// each writer's order, and none is stored twice. (A turn whose reply
	// the crash cut off may be there too: the server ran it.)
	rs, err = s.All(ctx, carol)
	require.NoError(t, err)
	require.Zero(t, len(rs)%2)
	stored := map[string]bool{}
	var order [writers][]string
	for i := 0; i < len(rs); i += 2 {
		q, a := rs[i].Message.GetContent(), rs[i+1].Message.GetContent()
		label := strings.TrimSuffix(q, " q")
		require.Equal(t, label+" a", a, "turn %s is whole", label)
		require.False(t, stored[label], "turn %s stored twice", label)
		stored[label] = true
		var w int
		_, err := fmt.Sscanf(label, "w%d-", &w)
		require.NoError(t, err)
		order[w] = append(order[w], label)
	}
	for w := range writers {
		for _, label := range acked[w] {
			assert.True(t, stored[label], "acknowledged turn %s survived the crash", label)
		}
		assert.IsIncreasing(t, order[w], "writer %d's order", w)
	}
}

func TestContextDeadlineDuringCall(t *testing.T) {
	t.Parallel() // waits on its own server or the clock
	srv := testsvc.StartRedis(t)
	s := open(t, srv.Addr())
	raw := rawClient(t, srv.Addr())
	ctx := context.Background()
	require.NoError(t, s.Append(ctx, alice, human("hi")))

	// CLIENT PAUSE makes the server hold every command for 1 s: a call
	// with a 200 ms deadline returns at its deadline, not after the pause.
	require.NoError(t, raw.Do(ctx, "CLIENT", "PAUSE", "1000", "ALL").Err())
	for _, name := range []string{"Append", "Last"} {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		var err error
		if name == "Append" {
			err = s.Append(cctx, alice, human("paused"))
		} else {
			_, err = s.Last(cctx, alice, 1)
		}
		cancel()
		require.Error(t, err, name)
		assert.ErrorIs(t, err, context.DeadlineExceeded, name)
		assert.Less(t, time.Since(start), 700*time.Millisecond, name)
	}
	require.NoError(t, raw.Do(ctx, "CLIENT", "UNPAUSE").Err())
	rs, err := s.All(ctx, alice)
	require.NoError(t, err)
	assert.NotEmpty(t, rs, "the store works after the pause")
}

func TestCorruptValues(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	s := open(t, addr, redisstore.WithKeyPrefix(prefix))
	raw := rawClient(t, addr)

	// fresh returns a new identity with three turns stored and its keys.
	n := 0
	fresh := func(t *testing.T) (memstack.Identity, keyNames, []store.Record) {
		t.Helper()
		n++
		id := memstack.Identity{Tenant: "corrupt", User: fmt.Sprint("u", n)}
		require.NoError(t, s.Append(ctx, id, system("secret rules"), human("secret q1"), ai("secret a1")))
		require.NoError(t, s.Append(ctx, id, human("secret q2"), ai("secret a2")))
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, rs, 5)
		return id, keysOf(prefix, "default", id), rs
	}
	require.NoError(t, s.Append(ctx, bob, human("bob's")))

	requireCorrupt := func(t *testing.T, err error, id memstack.Identity, mentions string) {
		t.Helper()
		require.Error(t, err)
		assert.ErrorIs(t, err, store.ErrCorrupt)
		assert.Contains(t, err.Error(), id.Key(), "names the identity")
		assert.Contains(t, err.Error(), mentions)
		assert.NotContains(t, err.Error(), "secret", "never shows stored content")
	}
	encode := func(m llms.ChatMessage) string {
		b, err := storekit.EncodeMessage(m)
		require.NoError(t, err)
		return string(b)
	}

	cases := []struct {
		name     string
		value    func(seq int64) string
		mentions func(seq int64) string
	}{
		{"no Seq", func(int64) string { return "garbage secret" }, func(int64) string { return "list index 2" }},
		{"not JSON", func(seq int64) string { return fmt.Sprintf("%d|m|{secret", seq) }, func(seq int64) string { return fmt.Sprint("Seq ", seq) }},
		{"unknown type", func(seq int64) string { return fmt.Sprintf(`%d|m|{"v":1,"type":"alien","content":"secret"}`, seq) }, func(seq int64) string { return fmt.Sprint("Seq ", seq) }},
		{"bad role flag", func(seq int64) string { return fmt.Sprintf("%d|x|%s", seq, encode(human("secret"))) }, func(seq int64) string { return fmt.Sprint("Seq ", seq) }},
		{"flag disagrees with the message", func(seq int64) string { return fmt.Sprintf("%d|m|%s", seq, encode(system("secret"))) }, func(seq int64) string { return "role flag" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, k, rs := fresh(t)
			seq := rs[2].Seq
			require.NoError(t, raw.LSet(ctx, k.msgs, 2, c.value(seq)).Err())

			_, err := s.All(ctx, id)
			requireCorrupt(t, err, id, c.mentions(seq))
			_, err = s.Last(ctx, id, 3)
			requireCorrupt(t, err, id, "")
			_, err = s.Tail(ctx, id, 3, 0)
			requireCorrupt(t, err, id, "")
			// The rest stays readable: the newer messages, Stat, and
			// other identities.
			got, err := s.Last(ctx, id, 2)
			require.NoError(t, err)
			assert.Equal(t, []string{"secret q2", "secret a2"}, contents(got))
			got, err = s.Tail(ctx, id, 2, 0)
			require.NoError(t, err)
			assert.Equal(t, []string{"secret rules", "secret q2", "secret a2"}, contents(got))
			st, err := s.Stat(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, store.Stat{Count: 5, FirstSeq: rs[0].Seq, LastSeq: rs[4].Seq}, st)
			got, err = s.All(ctx, bob)
			require.NoError(t, err)
			assert.Equal(t, []string{"bob's"}, contents(got))
			// Appending still works, and Clear removes the bad value.
			require.NoError(t, s.Append(ctx, id, human("more")))
			require.NoError(t, s.Clear(ctx, id))
			got, err = s.All(ctx, id)
			require.NoError(t, err)
			assert.Empty(t, got)
		})
	}

	t.Run("head without Seq", func(t *testing.T) {
		id, k, _ := fresh(t)
		require.NoError(t, raw.LSet(ctx, k.msgs, 0, "garbage").Err())
		_, err := s.Stat(ctx, id)
		requireCorrupt(t, err, id, "head")
		_, err = s.RemovePrefix(ctx, id, 1<<62)
		requireCorrupt(t, err, id, "list index 0")
		got, err := s.Last(ctx, id, 4)
		require.NoError(t, err, "the rest is readable")
		assert.Len(t, got, 4)
	})

	t.Run("index of system messages", func(t *testing.T) {
		id, k, _ := fresh(t)
		require.NoError(t, raw.LSet(ctx, k.sys, 1, "garbage secret").Err())
		_, err := s.Tail(ctx, id, 2, 0)
		requireCorrupt(t, err, id, "index of system messages")
		got, err := s.Last(ctx, id, 2)
		require.NoError(t, err, "the list is readable")
		assert.Len(t, got, 2)
		require.NoError(t, s.Clear(ctx, id))
		require.NoError(t, s.Append(ctx, id, system("rules"), human("q")))
		got, err = s.Tail(ctx, id, 1, 0)
		require.NoError(t, err, "Clear starts the index again")
		assert.Equal(t, []string{"rules", "q"}, contents(got))
	})

	t.Run("state value", func(t *testing.T) {
		id, k, _ := fresh(t)
		create(t, s, id, "good", []byte("fine"))
		require.NoError(t, raw.HSet(ctx, k.state, "summary", "secret without version").Err())
		_, err := s.GetState(ctx, id, "summary")
		requireCorrupt(t, err, id, `"summary"`)
		_, err = s.PutState(ctx, id, "summary", []byte("x"), 0)
		requireCorrupt(t, err, id, `"summary"`)
		st, err := s.GetState(ctx, id, "good")
		require.NoError(t, err)
		assert.Equal(t, "fine", string(st.Value))
	})

	t.Run("Clear mark and forgotten version", func(t *testing.T) {
		id, k, _ := fresh(t)
		v := create(t, s, id, "kept", []byte("fine"))
		require.NoError(t, raw.Set(ctx, k.cleared, "secret mark", 0).Err())
		_, err := s.GetState(ctx, id, "summary")
		requireCorrupt(t, err, id, "Clear mark")
		_, err = s.PutState(ctx, id, "summary", []byte("x"), 0)
		requireCorrupt(t, err, id, "Clear mark")
		st, err := s.GetState(ctx, id, "kept")
		require.NoError(t, err)
		assert.Equal(t, store.State{Value: []byte("fine"), Version: v}, st, "a stored value stays readable")
		// Clear sets a new mark.
		require.NoError(t, s.Clear(ctx, id))
		st, err = s.GetState(ctx, id, "summary")
		require.NoError(t, err)
		assert.Nil(t, st.Value)
		assert.Greater(t, st.Version, v)

		require.NoError(t, raw.Del(ctx, k.cleared).Err())
		require.NoError(t, raw.Set(ctx, k.forgotten, "secret forgotten", 0).Err())
		_, err = s.GetState(ctx, id, "summary")
		requireCorrupt(t, err, id, "forgotten version")
		_, err = s.PutState(ctx, id, "summary", []byte("x"), 0)
		requireCorrupt(t, err, id, "forgotten version")
		// Forget draws a new forgotten version.
		require.NoError(t, s.Forget(ctx, id))
		st, err = s.GetState(ctx, id, "summary")
		require.NoError(t, err)
		assert.Nil(t, st.Value)
		assert.Greater(t, st.Version, v)
		create(t, s, id, "summary", []byte("x"))
	})

	t.Run("sequence counter", func(t *testing.T) {
		id, k, rs := fresh(t)
		absent, err := s.GetState(ctx, id, "new")
		require.NoError(t, err)
		require.NoError(t, raw.Set(ctx, k.seq, "not a number", 0).Err())
		err = s.Append(ctx, id, human("q"), ai("a"))
		requireCorrupt(t, err, id, "sequence counter")
		_, err = s.PutState(ctx, id, "new", []byte("x"), absent.Version)
		requireCorrupt(t, err, id, "sequence counter")
		requireCorrupt(t, s.Clear(ctx, id), id, "sequence counter")
		got, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, contents(rs), contents(got), "nothing was stored")
		// Forget still removes everything, the bad counter included.
		require.NoError(t, s.Forget(ctx, id))
		require.NoError(t, s.Append(ctx, id, human("fresh start")))
	})

	t.Run("wrong key type", func(t *testing.T) {
		id := memstack.Identity{User: "wrongtype"}
		k := keysOf(prefix, "default", id)
		require.NoError(t, raw.Set(ctx, k.msgs, "a string, not a list", 0).Err())
		_, err := s.All(ctx, id)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "WRONGTYPE")
		assert.Contains(t, err.Error(), id.Key())
		require.Error(t, s.Append(ctx, id, human("x")))
		_, err = s.Stat(ctx, id)
		require.Error(t, err)
		require.NoError(t, s.Forget(ctx, id))
	})
}

func TestClosedStore(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	s, err := redisstore.New(ctx, c, redisstore.WithKeyPrefix(uniquePrefix()))
	require.NoError(t, err)
	require.NoError(t, s.Append(ctx, alice, human("hi")))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "closing twice is fine")

	errs := map[string]error{}
	errs["Append"] = s.Append(ctx, alice, human("x"))
	_, errs["Last"] = s.Last(ctx, alice, 1)
	_, errs["All"] = s.All(ctx, alice)
	_, errs["Stat"] = s.Stat(ctx, alice)
	_, errs["RemovePrefix"] = s.RemovePrefix(ctx, alice, 1)
	errs["Clear"] = s.Clear(ctx, alice)
	errs["Forget"] = s.Forget(ctx, alice)
	_, errs["GetState"] = s.GetState(ctx, alice, "x")
	_, errs["PutState"] = s.PutState(ctx, alice, "x", []byte("v"), 0)
	_, errs["Rewrite"] = s.Rewrite(ctx, alice, 1, false, human("x"))
	_, errs["Identities"] = s.Identities(ctx, store.UserScope("acme", "alice"))
	_, errs["Export"] = s.Export(ctx, store.UserScope("acme", "alice"))
	_, errs["ForgetScope"] = s.ForgetScope(ctx, store.UserScope("acme", "alice"))
	for name, err := range errs {
		assert.ErrorIs(t, err, redisstore.ErrClosed, name)
		if err != nil {
			assert.Contains(t, err.Error(), name)
		}
	}
	// A client given to New belongs to the caller: still open.
	require.NoError(t, c.Ping(ctx).Err())

	// A store made by Open closes its own client; the zero Store errors.
	s2, err := redisstore.Open(ctx, addr)
	require.NoError(t, err)
	require.NoError(t, s2.Close())
	assert.ErrorIs(t, s2.Append(ctx, alice, human("x")), redisstore.ErrClosed)
	var zero redisstore.Store
	assert.ErrorIs(t, zero.Append(ctx, alice, human("x")), store.ErrInvalidArgument)
	var nilStore *redisstore.Store
	_, err = nilStore.All(ctx, alice)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
}

// Two memory values over two clients stand for two replicas of an agent
// serving one user: both see one conversation, system prompt pinned, and
// RecentN keeps the stored list O(n).
func TestRecentNOnRedisAcrossReplicas(t *testing.T) {
	addr := testsvc.Redis(t)
	prefix := uniquePrefix()
	s1 := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("recent"))
	s2 := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("recent"))
	keep := memories.WithRetention(memories.KeepLast(4))
	m1, err := memories.NewRecentN(4, memories.WithStore(s1), keep)
	require.NoError(t, err)
	m2, err := memories.NewRecentN(4, memories.WithStore(s2), keep)
	require.NoError(t, err)

	ctx := memstack.WithIdentity(context.Background(), alice)
	require.NoError(t, m1.AddMessage(ctx, llms.SystemChatMessage{Content: "You are terse."}))
	for i := range 30 {
		m := m1
		if i%2 == 1 {
			m = m2
		}
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": fmt.Sprint("q", i)}, map[string]any{"output": fmt.Sprint("a", i)}))
	}
	vars, err := m2.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "system: You are terse.\nHuman: q28\nAI: a28\nHuman: q29\nAI: a29", vars["history"])

	st, err := s1.Stat(ctx, alice)
	require.NoError(t, err)
	assert.LessOrEqual(t, st.Count, 1+4+16+2, "RecentN trims the Redis list")

	// Another identity on the same memories sees nothing of alice's.
	vars, err = m1.LoadMemoryVariables(memstack.WithIdentity(context.Background(), bob), nil)
	require.NoError(t, err)
	assert.Equal(t, "", vars["history"])
}

func TestDecodeCacheReturnsCopies(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	s := open(t, addr, redisstore.WithKeyPrefix(uniquePrefix()))
	call := llms.AIChatMessage{Content: "calling", ToolCalls: []llms.ToolCall{{ID: "1", Type: "function",
		FunctionCall: &llms.FunctionCall{Name: "search", Arguments: `{"q":"x"}`}}}}
	require.NoError(t, s.Append(ctx, alice, call))
	for range 3 { // the first read decodes, the others hit the cache
		rs, err := s.Last(ctx, alice, 1)
		require.NoError(t, err)
		require.Equal(t, call, rs[0].Message)
		got := rs[0].Message.(llms.AIChatMessage)
		got.ToolCalls[0].FunctionCall.Name = "changed by the caller"
		got.ToolCalls[0].ID = "changed"
	}
}

func TestErrorsNameTheIdentity(t *testing.T) {
	addr := testsvc.Redis(t)
	s := open(t, addr, redisstore.WithKeyPrefix(uniquePrefix()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Append(ctx, alice, human("x"))
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), alice.Key())
	_, err = s.Last(context.Background(), alice, 0)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	err = s.Append(context.Background(), alice, human("ok"), nil)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "message 2 of 2")
	_, err = s.PutState(context.Background(), alice, "bad name", []byte("x"), 0)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = s.PutState(context.Background(), alice, "n", []byte("x"), 12345)
	require.ErrorIs(t, err, store.ErrConflict)
	assert.Contains(t, err.Error(), alice.Key())
	assert.False(t, errors.Is(err, store.ErrCorrupt))
}

// StatMany works on a server that has never run the Stat script, or
// whose script cache was flushed (a restart, SCRIPT FLUSH): it loads the
// script and answers, rather than failing with NOSCRIPT.
func TestStatManyAfterScriptFlush(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	s, err := redisstore.Open(ctx, addr, redisstore.WithKeyPrefix("flush-"+t.Name()))
	require.NoError(t, err)
	defer s.Close()
	id := memstack.Identity{User: "u", Conversation: "c"}
	require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: "hi"}))
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	require.NoError(t, c.ScriptFlush(ctx).Err())
	got, err := s.StatMany(ctx, []memstack.Identity{id, {User: "none"}})
	require.NoError(t, err)
	want, err := s.Stat(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []store.Stat{want, {}}, got)
	assert.Equal(t, 1, want.Count)
}

// AppendBatches works on a server whose script cache was flushed: the
// transaction's scripts are all refused (none runs), the script is loaded,
// and the batches are stored once each.
func TestAppendBatchesAfterScriptFlush(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	s, err := redisstore.Open(ctx, addr, redisstore.WithKeyPrefix("flush-ab-"+t.Name()))
	require.NoError(t, err)
	defer s.Close()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	require.NoError(t, c.ScriptFlush(ctx).Err())
	a, b := memstack.Identity{User: "u", Conversation: "c"}, memstack.Identity{User: "u", Conversation: "journal"}
	require.NoError(t, s.AppendBatches(ctx,
		store.Batch{ID: a, Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: "hi"}, llms.AIChatMessage{Content: "hello"}}, Key: "k1"},
		store.Batch{ID: b, Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: "c"}}, Key: "k1"}))
	for id, n := range map[memstack.Identity]int{a: 2, b: 1} {
		recs, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Len(t, recs, n, "%s", id.Key())
	}
}
