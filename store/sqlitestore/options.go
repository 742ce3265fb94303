package sqlitestore

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memstack/memstack/store"
)

// Option configures Open or New.
type Option func(*config) error

type config struct {
	ns          string
	busyTimeout time.Duration
	synchronous string
	maxConns    int
	mmapSize    int64 // WithMmapSize
	readOnly    bool  // WithReadOnly
	recall      bool  // WithRecallIndex
	// openOnly names the options given that configure a database Open
	// opens, which New refuses: New's database is the caller's.
	openOnly []string
}

// WithNamespace sets the namespace (the memory layer's name) every row this
// Store writes carries; Clear, reads and writes see only this namespace,
// Forget all of them. It must be 1 to 200 bytes of valid UTF-8. Default
// DefaultNamespace.
func WithNamespace(ns string) Option {
	return func(c *config) error {
		if ns == "" || len(ns) > 200 || !utf8.ValidString(ns) {
			return fmt.Errorf("sqlitestore: WithNamespace: namespace must be 1 to 200 bytes of valid UTF-8 (got %d bytes)", len(ns))
		}
		c.ns = ns
		return nil
	}
}

// WithBusyTimeout sets how long one attempt waits for another process's
// write lock before the Store backs off and retries (as long as the call's
// ctx allows). It must be at least 1 ms. Default 5 s. For Open only: with
// New, the busy timeout is the one the application's database has.
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("sqlitestore: WithBusyTimeout: %v is less than 1ms", d)
		}
		c.busyTimeout = d
		c.openOnly = append(c.openOnly, "WithBusyTimeout")
		return nil
	}
}

// WithSynchronous sets SQLite's synchronous pragma: "NORMAL" (the default;
// durable across process crashes, a power failure may take back the last
// commits), "FULL" (every commit is synced: durable across power failures,
// slower) or "OFF" (see "Durability" in the package documentation). For
// Open only: with New, the application's database has its own setting.
func WithSynchronous(mode string) Option {
	return func(c *config) error {
		switch m := strings.ToUpper(mode); m {
		case "OFF", "NORMAL", "FULL":
			c.synchronous = m
			c.openOnly = append(c.openOnly, "WithSynchronous")
			return nil
		}
		return fmt.Errorf("sqlitestore: WithSynchronous: %q is not OFF, NORMAL or FULL", mode)
	}
}

// WithMaxOpenConns caps the connections of the Store's pool (readers run
// concurrently on them; writes use one at a time). It must be at least 1.
// Default 16. For Open only: New uses the application's pool as it is.
func WithMaxOpenConns(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("sqlitestore: WithMaxOpenConns: %d is less than 1", n)
		}
		c.maxConns = n
		c.openOnly = append(c.openOnly, "WithMaxOpenConns")
		return nil
	}
}

// DefaultMmapSize is the default of WithMmapSize: 256 MiB.
const DefaultMmapSize = 256 << 20

// WithMmapSize sets SQLite's mmap_size pragma: how many bytes of the file
// each connection reads through memory-mapped I/O rather than read calls.
// Mapped pages are the operating system's page cache, shared by every
// connection and process, so a fresh process's first reads (a recall
// search reading thousands of index rows) cost no system call per page:
// a cold search of a user's 100,000 messages takes about a fifth less
// (BenchmarkUserColdLoad in internal/proof). 0 turns memory mapping off
// (SQLite's own default), which a file on a network file system, or a
// host where an I/O error must not end the process with SIGBUS, may
// want; SQLite caps the value at its compile-time maximum. Default
// DefaultMmapSize. For Open only: with New, the application's database
// has its own setting.
func WithMmapSize(n int64) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("sqlitestore: WithMmapSize: %d is negative", n)
		}
		c.mmapSize = n
		c.openOnly = append(c.openOnly, "WithMmapSize")
		return nil
	}
}

// configure applies opts to the defaults; op names the constructor.
func configure(op string, opts []Option) (config, error) {
	cfg := config{ns: DefaultNamespace, busyTimeout: 5 * time.Second, synchronous: "NORMAL", maxConns: 16, mmapSize: DefaultMmapSize}
	for _, o := range opts {
		if o == nil {
			return config{}, fmt.Errorf("%w: sqlitestore: %s: nil option", store.ErrInvalidArgument, op)
		}
		if err := o(&cfg); err != nil {
			return config{}, fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
		}
	}
	if cfg.readOnly && cfg.recall {
		return config{}, fmt.Errorf("%w: sqlitestore: %s: WithReadOnly with WithRecallIndex: a read-only Store cannot turn the recall index on (open the file once without WithReadOnly; a read-only Store searches the index once it is on)", store.ErrInvalidArgument, op)
	}
	return cfg, nil
}
