package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
)

// longPart is 10 KB of varied text (ASCII and multibyte), so it neither
// compresses away nor fits a size-limited index.
func longPart() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:/*{}%_ éß中🙂"
	runes := []rune(alphabet)
	var b strings.Builder
	x := uint32(2463534242)
	for b.Len() < 10<<10 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteRune(runes[x%uint32(len(runes))])
	}
	return b.String()
}

// adversarialIdentities are identities a naive key scheme confuses.
func adversarialIdentities() []memstack.Identity {
	long := longPart()
	return []memstack.Identity{
		{},
		{Tenant: "a:b"},
		{Tenant: "a", User: "b"},
		{Tenant: "a:", User: "b"},
		{Tenant: "a", User: "", Conversation: "b"},
		{Tenant: "", User: "a", Conversation: "b"},
		{Tenant: "a:b:c"},
		{Tenant: "a", User: "b", Conversation: "c"},
		{Tenant: "a/b", User: "c"},
		{Tenant: "a", User: "b/c"},
		{Tenant: "a%3Ab"},
		{Tenant: "%"},
		{Tenant: "%%"},
		{Tenant: "*"},
		{Tenant: "?"},
		{Tenant: "[a]"},
		{Tenant: "{x}"},
		{Tenant: "{x"},
		{Tenant: "_"},
		{Tenant: "\\"},
		{Tenant: "a"},
		{Tenant: "ab"},
		{Tenant: "A"},
		{User: "a"},
		{User: "ab"},
		{User: "a\x00b"},
		{User: "a\nb"},
		{User: " "},
		{User: "'; DROP TABLE messages; --"},
		{User: "用户", Conversation: "会话"},
		{User: "é"},
		{User: "e\u0301"},
		{Conversation: "🙂"},
		{Tenant: long},
		{Tenant: long[:len(long)-1] + "!"},
		{User: long, Conversation: long},
	}
}

func testIdentitiesIsolated(t *testing.T, e *env) {
	s := e.store()
	ids := adversarialIdentities()
	seen := map[memstack.Identity]int{}
	for i, id := range ids {
		j, dup := seen[id]
		require.False(t, dup, "kit bug: identities %d and %d are the same", j, i)
		seen[id] = i
	}
	for i, id := range ids {
		mustAppend(t, s, id, human(fmt.Sprintf("human %d", i)), ai(fmt.Sprintf("ai %d", i)))
		mustCreate(t, s, id, "summary", []byte(fmt.Sprint("state ", i)))
	}
	check := func(when string, gone map[int]bool) {
		t.Helper()
		for i, id := range ids {
			rs := mustAll(t, s, id)
			st := mustGet(t, s, id, "summary")
			if gone[i] {
				assert.Empty(t, rs, "%s: identity %d (%.60s)", when, i, id.Key())
				assertAbsent(t, st, "%s: identity %d (%.60s)", when, i, id.Key())
				continue
			}
			assert.Equal(t, []string{fmt.Sprintf("human %d", i), fmt.Sprintf("ai %d", i)}, contentsOf(rs),
				"%s: identity %d (%.60s) sees only its own messages", when, i, id.Key())
			assert.Equal(t, fmt.Sprint("state ", i), string(st.Value), "%s: identity %d (%.60s) state", when, i, id.Key())
			assert.Equal(t, 2, mustStat(t, s, id).Count, "%s: identity %d (%.60s)", when, i, id.Key())
		}
	}
	check("after appending", nil)

	// Clear, RemovePrefix and Forget of one identity touch no other.
	gone := map[int]bool{}
	for _, i := range []int{1, 13, 20, 23} { // "a:b", "*", "a", User "a"
		require.NoError(t, s.Clear(e.ctx, ids[i]))
		gone[i] = true
		check(fmt.Sprintf("after Clear of identity %d", i), gone)
	}
	for _, i := range []int{0, 11, 18, 33} { // zero, "%", "_", long
		rs := mustAll(t, s, ids[i])
		n, err := s.RemovePrefix(e.ctx, ids[i], rs[len(rs)-1].Seq)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		mustAppend(t, s, ids[i], human(fmt.Sprintf("human %d", i)), ai(fmt.Sprintf("ai %d", i)))
		check(fmt.Sprintf("after RemovePrefix of identity %d", i), gone)
	}
}

func testForgetAdversarial(t *testing.T, e *env) {
	s := e.store()
	ids := adversarialIdentities()
	for i, id := range ids {
		mustAppend(t, s, id, human(fmt.Sprint("m", i)))
		mustCreate(t, s, id, "summary", []byte(fmt.Sprint("s", i)))
	}
	gone := map[int]bool{}
	// Identities whose key looks like a pattern or a prefix of another's
	// go first: "*", "?", "[a]", "%", "_", "\\", "a", User "a", zero.
	for _, i := range []int{13, 14, 15, 11, 18, 19, 20, 23, 0, 1, 33} {
		require.NoError(t, s.Forget(e.ctx, ids[i]))
		gone[i] = true
		for j, id := range ids {
			rs := mustAll(t, s, id)
			st := mustGet(t, s, id, "summary")
			if gone[j] {
				assert.Empty(t, rs, "identity %d after Forget of %d", j, i)
				assertAbsent(t, st, "identity %d after Forget of %d", j, i)
			} else {
				assert.Equal(t, []string{fmt.Sprint("m", j)}, contentsOf(rs), "Forget of identity %d (%.60s) touched identity %d (%.60s)", i, ids[i].Key(), j, id.Key())
				assert.Equal(t, fmt.Sprint("s", j), string(st.Value), "Forget of identity %d touched the state of identity %d", i, j)
			}
		}
	}
}
