// Package pgstore is the PostgreSQL backend of memstack's storage port: a
// store.Store kept in the tables of a PostgreSQL database, through a pgx v5
// connection pool, for memory shared by several processes that must survive
// restarts.
//
// # Starting a server
//
// Any PostgreSQL 12 or newer works. For a local one on Debian or Ubuntu:
//
//	apt-get install postgresql
//	pg_ctlcluster 15 main start
//	su postgres -c "psql -c \"ALTER USER postgres PASSWORD 'secret'\""
//
// then Open(ctx, "postgres://postgres:secret@127.0.0.1:5432/postgres"). Or
// with Docker: docker run -e POSTGRES_PASSWORD=secret -p 127.0.0.1:5432:5432 postgres:16.
// The tests start their own throwaway server (internal/testsvc).
//
// # Schema
//
// New creates, if they do not exist, one sequence and three tables named
// after the table prefix (WithTablePrefix, default "memstack_"):
//
//	memstack_seq            one counter for every Seq, state version and absent version
//	memstack_messages       (id_hash, ns, seq) primary key, id_key, system, body
//	memstack_conversations  (id_hash, ns) primary key, id_key, count, first_seq, last_seq
//	memstack_state          (id_hash, ns, name) primary key, id_key, version, value;
//	                        also the reserved rows of absent versions (see State)
//
// id_key is memstack.Identity.Key; id_hash is its SHA-256, which is what the
// indexes hold, so identities of any length (a B-tree entry is limited to
// about 2.7 kB) are served by the same index. Every query also compares
// id_key itself. ns is the namespace (WithNamespace, default "default"), so
// several memory layers can share the tables. The DDL runs in one
// transaction under a transaction-scoped advisory lock, so stores that
// create the schema at the same moment, from several pools or processes, do
// not fail on each other. The tables belong to the store: rows changed
// behind its back (a conversation's messages without its conversations
// row, a reserved state row) make Stat or the state's versions wrong.
//
// # Messages
//
// A message is stored as store.EncodeMessageAt's JSON in a bytea column,
// not in jsonb or text: PostgreSQL's text types cannot hold a NUL character
// and jsonb rejects \u0000, while the contract requires any valid string to
// round-trip byte for byte. The JSON carries the message's time (its "at"
// field: store.AppendTime of the Append, which a caller sets with
// memstack.WithTime), with its UTC offset, which a timestamptz column
// would not keep; so times need no column and the tables are unchanged.
// Rows written before memstack recorded times have no "at" and read back
// with a zero store.Record.Time. The system column pins system messages:
// RemovePrefix is DELETE … WHERE seq <= through AND NOT system.
//
// Every write of an identity's rows (Append, RemovePrefix, Clear, Forget,
// PutState) is one batch of statements, sent in one round trip and run by
// PostgreSQL as one implicit transaction, that starts by taking a
// transaction-scoped advisory lock for the identity (pg_advisory_xact_lock
// on a 64-bit hash of the table prefix and the identity key). Append then
// inserts one row per message, each drawing its Seq with nextval, and
// updates the conversation's row in memstack_conversations; a turn is
// therefore stored whole or not at all. The lock makes appends to one
// identity take their Seqs one after the other: a second appender draws its
// values only after the first has committed, so Seqs increase in append
// (commit) order even with many appenders in many processes, and a reader
// never sees a higher Seq before a lower one. Writes to different
// identities do not wait for each other (two identities share a lock only
// on a 64-bit hash collision, which costs waiting, never correctness).
// Because every Seq and version comes from one sequence, none is reused
// after RemovePrefix, Clear or Forget. The sequence must keep CACHE 1 (the
// default): per-session caching would hand out Seqs out of order.
//
// Single-row inserts, rather than one multi-row INSERT … SELECT FROM unnest,
// are deliberate: PostgreSQL keeps one generic plan for each of them, while
// it re-plans an INSERT over array parameters on every call, which costs
// more than the extra statements.
//
// Stat reads the conversation's row (count, first and last Seq), so it
// costs the same for ten messages or ten thousand; memories call it on
// every load. Last(n) is an index scan of n rows; All reads every row.
//
// # State
//
// A state value is a row of memstack_state. Absent versions (package
// store, "Cleared means gone, across replicas") live in the same table, in
// reserved rows no caller can reach, so the schema is the same as before
// they existed:
//
//   - a Clear mark is the row of the identity and namespace named "" (which
//     store.CheckStateName rejects, so GetState and PutState never touch
//     it), with an empty value; its version is the identity's absent
//     version in that namespace. Clear sets it to a fresh version, also for
//     an identity with no rows; Forget deletes it with the identity's other
//     rows.
//   - the forgotten version is the one row with an empty id_hash (no
//     SHA-256 is empty), ns "" (WithNamespace rejects it) and name "":
//     every Forget moves it to a fresh version, and none deletes it, as
//     Forget deletes by the identity's hash. One row serves every namespace
//     under the table prefix: all that Forget reaches.
//
// The absent version of a name is the identity's mark in the namespace,
// else the forgotten version, else 0 (no Clear, no Forget yet). Marks and
// the forgotten version are drawn from memstack_seq like every version, so
// none is ever reused.
//
// GetState is one statement: the value, its version and the absent
// version come from one snapshot. PutState is one statement, after the
// identity's advisory lock, in one round trip: the current version is the
// value's, else the absent version; only when it is expect is the value
// upserted with the next value of the sequence (or, for a nil value,
// deleted, returning the absent version). Clear is, in one transaction
// under the same lock, the deletes of the identity's messages,
// conversations row and state values in the namespace and the upsert of
// its mark; Forget is the upsert of the forgotten row, then the deletes of
// every row of the identity under the table prefix, marks included.
// Because PutState, Clear and Forget of one identity hold its lock in
// turn, a PutState racing a Clear or Forget, from any pool or process,
// either commits before it, and is removed by it, or runs after it, and
// then conflicts unless it expected the new absent version (see PutState
// for why a row lock would not do).
//
// This relies on read committed, PostgreSQL's default isolation: each
// statement sees what was committed when it started, so the statements
// after the lock see all that the lock's previous holder committed. The
// sessions of the pool must keep default_transaction_isolation at read
// committed; with repeatable read, a batch's snapshot would date from
// before its lock was granted.
//
// # Failures
//
// Every method honours ctx (a done context changes nothing), and wraps its
// errors with the operation and the identity key, never message content. A
// stored value that does not decode is an error wrapping store.ErrCorrupt
// naming the identity and Seq; other identities stay readable. When the
// server goes away calls fail; pgxpool replaces broken connections, so the
// same Store works again once the server is back. Close on a store from
// Open closes its pool; calls after Close return ErrClosed.
//
// Durability is the server's: the store never changes synchronous_commit,
// so an Append that returned nil is committed as durably as the server is
// configured to commit.
//
// # Performance
//
// A store from Open uses pgxpool's default pool size (the larger of 4 and
// the number of CPUs) unless the DSN sets pool_max_conns. An Append of a
// turn is one round trip; so are Last, All, Stat, GetState, PutState,
// Clear and Forget. On a 2-core
// machine with client and server on loopback, 32 concurrent conversations
// saving a turn and loading Last(10) each time reach several thousand saves
// per second (see the README's benchmark table and BenchmarkPostgres).
package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// ErrClosed is wrapped by the error of every call on a closed Store.
var ErrClosed = errors.New("pgstore: store is closed")

// DefaultConnectTimeout bounds each connection attempt of a pool made by
// Open when the DSN sets no connect_timeout, so a server that drops packets
// cannot hang a call whose context has no deadline.
const DefaultConnectTimeout = 10 * time.Second

// Store is a store.Store in PostgreSQL. It is safe for concurrent use by
// many goroutines and many processes. See the package documentation.
type Store struct {
	pool    *pgxpool.Pool
	ownPool bool
	addr    string
	prefix  string
	ns      string
	closed  atomic.Bool
	q       queries
}

var _ store.Store = (*Store)(nil)

// queries holds the SQL of every statement, built once from the prefix.
type queries struct {
	schema                                  []string
	insertMessage, updateConv               string
	last, all, stat, removePrefix           string
	clearMessages, clearState, clearConv    string
	setMark, setForgotten                   string
	forgetMessages, forgetState, forgetConv string
	getState, putState, deleteState         string
}

// The reserved rows of the state table (see the package documentation).
// markName is the name of a Clear mark, as an SQL literal: the empty name,
// which store.CheckStateName rejects, so no caller reads or writes it.
// forgottenRow selects the one row holding the store-wide forgotten
// version: its empty id_hash is no SHA-256 and its empty ns no namespace
// (WithNamespace rejects ""), so no identity's row is it and no identity's
// Forget deletes it.
const (
	markName     = "''"
	forgottenRow = "id_hash = ''::bytea AND ns = '' AND name = ''"
)

func buildQueries(prefix string) queries {
	seq := prefix + "seq"
	m := pgx.Identifier{prefix + "messages"}.Sanitize()
	c := pgx.Identifier{prefix + "conversations"}.Sanitize()
	st := pgx.Identifier{prefix + "state"}.Sanitize()
	// The prefix matches [a-z_][a-z0-9_]*, so it needs no escaping inside
	// the regclass literal.
	next := "nextval('" + pgx.Identifier{seq}.Sanitize() + "')"
	const idm = "id_hash = $1 AND ns = $2 AND id_key = $3"
	const ida = "id_hash = $1 AND id_key = $2" // every namespace
	// absent is the absent version of the identity $1/$3 in namespace $2:
	// its Clear mark, else the forgotten version, else 0. Its sub-selects
	// run in the snapshot of the statement they are part of, so they agree
	// with every other read of that statement.
	absent := "coalesce((SELECT version FROM " + st + " WHERE " + idm + " AND name = " + markName + "), " +
		"(SELECT version FROM " + st + " WHERE " + forgottenRow + "), 0)"
	return queries{
		schema: []string{
			"CREATE SEQUENCE IF NOT EXISTS " + pgx.Identifier{seq}.Sanitize() + " AS bigint",
			"CREATE TABLE IF NOT EXISTS " + m + ` (
	id_hash bytea   NOT NULL,
	ns      text    NOT NULL,
	seq     bigint  NOT NULL,
	id_key  text    NOT NULL,
	system  boolean NOT NULL,
	body    bytea   NOT NULL,
	PRIMARY KEY (id_hash, ns, seq))`,
			"CREATE TABLE IF NOT EXISTS " + c + ` (
	id_hash   bytea  NOT NULL,
	ns        text   NOT NULL,
	id_key    text   NOT NULL,
	count     bigint NOT NULL,
	first_seq bigint NOT NULL,
	last_seq  bigint NOT NULL,
	PRIMARY KEY (id_hash, ns))`,
			"CREATE TABLE IF NOT EXISTS " + st + ` (
	id_hash bytea  NOT NULL,
	ns      text   NOT NULL,
	name    text   NOT NULL,
	id_key  text   NOT NULL,
	version bigint NOT NULL,
	value   bytea  NOT NULL,
	PRIMARY KEY (id_hash, ns, name))`,
		},
		// One single-row INSERT per message, all in one implicit
		// transaction: nextval runs in statement order, so the Seqs follow
		// append order. Each statement is simple enough for PostgreSQL to
		// keep one generic plan for it.
		insertMessage: "INSERT INTO " + m + " (id_hash, ns, seq, id_key, system, body) VALUES ($1, $2, " + next + ", $3, $4, $5)",
		// After a turn's inserts: currval is the Seq this session drew
		// last, which is the turn's last message. first_seq only changes
		// when the conversation was empty; min(seq) is then the turn's
		// first message (an index lookup).
		updateConv: "INSERT INTO " + c + " AS c (id_hash, ns, id_key, count, first_seq, last_seq)" +
			" VALUES ($1, $2, $3, $4, (SELECT min(seq) FROM " + m + " WHERE " + idm + "), currval('" + pgx.Identifier{seq}.Sanitize() + `'))
ON CONFLICT (id_hash, ns) DO UPDATE SET
	count = c.count + EXCLUDED.count,
	first_seq = CASE WHEN c.count = 0 THEN EXCLUDED.first_seq ELSE c.first_seq END,
	last_seq = EXCLUDED.last_seq`,
		last: "SELECT seq, body FROM " + m + " WHERE " + idm + " ORDER BY seq DESC LIMIT $4",
		all:  "SELECT seq, body FROM " + m + " WHERE " + idm + " ORDER BY seq",
		stat: "SELECT count, first_seq, last_seq FROM " + c + " WHERE " + idm,
		// The sub-select sees the statement's snapshot, from before the
		// DELETE: the rows it keeps are those with seq > $4 or system.
		removePrefix: `WITH d AS (
	DELETE FROM ` + m + " WHERE " + idm + ` AND seq <= $4 AND NOT system RETURNING 1),
u AS (
	UPDATE ` + c + ` SET
		count = count - (SELECT count(*) FROM d),
		first_seq = coalesce((SELECT min(seq) FROM ` + m + " WHERE " + idm + ` AND (seq > $4 OR system)), 0),
		last_seq = coalesce((SELECT max(seq) FROM ` + m + " WHERE " + idm + ` AND (seq > $4 OR system)), 0)
	WHERE ` + idm + ` AND EXISTS (SELECT FROM d))
SELECT count(*) FROM d`,
		clearMessages: "DELETE FROM " + m + " WHERE " + idm,
		clearConv:     "DELETE FROM " + c + " WHERE " + idm,
		// Every state value of the identity in the namespace; its Clear
		// mark is then moved by setMark.
		clearState: "DELETE FROM " + st + " WHERE " + idm + " AND name <> " + markName,
		setMark: "INSERT INTO " + st + " AS s (id_hash, ns, name, id_key, version, value) VALUES ($1, $2, " + markName + ", $3, " + next + ", ''::bytea)" +
			" ON CONFLICT (id_hash, ns, name) DO UPDATE SET version = EXCLUDED.version WHERE s.id_key = EXCLUDED.id_key",
		// The fresh version is drawn by the UPDATE, after it holds the
		// row's lock, so concurrent Forgets store increasing versions.
		setForgotten: "INSERT INTO " + st + " AS s (id_hash, ns, name, id_key, version, value) VALUES (''::bytea, '', '', '', " + next + ", ''::bytea)" +
			" ON CONFLICT (id_hash, ns, name) DO UPDATE SET version = " + next,
		forgetMessages: "DELETE FROM " + m + " WHERE " + ida,
		forgetConv:     "DELETE FROM " + c + " WHERE " + ida,
		// The identity's state values and Clear marks in every namespace;
		// never the forgotten row, whose id_hash is empty.
		forgetState: "DELETE FROM " + st + " WHERE " + ida,
		// The value (NULL when absent), its version (NULL when absent) and
		// the absent version, from one snapshot.
		getState: "SELECT s.value, s.version, " + absent + " FROM (VALUES (0)) AS one (x) LEFT JOIN " + st +
			" s ON s.id_hash = $1 AND s.ns = $2 AND s.id_key = $3 AND s.name = $4",
		// The compare-and-set of a value, run under the identity's lock
		// (see PutState): cur is the current version, the value's or the
		// absent one; the value is written, with a fresh version, only if
		// cur is $6. It returns the new version (NULL on a conflict) and
		// cur.
		putState: `WITH cur AS (
	SELECT coalesce((SELECT version FROM ` + st + " WHERE " + idm + " AND name = $4), " + absent + `) AS version),
w AS (
	INSERT INTO ` + st + ` AS s (id_hash, ns, name, id_key, version, value)
	SELECT $1::bytea, $2::text, $4::text, $3::text, ` + next + `, $5::bytea FROM cur WHERE cur.version = $6::bigint
	ON CONFLICT (id_hash, ns, name) DO UPDATE SET value = EXCLUDED.value, version = EXCLUDED.version
		WHERE s.id_key = EXCLUDED.id_key
	RETURNING s.version)
SELECT (SELECT version FROM w), version FROM cur`,
		// The compare-and-set of a delete, under the identity's lock: it
		// returns the current version (the value's or the absent one) and
		// the absent version, which is the name's after the delete. The
		// DELETE matches only when the value exists at version $5.
		deleteState: `WITH cur AS (
	SELECT (SELECT version FROM ` + st + " WHERE " + idm + " AND name = $4) AS stored, " + absent + ` AS absent),
d AS (
	DELETE FROM ` + st + " WHERE " + idm + ` AND name = $4 AND version = $5::bigint RETURNING 1)
SELECT coalesce(stored, absent), absent FROM cur`,
	}
}

// New returns a Store over pool, creating the schema if needed (see the
// package documentation). The caller keeps ownership of pool: Close does
// not close it. New fails, with an error naming the server's address, when
// the server cannot be reached before ctx is done.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore.New: pool is nil", store.ErrInvalidArgument)
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: pgstore.New: nil context", store.ErrInvalidArgument)
	}
	c, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	return newStore(ctx, pool, false, c)
}

// Open connects to the server named by dsn (a PostgreSQL URL or key=value
// string, as pgxpool.ParseConfig accepts, pool settings such as
// pool_max_conns included) with a pool of its own, creates the schema if
// needed and returns the Store; Close closes the pool. A DSN without
// connect_timeout gets DefaultConnectTimeout. An unreachable server is an
// error naming its host:port, returned no later than ctx is done.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: pgstore.Open: nil context", store.ErrInvalidArgument)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse errors redact the password.
		return nil, fmt.Errorf("pgstore: parsing the DSN: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	c, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: creating a pool for %s: %w", poolAddr(cfg), err)
	}
	s, err := newStore(ctx, pool, true, c)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func newStore(ctx context.Context, pool *pgxpool.Pool, own bool, c config) (*Store, error) {
	s := &Store{
		pool:    pool,
		ownPool: own,
		addr:    poolAddr(pool.Config()),
		prefix:  c.prefix,
		ns:      c.ns,
		q:       buildQueries(c.prefix),
	}
	if err := s.createSchema(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// poolAddr names the server of cfg as host:port (or the socket directory).
func poolAddr(cfg *pgxpool.Config) string {
	cc := cfg.ConnConfig
	if len(cc.Host) > 0 && cc.Host[0] == '/' {
		return fmt.Sprintf("unix socket %s/.s.PGSQL.%d", cc.Host, cc.Port)
	}
	return net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
}

// createSchema creates the sequence and tables in one transaction, under an
// advisory lock so that concurrent creators do not collide on the catalog.
func (s *Store) createSchema(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: pgstore: nil context", store.ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: connecting to PostgreSQL at %s: %w", s.addr, err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: connecting to PostgreSQL at %s: %w", s.addr, err)
	}
	defer conn.Release()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("schema", s.prefix)); err != nil {
			return err
		}
		for _, ddl := range s.q.schema {
			if _, err := tx.Exec(ctx, ddl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: creating the schema (table prefix %q) on %s: %w", s.prefix, s.addr, err)
	}
	return nil
}

// lockKey returns the 64-bit advisory lock key of parts.
func lockKey(parts ...string) int64 {
	h := sha256.New()
	h.Write([]byte("memstack/pgstore"))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)))
}

// ident is an identity as the queries take it.
type ident struct {
	key  string
	hash []byte
}

func identOf(id memstack.Identity) ident {
	k := id.Key()
	h := sha256.Sum256([]byte(k))
	return ident{key: k, hash: h[:]}
}

// Close marks the store closed and, if Open made its pool, closes the pool.
// Calls after Close return ErrClosed. Close is safe to call more than once.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// check returns the error a call must return before touching the server.
func (s *Store) check(ctx context.Context, op string, id memstack.Identity) error {
	if ctx == nil {
		return fmt.Errorf("%w: pgstore: %s of identity %q: nil context", store.ErrInvalidArgument, op, id.Key())
	}
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s of identity %q: %w", op, id.Key(), ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %s of identity %q: %w", op, id.Key(), err)
	}
	return nil
}

func (s *Store) wrap(op string, id ident, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s of identity %q: %w (%w)", op, id.key, ErrClosed, err)
	}
	return fmt.Errorf("pgstore: %s of identity %q on %s: %w", op, id.key, s.addr, err)
}

// Append implements store.Store: one round trip, one implicit transaction
// (see the package documentation). Every message is dated
// store.AppendTime(ctx), taken once, by this process.
func (s *Store) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	if err := s.check(ctx, "Append", id); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	at := store.AppendTime(ctx)
	if err := store.CheckTime(at); err != nil {
		return fmt.Errorf("pgstore: Append of identity %q: %w", id.Key(), err)
	}
	system := make([]bool, len(msgs))
	bodies := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := store.EncodeMessageAt(m, at)
		if err != nil {
			return fmt.Errorf("pgstore: Append of identity %q: message %d of %d: %w", id.Key(), i+1, len(msgs), err)
		}
		bodies[i] = b
		system[i] = m.GetType() == llms.ChatMessageTypeSystem
	}
	k := identOf(id)
	b := &pgx.Batch{}
	s.lockIdentity(b, k)
	for i := range msgs {
		b.Queue(s.q.insertMessage, k.hash, s.ns, k.key, system[i], bodies[i])
	}
	b.Queue(s.q.updateConv, k.hash, s.ns, k.key, len(msgs))
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return s.wrap("Append", k, err)
	}
	return nil
}

// Last implements store.Store.
func (s *Store) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	if err := s.check(ctx, "Last", id); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: pgstore: Last(n=%d) of identity %q: n must be at least 1", store.ErrInvalidArgument, n, id.Key())
	}
	k := identOf(id)
	rs, err := s.records(ctx, id, "Last", s.q.last, k.hash, s.ns, k.key, n)
	if err != nil {
		return nil, err
	}
	slices.Reverse(rs)
	return rs, nil
}

// All implements store.Store.
func (s *Store) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	if err := s.check(ctx, "All", id); err != nil {
		return nil, err
	}
	k := identOf(id)
	return s.records(ctx, id, "All", s.q.all, k.hash, s.ns, k.key)
}

// records runs a query returning (seq, body) rows and decodes them.
func (s *Store) records(ctx context.Context, id memstack.Identity, op, sql string, args ...any) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.wrap(op, identOf(id), err)
	}
	defer rows.Close()
	out := []store.Record{}
	var (
		seq  int64
		body []byte
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &body); err != nil {
			return nil, s.wrap(op, identOf(id), err)
		}
		r, err := store.DecodeRecord(id, seq, body)
		if err != nil {
			return nil, fmt.Errorf("pgstore: %s: %w", op, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(op, identOf(id), err)
	}
	return out, nil
}

// Stat implements store.Store.
func (s *Store) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	if err := s.check(ctx, "Stat", id); err != nil {
		return store.Stat{}, err
	}
	k := identOf(id)
	var (
		st    store.Stat
		count int64
	)
	err := s.pool.QueryRow(ctx, s.q.stat, k.hash, s.ns, k.key).Scan(&count, &st.FirstSeq, &st.LastSeq)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && count == 0 {
		return store.Stat{}, nil
	}
	if err != nil {
		return store.Stat{}, s.wrap("Stat", k, err)
	}
	st.Count = int(count)
	return st, nil
}

// RemovePrefix implements store.Store.
func (s *Store) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	if err := s.check(ctx, "RemovePrefix", id); err != nil {
		return 0, err
	}
	k := identOf(id)
	b := &pgx.Batch{}
	s.lockIdentity(b, k)
	var removed int64
	b.Queue(s.q.removePrefix, k.hash, s.ns, k.key, through).QueryRow(func(r pgx.Row) error { return r.Scan(&removed) })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, s.wrap("RemovePrefix", k, err)
	}
	return int(removed), nil
}

// lockIdentity queues, as the first statement of b, the transaction-scoped
// advisory lock of identity k, which every write of k's rows takes (see
// the package documentation).
func (s *Store) lockIdentity(b *pgx.Batch, k ident) {
	b.Queue("SELECT pg_advisory_xact_lock($1)", lockKey("identity", s.prefix, k.key))
}

// Clear implements store.Store: the messages and state of id in this
// store's namespace are removed and its Clear mark moved to a fresh
// version, in one transaction under the identity's lock.
func (s *Store) Clear(ctx context.Context, id memstack.Identity) error {
	if err := s.check(ctx, "Clear", id); err != nil {
		return err
	}
	k := identOf(id)
	b := &pgx.Batch{}
	s.lockIdentity(b, k)
	b.Queue(s.q.clearMessages, k.hash, s.ns, k.key)
	b.Queue(s.q.clearConv, k.hash, s.ns, k.key)
	b.Queue(s.q.clearState, k.hash, s.ns, k.key)
	// Also for an identity with no rows: a commit may have read its
	// absent version before anything was stored.
	b.Queue(s.q.setMark, k.hash, s.ns, k.key)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return s.wrap("Clear", k, err)
	}
	return nil
}

// Forget implements store.Store: in one transaction under the identity's
// lock, a fresh forgotten version is stored, then the messages, state and
// Clear marks of id in every namespace under this store's table prefix
// are removed.
func (s *Store) Forget(ctx context.Context, id memstack.Identity) error {
	if err := s.check(ctx, "Forget", id); err != nil {
		return err
	}
	k := identOf(id)
	b := &pgx.Batch{}
	s.lockIdentity(b, k)
	b.Queue(s.q.setForgotten)
	b.Queue(s.q.forgetMessages, k.hash, k.key)
	b.Queue(s.q.forgetConv, k.hash, k.key)
	b.Queue(s.q.forgetState, k.hash, k.key)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return s.wrap("Forget", k, err)
	}
	return nil
}

// GetState implements store.Store: one statement, so the value, its
// version and the absent version come from one snapshot, all from before
// or all from after any Clear or Forget.
func (s *Store) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	if err := s.check(ctx, "GetState", id); err != nil {
		return store.State{}, err
	}
	if err := store.CheckStateName(name); err != nil {
		return store.State{}, fmt.Errorf("pgstore: GetState of identity %q: %w", id.Key(), err)
	}
	k := identOf(id)
	var (
		value   []byte
		version *int64
		absent  int64
	)
	err := s.pool.QueryRow(ctx, s.q.getState, k.hash, s.ns, k.key, name).Scan(&value, &version, &absent)
	if err != nil {
		return store.State{}, s.wrap(fmt.Sprintf("GetState(%q)", name), k, err)
	}
	if version == nil {
		return store.State{Version: absent}, nil
	}
	if value == nil {
		value = []byte{} // a stored empty value is a value
	}
	return store.State{Value: value, Version: *version}, nil
}

// PutState implements store.Store: a compare-and-set in one statement,
// under the identity's advisory lock, in one round trip.
//
// Why the lock: at read committed, a statement sees what was committed
// when it started, and it waits only for rows it writes. A plain UPDATE of
// a value that exists would be safe without more (it waits for a
// concurrent Clear's DELETE of the row, then finds nothing), but a first
// commit compares the absent version and inserts a row Clear never saw:
// run while a Clear has moved the mark but not yet committed, it reads the
// old mark, matches, and inserts a value that outlives the Clear (so does
// this statement's upsert when the row it found is deleted under it).
// Locking the mark row cannot help: there is none before the first Clear.
// So PutState takes the same per-identity transaction-scoped lock as
// Clear, Forget, Append and RemovePrefix (pg_advisory_xact_lock, the first
// statement of the batch): PutState, Clear and Forget of one identity run
// one after the other, and the compare-and-set statement, which starts
// after the lock is granted, sees every commit of the lock's previous
// holders (PostgreSQL makes a transaction visible before it releases its
// locks). A PutState before a Clear is then removed by it; one after it
// reads the new mark and conflicts unless it expected that mark.
//
// The forgotten version is not covered by the lock: a Forget of another
// identity may move it while PutState runs. PutState then reads it as it
// was, and is ordered before that Forget, which removes nothing of this
// identity; the next commit that expects the old version conflicts, as the
// package store documents.
func (s *Store) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	if err := s.check(ctx, "PutState", id); err != nil {
		return 0, err
	}
	if err := store.CheckStateName(name); err != nil {
		return 0, fmt.Errorf("pgstore: PutState of identity %q: %w", id.Key(), err)
	}
	k := identOf(id)
	b := &pgx.Batch{}
	s.lockIdentity(b, k)
	var (
		written *int64 // the new version; nil when nothing was written
		current int64  // the version before: the value's or the absent one
		absent  int64  // after a delete: the absent version
	)
	if value == nil {
		b.Queue(s.q.deleteState, k.hash, s.ns, k.key, name, expect).QueryRow(func(r pgx.Row) error {
			return r.Scan(&current, &absent)
		})
	} else {
		b.Queue(s.q.putState, k.hash, s.ns, k.key, name, value, expect).QueryRow(func(r pgx.Row) error {
			return r.Scan(&written, &current)
		})
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, s.wrap(fmt.Sprintf("PutState(%q)", name), k, err)
	}
	if current != expect || value != nil && written == nil {
		return 0, s.conflict(k, name, current, expect)
	}
	if value == nil {
		return absent, nil
	}
	return *written, nil
}

func (s *Store) conflict(k ident, name string, current, expect int64) error {
	return fmt.Errorf("%w: pgstore: state %q of identity %q is at version %d, not %d", store.ErrConflict, name, k.key, current, expect)
}
