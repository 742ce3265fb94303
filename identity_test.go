package memstack_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
)

func TestWithIdentityRoundTrip(t *testing.T) {
	id := memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c7"}
	ctx := memstack.WithIdentity(context.Background(), id)

	got, ok := memstack.IdentityFrom(ctx)
	require.True(t, ok)
	assert.Equal(t, id, got)

	// A derived context keeps the identity.
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	got, ok = memstack.IdentityFrom(child)
	require.True(t, ok)
	assert.Equal(t, id, got)

	// A nested WithIdentity overrides the outer one.
	other := memstack.Identity{Tenant: "acme", User: "u43"}
	got, ok = memstack.IdentityFrom(memstack.WithIdentity(ctx, other))
	require.True(t, ok)
	assert.Equal(t, other, got)

	// The zero identity is a real identity when set explicitly.
	got, ok = memstack.IdentityFrom(memstack.WithIdentity(context.Background(), memstack.Identity{}))
	assert.True(t, ok)
	assert.Equal(t, memstack.Identity{}, got)
}

func TestIdentityFromAbsent(t *testing.T) {
	got, ok := memstack.IdentityFrom(context.Background())
	assert.False(t, ok)
	assert.Equal(t, memstack.Identity{}, got)

	var nilCtx context.Context // a nil context must not panic
	got, ok = memstack.IdentityFrom(nilCtx)
	assert.False(t, ok)
	assert.Equal(t, memstack.Identity{}, got)

	// A value of another type under another key is not an identity.
	type otherKey struct{}
	ctx := context.WithValue(context.Background(), otherKey{}, memstack.Identity{Tenant: "x"})
	_, ok = memstack.IdentityFrom(ctx)
	assert.False(t, ok)
}

func TestKeyDocumentedExamples(t *testing.T) {
	a := memstack.Identity{Tenant: "a/b", User: "c"}
	b := memstack.Identity{Tenant: "a", User: "b/c"}
	assert.Equal(t, "a%2Fb:c:", a.Key())
	assert.Equal(t, "a:b%2Fc:", b.Key())
	assert.NotEqual(t, a.Key(), b.Key())
	assert.Equal(t, "::", memstack.Identity{}.Key())
	assert.Equal(t, "acme:u42:c7", memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c7"}.Key())
	assert.Equal(t, a.Key(), a.String())
}

// adversarialIdentities are identities whose parts contain every character
// that could confuse a naive key encoding.
func adversarialIdentities() []memstack.Identity {
	long := strings.Repeat("x:/*{}%", 2000)
	return []memstack.Identity{
		{},
		{Tenant: "t"},
		{User: "u"},
		{Conversation: "c"},
		{Tenant: "a:b", User: "c"},
		{Tenant: "a", User: "b:c"},
		{Tenant: "a/b", User: "c"},
		{Tenant: "a", User: "b/c"},
		{Tenant: "*", User: "*", Conversation: "*"},
		{Tenant: "{tag}", User: "}{", Conversation: "{"},
		{Tenant: "%", User: "%25", Conversation: "%2F"},
		{Tenant: "%3A", User: ":", Conversation: "%%"},
		{Tenant: " ", User: "a b", Conversation: "\t\n\r"},
		{Tenant: "\x00", User: "a\x00b", Conversation: "\x00\x00"},
		{Tenant: "ünï", User: "用户", Conversation: "💬"},
		{Tenant: "\xff\xfe", User: "\x80", Conversation: "\x7f"},
		{Tenant: "::", User: "", Conversation: "::"},
		{Tenant: "", User: "", Conversation: ":"},
		{Tenant: ":", User: "", Conversation: ""},
		{Tenant: "a.b_c-d", User: "A.Z", Conversation: "0-9"},
		{Tenant: long, User: long + "u", Conversation: strings.Repeat("é", 5000)},
		{Tenant: "key'; DROP TABLE users; --", User: `"quoted"`, Conversation: `back\slash`},
	}
}

var plainField = regexp.MustCompile(`^(?:[A-Za-z0-9._-]|%[0-9A-F]{2})*$`)

func TestKeyFieldsContainNoForbiddenBytes(t *testing.T) {
	for _, id := range adversarialIdentities() {
		key := id.Key()
		fields := strings.Split(key, ":")
		require.Len(t, fields, 3, "key %q must have exactly three fields", key)
		for i, f := range fields {
			assert.Regexp(t, plainField, f, "field %d of key for %#v", i+1, id)
		}
		for _, forbidden := range []string{"{", "}", "*", "/", " ", "\x00", "\n"} {
			assert.NotContains(t, key, forbidden, "key for %#v", id)
		}
		for i := 0; i < len(key); i++ {
			assert.Less(t, key[i], byte(0x80), "non-ASCII byte in key %q", key)
		}
	}
}

func TestParseKeyInvertsKey(t *testing.T) {
	for _, id := range adversarialIdentities() {
		got, err := memstack.ParseKey(id.Key())
		require.NoError(t, err, "key %q", id.Key())
		assert.Equal(t, id, got)
	}
}

func TestKeyInjectiveOverAdversarialTable(t *testing.T) {
	ids := adversarialIdentities()
	seen := make(map[string]memstack.Identity, len(ids))
	for _, id := range ids {
		k := id.Key()
		if prev, dup := seen[k]; dup {
			t.Fatalf("identities %#v and %#v share key %q", prev, id, k)
		}
		seen[k] = id
	}
	assert.Len(t, seen, len(ids))
}

func TestParseKeyRejectsMalformed(t *testing.T) {
	cases := []struct {
		name, key, want string
	}{
		{"empty string has one field", "", "1 fields"},
		{"two fields", "a:b", "2 fields"},
		{"four fields", "a:b:c:d", "4 fields"},
		{"five fields", "::::", "5 fields"},
		{"truncated escape at end", "a:b:%4", "truncated escape"},
		{"lone percent", "%:b:c", "truncated escape"},
		{"bad hex digit", "a:%G1:c", "invalid escape"},
		{"lower-case hex", "a%2f:b:c", "invalid escape"},
		{"lower-case hex second digit", "a:b:%3a", "invalid escape"},
		{"escaped plain letter", "%61:b:c", "never escaped"},
		{"escaped plain digit", "a:%30:c", "never escaped"},
		{"escaped dot", "a:b:%2E", "never escaped"},
		{"raw slash", "a/b:c:", "must be escaped"},
		{"raw space", "a b:c:", "must be escaped"},
		{"raw star", "a:*:c", "must be escaped"},
		{"raw brace", "a:b:{c}", "must be escaped"},
		{"raw NUL", "a:\x00:c", "must be escaped"},
		{"raw non-ASCII", "a:b:é", "must be escaped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, err := memstack.ParseKey(tc.key)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, memstack.Identity{}, id)
		})
	}
}

func TestParseKeyErrorNamesField(t *testing.T) {
	_, err := memstack.ParseKey("a:b:%zz")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "field 3")
	_, err = memstack.ParseKey("a/:b:c")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "field 1")
}

func TestHash(t *testing.T) {
	hexRe := regexp.MustCompile(`^[0-9a-f]{16}$`)
	ids := adversarialIdentities()
	seen := make(map[string]memstack.Identity, len(ids))
	for _, id := range ids {
		h := id.Hash()
		assert.Regexp(t, hexRe, h)
		assert.Equal(t, h, id.Hash(), "Hash must be stable")
		// Documented: the first 16 hex digits of SHA-256 of Key.
		sum := sha256.Sum256([]byte(id.Key()))
		assert.Equal(t, hex.EncodeToString(sum[:])[:16], h)
		if prev, dup := seen[h]; dup {
			t.Fatalf("identities %#v and %#v share hash %q", prev, id, h)
		}
		seen[h] = id
	}
	a := memstack.Identity{Tenant: "a/b", User: "c"}
	b := memstack.Identity{Tenant: "a", User: "b/c"}
	assert.NotEqual(t, a.Hash(), b.Hash())
}

func FuzzIdentityKey(f *testing.F) {
	f.Add("a/b", "c", "", "a", "b/c", "")
	f.Add("", "", "", "", "", ":")
	f.Add("%", "%25", "{x}", "%25", "%", "{x}")
	f.Add("\x00", "ü", "*", "\x00ü", "", "*")
	f.Add("t:u", "c", "", "t", "u:c", "")
	f.Fuzz(func(t *testing.T, t1, u1, c1, t2, u2, c2 string) {
		a := memstack.Identity{Tenant: t1, User: u1, Conversation: c1}
		b := memstack.Identity{Tenant: t2, User: u2, Conversation: c2}
		ka, kb := a.Key(), b.Key()

		got, err := memstack.ParseKey(ka)
		if err != nil {
			t.Fatalf("ParseKey(%q): %v", ka, err)
		}
		if got != a {
			t.Fatalf("ParseKey(Key(%#v)) = %#v", a, got)
		}
		if fields := strings.Split(ka, ":"); len(fields) != 3 {
			t.Fatalf("key %q has %d fields", ka, len(fields))
		}
		if !plainKey(ka) {
			t.Fatalf("key %q contains a forbidden byte", ka)
		}
		if (a == b) != (ka == kb) {
			t.Fatalf("injectivity: %#v -> %q, %#v -> %q", a, ka, b, kb)
		}
		if a == b && a.Hash() != b.Hash() {
			t.Fatalf("hash not stable for %#v", a)
		}
	})
}

// plainKey reports whether every byte of key is one Key may write: a plain
// byte, ':', or '%' followed by two upper-case hex digits.
func plainKey(key string) bool {
	for _, f := range strings.Split(key, ":") {
		if !plainField.MatchString(f) {
			return false
		}
	}
	return true
}
