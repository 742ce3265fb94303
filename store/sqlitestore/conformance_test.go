package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/store/storetest"
)

// kitFiles gives each conformance subtest its own file: the kit opens
// every store of a subtest with that subtest's tb, its namespaces (the
// subtest's and a second one) share the file, and the Users cases, which
// reach every namespace of the file, see only what the subtest wrote.
type kitFiles struct {
	mu    sync.Mutex
	paths map[testing.TB]string
}

func (k *kitFiles) path(tb testing.TB) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.paths == nil {
		k.paths = map[testing.TB]string{}
	}
	p, ok := k.paths[tb]
	if !ok {
		p = filepath.Join(tb.TempDir(), "kit.db")
		k.paths[tb] = p
	}
	return p
}

// TestConformance runs the conformance kit over Open: each subtest has its
// own file, holding its namespace and the second namespace the kit checks
// Clear, Forget and Users across. "Two independent clients" are two Open
// calls on the file.
func TestConformance(t *testing.T) {
	var files kitFiles
	storetest.Run(t, func(tb testing.TB, ns string) (store.Store, error) {
		return sqlitestore.Open(context.Background(), files.path(tb), sqlitestore.WithNamespace(ns))
	})
}

// TestConformanceRecallIndex runs the conformance kit over Open with the
// recall index on (WithRecallIndex): every contract holds with the index
// kept in the same transactions, and the RecallSearch case checks the
// index itself.
func TestConformanceRecallIndex(t *testing.T) {
	var files kitFiles
	storetest.Run(t, func(tb testing.TB, ns string) (store.Store, error) {
		return sqlitestore.Open(context.Background(), files.path(tb), sqlitestore.WithNamespace(ns), sqlitestore.WithRecallIndex())
	})
}

// TestConformanceNew runs the conformance kit over New: every client is a
// Store over a *sql.DB of its own, opened as an application would (WAL and
// a busy timeout in the DSN, no _txlock, so the driver issues a plain
// BEGIN), and the databases stay open until the end: Close of a Store
// from New leaves its database alone.
func TestConformanceNew(t *testing.T) {
	var files kitFiles
	var mu sync.Mutex
	var dbs []*sql.DB
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, db := range dbs {
			require.NoError(t, db.Ping(), "a Store from New closed its database")
			require.NoError(t, db.Close())
		}
	})
	storetest.Run(t, func(tb testing.TB, ns string) (store.Store, error) {
		db, err := sql.Open("sqlite", "file:"+files.path(tb)+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
		if err != nil {
			return nil, err
		}
		mu.Lock()
		dbs = append(dbs, db)
		mu.Unlock()
		return sqlitestore.New(db, sqlitestore.WithNamespace(ns))
	})
}

// BenchmarkSQLite measures saves/s and Last(10) latency with 1 and 32
// concurrent conversations, each sub-benchmark on a fresh file.
func BenchmarkSQLite(b *testing.B) {
	storetest.Bench(b, func(tb testing.TB, ns string) (store.Store, error) {
		return sqlitestore.Open(context.Background(), filepath.Join(tb.TempDir(), "bench.db"), sqlitestore.WithNamespace(ns))
	})
}

// BenchmarkSQLiteRecallIndex is BenchmarkSQLite with the recall index on
// (WithRecallIndex): what keeping the index in each append's transaction
// costs.
func BenchmarkSQLiteRecallIndex(b *testing.B) {
	storetest.Bench(b, func(tb testing.TB, ns string) (store.Store, error) {
		return sqlitestore.Open(context.Background(), filepath.Join(tb.TempDir(), "bench.db"), sqlitestore.WithNamespace(ns), sqlitestore.WithRecallIndex())
	})
}
