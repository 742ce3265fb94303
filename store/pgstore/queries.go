package pgstore

import (
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/memstack/memstack/store/storekit"
)

// queries holds the SQL of every statement, built once from the prefix.
type queries struct {
	schemaVersion, setSchemaVersion             string
	migrations                                  [SchemaVersion][]string
	appendFirst, insertMessage, updateConv      string
	appendKeyed, insertAfter, updateAfter       string
	last, tail, all, ranges, stat, removePrefix string
	rewrite                                     string
	clearMessages, clearState, clearConv        string
	setMark, setForgotten, setForgottenEvery    string
	forgetMessages, forgetState, forgetConv     string
	getState, putState, deleteState             string
	scopeTenant, scopeUser                      string
	exportMessages, exportStates                string
	schemaTable, messagesTable, sequenceName    string
	recall                                      recallSQL
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
	q := queries{
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
		// Each range ($1..$4: hash, key, from, to; $5 the namespace) is
		// a seek of the primary key; one statement, so one snapshot.
		ranges: "SELECT r.i, x.seq, x.body FROM unnest($1::bytea[], $2::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS r(h, k, lo, hi, i)" +
			" CROSS JOIN LATERAL (SELECT seq, body FROM " + m + " WHERE id_hash = r.h AND ns = $5 AND id_key = r.k AND seq >= r.lo AND seq < r.hi) x" +
			" ORDER BY r.i, x.seq",
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
	// To version 4: the recall index's tables (recall.go), empty and off
	// until a Store turns them on (WithRecallIndex); creating them reads
	// no other table.
	q.recall = buildRecallSQL(prefix, q)
	q.migrations[3] = q.recall.create
	// To version 5: the recall index's postings by groups of a user's
	// conversations (recall.go, Posting rows), rebuilt by the backfill.
	q.migrations[4] = q.recall.toV5
	return q
}
