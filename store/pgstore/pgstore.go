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
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
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

var (
	_ store.Store    = (*Store)(nil)
	_ store.Rewriter = (*Store)(nil)
	_ store.Users    = (*Store)(nil)
	// storetest.Namespaced, without importing the test kit.
	_ interface{ Namespace() string } = (*Store)(nil)
)

// queries holds the SQL of every statement, built once from the prefix.
type queries struct {
	schemaVersion, setSchemaVersion          string
	migrations                               [SchemaVersion][]string
	appendFirst, insertMessage, updateConv   string
	appendKeyed, insertAfter, updateAfter    string
	last, tail, all, stat, removePrefix      string
	rewrite                                  string
	clearMessages, clearState, clearConv     string
	setMark, setForgotten, setForgottenEvery string
	forgetMessages, forgetState, forgetConv  string
	getState, putState, deleteState          string
	scopeTenant, scopeUser                   string
	exportMessages, exportStates             string
	schemaTable, messagesTable, sequenceName string
}

// The reserved rows of the state table (see the package documentation).
// markName is the name of a Clear mark, as an SQL literal: the empty name,
// which storekit.CheckStateName rejects, so no caller reads or writes it.
// forgottenRows selects the rows of the forgotten versions: that of each
// bucket of users (storekit.ForgetBucket), named bucketName, and the
// store-wide one of builds before buckets, named legacyName. Their empty
// id_hash is no SHA-256 and their empty ns no namespace (WithNamespace
// rejects ""), so no identity's row is one of them and no identity's
// Forget deletes them; the primary key (id_hash, ns, name) finds each.
const (
	markName      = "''"
	forgottenRows = "id_hash = ''::bytea AND ns = ''"
	legacyName    = "''"
)

// bucketName is the name of the reserved row holding the forgotten
// version of the bucket of tenant's user (storekit.ForgetBucket): '#' and
// the bucket's number.
func bucketName(tenant, user string) string {
	return bucketNameOf(storekit.ForgetBucket(tenant, user))
}

func bucketNameOf(bucket int) string { return "#" + strconv.Itoa(bucket) }

// The scope expressions of an identity key (tenant:user:conversation,
// each part escaped so that it holds no ':'): its tenant prefix "t:" and
// its user prefix "t:u:", which are store.Scope.KeyPrefix of the scopes
// containing it. Schema version 2 indexes both (hash indexes: a key part
// may be longer than a B-tree entry can be); the scope queries use the
// same text, so the planner matches them to the indexes.
const (
	tenantExpr = "(split_part(id_key, ':', 1) || ':')"
	userExpr   = "(split_part(id_key, ':', 1) || ':' || split_part(id_key, ':', 2) || ':')"
)

func buildQueries(prefix string) queries {
	seq := pgx.Identifier{prefix + "seq"}.Sanitize()
	schema := pgx.Identifier{prefix + "schema"}.Sanitize()
	m := pgx.Identifier{prefix + "messages"}.Sanitize()
	c := pgx.Identifier{prefix + "conversations"}.Sanitize()
	st := pgx.Identifier{prefix + "state"}.Sanitize()
	index := func(name, table, expr string) string {
		return "CREATE INDEX IF NOT EXISTS " + pgx.Identifier{prefix + name}.Sanitize() + " ON " + table + " USING hash (" + expr + ")"
	}
	partial := func(unique, name, columns, where string) string {
		return "CREATE " + unique + "INDEX IF NOT EXISTS " + pgx.Identifier{prefix + name}.Sanitize() + " ON " + m + " (" + columns + ") WHERE " + where
	}
	// The prefix matches [a-z_][a-z0-9_]*, so it needs no escaping inside
	// the regclass literal.
	next := "nextval('" + seq + "')"
	// stored tells whether the row of the Seq this session drew last is
	// stored for the identity $1/$2 (see appendKeyed).
	stored := "EXISTS (SELECT FROM " + m + " WHERE id_hash = $1::bytea AND ns = $2::text AND seq = currval('" + seq + "'))"
	const idm = "id_hash = $1 AND ns = $2 AND id_key = $3"
	const ida = "id_hash = $1 AND id_key = $2" // every namespace
	// absent is the absent version of the identity $1/$3 in namespace $2,
	// whose user's bucket row is named by the parameter bucket
	// (bucketName): its Clear mark, else the greater of its bucket's
	// forgotten version and the store-wide one that builds before buckets
	// moved (greatest ignores a missing one), else 0. Each sub-select is a
	// primary-key lookup, run in the snapshot of the statement it is part
	// of, so they agree with every other read of that statement.
	absent := func(bucket string) string {
		return "coalesce((SELECT version FROM " + st + " WHERE " + idm + " AND name = " + markName + "), " +
			"greatest((SELECT version FROM " + st + " WHERE " + forgottenRows + " AND name = " + bucket + "::text), " +
			"(SELECT version FROM " + st + " WHERE " + forgottenRows + " AND name = " + legacyName + ")), 0)"
	}
	// scope lists the identity keys with a row in the conversations or
	// the state table whose scope expression is $1, and whether they hold
	// anything (messages, a value or a Clear mark; a conversations row
	// with no messages left does not count). starts_with makes the match
	// exact also for the forgotten versions' rows, whose empty key has no
	// parts (and whose empty ns the state branch skips).
	scope := func(expr string) string {
		return "SELECT id_key, bool_or(held) FROM (" +
			"SELECT id_key, count > 0 AS held FROM " + c + " WHERE " + expr + " = $1 AND starts_with(id_key, $1)" +
			" UNION ALL SELECT id_key, true FROM " + st + " WHERE " + expr + " = $1 AND starts_with(id_key, $1) AND ns <> ''" +
			") AS rows GROUP BY id_key"
	}
	return queries{
		schemaTable:      schema,
		messagesTable:    m,
		sequenceName:     seq,
		schemaVersion:    "SELECT version FROM " + schema + " WHERE id = 1",
		setSchemaVersion: "INSERT INTO " + schema + " (id, version) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version",
		migrations: [SchemaVersion][]string{
			// To version 1: the sequence and the three tables, as every
			// build before the schema table created them.
			{
				"CREATE SEQUENCE IF NOT EXISTS " + seq + " AS bigint",
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
			// To version 2: the schema table and the scope indexes of
			// Users. Rows are unchanged, so builds of version 1 keep
			// working on the tables, and what they write is indexed too.
			{
				"CREATE TABLE IF NOT EXISTS " + schema + ` (
	id      integer NOT NULL PRIMARY KEY CHECK (id = 1),
	version integer NOT NULL)`,
				index("conversations_tenant", c, tenantExpr),
				index("conversations_user", c, userExpr),
				index("state_tenant", st, tenantExpr),
				index("state_user", st, userExpr),
			},
			// To version 3: the append key of a keyed unit, on its first
			// message, unique per identity and namespace; and the system
			// messages, which Tail reads, indexed apart. Adding a nullable
			// column without a default rewrites nothing; the two CREATE
			// INDEX read the table once each (see the package
			// documentation, Schema).
			{
				"ALTER TABLE " + m + ` ADD COLUMN IF NOT EXISTS unit text COLLATE "C"`,
				partial("", "messages_system", "id_hash, ns, seq", "system"),
				partial("UNIQUE ", "messages_unit", "id_hash, ns, unit", "unit IS NOT NULL"),
			},
		},
		// The first message of a turn, and the conversation's row: created
		// when missing, and when the conversation holds no message (new,
		// or emptied by RemovePrefix) its first and last Seq become this
		// message's. Nothing here reads older rows, so the cost of an
		// Append does not grow with the dead index entries a large
		// RemovePrefix leaves behind until VACUUM.
		appendFirst: "WITH i AS (INSERT INTO " + m + " (id_hash, ns, seq, id_key, system, body) VALUES ($1, $2, " + next + ", $3, $4, $5) RETURNING seq)" +
			" INSERT INTO " + c + " AS c (id_hash, ns, id_key, count, first_seq, last_seq) SELECT $1, $2, $3, 0, seq, seq FROM i" +
			" ON CONFLICT (id_hash, ns) DO UPDATE SET first_seq = EXCLUDED.first_seq, last_seq = EXCLUDED.last_seq WHERE c.count = 0",
		// The other messages of the turn: one single-row INSERT each, all
		// in the turn's transaction. nextval runs in statement order, so
		// the Seqs follow append order.
		insertMessage: "INSERT INTO " + m + " (id_hash, ns, seq, id_key, system, body) VALUES ($1, $2, " + next + ", $3, $4, $5)",
		// After a turn's inserts: currval is the Seq this session drew
		// last, which is the turn's last message.
		updateConv: "UPDATE " + c + " SET count = count + $4, last_seq = currval('" + seq + "') WHERE " + idm,
		// A keyed unit (store.WithAppendKey): appendFirst, but the first
		// message carries the key $6 and is not inserted when the
		// identity has the key stored in the namespace (a concurrent
		// insert of the key waits on the unique index and then
		// conflicts) — and then neither is the conversations row
		// touched. The VALUES row, nextval included, is computed before
		// the conflict check, so currval is then a Seq no row has. Each
		// statement after it goes on only if the row of the Seq the
		// session drew last is stored (stored): the previous message of
		// the unit, which it is exactly when the first one was inserted.
		appendKeyed: "WITH i AS (INSERT INTO " + m + " (id_hash, ns, seq, id_key, system, body, unit) VALUES ($1, $2, " + next + ", $3, $4, $5, $6)" +
			" ON CONFLICT (id_hash, ns, unit) WHERE unit IS NOT NULL DO NOTHING RETURNING seq)" +
			" INSERT INTO " + c + " AS c (id_hash, ns, id_key, count, first_seq, last_seq) SELECT $1, $2, $3, 0, seq, seq FROM i" +
			" ON CONFLICT (id_hash, ns) DO UPDATE SET first_seq = EXCLUDED.first_seq, last_seq = EXCLUDED.last_seq WHERE c.count = 0",
		insertAfter: "INSERT INTO " + m + " (id_hash, ns, seq, id_key, system, body)" +
			" SELECT $1::bytea, $2::text, " + next + ", $3::text, $4::boolean, $5::bytea WHERE " + stored,
		updateAfter: "UPDATE " + c + " SET count = count + $4, last_seq = currval('" + seq + "') WHERE " + idm + " AND " + stored,
		last:        "SELECT seq, body FROM " + m + " WHERE " + idm + " ORDER BY seq DESC LIMIT $4",
		// Every system message (the partial index messages_system), and
		// the newest $5 others with seq > $4: the primary key read
		// backwards from the newest, the system rows it meets filtered
		// out, from no lower than the conversation's first Seq (as All).
		// One statement, so one snapshot.
		tail: "(SELECT seq, body FROM " + m + " WHERE " + idm + " AND system)" +
			" UNION ALL (SELECT seq, body FROM " + m + " WHERE " + idm + " AND NOT system AND seq > $4" +
			" AND seq >= coalesce((SELECT first_seq FROM " + c + " WHERE " + idm + "), 0) ORDER BY seq DESC LIMIT $5)" +
			" ORDER BY seq",
		// Every stored message has seq >= the conversation's first_seq
		// (read in the same snapshot), so the scan starts there, past the
		// index entries of rows removed before (see the package
		// documentation, Performance); without a conversations row it
		// reads every row.
		all: "SELECT seq, body FROM " + m + " WHERE " + idm +
			" AND seq >= coalesce((SELECT first_seq FROM " + c + " WHERE " + idm + "), 0) ORDER BY seq",
		stat: "SELECT count, first_seq, last_seq FROM " + c + " WHERE " + idm,
		// The sub-selects see the statement's snapshot, from before the
		// DELETE: the rows it keeps are those with seq > $4 or system.
		// Every stored row has seq >= the conversation's first_seq, and
		// the index entries of rows removed before lie below it unless a
		// system message is pinned there, so the scans start at first_seq.
		removePrefix: `WITH d AS (
	DELETE FROM ` + m + " WHERE " + idm + ` AND seq <= $4 AND NOT system
		AND seq >= (SELECT first_seq FROM ` + c + " WHERE " + idm + `) RETURNING 1),
u AS (
	UPDATE ` + c + ` AS c SET
		count = c.count - (SELECT count(*) FROM d),
		first_seq = coalesce((SELECT min(seq) FROM ` + m + " WHERE " + idm + ` AND seq >= c.first_seq AND (seq > $4 OR system)), 0),
		last_seq = CASE WHEN c.last_seq > $4 THEN c.last_seq
			ELSE coalesce((SELECT max(seq) FROM ` + m + " WHERE " + idm + ` AND seq >= c.first_seq AND seq <= $4 AND system), 0) END
	WHERE ` + idm + ` AND EXISTS (SELECT FROM d))
SELECT count(*) FROM d`,
		// Rewrite's removal: every message with seq <= $4, system ones
		// included; the kept ones are those with seq > $4, and the
		// newest of them is still the conversation's last.
		rewrite: `WITH d AS (
	DELETE FROM ` + m + " WHERE " + idm + ` AND seq <= $4
		AND seq >= (SELECT first_seq FROM ` + c + " WHERE " + idm + `) RETURNING 1),
u AS (
	UPDATE ` + c + ` AS c SET
		count = c.count - (SELECT count(*) FROM d),
		first_seq = coalesce((SELECT min(seq) FROM ` + m + " WHERE " + idm + ` AND seq > $4), 0),
		last_seq = CASE WHEN c.last_seq > $4 THEN c.last_seq ELSE 0 END
	WHERE ` + idm + ` AND EXISTS (SELECT FROM d))
SELECT count(*) FROM d`,
		clearMessages: "DELETE FROM " + m + " WHERE " + idm,
		clearConv:     "DELETE FROM " + c + " WHERE " + idm,
		// Every state value of the identity in the namespace; its Clear
		// mark is then moved by setMark.
		clearState: "DELETE FROM " + st + " WHERE " + idm + " AND name <> " + markName,
		setMark: "INSERT INTO " + st + " AS s (id_hash, ns, name, id_key, version, value) VALUES ($1, $2, " + markName + ", $3, " + next + ", ''::bytea)" +
			" ON CONFLICT (id_hash, ns, name) DO UPDATE SET version = EXCLUDED.version WHERE s.id_key = EXCLUDED.id_key",
		// The forgotten version of the bucket named $1 (bucketName) moves
		// to a fresh version. It is drawn by the UPDATE, after it holds the
		// row's lock, so concurrent Forgets store increasing versions.
		setForgotten: "INSERT INTO " + st + " AS s (id_hash, ns, name, id_key, version, value) VALUES (''::bytea, '', $1::text, '', " + next + ", ''::bytea)" +
			" ON CONFLICT (id_hash, ns, name) DO UPDATE SET version = " + next,
		// Every bucket's forgotten version and the store-wide one (-1)
		// move, in one statement (a tenant's ForgetScope), each row to a
		// fresh version drawn after its lock; rows are taken in one order,
		// so two of these never deadlock.
		setForgottenEvery: "INSERT INTO " + st + " AS s (id_hash, ns, name, id_key, version, value)" +
			" SELECT ''::bytea, '', CASE WHEN b < 0 THEN " + legacyName + " ELSE '#' || b END, '', " + next + ", ''::bytea" +
			" FROM generate_series(-1, " + strconv.Itoa(storekit.ForgetBuckets-1) + ") AS b" +
			" ON CONFLICT (id_hash, ns, name) DO UPDATE SET version = " + next,
		forgetMessages: "DELETE FROM " + m + " WHERE " + ida,
		forgetConv:     "DELETE FROM " + c + " WHERE " + ida,
		// The identity's state values and Clear marks in every namespace;
		// never a forgotten version's row, whose id_hash is empty.
		forgetState: "DELETE FROM " + st + " WHERE " + ida,
		// The value (NULL when absent), its version (NULL when absent) and
		// the absent version, from one snapshot; $5 is the bucket.
		getState: "SELECT s.value, s.version, " + absent("$5") + " FROM (VALUES (0)) AS one (x) LEFT JOIN " + st +
			" s ON s.id_hash = $1 AND s.ns = $2 AND s.id_key = $3 AND s.name = $4",
		// The compare-and-set of a value, run under the identity's lock
		// (see PutState): cur is the current version, the value's or the
		// absent one; the value is written, with a fresh version, only if
		// cur is $6. It returns the new version (NULL on a conflict) and
		// cur. $7 is the bucket.
		putState: `WITH cur AS (
	SELECT coalesce((SELECT version FROM ` + st + " WHERE " + idm + " AND name = $4), " + absent("$7") + `) AS version),
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
		// DELETE matches only when the value exists at version $5. $6 is
		// the bucket.
		deleteState: `WITH cur AS (
	SELECT (SELECT version FROM ` + st + " WHERE " + idm + " AND name = $4) AS stored, " + absent("$6") + ` AS absent),
d AS (
	DELETE FROM ` + st + " WHERE " + idm + ` AND name = $4 AND version = $5::bigint RETURNING 1)
SELECT coalesce(stored, absent), absent FROM cur`,
		scopeTenant: scope(tenantExpr),
		scopeUser:   scope(userExpr),
		// Everything of the identities whose hashes are $1, in every
		// namespace; the caller checks each row's id_key.
		exportMessages: "SELECT id_key, ns, seq, body FROM " + m + " WHERE id_hash = ANY($1::bytea[]) ORDER BY id_hash, ns, seq",
		exportStates:   "SELECT id_key, ns, name, version, value FROM " + st + " WHERE id_hash = ANY($1::bytea[]) AND ns <> ''",
	}
}

// New returns a Store over pool, after checking the schema version of its
// tables and creating or migrating them if needed (see the package
// documentation, Schema). The caller keeps ownership of pool: Close does
// not close it. New fails, with an error naming the server's address, when
// the server cannot be reached before ctx is done, and with an error
// wrapping ErrSchemaVersion when the tables are of a newer schema (or, with
// WithoutDDL, not at this build's).
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
// pool_max_conns included) with a pool of its own, checks, creates or
// migrates the schema as New does and returns the Store; Close closes the
// pool. A DSN without connect_timeout gets DefaultConnectTimeout. An
// unreachable server is an error naming its host:port, returned no later
// than ctx is done. When a call's context ends while the server runs its
// statements, the pool's connections ask the server to cancel them and
// wait for its answer, so the call's outcome is settled when it returns
// (see the package documentation, Cancellation).
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
	cfg.ConnConfig.BuildContextWatcherHandler = settleOnCancel
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

// The context handling of the connections of a pool made by Open (see
// the package documentation, Cancellation).
const (
	// cancelRequestDelay is how long a call whose context is done lets
	// the server go on before asking it to cancel: a statement about to
	// finish finishes.
	cancelRequestDelay = 10 * time.Millisecond
	// cancelDeadline bounds the wait for the server's answer once the
	// context is done: then the connection is closed, and the outcome of
	// a write in flight is unknown.
	cancelDeadline = time.Second
)

// settleOnCancel is the pgconn context handler of Open's pools: when a
// call's context is done while the server runs its statements, the
// client asks the server to cancel them (a cancel request) and reads its
// answer — the transaction rolled back, or committed — instead of
// dropping the connection at once, which would leave the server running
// the statements it has received, a COMMIT included, after the call has
// returned.
func settleOnCancel(c *pgconn.PgConn) ctxwatch.Handler {
	return &pgconn.CancelRequestContextWatcherHandler{Conn: c, CancelRequestDelay: cancelRequestDelay, DeadlineDelay: cancelDeadline}
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
	if err := s.prepareSchema(ctx, !c.withoutDDL); err != nil {
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

func identOf(id memstack.Identity) ident { return identOfKey(id.Key()) }

func identOfKey(k string) ident {
	h := sha256.Sum256([]byte(k))
	return ident{key: k, hash: h[:]}
}

// Namespace returns the store's namespace (WithNamespace): the one Clear,
// Append and the reads work in. Forget and the Users methods reach every
// namespace under the table prefix.
func (s *Store) Namespace() string { return s.ns }

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

// encodeTurn encodes msgs as Append stores them, all dated at: their
// bodies and system flags. A message that cannot be stored (nil, or
// rejected by the codec) is an error naming its position.
func encodeTurn(msgs []llms.ChatMessage, at time.Time) (bodies [][]byte, system []bool, err error) {
	bodies = make([][]byte, len(msgs))
	system = make([]bool, len(msgs))
	for i, m := range msgs {
		b, err := storekit.EncodeMessageAt(m, at)
		if err != nil {
			return nil, nil, fmt.Errorf("message %d of %d: %w", i+1, len(msgs), err)
		}
		bodies[i] = b
		system[i] = m.GetType() == llms.ChatMessageTypeSystem
	}
	return bodies, system, nil
}

// queueAppend queues the statements that append a turn's encoded
// messages to k's conversation in this store's namespace, after the
// identity's lock (see the package documentation): under the append key
// unit, unless it is "", they store nothing when k has unit stored.
func (s *Store) queueAppend(b *pgx.Batch, k ident, unit string, bodies [][]byte, system []bool) {
	if len(bodies) == 0 {
		return
	}
	insert, update := s.q.insertMessage, s.q.updateConv
	if unit == "" {
		b.Queue(s.q.appendFirst, k.hash, s.ns, k.key, system[0], bodies[0])
	} else {
		b.Queue(s.q.appendKeyed, k.hash, s.ns, k.key, system[0], bodies[0], unit)
		insert, update = s.q.insertAfter, s.q.updateAfter
	}
	for i := 1; i < len(bodies); i++ {
		b.Queue(insert, k.hash, s.ns, k.key, system[i], bodies[i])
	}
	b.Queue(update, k.hash, s.ns, k.key, len(bodies))
}

// Append implements store.Store: one transaction in one round trip (see
// the package documentation). Every message is dated
// storekit.AppendTime(ctx), taken once, by this process. Under an append
// key (store.WithAppendKey) the first message carries the key, and the
// transaction stores nothing when id has the key stored in this store's
// namespace (see the package documentation, Tail and append keys).
func (s *Store) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	if err := s.check(ctx, "Append", id); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	at := storekit.AppendTime(ctx)
	if err := storekit.CheckTime(at); err != nil {
		return fmt.Errorf("pgstore: Append of identity %q: %w", id.Key(), err)
	}
	unit, _, err := storekit.CheckAppendKeyOf(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: Append of identity %q: %w", id.Key(), err)
	}
	bodies, system, err := encodeTurn(msgs, at)
	if err != nil {
		return fmt.Errorf("pgstore: Append of identity %q: %w", id.Key(), err)
	}
	k := identOf(id)
	err = s.write(ctx, func(b *pgx.Batch) {
		s.lockIdentity(b, k)
		s.queueAppend(b, k, unit, bodies, system)
	})
	if err != nil {
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

// Tail implements store.Store: one statement, so it reads one snapshot,
// over the partial index of the system messages and the primary key read
// backwards from the newest message, so it costs what it returns (see the
// package documentation, Tail and append keys).
func (s *Store) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	if err := s.check(ctx, "Tail", id); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: pgstore: Tail(n=%d) of identity %q: n must be at least 1", store.ErrInvalidArgument, n, id.Key())
	}
	k := identOf(id)
	return s.records(ctx, id, "Tail", s.q.tail, k.hash, s.ns, k.key, after, int64(n))
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
	var out []store.Record
	err := s.retry(ctx, func() error {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = []store.Record{}
		var (
			seq  int64
			body []byte
		)
		for rows.Next() {
			if err := rows.Scan(&seq, &body); err != nil {
				return err
			}
			r, err := storekit.DecodeRecord(id, seq, body)
			if err != nil {
				return &decodeError{err}
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	var de *decodeError
	if errors.As(err, &de) {
		return nil, fmt.Errorf("pgstore: %s: %w", op, de.err)
	}
	if err != nil {
		return nil, s.wrap(op, identOf(id), err)
	}
	return out, nil
}

// decodeError carries a stored value's decoding error out of a retried
// read, to be reported without the server's address (it is not the
// server's).
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

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
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.q.stat, k.hash, s.ns, k.key).Scan(&count, &st.FirstSeq, &st.LastSeq)
	})
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
	var removed int64
	err := s.write(ctx, func(b *pgx.Batch) {
		s.lockIdentity(b, k)
		b.Queue(s.q.removePrefix, k.hash, s.ns, k.key, through).QueryRow(func(r pgx.Row) error { return r.Scan(&removed) })
	})
	if err != nil {
		return 0, s.wrap("RemovePrefix", k, err)
	}
	return int(removed), nil
}

// lockIdentity queues the transaction-scoped advisory lock of identity k,
// which every write of k's rows takes first (see the package
// documentation).
func (s *Store) lockIdentity(b *pgx.Batch, k ident) {
	b.Queue("SELECT pg_advisory_xact_lock($1)", s.identityLock(k))
}

func (s *Store) identityLock(k ident) int64 { return lockKey("identity", s.prefix, k.key) }

// Clear implements store.Store: the messages and state of id in this
// store's namespace are removed and its Clear mark moved to a fresh
// version, in one transaction under the identity's lock.
func (s *Store) Clear(ctx context.Context, id memstack.Identity) error {
	if err := s.check(ctx, "Clear", id); err != nil {
		return err
	}
	k := identOf(id)
	err := s.write(ctx, func(b *pgx.Batch) {
		s.lockIdentity(b, k)
		b.Queue(s.q.clearMessages, k.hash, s.ns, k.key)
		b.Queue(s.q.clearConv, k.hash, s.ns, k.key)
		s.queueReset(b, k)
	})
	if err != nil {
		return s.wrap("Clear", k, err)
	}
	return nil
}

// queueReset queues the removal of k's state values in this store's
// namespace and the move of its Clear mark to a fresh version — also for
// an identity with no rows: a commit may have read its absent version
// before anything was stored.
func (s *Store) queueReset(b *pgx.Batch, k ident) {
	b.Queue(s.q.clearState, k.hash, s.ns, k.key)
	b.Queue(s.q.setMark, k.hash, s.ns, k.key)
}

// Forget implements store.Store: in one transaction under the identity's
// lock, the forgotten version of the bucket of id's user
// (storekit.ForgetBucket) moves to a fresh version, then the messages, state
// and Clear marks of id in every namespace under this store's table
// prefix are removed. The absent versions of users of other buckets do
// not move, so their first commits are not disturbed.
func (s *Store) Forget(ctx context.Context, id memstack.Identity) error {
	if err := s.check(ctx, "Forget", id); err != nil {
		return err
	}
	k := identOf(id)
	err := s.write(ctx, func(b *pgx.Batch) {
		s.lockIdentity(b, k)
		b.Queue(s.q.setForgotten, bucketName(id.Tenant, id.User))
		s.queueForget(b, k, nil)
	})
	if err != nil {
		return s.wrap("Forget", k, err)
	}
	return nil
}

// queueForget queues the deletes of every row of k under the table
// prefix. Unless removed is nil, the messages, state values and Clear
// marks deleted are added to it (not the conversations row, which holds
// nothing by itself).
func (s *Store) queueForget(b *pgx.Batch, k ident, removed *int64) {
	messages := b.Queue(s.q.forgetMessages, k.hash, k.key)
	b.Queue(s.q.forgetConv, k.hash, k.key)
	state := b.Queue(s.q.forgetState, k.hash, k.key)
	if removed != nil {
		count := func(ct pgconn.CommandTag) error {
			*removed += ct.RowsAffected()
			return nil
		}
		messages.Exec(count)
		state.Exec(count)
	}
}

// GetState implements store.Store: one statement, so the value, its
// version and the absent version come from one snapshot, all from before
// or all from after any Clear or Forget.
func (s *Store) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	if err := s.check(ctx, "GetState", id); err != nil {
		return store.State{}, err
	}
	if err := storekit.CheckStateName(name); err != nil {
		return store.State{}, fmt.Errorf("pgstore: GetState of identity %q: %w", id.Key(), err)
	}
	k := identOf(id)
	var (
		value   []byte
		version *int64
		absent  int64
	)
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.q.getState, k.hash, s.ns, k.key, name, bucketName(id.Tenant, id.User)).Scan(&value, &version, &absent)
	})
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
// under the identity's advisory lock, in one transaction and one round
// trip. A transaction the server rolls back for a serialization failure
// or a deadlock wrote nothing; it is run again a few times (see the
// package documentation, Transactions) and then reported as an error
// wrapping store.ErrConflict, so a caller's retry loop retries it.
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
// Clear, Forget, Append, RemovePrefix and Rewrite (pg_advisory_xact_lock,
// the first statement of the transaction): PutState, Clear and Forget of
// one identity run one after the other, and the compare-and-set
// statement, which starts after the lock is granted, sees every commit of
// the lock's previous holders (PostgreSQL makes a transaction visible
// before it releases its locks). A PutState before a Clear is then
// removed by it; one after it reads the new mark and conflicts unless it
// expected that mark.
//
// The forgotten version of the identity's bucket (storekit.ForgetBucket) is
// not always moved under this identity's lock: a Forget of another
// identity of the same bucket moves it under that identity's lock, and
// ForgetScope draws it first under none. PutState may then read it as it
// was, and is ordered before that move. A Forget of another identity
// removes nothing of this one; after ForgetScope's draw, the identity's
// rows are deleted under its lock, so a commit ordered before the draw
// lands before that delete and goes with it. The next commit that expects
// the old version conflicts, as the package store documents. Forgets of
// users of other buckets move rows PutState does not read: their first
// commits go on. ForgetScope's last step — each derived identity of the
// scope's users (storekit.DerivedOf) forgotten under its own lock, its
// user's bucket moved in the same transaction — is covered by the lock:
// a commit to it lands before and is removed, or runs after and
// conflicts unless it read after that step.
func (s *Store) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	if err := s.check(ctx, "PutState", id); err != nil {
		return 0, err
	}
	if err := storekit.CheckStateName(name); err != nil {
		return 0, fmt.Errorf("pgstore: PutState of identity %q: %w", id.Key(), err)
	}
	k := identOf(id)
	bucket := bucketName(id.Tenant, id.User)
	var (
		written *int64 // the new version; nil when nothing was written
		current int64  // the version before: the value's or the absent one
		absent  int64  // after a delete: the absent version
	)
	err := s.write(ctx, func(b *pgx.Batch) {
		s.lockIdentity(b, k)
		if value == nil {
			b.Queue(s.q.deleteState, k.hash, s.ns, k.key, name, expect, bucket).QueryRow(func(r pgx.Row) error {
				return r.Scan(&current, &absent)
			})
		} else {
			b.Queue(s.q.putState, k.hash, s.ns, k.key, name, value, expect, bucket).QueryRow(func(r pgx.Row) error {
				return r.Scan(&written, &current)
			})
		}
	})
	op := fmt.Sprintf("PutState(%q)", name)
	if rolledBack(err) {
		return 0, fmt.Errorf("%w: %w", store.ErrConflict, s.wrap(op, k, fmt.Errorf("the server rolled the compare-and-set back %d times: %w", maxAttempts, err)))
	}
	if err != nil {
		return 0, s.wrap(op, k, err)
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
