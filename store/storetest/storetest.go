// Package storetest is the conformance kit for memstack's storage port: an
// exported test suite that every store.Store backend in this module passes,
// and that a third party runs against their own store with one call.
//
// # Running it
//
// In a _test.go file of the backend's package, give Run an Opener:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(tb testing.TB, ns string) (store.Store, error) {
//			return mybackend.Open(ctx, dsn, mybackend.WithNamespace(ns))
//		})
//	}
//
// and run it like any test: go test -race -run TestConformance ./mybackend.
// Every expectation is a subtest with its own name (AppendKeepsOrder,
// StateCompareAndSet, ConcurrentWritersLoseNothing, …), so one failure names
// the broken rule and -run TestConformance/StateCompareAndSet reruns it.
//
// Bench(b, open) measures saves per second and load latency with the same
// Opener, and Measure does the measurement for a benchmark command.
//
// RunUndated(t, s, overwrite) checks that a backend still reads the
// messages it stored before memstack recorded times: overwrite plants such
// values in the backend's own layout (a SQL UPDATE, a Redis LSET).
//
// # The Opener
//
// Open(tb, ns) opens a store over the backend's data in namespace ns. Called
// twice with the same ns it must give two independent clients (two
// connection pools, two *sql.DB, two Redis clients) over the same data: the
// kit uses that to check that data survives closing and reopening the store
// and that two clients writing the same conversation lose nothing. Each
// subtest uses a fresh, unique ns — lower-case letters, digits and '_',
// starting with a letter, at most 27 bytes, so it fits a table prefix, a key
// prefix or a file name — so subtests never see each other's data. Some
// subtests also open ns+"_b": it must be another namespace of the same
// backend data (the same file, server or database — what Forget and the
// Users calls reach), so that Clear can be told from Forget; an Opener that
// maps each ns to a backend of its own (a file per ns) must map ns+"_b" to
// ns's. The Users cases write identities of a tenant of their own
// ("acme-"+ns), so other subtests' data in the backend does not disturb
// them. The kit
// closes every store it opens that implements io.Closer; an Opener for an
// in-process store that cannot be closed returns the same value for the same
// ns (see inmemory_test.go in this package).
//
// # The contract checked
//
// The store package documentation is the contract; Run checks, per subtest:
//
//   - order: messages come back in append order, and Seqs increase strictly
//     within an identity, also across RemovePrefix, Clear and Forget (an
//     append after any of them gets a Seq greater than every Seq before);
//   - atomic turns: several messages in one Append are stored whole or not at
//     all — a nil message anywhere in the turn is an error wrapping
//     store.ErrInvalidArgument and stores nothing; readers running during
//     concurrent appends never see half a turn;
//   - Last(n) for n = 1, n = count and n > count; n < 1 is an error wrapping
//     store.ErrInvalidArgument; All; Stat (Count, FirstSeq, LastSeq; the zero
//     Stat for an unknown identity);
//   - Tail(n, after) is every system message and the newest n non-system
//     messages with a Seq after after, in Seq order, for many n and after
//     (also after RemovePrefix and Clear); n < 1 is an error wrapping
//     store.ErrInvalidArgument; a Tail(2) read by a second client while
//     four writers append two-message turns always shows one whole turn;
//   - append keys (store.WithAppendKey): a unit appended under one key —
//     again, by another client, or by eight Appends of two clients at the
//     same moment — is stored once; another key, or none, stores it
//     again; keys are per identity; a pinned system message keeps its key
//     after RemovePrefix; an invalid key is an error wrapping
//     store.ErrInvalidArgument and stores nothing; an empty key is none;
//   - RemovePrefix removes only non-system messages with Seq <= through,
//     returns how many, and leaves the Seqs of the rest unchanged; system
//     messages are pinned;
//   - Clear removes the messages and the state of that identity only;
//     Forget removes everything of that identity and nothing else;
//   - state: GetState of an absent name has a nil Value and the identity's
//     absent version; PutState is a compare-and-set (a new value expects
//     that absent version; a wrong version is an error wrapping
//     store.ErrConflict and stores nothing); a nil value deletes and
//     returns the absent version; versions are never reused, so a version
//     from before a delete, a Clear or a Forget conflicts afterwards;
//   - cleared means gone: a commit that read the state before a Clear or
//     Forget (on the same client or another), of a value that existed or
//     not, conflicts after it; a Clear of one identity does not fail
//     another's first commit; writers committing in a loop from two
//     clients while Clears run never land a commit that read before a
//     Clear began and started after it returned; values are arbitrary bytes
//     (0x00 and 0xFF included); an invalid state name (storekit.CheckStateName)
//     is an error wrapping store.ErrInvalidArgument; states of different
//     identities and names are apart; two clients incrementing one counter
//     with compare-and-set lose no increment;
//   - isolation between identities, adversarial ones included: parts with
//     ':', '/', '*', '?', '[', '{x}', '%', '_', '\\', NUL, newlines,
//     unicode, empty parts, ("a/b","c") versus ("a","b/c"), "a" versus "ab"
//     (a key-prefix or glob-pattern Forget must not touch "ab"), and a
//     10 KB part of varied text (a backend that indexes the raw key in a
//     B-tree with a size limit must hash it);
//   - every langchaingo message type round-trips exactly (assert.Equal with
//     the appended value): human, AI with Content, ToolCalls, FunctionCall
//     and ReasoningContent, system, generic with Role and Name, function with
//     Name, tool with ID; nil and empty ToolCalls are told apart;
//   - any valid UTF-8 string round-trips byte for byte, including "\x00" and
//     other control characters — PostgreSQL text and jsonb cannot hold NUL,
//     so a backend must encode (storekit.EncodeMessage escapes it as \u0000;
//     keep that in a text or bytea column, not jsonb) — and so does a 1 MB
//     message of multibyte text;
//   - returned messages are copies: changing them, or the appended values,
//     afterwards changes nothing stored;
//   - times (store.Record.Time): an Append under memstack.WithTime(ctx, t)
//     reads back, by Last, All and a second client, dated t — the same
//     instant (time.Time.Equal) with the same UTC offset, nanoseconds
//     included, for offsets east and west of UTC and years 1 to 9999; an
//     Append without a time (or with a zero one) is dated between the
//     instants before and after the call; every message of one Append has
//     the same time; RemovePrefix leaves the times of the kept messages
//     (system ones included) and of other identities unchanged; a time
//     RFC 3339 cannot hold is either refused with an error wrapping
//     store.ErrInvalidArgument, storing nothing, or kept exactly;
//   - 32 goroutines appending 20 turns each to one conversation lose
//     nothing, each turn's messages are adjacent and each writer's order is
//     kept; two independent clients appending concurrently to one
//     conversation lose nothing and both read the same interleaving;
//   - a context that is already cancelled makes every method return an
//     error wrapping context.Canceled and change nothing;
//   - messages and state survive closing the store and opening it again,
//     and Seqs and versions continue without reuse;
//   - a closed store (when the store implements io.Closer) returns errors
//     from every method and never panics.
//
// store.History serves a single identity and keeps state in process memory,
// so it cannot pass a multi-identity, reopenable suite and is not run with
// this kit; its own tests in package store cover it.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/memstack/memstack/store"
)

// Opener opens a store over the backend's data in namespace ns. Calling it
// twice with the same ns gives two independent clients (e.g. two connection
// pools, two *sql.DB) over the same data. The kit closes every store it
// opens that implements io.Closer. See the package documentation.
//
// tb is the test (in Run) or the benchmark (in Bench) the store is opened
// for: use it for tb.TempDir, tb.Cleanup or tb.Skip. It is a testing.TB
// rather than a *testing.T so that one Opener serves both Run and Bench.
type Opener func(tb testing.TB, ns string) (store.Store, error)

// Run runs the conformance suite against the stores open returns, one
// subtest per expectation (see the package documentation for the list).
func Run(t *testing.T, open Opener) {
	t.Helper()
	if open == nil {
		t.Fatal("storetest.Run: Opener is nil")
	}
	k := &kit{open: open, prefix: randomHex(4)}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, k.newEnv(t))
		})
	}
}

// kit hands out fresh namespaces for one Run.
type kit struct {
	open   Opener
	prefix string
	n      atomic.Int64
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// env is what one subtest gets: its namespace and a way to open clients
// over it.
type env struct {
	t    *testing.T
	kit  *kit
	ns   string
	ctx  context.Context
	mu   sync.Mutex
	open []*client
}

// client is one opened store and whether the kit has closed it.
type client struct {
	store.Store
	closed bool
}

func (k *kit) newEnv(t *testing.T) *env {
	e := &env{
		t:   t,
		kit: k,
		ns:  fmt.Sprintf("st%s_%d", k.prefix, k.n.Add(1)),
		ctx: context.Background(),
	}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, c := range e.open {
			e.closeClient(c)
		}
	})
	return e
}

// client opens a new client over the subtest's namespace; the first one is
// the store most subtests use.
func (e *env) client() *client {
	e.t.Helper()
	s, err := e.kit.open(e.t, e.ns)
	if err != nil {
		e.t.Fatalf("storetest: Opener(ns=%q): %v", e.ns, err)
	}
	if s == nil {
		e.t.Fatalf("storetest: Opener(ns=%q) returned a nil store and no error", e.ns)
	}
	c := &client{Store: s}
	e.mu.Lock()
	e.open = append(e.open, c)
	e.mu.Unlock()
	return c
}

// store opens a client and returns it as a store.Store.
func (e *env) store() store.Store {
	e.t.Helper()
	return e.client()
}

// close closes c if its store implements io.Closer and reports whether it
// did.
func (e *env) close(c *client) bool {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closeClient(c)
}

func (e *env) closeClient(c *client) bool {
	e.t.Helper()
	if c.closed {
		return true
	}
	cl, ok := c.Store.(io.Closer)
	if !ok {
		return false
	}
	c.closed = true
	if err := cl.Close(); err != nil {
		e.t.Errorf("storetest: closing the store of ns %q: %v", e.ns, err)
	}
	return true
}
