package proof_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/sqlitestore"
)

// backend is one store backend the suites run on.
type backend struct {
	name string
	// space opens a fresh data space of the backend for the calling test
	// (its own in-memory stores, SQLite file, Redis key prefix or
	// PostgreSQL table prefix) and returns a function that opens the store
	// of namespace ns in it: one memory layer per namespace, as an
	// application would lay them out. Stores are closed when the test
	// ends. A missing server skips the test (fails it under CI).
	space func(t testing.TB) func(ns string) store.Store
}

// backends returns every backend memstack has.
func backends() []backend {
	return []backend{
		{"inmemory", func(testing.TB) func(string) store.Store {
			var mu sync.Mutex
			stores := map[string]store.Store{}
			return func(ns string) store.Store {
				mu.Lock()
				defer mu.Unlock()
				if stores[ns] == nil {
					stores[ns] = store.NewInMemory()
				}
				return stores[ns]
			}
		}},
		{"sqlite", func(t testing.TB) func(string) store.Store {
			path := filepath.Join(t.TempDir(), "proof.db")
			return func(ns string) store.Store {
				s, err := sqlitestore.Open(openCtx(t), path, sqlitestore.WithNamespace(ns))
				return closeLater(t, "sqlitestore.Open", s, err)
			}
		}},
		{"redis", func(t testing.TB) func(string) store.Store {
			addr := testsvc.Redis(t)
			prefix := "proof-" + randomHex(6)
			return func(ns string) store.Store {
				s, err := redisstore.Open(openCtx(t), addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace(ns))
				return closeLater(t, "redisstore.Open", s, err)
			}
		}},
		{"postgres", func(t testing.TB) func(string) store.Store {
			dsn := testsvc.Postgres(t) + "&pool_max_conns=8"
			prefix := "proof_" + randomHex(6) + "_"
			return func(ns string) store.Store {
				s, err := pgstore.Open(openCtx(t), dsn, pgstore.WithTablePrefix(prefix), pgstore.WithNamespace(ns))
				return closeLater(t, "pgstore.Open", s, err)
			}
		}},
	}
}

// openCtx bounds opening a store.
func openCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// closeLater fails the test on err and closes s when the test ends.
func closeLater[S interface {
	store.Store
	io.Closer
}](t testing.TB, what string, s S, err error) store.Store {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
