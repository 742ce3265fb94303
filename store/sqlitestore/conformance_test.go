package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/store/storetest"
)

// TestConformance runs the conformance kit with every subtest in its own
// namespace of one shared file, so the kit also checks that namespaces keep
// data apart. "Two independent clients" are two Open calls on the file.
func TestConformance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kit.db")
	storetest.Run(t, func(_ testing.TB, ns string) (store.Store, error) {
		return sqlitestore.Open(context.Background(), path, sqlitestore.WithNamespace(ns))
	})
}

// BenchmarkSQLite measures saves/s and Last(10) latency with 1 and 32
// concurrent conversations, each sub-benchmark on a fresh file.
func BenchmarkSQLite(b *testing.B) {
	storetest.Bench(b, func(tb testing.TB, ns string) (store.Store, error) {
		return sqlitestore.Open(context.Background(), filepath.Join(tb.TempDir(), "bench.db"), sqlitestore.WithNamespace(ns))
	})
}
