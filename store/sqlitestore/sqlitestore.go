// Package sqlitestore is memstack's SQLite backend: a store.Store kept in
// one SQLite database file, the embedded default for memory that must
// survive restarts. It needs no server and no cgo — it uses
// modernc.org/sqlite, a pure-Go SQLite — so a single binary carries its
// own database.
//
// # Use
//
//	s, err := sqlitestore.Open(ctx, "memory.db", sqlitestore.WithNamespace("buffer"))
//	if err != nil { ... }
//	defer s.Close()
//	mem := memories.NewBuffer(memories.WithStore(s))
//
// Several memory layers can share one file, each under its own namespace
// (WithNamespace, default "default"): Clear works within the namespace of
// the Store it is called on, Forget removes the identity from every
// namespace in the file. Several processes, or several Stores in one
// process, may open the same file at once.
//
// # Schema
//
// Open creates the schema if it is missing (CREATE … IF NOT EXISTS, in one
// transaction, so opening an existing file — or two processes opening a new
// one at the same moment — is safe) and records its version in
// memstack_schema; a file with a newer schema version is refused.
//
//	memstack_schema   (version INTEGER)                      -- one row: 1
//	memstack_messages (seq INTEGER PRIMARY KEY AUTOINCREMENT,
//	                   ns TEXT, identity TEXT, system INTEGER, message BLOB)
//	                  index (ns, identity, seq)
//	memstack_state    (ns TEXT, identity TEXT, name TEXT, version INTEGER, value BLOB,
//	                   PRIMARY KEY (ns, identity, name))    -- name '': see below
//	memstack_counter  (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER)
//	memstack_namespaces (ns TEXT PRIMARY KEY)                -- every namespace opened
//
// identity is memstack.Identity.Key (injective, so adversarial identities
// never share rows). message is store.EncodeMessageAt's JSON, shared with
// the Redis and PostgreSQL backends; it carries the message's time (its
// "at" field: store.AppendTime of the Append, which a caller sets with
// memstack.WithTime), so times need no column of their own and schema
// version 1 is unchanged. Rows written before memstack recorded times have
// no "at" and read back with a zero store.Record.Time. system marks system
// messages, which RemovePrefix keeps. Seq is the AUTOINCREMENT rowid, which
// SQLite never hands out twice, not even after the rows are deleted (by
// RemovePrefix, Clear or Forget), so Seqs increase strictly in append order
// across the whole file. State versions come from memstack_counter, a
// single-row counter that only grows; PutState is a compare-and-set
// (UPDATE … WHERE version = ?). Open registers its namespace in
// memstack_namespaces, so Forget finds every namespace's rows through the
// (ns, identity) keys — no second index on identity slows every Append
// down.
//
// Absent versions (see package store, "Cleared means gone, across
// replicas") live in memstack_state too, as rows under names no caller can
// use (store.CheckStateName refuses the empty name), so schema version 1
// is unchanged:
//
//	(ns, identity, '')  -- identity's Clear mark in ns: its absent version
//	('', '', '')        -- the file-wide forgotten version
//
// Both have an empty value (the column is NOT NULL) and a version drawn
// from memstack_counter. Clear deletes the identity's messages and state
// rows in its namespace and inserts a fresh mark; Forget first draws a
// fresh forgotten version, then deletes every row of the identity, marks
// included, in every namespace. A name's absent version is the identity's
// mark in the namespace, else the forgotten version, else 0 (a file that
// never ran Forget, or one written before absent versions, which reads as
// it always did). GetState is one statement — three primary-key lookups,
// the best one wins — so it sees a Clear or Forget all before or all
// after. No namespace is empty (WithNamespace refuses it) and no identity
// key is (memstack.Identity.Key always has two colons), so a reserved row
// is never a caller's. A build from before these rows ignores them: it
// never reads the empty name, and its Clear and Forget delete marks like
// any other state row.
//
// # Concurrency and durability
//
// The file is in WAL mode, so readers never block the writer and the writer
// never blocks readers; every read is one statement and so sees a
// consistent snapshot — never half a turn. Writes run in BEGIN IMMEDIATE
// transactions: an Append of several messages is one transaction, stored
// whole or not at all. Within one Store writes are serialised by a
// semaphore (a waiting writer honours its ctx), and Appends that wait at
// the same moment are committed together in one transaction (group commit:
// each Append's messages stay contiguous and all-or-nothing, and 32
// concurrent conversations cost a few commits instead of 32); between
// processes or
// Stores on the same file, SQLite's lock does it, waiting up to the busy
// timeout (WithBusyTimeout, default 5 s) and then retrying with backoff
// until the call's ctx is done. synchronous=NORMAL is the default: in WAL
// mode a crash of the process loses nothing; a power failure may lose the
// last commits. WithSynchronous("FULL") syncs every commit.
//
// A stored message that does not decode is reported as an error naming the
// identity and Seq (wrapping store.ErrCorrupt); other identities stay
// readable. After Close every method returns an error wrapping ErrClosed.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// SchemaVersion is the version of the schema this package creates and
// reads.
const SchemaVersion = 1

// DefaultNamespace is the namespace of a Store opened without
// WithNamespace.
const DefaultNamespace = "default"

// ErrClosed is wrapped by the error of every call on a closed Store.
var ErrClosed = errors.New("sqlitestore: store is closed")

// Store is a store.Store in a SQLite file. It is safe for concurrent use by
// multiple goroutines; several Stores and processes may share one file.
type Store struct {
	db     *sql.DB
	path   string
	ns     string
	cfg    config
	writer chan struct{} // a one-slot semaphore serialising this Store's writes
	closed atomic.Bool

	qmu   sync.Mutex
	queue []*appendReq // Appends waiting to be committed (see append.go)

	stmtInsert, stmtLast, stmtAll, stmtStat, stmtGetState *sql.Stmt
}

var _ store.Store = (*Store)(nil)

// Option configures Open.
type Option func(*config) error

type config struct {
	ns          string
	busyTimeout time.Duration
	synchronous string
	maxConns    int
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
// ctx allows). It must be at least 1 ms. Default 5 s.
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("sqlitestore: WithBusyTimeout: %v is less than 1ms", d)
		}
		c.busyTimeout = d
		return nil
	}
}

// WithSynchronous sets SQLite's synchronous pragma: "NORMAL" (the default;
// in WAL mode durable across process crashes), "FULL" (every commit is
// synced: durable across power failures, slower) or "OFF".
func WithSynchronous(mode string) Option {
	return func(c *config) error {
		switch m := strings.ToUpper(mode); m {
		case "OFF", "NORMAL", "FULL":
			c.synchronous = m
			return nil
		}
		return fmt.Errorf("sqlitestore: WithSynchronous: %q is not OFF, NORMAL or FULL", mode)
	}
}

// WithMaxOpenConns caps the connections of the Store's pool (readers run
// concurrently on them; writes use one at a time). It must be at least 1.
// Default 16.
func WithMaxOpenConns(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("sqlitestore: WithMaxOpenConns: %d is less than 1", n)
		}
		c.maxConns = n
		return nil
	}
}

// Open opens (creating if needed) the SQLite database file at path and
// returns a Store over it. The file is put in WAL mode and the schema is
// created if it is missing. ctx bounds the opening; it is not kept.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := config{ns: DefaultNamespace, busyTimeout: 5 * time.Second, synchronous: "NORMAL", maxConns: 16}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: sqlitestore: Open: nil option", store.ErrInvalidArgument)
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("%w: %w", store.ErrInvalidArgument, err)
		}
	}
	if path == "" {
		return nil, fmt.Errorf("%w: sqlitestore: Open: path is empty", store.ErrInvalidArgument)
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: sqlitestore: Open(%s): nil context", store.ErrInvalidArgument, path)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: opening %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: opening %s: %w", path, err)
	}
	dsn := fmt.Sprintf("file:%s?_txlock=immediate&_busy_timeout=%d&_journal_mode=WAL&_synchronous=%s",
		escapeURIPath(abs), cfg.busyTimeout.Milliseconds(), cfg.synchronous)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(cfg.maxConns)
	db.SetMaxIdleConns(cfg.maxConns)
	db.SetConnMaxIdleTime(0)
	s := &Store{db: db, path: path, ns: cfg.ns, cfg: cfg, writer: make(chan struct{}, 1)}
	if err := s.init(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlitestore: opening %s: %w", path, err)
	}
	return s, nil
}

// escapeURIPath escapes a file path for a SQLite "file:" URI: everything
// but unreserved characters and '/' becomes %XX.
func escapeURIPath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

var schema = []string{
	`CREATE TABLE IF NOT EXISTS memstack_schema (version INTEGER NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS memstack_messages (
		seq      INTEGER PRIMARY KEY AUTOINCREMENT,
		ns       TEXT    NOT NULL,
		identity TEXT    NOT NULL,
		system   INTEGER NOT NULL,
		message  BLOB    NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS memstack_messages_conv ON memstack_messages (ns, identity, seq)`,
	`CREATE TABLE IF NOT EXISTS memstack_state (
		ns       TEXT    NOT NULL,
		identity TEXT    NOT NULL,
		name     TEXT    NOT NULL,
		version  INTEGER NOT NULL,
		value    BLOB    NOT NULL,
		PRIMARY KEY (ns, identity, name)
	) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS memstack_namespaces (ns TEXT PRIMARY KEY) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS memstack_counter (
		id    INTEGER PRIMARY KEY CHECK (id = 1),
		value INTEGER NOT NULL
	)`,
	`INSERT OR IGNORE INTO memstack_counter (id, value) VALUES (1, 0)`,
}

// init creates the schema if needed, checks its version and prepares the
// frequent statements.
func (s *Store) init(ctx context.Context) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		for _, q := range schema {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("creating the schema: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO memstack_namespaces (ns) VALUES (?)`, s.ns); err != nil {
			return fmt.Errorf("registering namespace %q: %w", s.ns, err)
		}
		var v int
		err := tx.QueryRowContext(ctx, `SELECT version FROM memstack_schema`).Scan(&v)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `INSERT INTO memstack_schema (version) VALUES (?)`, SchemaVersion)
			return err
		case err != nil:
			return fmt.Errorf("reading the schema version: %w", err)
		case v > SchemaVersion:
			return fmt.Errorf("the file has schema version %d; this build knows up to %d", v, SchemaVersion)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var mode string
	if err := s.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return fmt.Errorf("reading the journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("the file is in journal mode %q, not WAL", mode)
	}
	prepare := []struct {
		dst **sql.Stmt
		q   string
	}{
		{&s.stmtInsert, `INSERT INTO memstack_messages (ns, identity, system, message) VALUES (?, ?, ?, ?)`},
		{&s.stmtLast, `SELECT seq, message FROM memstack_messages WHERE ns = ? AND identity = ? ORDER BY seq DESC LIMIT ?`},
		{&s.stmtAll, `SELECT seq, message FROM memstack_messages WHERE ns = ? AND identity = ? ORDER BY seq`},
		{&s.stmtStat, `SELECT count(*), coalesce(min(seq), 0), coalesce(max(seq), 0) FROM memstack_messages WHERE ns = ? AND identity = ?`},
		{&s.stmtGetState, getStateQuery},
	}
	for _, p := range prepare {
		st, err := s.db.PrepareContext(ctx, p.q)
		if err != nil {
			return fmt.Errorf("preparing statements: %w", err)
		}
		*p.dst = st
	}
	return nil
}

// Close closes the database. Calls after Close return an error wrapping
// ErrClosed; Close is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.db.Close()
}

// Namespace returns the Store's namespace.
func (s *Store) Namespace() string { return s.ns }

// begin checks that the Store is open and ctx is not done.
func (s *Store) begin(ctx context.Context, op string, id memstack.Identity) error {
	if ctx == nil {
		return fmt.Errorf("%w: sqlitestore: %s of %s: nil context", store.ErrInvalidArgument, op, id.Key())
	}
	if s.closed.Load() {
		return fmt.Errorf("sqlitestore: %s of %s: %w", op, id.Key(), ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: %s of %s: %w", op, id.Key(), err)
	}
	return nil
}

// fail wraps err from op, adding ctx's error when the call was cut short
// by it (SQLite reports an interrupt, not the context's error) and
// ErrClosed when the Store was closed under it.
func (s *Store) fail(ctx context.Context, op string, id memstack.Identity, err error) error {
	switch {
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return fmt.Errorf("sqlitestore: %s of %s: %w (%w)", op, id.Key(), ctx.Err(), err)
	case s.closed.Load() && !errors.Is(err, ErrClosed):
		return fmt.Errorf("sqlitestore: %s of %s: %w (%w)", op, id.Key(), ErrClosed, err)
	}
	return fmt.Errorf("sqlitestore: %s of %s: %w", op, id.Key(), err)
}

// busy reports whether err is SQLite's "database is locked" (another
// connection holds the write lock past the busy timeout).
func busy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		code := se.Code() & 0xff
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	return false
}

// write runs fn in a BEGIN IMMEDIATE transaction and commits it, retrying
// the whole transaction while the database is locked by another connection
// and ctx allows. fn must be safe to run more than once.
func (s *Store) write(ctx context.Context, fn func(*sql.Tx) error) error {
	select {
	case s.writer <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.writer }()
	return s.writeLocked(ctx, fn)
}

// writeLocked is write for a caller that holds the writer semaphore.
func (s *Store) writeLocked(ctx context.Context, fn func(*sql.Tx) error) error {
	backoff := time.Millisecond
	for {
		err := s.tryWrite(ctx, fn)
		if err == nil || !busy(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up waiting for the write lock: %w)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

func (s *Store) tryWrite(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock=immediate)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// scanRecords reads (seq, message) rows and decodes them.
func scanRecords(id memstack.Identity, rows *sql.Rows, capacity int) ([]store.Record, error) {
	defer rows.Close()
	out := make([]store.Record, 0, capacity)
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return nil, err
		}
		rec, err := store.DecodeRecord(id, seq, data)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

// Last implements store.Store.
func (s *Store) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	if err := s.begin(ctx, "Last", id); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: sqlitestore: Last(n=%d): n must be at least 1", store.ErrInvalidArgument, n)
	}
	rows, err := s.stmtLast.QueryContext(ctx, s.ns, id.Key(), n)
	if err != nil {
		return nil, s.fail(ctx, "Last", id, err)
	}
	recs, err := scanRecords(id, rows, min(n, 64))
	if err != nil {
		return nil, s.fail(ctx, "Last", id, err)
	}
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	return recs, nil
}

// All implements store.Store.
func (s *Store) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	if err := s.begin(ctx, "All", id); err != nil {
		return nil, err
	}
	rows, err := s.stmtAll.QueryContext(ctx, s.ns, id.Key())
	if err != nil {
		return nil, s.fail(ctx, "All", id, err)
	}
	recs, err := scanRecords(id, rows, 16)
	if err != nil {
		return nil, s.fail(ctx, "All", id, err)
	}
	return recs, nil
}

// Stat implements store.Store.
func (s *Store) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	if err := s.begin(ctx, "Stat", id); err != nil {
		return store.Stat{}, err
	}
	var st store.Stat
	if err := s.stmtStat.QueryRowContext(ctx, s.ns, id.Key()).Scan(&st.Count, &st.FirstSeq, &st.LastSeq); err != nil {
		return store.Stat{}, s.fail(ctx, "Stat", id, err)
	}
	return st, nil
}

// RemovePrefix implements store.Store.
func (s *Store) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	if err := s.begin(ctx, "RemovePrefix", id); err != nil {
		return 0, err
	}
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`DELETE FROM memstack_messages WHERE ns = ? AND identity = ? AND seq <= ? AND system = 0`,
			s.ns, id.Key(), through)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, s.fail(ctx, "RemovePrefix", id, err)
	}
	return int(n), nil
}

// getStateQuery reads a state value, or the absent version of a name
// without one, in one statement: the value (rank 0), else the identity's
// Clear mark in the namespace (rank 1), else the file-wide forgotten
// version (rank 2), else 0 (rank 3). Each branch is one primary-key
// lookup. Its parameters are ns, identity key and name.
const getStateQuery = `
	SELECT version, value, 0 FROM memstack_state WHERE ns = ?1 AND identity = ?2 AND name = ?3
	UNION ALL
	SELECT version, NULL, 1 FROM memstack_state WHERE ns = ?1 AND identity = ?2 AND name = ''
	UNION ALL
	SELECT version, NULL, 2 FROM memstack_state WHERE ns = '' AND identity = '' AND name = ''
	UNION ALL
	SELECT 0, NULL, 3
	ORDER BY 3 LIMIT 1`

// drawVersion takes a fresh version from the file's counter.
func drawVersion(ctx context.Context, tx *sql.Tx) (int64, error) {
	var v int64
	if err := tx.QueryRowContext(ctx, `UPDATE memstack_counter SET value = value + 1 WHERE id = 1 RETURNING value`).Scan(&v); err != nil {
		return 0, fmt.Errorf("drawing a version: %w", err)
	}
	return v, nil
}

// readState runs getStateQuery through st (s.stmtGetState or its copy in
// a transaction): a present value has a non-nil Value, an absent one a nil
// Value and the name's absent version.
func (s *Store) readState(ctx context.Context, st *sql.Stmt, key, name string) (store.State, error) {
	var out store.State
	var rank int
	if err := st.QueryRowContext(ctx, s.ns, key, name).Scan(&out.Version, &out.Value, &rank); err != nil {
		return store.State{}, err
	}
	switch {
	case rank != 0:
		out.Value = nil
	case out.Value == nil:
		out.Value = []byte{} // a stored empty value is a value
	}
	return out, nil
}

// Clear implements store.Store: in one transaction it removes the
// identity's messages and state in this Store's namespace and gives the
// identity a fresh Clear mark there, so a commit that read before the
// Clear conflicts.
func (s *Store) Clear(ctx context.Context, id memstack.Identity) error {
	if err := s.begin(ctx, "Clear", id); err != nil {
		return err
	}
	key := id.Key()
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM memstack_messages WHERE ns = ? AND identity = ?`, s.ns, key); err != nil {
			return err
		}
		// Every state row of the identity goes, its old mark included.
		if _, err := tx.ExecContext(ctx, `DELETE FROM memstack_state WHERE ns = ? AND identity = ?`, s.ns, key); err != nil {
			return err
		}
		mark, err := drawVersion(ctx, tx)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx,
			`INSERT INTO memstack_state (ns, identity, name, version, value) VALUES (?, ?, '', ?, X'')`, s.ns, key, mark)
		return err
	})
	if err != nil {
		return s.fail(ctx, "Clear", id, err)
	}
	return nil
}

// Forget implements store.Store: in one transaction it moves the file-wide
// forgotten version, then removes the identity's messages, state and Clear
// marks in every namespace of the file.
func (s *Store) Forget(ctx context.Context, id memstack.Identity) error {
	if err := s.begin(ctx, "Forget", id); err != nil {
		return err
	}
	key := id.Key()
	err := s.write(ctx, func(tx *sql.Tx) error {
		forgotten, err := drawVersion(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO memstack_state (ns, identity, name, version, value) VALUES ('', '', '', ?, X'')
				ON CONFLICT (ns, identity, name) DO UPDATE SET version = excluded.version`, forgotten); err != nil {
			return fmt.Errorf("storing the forgotten version: %w", err)
		}
		// Every namespace that has rows is registered (Open does it), and
		// the IN list lets both deletes seek the (ns, identity, …) keys.
		// ns '' is never a namespace: the forgotten version stays.
		if _, err := tx.ExecContext(ctx, `DELETE FROM memstack_messages
				WHERE ns IN (SELECT ns FROM memstack_namespaces WHERE ns <> '') AND identity = ?`, key); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM memstack_state
				WHERE ns IN (SELECT ns FROM memstack_namespaces WHERE ns <> '') AND identity = ?`, key)
		return err
	})
	if err != nil {
		return s.fail(ctx, "Forget", id, err)
	}
	return nil
}

// GetState implements store.Store: one statement, so it sees a Clear or
// Forget all before or all after.
func (s *Store) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	if err := s.begin(ctx, "GetState", id); err != nil {
		return store.State{}, err
	}
	if err := store.CheckStateName(name); err != nil {
		return store.State{}, err
	}
	st, err := s.readState(ctx, s.stmtGetState, id.Key(), name)
	if err != nil {
		return store.State{}, s.fail(ctx, "GetState", id, err)
	}
	return st, nil
}

// PutState implements store.Store: a compare-and-set on the version — of
// the value, or the name's absent version when it has none — in one
// transaction; the new version comes from the file's counter.
func (s *Store) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	if err := s.begin(ctx, "PutState", id); err != nil {
		return 0, err
	}
	if err := store.CheckStateName(name); err != nil {
		return 0, err
	}
	if value != nil && len(value) == 0 {
		value = []byte{} // an empty value is a value: store a zero-length blob
	}
	key := id.Key()
	var version int64
	var conflict error
	err := s.write(ctx, func(tx *sql.Tx) error {
		conflict = nil
		get := tx.StmtContext(ctx, s.stmtGetState)
		cur, err := s.readState(ctx, get, key, name)
		if err != nil {
			return err
		}
		if cur.Version != expect {
			conflict = fmt.Errorf("%w: sqlitestore: state %q of %s is at version %d, not %d", store.ErrConflict, name, key, cur.Version, expect)
			return nil
		}
		if value == nil {
			if !cur.Exists() {
				version = cur.Version
				return nil
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM memstack_state WHERE ns = ? AND identity = ? AND name = ?`, s.ns, key, name); err != nil {
				return err
			}
			after, err := s.readState(ctx, get, key, name)
			version = after.Version
			return err
		}
		if version, err = drawVersion(ctx, tx); err != nil {
			return err
		}
		if !cur.Exists() {
			_, err = tx.ExecContext(ctx,
				`INSERT INTO memstack_state (ns, identity, name, version, value) VALUES (?, ?, ?, ?, ?)`,
				s.ns, key, name, version, value)
			return err
		}
		res, err := tx.ExecContext(ctx,
			`UPDATE memstack_state SET value = ?, version = ? WHERE ns = ? AND identity = ? AND name = ? AND version = ?`,
			value, version, s.ns, key, name, expect)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("compare-and-set updated %d rows (%v)", n, err)
		}
		return nil
	})
	if err != nil {
		return 0, s.fail(ctx, "PutState", id, err)
	}
	if conflict != nil {
		return 0, conflict
	}
	return version, nil
}
