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
//	mem, err := memories.NewBuffer(memories.WithStore(s))
//
// or, in the application's own database (which New checks: WAL mode, a
// busy timeout; see New):
//
//	db, err := sql.Open("sqlite", "file:app.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
//	...
//	s, err := sqlitestore.New(db, sqlitestore.WithNamespace("buffer"))
//
// Several memory layers can share one file, each under its own namespace
// (WithNamespace, default "default"): Clear works within the namespace of
// the Store it is called on, Forget removes the identity from every
// namespace in the file. Several processes, or several Stores in one
// process, may open the same file at once.
//
// A Store is also a store.Rewriter (AsHistory's SetMessages trims and
// appends in one transaction) and a store.Users: Identities lists, Export
// returns and ForgetScope removes everything the file holds for a user or
// a tenant, in every namespace (see "Forgetting a user").
//
// # Schema
//
// Open and New create the schema if it is missing, or migrate it from an
// older version, in one transaction that holds the write lock from its
// first statement — so opening an existing file, or two processes opening
// a new or an old one at the same moment, is safe: the second finds what
// the first left — and record its version in memstack_schema. A file with
// a newer schema version is refused, and left as it was. Open with
// WithReadOnly creates and migrates nothing: it reads a file at
// SchemaVersion and refuses any other, writing nothing.
//
//	memstack_schema   (version INTEGER)                      -- one row: 4
//	memstack_messages (seq INTEGER PRIMARY KEY AUTOINCREMENT,
//	                   ns TEXT, identity TEXT, system INTEGER, message BLOB,
//	                   unit TEXT)                           -- version 3
//	                  index (ns, identity, seq)
//	                  index (ns, identity, seq) WHERE system = 1          -- version 3
//	                  unique (ns, identity, unit) WHERE unit IS NOT NULL  -- version 3
//	memstack_stat     (ns TEXT, identity TEXT, count INTEGER,
//	                   first_seq INTEGER, last_seq INTEGER,
//	                   PRIMARY KEY (ns, identity))          -- version 2
//	memstack_state    (ns TEXT, identity TEXT, name TEXT, version INTEGER, value BLOB,
//	                   PRIMARY KEY (ns, identity, name))    -- name '': see below
//	memstack_counter  (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER)
//	memstack_namespaces (ns TEXT PRIMARY KEY)                -- every namespace opened
//	memstack_recall_conv  (ns, identity, state BLOB, PRIMARY KEY (ns, identity))    -- version 4
//	memstack_recall_units (ns, identity, chunk, data BLOB, PRIMARY KEY (ns, identity, chunk))
//	memstack_recall_terms (ns, term, identity, chunk, data BLOB,
//	                       PRIMARY KEY (ns, term, identity, chunk))
//	                      index (ns, identity, chunk)
//	memstack_recall_meta  (id INTEGER PRIMARY KEY CHECK (id = 1), complete INTEGER)
//
// identity is memstack.Identity.Key (injective, so adversarial identities
// never share rows). message is storekit.EncodeMessageAt's JSON, shared with
// the Redis and PostgreSQL backends; it carries the message's time (its
// "at" field: storekit.AppendTime of the Append, which a caller sets with
// memstack.WithTime), so times need no column of their own. Rows written
// before memstack recorded times have no "at" and read back with a zero
// store.Record.Time. system marks system messages (1; 0 for the others),
// which RemovePrefix keeps. Seq is the AUTOINCREMENT rowid, which SQLite
// never hands out twice, not even after the rows are deleted (by
// RemovePrefix, Clear or Forget), so Seqs increase strictly in append
// order across the whole file. State versions come from
// memstack_counter, a single-row counter that only grows; PutState is a
// compare-and-set (UPDATE … WHERE version = ?). Open and New register
// their namespace in memstack_namespaces, so Forget finds every
// namespace's rows through the (ns, identity) keys — no second index on
// identity slows every Append down.
//
// memstack_stat holds one row per conversation with messages: how many it
// has and its first and last Seq, which Stat — called by every memory on
// every load — reads with one primary-key lookup (and Changed, the
// store.ChangeFeed a user-scoped Recall follows, reads as one range of a
// user's rows), in the same time at 100k messages as at 10 (count(*) over
// the messages took about 30 ms at 100k).
// Every write keeps the row in step in its own transaction: Append adds
// its messages (one row update per conversation per group commit),
// RemovePrefix and Rewrite take the new bounds from two seeks of the
// (ns, identity, seq) index, Clear, Forget and ForgetScope delete it. So
// Stat agrees with All at every moment; a conversation without messages
// has no row. (A count that disagrees with the bounds — rows changed
// behind the store's back — is recounted by the next RemovePrefix or
// Rewrite.)
//
// Tail reads the newest messages and the pinned system ones in one
// statement, from two indexes, without touching the rest of the
// conversation: the newest n non-system messages by a backward seek of
// the (ns, identity, seq) index that stops after n (or at the Seq it is
// given), the system messages from the partial index of the rows with
// system = 1, which holds nothing else — so a window loads as fast at
// 100k messages as at 10.
//
// Append keys (store.WithAppendKey) live in the unit column: the first
// message of a unit appended under a key carries the key, every other row
// has NULL. A partial unique index on (ns, identity, unit) holds the keys
// only; Append inserts a unit's first message with ON CONFLICT DO
// NOTHING, and when the key was there already — stored before, by
// another Store or process, or earlier in the same group commit — it
// inserts none of the unit and counts nothing. The key lives as long as
// its row: RemovePrefix keeps it with a pinned system message and removes
// it with a removed one; Clear, Forget, ForgetScope and Rewrite remove it
// with the rows they delete.
//
// # The recall index
//
// The memstack_recall_* tables (version 4) can hold memories.Recall's
// lexical index beside the messages (package indexkit;
// store.RecallSearcher). It is the file's, off until a Store opens the
// file with WithRecallIndex; from then on every Store writing the file
// keeps it (each reads whether it is on in the transaction it writes in),
// and a Recall with the default index searches it. While it is on, each
// Append writes its messages' unit entries and postings — tokenised
// before the transaction, appended to chunk rows with SQL's || so an
// append writes what it adds — and its conversation's small state, in
// its own transaction; Clear, Forget and ForgetScope delete them in
// theirs, RemovePrefix filters the chunks it reaches and recomputes the
// state, Rewrite indexes the conversation afresh. SearchRecall reads, in
// one snapshot, the states of the scope's conversations, the postings of
// the query's terms (one range of the term-first key each) and the unit
// entries of the conversations they name, and ranks in Go exactly as the
// in-process retrieval.BM25 ranks (indexkit's tests and storetest's
// RecallSearch case check it). Every process on the file searches what
// every process saved; RecallDated lists a scope's units of a day from
// memstack_recall_days. When the index is turned on for a file with
// messages (or a file of an older version is migrated with it on), they
// are indexed in the background (a few thousand messages a transaction,
// each conversation whole, so appends wait briefly), resumably: Close
// stops it and the next Open goes on from the conversations without a
// state. Meanwhile appends index the conversations indexed already and
// new ones, and SearchRecall returns an error wrapping
// store.ErrRecallNotReady. The index adds about the size of the messages
// again (100,000 benchmark-corpus messages: a 52 MiB file), and an append
// writes a row per distinct word of its messages: several times the cost
// of an append without it (BenchmarkSQLiteRecallIndex against
// BenchmarkSQLite), which is why it is off by default.
//
// Version 2 added memstack_stat; version 3 the unit column and the two
// partial indexes; version 4 the recall index. A file of version 1 or 2 is migrated by the first Open
// or New of this build, in one transaction, which a failure rolls back
// whole: from version 1 memstack_stat is created and filled from the
// messages (one pass over the index: about a second per million
// messages); from version 1 or 2 the column is added (no row is
// rewritten) and the two indexes built (one pass over the table, which
// puts into them only the system messages — and no key: the file has
// none yet); the recall index's tables are created; then the version is
// set to 4. Meanwhile other processes wait for the write lock as for any
// write (New waits up to 30 s, Open as long as its ctx allows). A file of
// version 4 opens without DDL. A build of an
// older version refuses the migrated file; stop processes of an older
// build before a newer one opens the file, since one that already has it
// open would go on writing without counting or keys.
//
// Absent versions (see package store, "Cleared means gone, across
// replicas") live in memstack_state too, as rows under names no caller can
// use (storekit.CheckStateName refuses the empty name):
//
//	(ns, identity, '')  -- identity's Clear mark in ns: its absent version
//	('', '#<b>', '')    -- the forgotten version of user bucket b (storekit.ForgetBucket)
//	('', '', '')        -- the file-wide forgotten version of older builds
//
// All have an empty value (the column is NOT NULL) and a version drawn
// from memstack_counter. Clear deletes the identity's messages and state
// rows in its namespace and inserts a fresh mark; Forget first draws a
// fresh forgotten version for the bucket of the identity's tenant and
// user, then deletes every row of the identity, marks included, in every
// namespace. A name's absent version is the identity's mark in the
// namespace, else the greater of its bucket's forgotten version and the
// file-wide one (which builds before buckets moved on every Forget), else
// 0 (a file that never ran Forget). So a Forget of one user moves the
// absent version of the users of its bucket only (one in
// storekit.ForgetBuckets), and their first commits racing with it conflict;
// everyone else's land. GetState is one statement — primary-key lookups,
// the best one wins — so it sees a Clear or Forget all before or all
// after. No namespace is empty (WithNamespace refuses it) and no identity
// key is ” or starts with '#' without two colons (memstack.Identity.Key
// always has two), so a reserved row is never a caller's.
//
// # Forgetting a user
//
// The keys of every conversation of a user (a tenant) share a prefix
// (store.Scope.KeyPrefix), so in each namespace they are one range of the
// (ns, identity, …) keys of every table. Identities reads the memstack_stat
// and memstack_state keys of the range; Export reads the messages and
// state of the range in one read transaction, a snapshot of the file;
// ForgetScope, in one write transaction, draws a fresh forgotten version
// (for the user's bucket, or every bucket for a tenant)
// first (so a commit that read any of the state before conflicts) and then
// deletes the range from memstack_messages, memstack_state (values and
// Clear marks) and memstack_stat in every namespace: no row of the scope
// is left and no other row changes. A large scope makes a long
// transaction, during which other writers wait.
//
// Deleting rows does not erase their bytes: SQLite keeps them in free
// pages of the file and in the WAL until it reuses the space. Where the
// bytes themselves must go, give New a database opened with
// _pragma=secure_delete(1) (SQLite then zeroes deleted content) and run
// PRAGMA wal_checkpoint(TRUNCATE) after ForgetScope — or VACUUM the file.
//
// # Concurrency
//
// The file is in WAL mode, so readers never block the writer and the writer
// never blocks readers; every read is one statement (Export one read
// transaction) and so sees a consistent snapshot — never half a turn.
// Every write transaction takes the write lock with its first statement
// (what BEGIN IMMEDIATE does, whatever BEGIN the driver issues): an Append
// of several messages is one transaction, stored whole or not at all.
// Within one Store writes are serialised by a semaphore (a waiting writer
// honours its ctx), and Appends that wait at the same moment are committed
// together in one transaction (group commit: each Append's messages stay
// contiguous and all-or-nothing, and 32 concurrent conversations cost a
// few commits instead of 32); between processes or Stores on the same
// file, SQLite's lock does it, waiting up to the busy timeout
// (WithBusyTimeout, default 5 s) and then retrying with backoff until the
// call's ctx is done.
//
// # Durability
//
// A commit appends the transaction's pages to the WAL (the -wal file next
// to the database); checkpoints copy them into the database file later
// (SQLite runs one whenever the WAL passes 1000 pages). What a crash can
// take back depends on the synchronous setting — WithSynchronous for Open,
// the DSN of the application's database for New:
//
//   - NORMAL, the default: a commit writes the WAL without syncing it;
//     the WAL is synced at checkpoints. A crash of the process (a panic,
//     kill -9, the OOM killer) loses nothing that was committed: the
//     operating system has the pages. A power loss or an operating-system
//     crash may take back the commits since the last sync — whole
//     transactions, never half a turn, and the file stays consistent — so
//     an Append that returned nil may be gone after a power cut.
//   - FULL: the WAL is synced (fsync) at every commit, so a commit that
//     returned survives a power loss too, given a disk that honours fsync.
//     Every commit waits for the disk to confirm the write (a fraction of
//     a millisecond on a server SSD, milliseconds on consumer, network or
//     spinning disks); group commit shares one sync among the Appends
//     that wait together.
//   - OFF: nothing is ever synced. A process crash still loses nothing,
//     but a power loss or an operating-system crash may corrupt the file.
//
// The database, -wal and -shm files are one database: back them up
// together (or with VACUUM INTO), never the .db file alone while a process
// has it open. WAL needs memory shared between the processes of one host,
// so the file must not be on a network file system.
//
// # Errors
//
// Writes run in process: an error means nothing was committed, and
// sqlitestore never returns store.ErrOutcomeUnknown.
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

	"modernc.org/sqlite"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// DefaultNamespace is the namespace of a Store opened without
// WithNamespace.
const DefaultNamespace = "default"

// ErrClosed is wrapped by the error of every call on a closed Store.
var ErrClosed = errors.New("sqlitestore: store is closed")

// Store is a store.Store in a SQLite file. It is safe for concurrent use by
// multiple goroutines; several Stores and processes may share one file.
type Store struct {
	db     *sql.DB
	ownsDB bool   // Open opened db and Close closes it; New's db is the caller's
	path   string // the file, for errors
	ns     string
	cfg    config
	writer chan struct{} // a one-slot semaphore serialising this Store's writes
	closed atomic.Bool

	// recallReady: the file's recall index is complete (see recall.go);
	// stopBackfill stops a background backfill and waits for it.
	recallReady  atomic.Bool
	indexOn      atomic.Bool // the file kept the recall index at this Store's last append
	stopBackfill func()
	backfillErr  atomic.Pointer[error] // why the background backfill stopped

	qmu   sync.Mutex
	queue []*appendReq // Appends waiting to be committed (see append.go)

	stmtLock, stmtInsert, stmtBump, stmtLast, stmtTail, stmtAll, stmtRange, stmtStat, stmtGetState *sql.Stmt
	stmtUpUnits, stmtUpTerms, stmtUpDays                                                           *sql.Stmt // the recall index's upserts
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Rewriter = (*Store)(nil)
	_ store.Users    = (*Store)(nil)
)

// Open opens (creating if needed) the SQLite database file at path and
// returns a Store over it. The file is put in WAL mode and the schema is
// created, or migrated from an older version, if needed (see "Schema").
// ctx bounds the opening; it is not kept.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg, err := configure("Open", opts)
	if err != nil {
		return nil, err
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
	dsn := fmt.Sprintf("file:%s?_busy_timeout=%d&_journal_mode=WAL&_synchronous=%s&_pragma=mmap_size(%d)",
		escapeURIPath(abs), cfg.busyTimeout.Milliseconds(), cfg.synchronous, cfg.mmapSize)
	if cfg.readOnly {
		dsn = readOnlyDSN(abs, cfg)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(cfg.maxConns)
	db.SetMaxIdleConns(cfg.maxConns)
	db.SetConnMaxIdleTime(0)
	s := &Store{db: db, ownsDB: true, path: path, ns: cfg.ns, cfg: cfg, writer: make(chan struct{}, 1)}
	if err := s.init(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlitestore: opening %s: %w", path, err)
	}
	s.startBackfill()
	return s, nil
}

// newTimeout bounds New, which has no ctx: how long it may wait for the
// write lock (another process creating or migrating the schema) and run.
const newTimeout = 30 * time.Second

// New returns a Store over the application's own database db, which must
// have been opened with modernc.org/sqlite's driver (sql.Open("sqlite", …)
// or sql.OpenDB(sqlite.NewConnector(…))). It creates or migrates the schema
// as Open does (see "Schema"), waiting at most 30 s for the write lock,
// and leaves every other table of the database alone. Close closes the
// Store's prepared statements, never db: the application keeps using it.
//
// New sets no pragma on the application's connections; it checks what it
// needs and refuses, with an error wrapping store.ErrInvalidArgument that
// names the fix, a database that
//
//   - is not in WAL mode (journal_mode is kept in the file: open it once
//     with _pragma=journal_mode(WAL) in the DSN, or run PRAGMA
//     journal_mode=WAL); an in-memory database cannot be;
//   - has no busy timeout (busy_timeout is per connection: put
//     _pragma=busy_timeout(5000) in the DSN, so every connection of the
//     pool has it);
//   - is query_only.
//
// Everything else is the application's: synchronous sets the durability
// (see "Durability"; NORMAL or FULL), foreign_keys and the transaction
// lock mode (_txlock) do not matter — the tables have no foreign keys, and
// every write transaction of the Store takes the write lock with its first
// statement, whatever BEGIN the driver issues. The Store shares db's pool:
// a write holds one connection for its transaction, a read one for its
// statement, so a pool of one connection works but serialises everything.
// WithSynchronous, WithBusyTimeout, WithMaxOpenConns and WithMmapSize
// configure a database Open opens; New refuses them.
func New(db *sql.DB, opts ...Option) (*Store, error) {
	cfg, err := configure("New", opts)
	if err != nil {
		return nil, err
	}
	if len(cfg.openOnly) > 0 {
		return nil, fmt.Errorf("%w: sqlitestore: New: %s configure a database Open opens; set them on your *sql.DB (in its DSN) instead",
			store.ErrInvalidArgument, strings.Join(cfg.openOnly, ", "))
	}
	if db == nil {
		return nil, fmt.Errorf("%w: sqlitestore: New: db is nil", store.ErrInvalidArgument)
	}
	if _, ok := db.Driver().(*sqlite.Driver); !ok {
		return nil, fmt.Errorf("%w: sqlitestore: New: the *sql.DB uses driver %T, not modernc.org/sqlite's (sql.Open(\"sqlite\", …))",
			store.ErrInvalidArgument, db.Driver())
	}
	ctx, cancel := context.WithTimeout(context.Background(), newTimeout)
	defer cancel()
	path, err := checkDB(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: New(%s): %w", path, err)
	}
	s := &Store{db: db, path: path, ns: cfg.ns, cfg: cfg, writer: make(chan struct{}, 1)}
	if err := s.init(ctx); err != nil {
		_ = s.closeStmts()
		return nil, fmt.Errorf("sqlitestore: New(%s): %w", path, err)
	}
	s.startBackfill()
	return s, nil
}

// checkDB checks, on one connection of db, what New needs of it, and
// returns the database's file name (or a description of it).
func checkDB(ctx context.Context, db *sql.DB) (string, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return "database", fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close()
	path := "database"
	var file sql.NullString
	if err := conn.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file); err != nil {
		return path, fmt.Errorf("reading the database's file name: %w", err)
	}
	if file.String != "" {
		path = file.String
	} else {
		path = "in-memory database"
	}
	var mode string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return path, fmt.Errorf("reading the journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return path, fmt.Errorf("%w: the database is in journal mode %q, and the store needs WAL: open it with _pragma=journal_mode(WAL) in the DSN, or run PRAGMA journal_mode=WAL once (it is kept in the file; an in-memory database cannot be in WAL mode)",
			store.ErrInvalidArgument, mode)
	}
	var timeout int64
	if err := conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&timeout); err != nil {
		return path, fmt.Errorf("reading the busy timeout: %w", err)
	}
	if timeout <= 0 {
		return path, fmt.Errorf("%w: the database's connections have no busy timeout, so a connection fails as soon as another holds the write lock: put _pragma=busy_timeout(5000) in the DSN, so that every connection of the pool has one",
			store.ErrInvalidArgument)
	}
	var queryOnly int
	if err := conn.QueryRowContext(ctx, `PRAGMA query_only`).Scan(&queryOnly); err != nil {
		return path, fmt.Errorf("reading query_only: %w", err)
	}
	if queryOnly != 0 {
		return path, fmt.Errorf("%w: the database is query_only, and the store writes", store.ErrInvalidArgument)
	}
	return path, nil
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

// Close closes the Store. A Store from Open closes its database; one from
// New closes only its prepared statements and leaves the application's
// database open. Calls after Close return an error wrapping ErrClosed;
// Close is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.stopBackfill != nil {
		s.stopBackfill()
	}
	if s.ownsDB {
		if err := s.db.Close(); err != nil {
			return fmt.Errorf("sqlitestore: closing %s: %w", s.path, err)
		}
		return nil
	}
	if err := s.closeStmts(); err != nil {
		return fmt.Errorf("sqlitestore: closing the statements of %s: %w", s.path, err)
	}
	return nil
}

// closeStmts closes the prepared statements.
func (s *Store) closeStmts() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.stmtLock, s.stmtInsert, s.stmtBump, s.stmtLast, s.stmtTail, s.stmtAll, s.stmtRange, s.stmtStat, s.stmtGetState, s.stmtUpUnits, s.stmtUpTerms, s.stmtUpDays} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// Namespace returns the Store's namespace.
func (s *Store) Namespace() string { return s.ns }

// begin checks that the Store is open and ctx is not done.
func (s *Store) begin(ctx context.Context, op string, id memstack.Identity) error {
	return s.check(ctx, op+" of "+id.Key())
}

// check is begin for a call described by what ("Append of t:u:c",
// "ForgetScope of user \"u\" of tenant \"t\"").
func (s *Store) check(ctx context.Context, what string) error {
	if ctx == nil {
		return fmt.Errorf("%w: sqlitestore: %s: nil context", store.ErrInvalidArgument, what)
	}
	if s.closed.Load() {
		return fmt.Errorf("sqlitestore: %s: %w", what, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", what, err)
	}
	return nil
}

// fail wraps err from op, adding ctx's error when the call was cut short
// by it (SQLite reports an interrupt, not the context's error) and
// ErrClosed when the Store was closed under it.
func (s *Store) fail(ctx context.Context, op string, id memstack.Identity, err error) error {
	return s.failed(ctx, op+" of "+id.Key(), err)
}

// failed is fail for a call described by what (see check).
func (s *Store) failed(ctx context.Context, what string, err error) error {
	switch {
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return fmt.Errorf("sqlitestore: %s: %w (%w)", what, ctx.Err(), err)
	case s.closed.Load() && !errors.Is(err, ErrClosed):
		return fmt.Errorf("sqlitestore: %s: %w (%w)", what, ErrClosed, err)
	}
	return fmt.Errorf("sqlitestore: %s: %w", what, err)
}
