package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/store/storetest"
)

// storeRow is one backend's result, or why it was not measured.
type storeRow struct {
	backend string
	setup   string // how the store was set up
	res     storetest.Result
	minimal *storetest.Result      // the same work with the driver's minimal commands (minimal.go); nil for none
	sizes   []storetest.SizeResult // storetest.MeasureSize at cfg.storeSizes
	windows []windowResult         // measureWindows at cfg.windowSizes
	users   []userRecallResult     // measureUserRecall at cfg.userConvs
	skipped string                 // non-empty: not measured, and why
}

// Names of the store backends, as the table shows them.
const (
	backendInMemory = "in-memory (store.InMemory)"
	backendSQLite   = "SQLite (sqlitestore)"
	backendSQLiteRI = "SQLite, recall index on (sqlitestore.WithRecallIndex)"
	backendRedis    = "Redis (redisstore)"
	backendPostgres = "PostgreSQL (pgstore)"
	// backendPostgresRI is PostgreSQL with the recall index on.
	backendPostgresRI = "PostgreSQL, recall index on (pgstore.WithRecallIndex)"
)

// storeBackend opens one backend; the returned func releases everything
// open started (store, server, files).
type storeBackend struct {
	name  string
	setup string
	// server is set for the backends that need a server process.
	server bool
	// open returns the store, and where it lives (its file's directory,
	// the server's address or DSN) for minimal.
	open func(ctx context.Context) (s store.Store, where string, release func(), err error)
	// minimal, if not nil, opens the same work done with the driver's
	// minimal commands next to the store (see minimal.go).
	minimal func(ctx context.Context, where string) (storetest.Workload, func(), error)
	// settle, if not nil, brings tables just filled to the state a
	// deployment's are in, before the user-recall loads are timed.
	settle func(ctx context.Context, where string) error
}

var errNotInstalled = errors.New("not installed")

func storeBackends() []storeBackend {
	return []storeBackend{
		{
			name:  backendInMemory,
			setup: "store.NewInMemory()",
			open: func(context.Context) (store.Store, string, func(), error) {
				return store.NewInMemory(), "", func() {}, nil
			},
		},
		{
			name:    backendSQLite,
			setup:   "a new file in a temporary directory, default options (WAL, synchronous=NORMAL)",
			open:    openSQLite(),
			minimal: minimalSQLite,
		},
		{
			name:  backendSQLiteRI,
			setup: "the same, with the recall index kept in the file (WithRecallIndex): a Recall searches the file",
			open:  openSQLite(sqlitestore.WithRecallIndex()),
		},
		{
			name:   backendRedis,
			setup:  "a throwaway redis-server on 127.0.0.1 without persistence, default client options",
			server: true,
			open: func(ctx context.Context) (store.Store, string, func(), error) {
				srv, err := testsvc.StartRedisServer()
				if err != nil {
					if errors.Is(err, testsvc.ErrRedisNotInstalled) {
						return nil, "", nil, fmt.Errorf("%w: %w", errNotInstalled, err)
					}
					return nil, "", nil, err
				}
				s, err := redisstore.Open(ctx, srv.Addr())
				if err != nil {
					srv.Stop()
					return nil, "", nil, err
				}
				return s, srv.Addr(), func() { _ = s.Close(); srv.Stop() }, nil
			},
			minimal: minimalRedis,
		},
		{
			name:    backendPostgres,
			setup:   "a throwaway PostgreSQL on 127.0.0.1 (fsync=off), default pool (pgxpool: max(4, CPUs) connections)",
			server:  true,
			open:    openPostgres(),
			minimal: minimalPostgres,
			settle:  analyzePostgres,
		},
		{
			name:   backendPostgresRI,
			setup:  "the same, with the recall index kept in the database (WithRecallIndex): a Recall searches it",
			server: true,
			open:   openPostgres(pgstore.WithRecallIndex()),
			settle: analyzePostgres,
		},
	}
}

// measureMinimal runs storetest.Measure's work with b's minimal driver
// commands against where b's store lives.
func measureMinimal(ctx context.Context, b storeBackend, where string, cfg config) (storetest.Result, error) {
	w, release, err := b.minimal(ctx, where)
	if err != nil {
		return storetest.Result{}, err
	}
	defer release()
	return storetest.MeasureWith(ctx, w, cfg.storeConvs, cfg.storeTurns)
}

// runStores measures every backend that can run with storetest.Measure:
// cfg.storeConvs concurrent conversations of cfg.storeTurns turns each.
// Server backends run when cfg.startServers is set; a server that is not
// installed is then skipped (noted in the table), unless
// cfg.requireServers is set, when it is an error, as is any other failure.
func runStores(ctx context.Context, cfg config, progress io.Writer) ([]storeRow, error) {
	var rows []storeRow
	for _, b := range storeBackends() {
		row := storeRow{backend: b.name, setup: b.setup}
		if b.server && !cfg.startServers {
			row.skipped = "not run: -quick starts no servers (add -stores)"
			rows = append(rows, row)
			fmt.Fprintf(progress, "stores: %-28s %s\n", b.name, row.skipped)
			continue
		}
		openCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		s, where, release, err := b.open(openCtx)
		cancel()
		if err != nil {
			if errors.Is(err, errNotInstalled) && !cfg.requireServers {
				row.skipped = "not run: the server is not installed"
				rows = append(rows, row)
				fmt.Fprintf(progress, "stores: %-28s %s (%v)\n", b.name, row.skipped, err)
				continue
			}
			return nil, fmt.Errorf("opening the %s store: %w", b.name, err)
		}
		row.res, err = storetest.Measure(ctx, s, cfg.storeConvs, cfg.storeTurns)
		if err != nil {
			release()
			return nil, fmt.Errorf("measuring the %s store: %w", b.name, err)
		}
		fmt.Fprintf(progress, "stores: %-28s %s\n", b.name, row.res)
		if b.minimal != nil {
			res, err := measureMinimal(ctx, b, where, cfg)
			if err != nil {
				release()
				return nil, fmt.Errorf("measuring the %s driver's minimal commands: %w", b.name, err)
			}
			row.minimal = &res
			fmt.Fprintf(progress, "stores: %-28s driver's minimal commands: %s\n", b.name, res)
		}
		for _, n := range cfg.storeSizes {
			sz, err := storetest.MeasureSize(ctx, s, n, cfg.storeSamples)
			if err != nil {
				release()
				return nil, fmt.Errorf("measuring the %s store at %d messages: %w", b.name, n, err)
			}
			fmt.Fprintf(progress, "stores: %-28s %d messages: Stat %v, Append %v, RemovePrefix %v, then Stat %v, Append %v\n",
				b.name, n, sz.Stat, sz.Append, sz.RemovePrefix, sz.StatAfter, sz.AppendAfter)
			row.sizes = append(row.sizes, sz)
		}
		if len(cfg.windowSizes) > 0 {
			ws, err := measureWindows(ctx, s, cfg.windowSizes, cfg.windowSamples)
			if err != nil {
				release()
				return nil, fmt.Errorf("measuring window loads on the %s store: %w", b.name, err)
			}
			for _, w := range ws {
				fmt.Fprintf(progress, "stores: %-28s %d messages: %s load p50 %v, p95 %v\n", b.name, w.messages, w.memory, w.p50, w.p95)
			}
			row.windows = ws
		}
		if len(cfg.userConvs) > 0 {
			var settle func(context.Context) error
			if b.settle != nil {
				settle = func(ctx context.Context) error { return b.settle(ctx, where) }
			}
			us, err := measureUserRecall(ctx, s, cfg.userConvs, cfg.windowSamples, settle)
			if err != nil {
				release()
				return nil, fmt.Errorf("measuring user-level recall on the %s store: %w", b.name, err)
			}
			for _, u := range us {
				fmt.Fprintf(progress, "stores: %-28s user with %d conversations: cold load p50 %v, p95 %v, load p50 %v, p95 %v, save %v (conversation-scoped %v)\n",
					b.name, u.conversations, u.coldP50, u.coldP95, u.loadP50, u.loadP95, u.saveUser, u.saveConv)
			}
			row.users = us
		}
		release()
		rows = append(rows, row)
	}
	return rows, nil
}

// analyzePostgres runs VACUUM (ANALYZE) on the database at dsn, as the
// scale benchmark does after its population: tables just filled as
// autovacuum keeps a deployment's as they grow — the planner's
// statistics (before its ANALYZE runs a table has none, and the planner
// guesses) and rows' old versions pruned.
func analyzePostgres(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "VACUUM (ANALYZE)")
	return err
}

// openSQLite opens a new SQLite file in a temporary directory with opts.
// openPostgres opens a pgstore with opts on a throwaway PostgreSQL server
// of its own.
func openPostgres(opts ...pgstore.Option) func(ctx context.Context) (store.Store, string, func(), error) {
	return func(ctx context.Context) (store.Store, string, func(), error) {
		srv, err := testsvc.StartPostgresServer()
		if err != nil {
			if errors.Is(err, testsvc.ErrPostgresNotInstalled) {
				return nil, "", nil, fmt.Errorf("%w: %w", errNotInstalled, err)
			}
			return nil, "", nil, err
		}
		s, err := pgstore.Open(ctx, srv.DSN(), opts...)
		if err != nil {
			srv.Stop()
			return nil, "", nil, err
		}
		return s, srv.DSN(), func() { _ = s.Close(); srv.Stop() }, nil
	}
}

func openSQLite(opts ...sqlitestore.Option) func(ctx context.Context) (store.Store, string, func(), error) {
	return func(ctx context.Context) (store.Store, string, func(), error) {
		dir, err := os.MkdirTemp("", "memstack-bench-sqlite-")
		if err != nil {
			return nil, "", nil, err
		}
		s, err := sqlitestore.Open(ctx, filepath.Join(dir, "bench.db"), opts...)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, "", nil, err
		}
		return s, dir, func() { _ = s.Close(); _ = os.RemoveAll(dir) }, nil
	}
}
