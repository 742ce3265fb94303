package redisstore

import (
	"fmt"
	"time"

	"github.com/memstack/memstack/store"
)

// Defaults of the options.
const (
	// DefaultNamespace is the namespace of a store without WithNamespace.
	DefaultNamespace = "default"
	// DefaultKeyPrefix is the key prefix of a store without WithKeyPrefix.
	DefaultKeyPrefix = "memstack"
	// MinTTL is the shortest TTL WithTTL accepts.
	MinTTL = time.Second
)

// Option configures a Store. Options are checked by New and Open, which
// return an error naming the option and the bad value.
type Option func(*config)

type config struct {
	ns     string
	prefix string
	ttl    time.Duration
	errs   []error

	cacheSize int

	evictionAllowed bool
}

func (c *config) bad(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: redisstore: "+format, append([]any{store.ErrInvalidArgument}, args...)...))
}

// WithNamespace sets the namespace (default "default"): the name of one
// memory layer, such as "recent" or "facts", whose messages and state are
// kept apart from those of other namespaces under the same key prefix.
// Forget removes an identity from every namespace of the prefix. A
// namespace is 1 to 64 bytes of [A-Za-z0-9._-].
func WithNamespace(ns string) Option {
	return func(c *config) {
		if len(ns) < 1 || len(ns) > 64 {
			c.bad("WithNamespace(%q): a namespace is 1 to 64 bytes long", ns)
			return
		}
		for i := 0; i < len(ns); i++ {
			if !plain(ns[i]) {
				c.bad("WithNamespace(%q): byte %d is not one of [A-Za-z0-9._-]", ns, i)
				return
			}
		}
		c.ns = ns
	}
}

// WithKeyPrefix sets the prefix of every key the store writes (default
// "memstack"): stores with different prefixes share nothing, Forget
// included. A prefix is 1 to 128 bytes of printable ASCII other than '{'
// and '}' (which would break the identity's hash tag).
func WithKeyPrefix(prefix string) Option {
	return func(c *config) {
		if len(prefix) < 1 || len(prefix) > 128 {
			c.bad("WithKeyPrefix(%q): a key prefix is 1 to 128 bytes long", prefix)
			return
		}
		for i := 0; i < len(prefix); i++ {
			b := prefix[i]
			if b < 0x21 || b > 0x7e || b == '{' || b == '}' {
				c.bad("WithKeyPrefix(%q): byte %d must be printable ASCII other than '{' and '}'", prefix, i)
				return
			}
		}
		c.prefix = prefix
	}
}

// WithTTL makes each conversation expire ttl after its last Append,
// PutState or Clear in this namespace: every write sets the expiry of all
// of the identity's keys (see the package documentation). Zero, the default,
// keeps conversations until Clear or Forget. A TTL is at least MinTTL and
// counted in whole milliseconds. A Clear mark expires too, yet its Clear
// holds: a commit that read before the Clear conflicts however late it
// comes (the write that gives a mark its expiry raises the slot's
// forgotten version to it; see "Absent versions" in the package
// documentation).
func WithTTL(ttl time.Duration) Option {
	return func(c *config) {
		if ttl != 0 && ttl < MinTTL {
			c.bad("WithTTL(%v): a TTL is 0 (none) or at least %v", ttl, MinTTL)
			return
		}
		c.ttl = ttl.Truncate(time.Millisecond)
	}
}

// WithDecodeCache sets how many decoded messages the store keeps in
// process memory (default DefaultDecodeCacheSize; 0 turns the cache off),
// keyed by their exact stored value, so loading a window that has mostly
// not changed since the last turn does not decode the same JSON again.
// Messages over 16 KiB are never cached. Negative sizes are an error.
func WithDecodeCache(entries int) Option {
	return func(c *config) {
		if entries < 0 {
			c.bad("WithDecodeCache(%d): the size is 0 (off) or more", entries)
			return
		}
		c.cacheSize = entries
	}
}

// WithEvictionAllowed accepts a server whose maxmemory-policy may evict
// keys (any allkeys-* or volatile-* policy), or whose policy New cannot
// read (a managed service that refuses CONFIG GET). Without it New refuses
// such a server with an error wrapping ErrEvictionPolicy.
//
// What eviction costs, and what the store does about it: an evicted
// conversation is gone whole, as if its TTL had run out; Forget no longer
// trusts the identity's namespace set (an evictable key) and also finds
// the identity's keys with SCAN on its node, which costs O(keys on that
// node) per Forget, in bounded batches; an evicted Clear mark or forgotten
// version lets a commit that read before that Clear or Forget land after
// it, and an evicted write token lets a client retry store a write twice.
// Prefer maxmemory-policy noeviction (see the package documentation,
// "Production settings").
func WithEvictionAllowed() Option {
	return func(c *config) { c.evictionAllowed = true }
}

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
