package memstack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ErrNoIdentity is returned by a memory configured to require an identity
// (memories.WithRequireIdentity) when the context carries none.
var ErrNoIdentity = errors.New("memstack: no identity in context")

// Identity names whose conversation a memory call belongs to. Every memory
// keys all of its state by the Identity found in the call's context, so one
// memory value serves many tenants, users and conversations without leaking
// between them.
//
// The zero Identity is a valid identity: it is the one shared conversation
// that plain langchaingo use (no identity anywhere) reads and writes.
type Identity struct {
	// Tenant is the organisation or application the user belongs to.
	Tenant string
	// User is the end user.
	User string
	// Conversation is one conversation (thread, session) of that user.
	Conversation string
}

type identityKey struct{}

// WithIdentity returns a copy of ctx that carries id. Memories called with the
// returned context read and write only id's state.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity carried by ctx and whether there was one.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	if ctx == nil {
		return Identity{}, false
	}
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Key returns the storage key of the identity: the three parts, each
// percent-encoded, joined by ':' (tenant:user:conversation).
//
// Every byte outside [A-Za-z0-9._-] is written as %XX with upper-case hex,
// so an encoded part never contains ':', '/', '*', '{', '}', '%' as itself,
// whitespace, control bytes or non-ASCII bytes. Because the encoding of each
// part is injective and the parts never contain the separator, the mapping
// from Identity to key is injective: ("a/b","c","") and ("a","b/c","") give
// "a%2Fb:c:" and "a:b%2Fc:". Empty parts are allowed and give empty fields.
// Keys are safe inside Redis hash tags, file names and SQL text columns.
// ParseKey inverts Key.
func (id Identity) Key() string {
	var b strings.Builder
	b.Grow(len(id.Tenant) + len(id.User) + len(id.Conversation) + 2)
	escapeTo(&b, id.Tenant)
	b.WriteByte(':')
	escapeTo(&b, id.User)
	b.WriteByte(':')
	escapeTo(&b, id.Conversation)
	return b.String()
}

// Hash returns a short, stable, one-way digest of the identity (the first 16
// hex digits of SHA-256 of Key), for logs and metrics that must not show who
// the user is.
func (id Identity) Hash() string {
	sum := sha256.Sum256([]byte(id.Key()))
	return hex.EncodeToString(sum[:8])
}

// KeyedHash is Hash keyed with a secret the application keeps: the first
// 16 hex digits of HMAC-SHA256(secret, Key). Hash is unsalted, so whoever
// reads the telemetry can hash a list of likely user ids and find the one
// that matches; without the secret they cannot. memories.WithHashKey makes
// a memory's reports and events use it.
func (id Identity) KeyedHash(secret []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id.Key()))
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

// String returns the identity's key; it makes identities readable in test
// failures and error messages.
func (id Identity) String() string { return id.Key() }

// ParseKey is the inverse of Identity.Key. It returns an error naming the
// problem when key is not a key that Key could have produced.
func ParseKey(key string) (Identity, error) {
	parts := strings.Split(key, ":")
	if len(parts) != 3 {
		return Identity{}, fmt.Errorf("memstack: identity key has %d fields, want 3 (tenant:user:conversation)", len(parts))
	}
	var out [3]string
	for i, p := range parts {
		s, err := unescape(p)
		if err != nil {
			return Identity{}, fmt.Errorf("memstack: identity key field %d: %w", i+1, err)
		}
		out[i] = s
	}
	return Identity{Tenant: out[0], User: out[1], Conversation: out[2]}, nil
}

const hexDigits = "0123456789ABCDEF"

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func escapeTo(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		if c != '%' {
			return "", fmt.Errorf("byte %q at offset %d must be escaped", c, i)
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("truncated escape at offset %d", i)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("invalid escape %q at offset %d", s[i:i+3], i)
		}
		v := hi<<4 | lo
		if plain(v) {
			return "", fmt.Errorf("escape %q at offset %d encodes a byte that is never escaped", s[i:i+3], i)
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}
