package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// WithReadOnly makes Open open the file read-only (SQLite's mode=ro), for
// tools that must not change what they read, such as a user's export:
// Open then never creates the file, creates or migrates no schema,
// registers no namespace and sets no pragma that is kept in the file, and
// every write of the Store fails (SQLite refuses it). The file must hold
// the schema at SchemaVersion: one without memstack's tables, or of an
// older or newer schema version, is refused with an error saying which
// (a read-only Store never migrates: a Store that may write, Open or New
// of this build, migrates the file when it opens it). The database file
// itself is left byte for byte as it was; like any reader of a file in
// WAL mode, SQLite creates the -wal (empty) and -shm files next to it
// when they do not exist, and a read-only connection cannot remove them
// when it closes (the next writer uses them as usual). For Open only: New
// refuses it.
func WithReadOnly() Option {
	return func(c *config) error {
		c.readOnly = true
		c.openOnly = append(c.openOnly, "WithReadOnly")
		return nil
	}
}

// readOnlyDSN is the DSN Open opens the file at abs with under
// WithReadOnly: read-only, never created, no pragma but the busy timeout
// (a reader of a WAL file may wait for a lock briefly) and mmap_size
// (WithMmapSize).
func readOnlyDSN(abs string, cfg config) string {
	return fmt.Sprintf("file:%s?mode=ro&_busy_timeout=%d&_pragma=mmap_size(%d)", escapeURIPath(abs), cfg.busyTimeout.Milliseconds(), cfg.mmapSize)
}

// checkReadOnly is init for a read-only Store: it checks, in one read
// transaction, that the file holds memstack's schema at SchemaVersion, and
// writes nothing.
func (s *Store) checkReadOnly(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // a plain (deferred) BEGIN
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var tables int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'memstack_schema'`).Scan(&tables); err != nil {
		return fmt.Errorf("reading the schema: %w", err)
	}
	if tables == 0 {
		return fmt.Errorf("no memstack tables in the file (a read-only Store never creates them)")
	}
	var rows, v int
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(max(version), 0) FROM memstack_schema`).Scan(&rows, &v); err != nil {
		return fmt.Errorf("reading the schema version: %w", err)
	}
	switch {
	case v > SchemaVersion:
		return fmt.Errorf("the file has schema version %d; this build knows up to %d", v, SchemaVersion)
	case rows != 1:
		return fmt.Errorf("the file's memstack_schema holds %d rows, not 1, and a read-only Store never repairs it: "+
			"a Store that may write (Open or New of this build) does when it opens the file", rows)
	case v < SchemaVersion:
		return fmt.Errorf("the file has memstack schema version %d, and a read-only Store reads only version %d: "+
			"it never migrates a file; a Store that may write (Open or New of this build) migrates it when it opens it", v, SchemaVersion)
	}
	return nil
}
