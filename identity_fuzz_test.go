package memstack_test

import (
	"strings"
	"testing"

	"github.com/memstack/memstack"
)

// FuzzParseKey is the other half of FuzzIdentityKey's injectivity check.
// FuzzIdentityKey shows ParseKey(Key(id)) == id for every identity, which
// already makes Key injective (a function with a left inverse is); this
// fuzzer shows Key(ParseKey(k)) == k for every key ParseKey accepts, so
// every valid key names exactly one identity and no two spellings of a key
// (lower-case hex, an escaped plain byte) can alias one identity. ParseKey
// must never panic and must reject everything else with an error.
//
// The seeds below and testdata/fuzz/FuzzParseKey (and FuzzIdentityKey's
// seeds in identity_test.go and testdata/fuzz/FuzzIdentityKey) run with
// every `go test`; to search longer:
//
//	go test . -run '^$' -fuzz '^FuzzIdentityKey$' -fuzztime 10m
//	go test . -run '^$' -fuzz '^FuzzParseKey$' -fuzztime 10m
func FuzzParseKey(f *testing.F) {
	for _, k := range []string{
		"::", "acme:u42:c7", "a%2Fb:c:", "a:b%2Fc:", "%25:%2525:%7Bx%7D",
		"%00:%C3%BC:%2A", "a:b", "a:b:c:d", "a:b:%4", "%:b:c", "a:%G1:c",
		"a%2f:b:c", "%61:b:c", "a:b:%2E", "a/b:c:", "a:\x00:c", "a:b:é",
		"%3A%3A:%3A:", "%FF%FE:%80:%7F", strings.Repeat("%25", 100) + "::",
	} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		id, err := memstack.ParseKey(key)
		if err != nil {
			if id != (memstack.Identity{}) {
				t.Fatalf("ParseKey(%q) returned %#v with an error", key, id)
			}
			if !strings.HasPrefix(err.Error(), "memstack: identity key") {
				t.Fatalf("ParseKey(%q) error does not say what failed: %v", key, err)
			}
			return
		}
		if got := id.Key(); got != key {
			t.Fatalf("ParseKey(%q) = %#v, whose Key is %q: two keys name one identity", key, id, got)
		}
	})
}
