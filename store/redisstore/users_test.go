package redisstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
)

// TestForgetScopeLeavesNothingOfTheUser forgets a user with
// ForgetScope: afterwards no key under the store's prefix mentions the
// user, and every other key — other users, look-alike identities, the user
// under other prefixes — is byte for byte what it was (DUMP). The prefix
// has glob metacharacters, and another prefix that an unescaped SCAN
// pattern would match holds the same user.
func TestForgetScopeLeavesNothingOfTheUser(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	raw := rawClient(t, addr)
	run := randomHex(6)
	prefix := "rt-*?[ab]\\" + run // every glob metacharacter
	lookalike := "rt-xyzxa" + run // matched by prefix read as a pattern
	other := "rt-other-" + run

	var stores []*redisstore.Store
	for _, o := range []struct {
		ns  string
		ttl time.Duration
	}{{"recent", 0}, {"facts", time.Hour}, {"summary", 0}} {
		stores = append(stores, open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace(o.ns), redisstore.WithTTL(o.ttl)))
	}
	elsewhere := []*redisstore.Store{
		open(t, addr, redisstore.WithKeyPrefix(lookalike), redisstore.WithNamespace("recent")),
		open(t, addr, redisstore.WithKeyPrefix(other), redisstore.WithNamespace("recent")),
	}
	ana := []memstack.Identity{
		{Tenant: "acme", User: "ana", Conversation: ""},
		{Tenant: "acme", User: "ana", Conversation: "c1"},
		{Tenant: "acme", User: "ana", Conversation: "c:2/*?[x]%_{}"},
	}
	others := []memstack.Identity{
		{Tenant: "acme", User: "anab", Conversation: "c1"},
		{Tenant: "acme", User: "an", Conversation: "ac1"},
		{Tenant: "acme", User: "ana:c1", Conversation: ""},
		{Tenant: "acme", User: "", Conversation: "ana"},
		{Tenant: "acme:ana", User: "c1", Conversation: ""},
		{Tenant: "acmeb", User: "ana", Conversation: "c1"},
		{Tenant: "", User: "ana", Conversation: "c1"},
		{Tenant: "acme", User: "bob", Conversation: "c1"},
	}
	for _, s := range append(append([]*redisstore.Store{}, stores...), elsewhere...) {
		for _, id := range append(append([]memstack.Identity{}, ana...), others...) {
			require.NoError(t, s.Append(ctx, id, system("rules"), human("secret of "+id.Key()), ai("noted")))
			create(t, s, id, "summary", []byte("about "+id.Key()))
		}
	}
	// One conversation cleared in one namespace (a mark), one with only
	// a Clear mark left anywhere.
	require.NoError(t, stores[2].Clear(ctx, ana[1]))
	markOnly := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "cleared"}
	require.NoError(t, stores[0].Append(ctx, markOnly, human("gone")))
	require.NoError(t, stores[0].Clear(ctx, markOnly))
	ana = append(ana, markOnly)
	// One with only an index of system messages left (its list expired a
	// moment before it): a copy, no data, not listed, but forgotten.
	indexOnly := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "index-only"}
	require.NoError(t, raw.RPush(ctx, keysOf(prefix, "recent", indexOnly).sys, "0|i").Err())

	users := stores[1] // any namespace reaches all of them
	got, err := users.Identities(ctx, store.UserScope("acme", "ana"))
	require.NoError(t, err)
	assert.Equal(t, sortedKeysOf(ana), keysOfIDs(got), "Identities lists every conversation of ana, by Key")

	ex, err := users.Export(ctx, store.UserScope("acme", "ana"))
	require.NoError(t, err)
	require.Len(t, ex.Identities, len(ana))
	var buf bytes.Buffer
	require.NoError(t, ex.WriteJSON(&buf))
	assert.True(t, json.Valid(buf.Bytes()))
	for _, id := range ana[:3] {
		assert.Contains(t, buf.String(), "secret of "+id.Key(), "the export holds %s", id.Key())
	}

	all := func() map[string]string {
		out := map[string]string{}
		for _, p := range []string{prefix, lookalike, other} {
			for _, key := range scanKeys(t, raw, globEscape(p)+":*") {
				out[key] = dump(t, raw, key)
			}
		}
		return out
	}
	anaPattern := globEscape(prefix) + ":{acme:ana:*"
	require.NotEmpty(t, scanKeys(t, raw, anaPattern))
	feedPattern := globEscape(prefix) + ":feed{acme:ana:}"
	require.NotEmpty(t, scanKeys(t, raw, feedPattern), "ana's change feeds")
	before := all()

	n, err := users.ForgetScope(ctx, store.UserScope("acme", "ana"))
	require.NoError(t, err)
	assert.Equal(t, len(ana), n, "the conversations forgotten")

	assert.Empty(t, scanKeys(t, raw, anaPattern), "no key under the prefix mentions ana")
	assert.Empty(t, scanKeys(t, raw, feedPattern), "nor a change feed of ana's")
	after := all()
	for key, d := range before {
		switch {
		case strings.HasPrefix(key, prefix+":{acme:ana:"), key == prefix+":feed{acme:ana:}":
			assert.NotContains(t, after, key)
		case strings.HasSuffix(key, "}:forgotten"):
			// The forgotten versions of the slots are no user's: ForgetScope
			// moves those of ana's slots.
		default:
			assert.Equal(t, d, after[key], "%s is byte for byte what it was", key)
		}
	}
	for key := range after {
		if !strings.HasSuffix(key, "}:forgotten") {
			assert.Contains(t, before, key, "ForgetScope created %s", key)
		}
	}

	got, err = users.Identities(ctx, store.UserScope("acme", "ana"))
	require.NoError(t, err)
	assert.Empty(t, got)
	n, err = users.ForgetScope(ctx, store.UserScope("acme", "ana"))
	require.NoError(t, err)
	assert.Zero(t, n, "forgetting again finds nothing")
}

// TestUsersAfterTheNamespaceSetIsGone finds a user's conversations by
// their keys, not through an index: with every nss set deleted (evicted),
// Identities still lists them and ForgetScope still removes every key.
func TestUsersAfterTheNamespaceSetIsGone(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	raw := rawClient(t, addr)
	prefix := uniquePrefix()
	a := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("a"))
	b := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("b"))
	for _, s := range []*redisstore.Store{a, b} {
		require.NoError(t, s.Append(ctx, alice, human("hi")))
		require.NoError(t, s.Append(ctx, alice10, human("hi")))
	}
	for _, id := range []memstack.Identity{alice, alice10} {
		require.NoError(t, raw.Del(ctx, keysOf(prefix, "a", id).nss).Err())
	}
	got, err := a.Identities(ctx, store.UserScope("acme", "alice"))
	require.NoError(t, err)
	assert.Equal(t, []string{alice.Key(), alice10.Key()}, keysOfIDs(got))
	n, err := a.ForgetScope(ctx, store.UserScope("acme", "alice"))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Empty(t, scanKeys(t, raw, prefix+":{acme:alice:*"))
}

func keysOfIDs(ids []memstack.Identity) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.Key()
	}
	return out
}

func sortedKeysOf(ids []memstack.Identity) []string {
	out := keysOfIDs(ids)
	slices.Sort(out)
	return out
}

// globEscape makes s a literal in a SCAN MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte(`*?[]\`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
