package storetest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// Namespaced is implemented by stores that keep several namespaces in one
// backend (a table or key prefix shared by many Store values): Clear works
// in the Store's namespace, Forget in all of them. The kit checks the two
// apart on such stores; a store without it (InMemory: one namespace per
// value) has only the one.
type Namespaced interface {
	// Namespace returns the Store's namespace.
	Namespace() string
}

// secondNamespace opens a client over a second namespace of the same
// backend, and reports whether the backend keeps namespaces (Namespaced).
func (e *env) secondNamespace() (store.Store, bool) {
	e.t.Helper()
	s, err := e.kit.open(e.t, e.ns+"_b")
	if err != nil {
		e.t.Fatalf("storetest: Opener(ns=%q): %v", e.ns+"_b", err)
	}
	c := &client{Store: s}
	e.mu.Lock()
	e.open = append(e.open, c)
	e.mu.Unlock()
	_, ok := s.(Namespaced)
	return c, ok
}

// testClearVersusForget uses two namespaces of one backend: Clear touches
// only its own, Forget every one. A backend whose Forget only clears, or
// whose Clear forgets, fails it.
func testClearVersusForget(t *testing.T, e *env) {
	a := e.store()
	b, namespaced := e.secondNamespace()
	for _, s := range []store.Store{a, b} {
		mustAppend(t, s, alice, system("sys"), human("h1"), ai("a1"))
		mustAppend(t, s, bob, human("b1"))
		mustCreate(t, s, alice, "summary", []byte("s"))
	}
	bAlice, bBob := mustAll(t, b, alice), mustAll(t, b, bob)

	require.NoError(t, a.Clear(e.ctx, alice))
	assert.Empty(t, mustAll(t, a, alice), "Clear empties its own namespace")
	assert.Equal(t, bAlice, mustAll(t, b, alice), "Clear leaves the identity in another namespace alone")
	assert.True(t, mustGet(t, b, alice, "summary").Exists(), "Clear leaves the state of another namespace alone")

	mustAppend(t, a, alice, human("again"))
	require.NoError(t, a.Forget(e.ctx, alice))
	assert.Empty(t, mustAll(t, a, alice), "Forget empties its own namespace")
	if namespaced {
		assert.Empty(t, mustAll(t, b, alice), "Forget removes the identity from every namespace")
		assertAbsent(t, mustGet(t, b, alice, "summary"), "Forget removes the state of every namespace")
	}
	assert.Equal(t, bBob, mustAll(t, b, bob), "Forget leaves other identities alone")
}

// ---------------------------------------------------------------------------
// Rewriter.
// ---------------------------------------------------------------------------

// unwrap returns the backend's own store value behind a kit client, so
// optional interfaces (Rewriter, Users, Namespaced) are seen.
func unwrap(s store.Store) store.Store {
	if c, ok := s.(*client); ok {
		return c.Store
	}
	return s
}

func rewriterOf(t *testing.T, s store.Store) store.Rewriter {
	t.Helper()
	return optional[store.Rewriter](t, s, "store.Rewriter")
}

// optional returns s as the optional interface T, named what, or skips t
// when s does not implement it.
func optional[T any](t *testing.T, s store.Store, what string) T {
	t.Helper()
	v, ok := unwrap(s).(T)
	if !ok {
		t.Skipf("%T is not a %s", s, what)
	}
	return v
}

func testRewrite(t *testing.T, e *env) {
	s := e.store()
	rw := rewriterOf(t, s)
	mustAppend(t, s, alice, system("sys"), human("h1"), ai("a1"))
	mustAppend(t, s, alice, human("h2"), ai("a2"))
	mustAppend(t, s, bob, human("b1"))
	v := mustCreate(t, s, alice, "summary", []byte("kept"))
	recs := mustAll(t, s, alice)
	bobAll := mustAll(t, s, bob)

	n, err := rw.Rewrite(e.ctx, alice, recs[2].Seq, false, human("h3"), ai("a3"))
	require.NoError(t, err)
	assert.Equal(t, 3, n, "removed the system message and the first turn")
	got := mustAll(t, s, alice)
	assert.Equal(t, []string{"h2", "a2", "h3", "a3"}, contentsOf(got), "system messages go too, unlike RemovePrefix")
	assert.Equal(t, seqsOf(recs[3:]), seqsOf(got[:2]), "the kept messages keep their Seqs")
	requireIncreasing(t, seqsOf(got))
	assert.Greater(t, got[2].Seq, recs[len(recs)-1].Seq, "appended messages get new Seqs")
	assert.Equal(t, store.State{Value: []byte("kept"), Version: v}, mustGet(t, s, alice, "summary"), "without reset the state stays")
	assert.Equal(t, bobAll, mustAll(t, s, bob), "other identities are untouched")

	// Failures change nothing.
	before := mustAll(t, s, alice)
	_, err = rw.Rewrite(e.ctx, alice, math.MaxInt64, true, human("x"), nil)
	assert.ErrorIs(t, err, store.ErrInvalidArgument, "a nil message")
	cctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err = rw.Rewrite(cctx, alice, math.MaxInt64, true, human("x"))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, before, mustAll(t, s, alice), "a failed Rewrite changes nothing")
	assert.True(t, mustGet(t, s, alice, "summary").Exists(), "a failed Rewrite changes nothing")

	// A full replacement with reset is Clear and Append in one step.
	read := mustGet(t, s, alice, "summary")
	n, err = rw.Rewrite(e.ctx, alice, math.MaxInt64, true, human("new"))
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	assert.Equal(t, []string{"new"}, contentsOf(mustAll(t, s, alice)))
	after := mustGet(t, s, alice, "summary")
	assertAbsent(t, after, "reset removes the state")
	assert.NotEqual(t, read.Version, after.Version, "reset moves the absent version")
	_, err = s.PutState(e.ctx, alice, "summary", []byte("stale"), read.Version)
	assert.ErrorIs(t, err, store.ErrConflict, "a commit that read before a reset conflicts")

	// Nothing to remove and nothing to add is a no-op.
	n, err = rw.Rewrite(e.ctx, alice, 0, false)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, []string{"new"}, contentsOf(mustAll(t, s, alice)))
}

// testRewriteAtomic checks that readers never see a Rewrite half done.
func testRewriteAtomic(t *testing.T, e *env) {
	s := e.store()
	rw := rewriterOf(t, s)
	reader := e.store()
	mustAppend(t, s, alice, human("t0"), ai("t0"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			rs, err := reader.All(e.ctx, alice)
			if !assert.NoError(t, err) {
				return
			}
			if !assert.Len(t, rs, 2, "a reader saw a Rewrite half done: %v", contentsOf(rs)) {
				return
			}
			assert.Equal(t, rs[0].Message.GetContent(), rs[1].Message.GetContent(), "a reader saw two turns mixed: %v", contentsOf(rs))
		}
	})
	for i := 1; i <= 100; i++ {
		last := mustStat(t, s, alice).LastSeq
		w := fmt.Sprintf("t%d", i)
		_, err := rw.Rewrite(e.ctx, alice, last, false, human(w), ai(w))
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
}

// ---------------------------------------------------------------------------
// Users.
// ---------------------------------------------------------------------------

func usersOf(t *testing.T, s store.Store) store.Users {
	t.Helper()
	return optional[store.Users](t, s, "store.Users")
}

// tenant returns the tenant the Users cases of this subtest write: one
// of its own, because Users calls reach every namespace of the backend,
// and other subtests' data lives there too.
func (e *env) tenant() string { return "acme-" + e.ns }

// usersStores opens the stores a Users case writes: a client of the
// subtest's namespace (skipping t unless it is a store.Users) and, when
// the backend keeps namespaces, one of a second namespace too.
func (e *env) usersStores(t *testing.T) (a store.Store, u store.Users, ss []store.Store, namespaced bool) {
	t.Helper()
	a = e.store()
	u = usersOf(t, a)
	b, namespaced := e.secondNamespace()
	ss = []store.Store{a}
	if namespaced {
		ss = append(ss, b)
	}
	return a, u, ss, namespaced
}

// population is the identities the Users cases write: ana's conversations
// in tenant and look-alikes that are not hers.
func population(tenant string) (ana, others []memstack.Identity) {
	ana = []memstack.Identity{
		{Tenant: tenant, User: "ana", Conversation: ""},
		{Tenant: tenant, User: "ana", Conversation: "c1"},
		{Tenant: tenant, User: "ana", Conversation: "c:2/*?[x]%_"},
		{Tenant: tenant, User: "ana", Conversation: "\x00memstack-user-facts"},
	}
	others = []memstack.Identity{
		{Tenant: tenant, User: "anab", Conversation: "c1"},
		{Tenant: tenant, User: "an", Conversation: "ac1"},
		{Tenant: tenant, User: "ana:c1", Conversation: ""},
		{Tenant: tenant, User: "", Conversation: "ana"},
		{Tenant: tenant + ":ana", User: "c1", Conversation: ""},
		{Tenant: tenant + "b", User: "ana", Conversation: "c1"},
		{Tenant: "", User: tenant + "ana", Conversation: "c1"},
		{Tenant: tenant, User: "bob", Conversation: "c1"},
	}
	return ana, others
}

// fill writes messages and a state for each identity, and a Clear mark
// only for the last of ana's.
func fill(t *testing.T, ss []store.Store, ids []memstack.Identity) {
	t.Helper()
	for si, s := range ss {
		for i, id := range ids {
			mustAppend(t, s, id, human(fmt.Sprintf("ns%d msg %d of %s", si, i, id.Key())), ai("answer"))
			mustCreate(t, s, id, "summary", []byte(fmt.Sprintf("ns%d state of %s", si, id.Key())))
		}
	}
}

func keysOf(ids []memstack.Identity) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.Key()
	}
	return out
}

func sortedKeys(ids []memstack.Identity) []string {
	ks := keysOf(ids)
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j] < ks[j-1]; j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}

func testUsersIdentities(t *testing.T, e *env) {
	a, u, ss, _ := e.usersStores(t)
	tenant := e.tenant()
	ana, others := population(tenant)
	fill(t, ss, ana[:3])
	fill(t, ss, others)
	// A conversation that was cleared holds only its Clear mark.
	require.NoError(t, a.Clear(e.ctx, ana[3]))

	got, err := u.Identities(e.ctx, store.UserScope(tenant, "ana"))
	require.NoError(t, err)
	assert.Equal(t, sortedKeys(ana), keysOf(got), "every conversation of the user, cleared ones included, by Key, and no other")

	got, err = u.Identities(e.ctx, store.TenantScope(tenant))
	require.NoError(t, err)
	var acme []memstack.Identity
	for _, id := range append(append([]memstack.Identity{}, ana...), others...) {
		if id.Tenant == tenant {
			acme = append(acme, id)
		}
	}
	assert.Equal(t, sortedKeys(acme), keysOf(got), "every identity of the tenant, and no other")

	got, err = u.Identities(e.ctx, store.UserScope(tenant, "nobody"))
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = u.Identities(e.ctx, store.Scope{Tenant: tenant, User: "ana", AllUsers: true})
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	cctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err = u.Identities(cctx, store.UserScope(tenant, "ana"))
	assert.ErrorIs(t, err, context.Canceled)
}

func testUsersExport(t *testing.T, e *env) {
	a, u, ss, namespaced := e.usersStores(t)
	tenant := e.tenant()
	ana, others := population(tenant)
	fill(t, ss, ana[:2])
	fill(t, ss, others[:2])
	require.NoError(t, a.Clear(e.ctx, ana[2]))

	ex, err := u.Export(e.ctx, store.UserScope(tenant, "ana"))
	require.NoError(t, err)
	assert.Equal(t, store.UserScope(tenant, "ana"), ex.Scope)
	require.Equal(t, sortedKeys(ana[:3]), keysOfExport(ex))
	for _, ie := range ex.Identities {
		if ie.Identity == ana[2] {
			for _, ne := range ie.Namespaces {
				assert.Empty(t, ne.Messages)
				assert.Empty(t, ne.States)
			}
			require.NotEmpty(t, ie.Namespaces, "a cleared conversation is listed with its mark")
			assert.True(t, ie.Namespaces[0].Cleared)
			continue
		}
		require.Len(t, ie.Namespaces, len(ss), "one entry per namespace with data")
		for si, ne := range ie.Namespaces {
			s := ss[si]
			if namespaced {
				s = storeOfNamespace(ss, ne.Namespace)
				require.NotNil(t, s, "namespace %q is one of the test's", ne.Namespace)
			}
			assert.Equal(t, mustAll(t, s, ie.Identity), ne.Messages, "the messages of %s", ie.Identity.Key())
			assert.Equal(t, map[string]store.State{"summary": mustGet(t, s, ie.Identity, "summary")}, ne.States, "the state of %s", ie.Identity.Key())
			assert.False(t, ne.Cleared)
		}
	}
}

func keysOfExport(ex store.Export) []string {
	out := make([]string, len(ex.Identities))
	for i, ie := range ex.Identities {
		out[i] = ie.Identity.Key()
	}
	return out
}

func storeOfNamespace(ss []store.Store, ns string) store.Store {
	for _, s := range ss {
		if n, ok := unwrap(s).(Namespaced); ok && n.Namespace() == ns {
			return s
		}
	}
	return nil
}

func testUsersForget(t *testing.T, e *env) {
	tenant := e.tenant()
	for _, scope := range []store.Scope{store.UserScope(tenant, "ana"), store.TenantScope(tenant)} {
		name := "user"
		if scope.AllUsers {
			name = "tenant"
		}
		t.Run(name, func(t *testing.T) {
			a, u, ss, _ := e.usersStores(t)
			ana, others := population(tenant)
			for _, s := range ss {
				for _, id := range append(append([]memstack.Identity{}, ana...), others...) {
					require.NoError(t, s.Forget(e.ctx, id))
				}
			}
			fill(t, ss, ana)
			fill(t, ss, others)
			var in, out []memstack.Identity
			for _, id := range append(append([]memstack.Identity{}, ana...), others...) {
				if scope.Contains(id) {
					in = append(in, id)
				} else {
					out = append(out, id)
				}
			}
			// What everyone else holds, before.
			keep := map[string][]store.Record{}
			keepState := map[string]store.State{}
			for si, s := range ss {
				for _, id := range out {
					keep[fmt.Sprint(si, id.Key())] = mustAll(t, s, id)
					keepState[fmt.Sprint(si, id.Key())] = mustGet(t, s, id, "summary")
				}
			}
			read := mustGet(t, a, in[0], "summary")

			n, err := u.ForgetScope(e.ctx, scope)
			require.NoError(t, err)
			assert.Equal(t, len(in), n, "the number of identities forgotten")
			got, err := u.Identities(e.ctx, scope)
			require.NoError(t, err)
			assert.Empty(t, got, "nothing of the scope is held any more, not even a Clear mark")
			ex, err := u.Export(e.ctx, scope)
			require.NoError(t, err)
			assert.Empty(t, ex.Identities)
			for _, s := range ss {
				for _, id := range in {
					assert.Empty(t, mustAll(t, s, id), "%s still has messages", id.Key())
					assertAbsent(t, mustGet(t, s, id, "summary"), "%s still has state", id.Key())
				}
			}
			for si, s := range ss {
				for _, id := range out {
					assert.Equal(t, keep[fmt.Sprint(si, id.Key())], mustAll(t, s, id), "%s lost messages", id.Key())
					assert.Equal(t, keepState[fmt.Sprint(si, id.Key())], mustGet(t, s, id, "summary"), "%s lost state", id.Key())
				}
			}
			_, err = a.PutState(e.ctx, in[0], "summary", []byte("stale"), read.Version)
			assert.ErrorIs(t, err, store.ErrConflict, "a commit that read before ForgetScope conflicts")

			n, err = u.ForgetScope(e.ctx, scope)
			require.NoError(t, err)
			assert.Zero(t, n, "forgetting again finds nothing")
			mustAppend(t, a, in[0], human("back"))
			assert.Equal(t, []string{"back"}, contentsOf(mustAll(t, a, in[0])), "the identity can be used again")
		})
	}
}

// ---------------------------------------------------------------------------
// Cancellation while a call is in flight.
// ---------------------------------------------------------------------------

// testCancelInFlight cancels Appends and PutStates at random moments while
// they run: each either fails with an error (wrapping context.Canceled or
// context.DeadlineExceeded, or another error) and stores nothing, or
// succeeds and stores everything — never half a turn, never a lost
// success.
func testCancelInFlight(t *testing.T, e *env) {
	s := e.store()
	big := strings.Repeat("x", 64<<10)
	stored, failed := 0, 0
	for i := range 60 {
		ctx, cancel := context.WithCancel(e.ctx)
		delay := time.Duration(rand.IntN(400)) * time.Microsecond
		timer := time.AfterFunc(delay, cancel)
		w := fmt.Sprintf("w%03d", i)
		err := s.Append(ctx, alice, human(w+" "+big), ai(w), human(w+" again"))
		timer.Stop()
		cancel()
		rs := mustAll(t, s, alice)
		n := 0
		for _, r := range rs {
			if c := r.Message.GetContent(); len(c) >= 4 && c[:4] == w {
				n++
			}
		}
		if err == nil {
			stored++
			assert.Equal(t, 3, n, "a successful Append stored all of its turn")
		} else {
			failed++
			assert.Contains(t, []int{0, 3}, n, "a cancelled Append stored %d of 3 messages: %v", n, err)
		}
	}
	t.Logf("%d appends stored, %d cancelled", stored, failed)
	for i := range 40 {
		st := mustGet(t, s, alice, "counter")
		ctx, cancel := context.WithCancel(e.ctx)
		timer := time.AfterFunc(time.Duration(rand.IntN(300))*time.Microsecond, cancel)
		v, err := s.PutState(ctx, alice, "counter", []byte(fmt.Sprint(i)), st.Version)
		timer.Stop()
		cancel()
		after := mustGet(t, s, alice, "counter")
		if err == nil {
			assert.Equal(t, store.State{Value: []byte(fmt.Sprint(i)), Version: v}, after, "a successful PutState is stored")
		} else if after.Version != st.Version {
			assert.Equal(t, []byte(fmt.Sprint(i)), after.Value, "a PutState that failed in flight stored either its value or nothing")
		}
	}
}
