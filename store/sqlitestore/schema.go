package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// SchemaVersion is the version of the schema this package creates and
// reads. Version 2 added memstack_stat, version 3 the append keys (column
// unit) and the index of system messages; Open and New migrate a file of
// version 1 or 2 (see "Schema" in the package documentation). Version 4
// added the recall index (recall.go), filled for older files in the
// background.
const SchemaVersion = 4

// schemaTable is created before anything else, so that the transaction
// that creates or migrates the schema can take the write lock (lockSQL)
// on a new file too.
const schemaTable = `CREATE TABLE IF NOT EXISTS memstack_schema (version INTEGER NOT NULL)`

// schema is every table of version 2, each created if missing: what
// version 3 adds to them is added by upgrade, to new files and old ones
// alike, so every file of version 3 has the same schema. The first five
// statements and the counter's row are version 1, unchanged.
var schema = []string{
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
	// Version 2.
	`CREATE TABLE IF NOT EXISTS memstack_stat (
		ns        TEXT    NOT NULL,
		identity  TEXT    NOT NULL,
		count     INTEGER NOT NULL,
		first_seq INTEGER NOT NULL,
		last_seq  INTEGER NOT NULL,
		PRIMARY KEY (ns, identity)
	) WITHOUT ROWID`,
}

// addUnit is version 3's new column: a keyed unit's append key, on the
// unit's first message only (NULL on every other row). Adding a nullable
// column without a default rewrites no row.
const addUnit = `ALTER TABLE memstack_messages ADD COLUMN unit TEXT`

// indexesV3 are version 3's indexes, both partial, so they hold only the
// rows they are for: the system messages, which Tail reads without
// scanning the conversation, and the append keys, unique per
// conversation, which make a second Append under a key store nothing.
var indexesV3 = []string{
	`CREATE INDEX IF NOT EXISTS memstack_messages_system ON memstack_messages (ns, identity, seq) WHERE system = 1`,
	`CREATE UNIQUE INDEX IF NOT EXISTS memstack_messages_unit ON memstack_messages (ns, identity, unit) WHERE unit IS NOT NULL`,
}

// backfill rebuilds memstack_stat from the messages: the migration from
// version 1, one pass over the (ns, identity, seq) index.
var backfill = []string{
	`DELETE FROM memstack_stat`,
	`INSERT INTO memstack_stat (ns, identity, count, first_seq, last_seq)
		SELECT ns, identity, count(*), min(seq), max(seq) FROM memstack_messages GROUP BY ns, identity`,
}

// init creates or migrates the schema and registers the namespace (a
// read-only Store only checks the schema: see WithReadOnly), checks the
// journal mode and prepares the frequent statements.
func (s *Store) init(ctx context.Context) error {
	// One transaction that holds the write lock from its first statements:
	// two processes opening one file at once run it one after the other,
	// and the second finds the schema the first left.
	err := s.retry(ctx, func() error {
		if s.cfg.readOnly {
			return s.checkReadOnly(ctx) // reads the schema version, writes nothing
		}
		return s.tryWrite(ctx, func(tx *sql.Tx) error {
			for _, q := range []string{schemaTable, lockSQL} {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("creating the schema: %w", err)
				}
			}
			return nil
		}, s.migrate(ctx))
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
		{&s.stmtLock, lockSQL},
		{&s.stmtInsert, insertSQL},
		{&s.stmtBump, bumpStatSQL},
		{&s.stmtLast, `SELECT seq, message FROM memstack_messages WHERE ns = ? AND identity = ? ORDER BY seq DESC LIMIT ?`},
		{&s.stmtTail, tailSQL},
		{&s.stmtAll, `SELECT seq, message FROM memstack_messages WHERE ns = ? AND identity = ? ORDER BY seq`},
		{&s.stmtRange, `SELECT seq, message FROM memstack_messages WHERE ns = ? AND identity = ? AND seq >= ? AND seq < ? ORDER BY seq`},
		{&s.stmtStat, `SELECT count, first_seq, last_seq FROM memstack_stat WHERE ns = ? AND identity = ?`},
		{&s.stmtGetState, getStateQuery},
		{&s.stmtUpUnits, upsertUnitsSQL},
		{&s.stmtUpTerms, upsertTermsSQL},
		{&s.stmtUpDays, upsertDaysSQL},
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

// migrate returns the body of init's transaction: it refuses a newer
// schema before changing anything, creates or migrates the schema of a
// file older than SchemaVersion (upgrade), and registers the Store's
// namespace. A file of the current version runs no DDL.
func (s *Store) migrate(ctx context.Context) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		var rows, v int
		if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(max(version), 0) FROM memstack_schema`).Scan(&rows, &v); err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		if v > SchemaVersion {
			return fmt.Errorf("the file has schema version %d; this build knows up to %d", v, SchemaVersion)
		}
		if v < SchemaVersion || rows != 1 {
			if err := upgrade(ctx, tx, v, rows); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO memstack_namespaces (ns) VALUES (?)`, s.ns); err != nil {
			return fmt.Errorf("registering namespace %q: %w", s.ns, err)
		}
		if s.cfg.recall {
			if _, err := tx.ExecContext(ctx, enableSQL); err != nil {
				return fmt.Errorf("turning the recall index on: %w", err)
			}
		}
		return nil
	}
}

// upgrade brings a file whose memstack_schema has rows rows and version v
// — a new file: no row, version 0 — to SchemaVersion in tx: it creates
// the tables that are missing, fills memstack_stat when the file is older
// than version 2 (a new file's is empty), adds version 3's column and
// indexes, and records the version.
func upgrade(ctx context.Context, tx *sql.Tx, v, rows int) error {
	for _, q := range schema {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("creating the schema: %w", err)
		}
	}
	if v < 2 || rows != 1 {
		for _, q := range backfill {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("migrating schema version %d to %d: filling memstack_stat: %w", v, SchemaVersion, err)
			}
		}
	}
	var hasUnit bool
	if err := tx.QueryRowContext(ctx, `SELECT count(*) > 0 FROM pragma_table_info('memstack_messages') WHERE name = 'unit'`).Scan(&hasUnit); err != nil {
		return fmt.Errorf("migrating schema version %d to %d: reading the columns of memstack_messages: %w", v, SchemaVersion, err)
	}
	v3 := indexesV3
	if !hasUnit {
		v3 = append([]string{addUnit}, v3...)
	}
	for _, q := range v3 {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("migrating schema version %d to %d: adding append keys and the index of system messages: %w", v, SchemaVersion, err)
		}
	}
	for _, q := range recallSchema {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("migrating schema version %d to %d: adding the recall index: %w", v, SchemaVersion, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM memstack_schema`); err != nil {
		return fmt.Errorf("recording schema version %d: %w", SchemaVersion, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO memstack_schema (version) VALUES (?)`, SchemaVersion); err != nil {
		return fmt.Errorf("recording schema version %d: %w", SchemaVersion, err)
	}
	return nil
}

// bumpStatSQL adds an Append's messages to the identity's memstack_stat
// row: count more messages, the last of them at last_seq; first_seq is the
// first of them for a row that did not exist (rows of conversations
// without messages are deleted). Its parameters are ns, identity key,
// count, first Seq and last Seq.
const bumpStatSQL = `INSERT INTO memstack_stat (ns, identity, count, first_seq, last_seq) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (ns, identity) DO UPDATE SET count = count + excluded.count, last_seq = excluded.last_seq`

// restat brings the memstack_stat row of (ns, key) up to date after
// delta messages were added (or, negative, removed) in tx — by
// RemovePrefix or Rewrite — with an index seek for each bound. A count
// that disagrees with the messages (a row changed behind the store's back)
// is recounted.
func restat(ctx context.Context, tx *sql.Tx, ns, key string, delta int64) error {
	var count int64
	err := tx.QueryRowContext(ctx, `SELECT count FROM memstack_stat WHERE ns = ? AND identity = ?`, ns, key).Scan(&count)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reading the message count: %w", err)
	}
	count += delta
	var first, last sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT
			(SELECT seq FROM memstack_messages WHERE ns = ?1 AND identity = ?2 ORDER BY seq LIMIT 1),
			(SELECT seq FROM memstack_messages WHERE ns = ?1 AND identity = ?2 ORDER BY seq DESC LIMIT 1)`,
		ns, key).Scan(&first, &last); err != nil {
		return fmt.Errorf("reading the Seq bounds: %w", err)
	}
	if !first.Valid {
		if _, err := tx.ExecContext(ctx, `DELETE FROM memstack_stat WHERE ns = ? AND identity = ?`, ns, key); err != nil {
			return fmt.Errorf("updating the message count: %w", err)
		}
		return nil
	}
	if count < 1 || count > last.Int64-first.Int64+1 {
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM memstack_messages WHERE ns = ? AND identity = ?`, ns, key).Scan(&count); err != nil {
			return fmt.Errorf("recounting the messages: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO memstack_stat (ns, identity, count, first_seq, last_seq) VALUES (?, ?, ?, ?, ?)`,
		ns, key, count, first.Int64, last.Int64); err != nil {
		return fmt.Errorf("updating the message count: %w", err)
	}
	return nil
}
