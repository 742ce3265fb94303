package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memstack/memstack/store"
)

// SchemaVersion is the version of the tables this build creates, migrates
// to and reads (see the package documentation, Schema): 1 is the layout
// of the builds before the schema table, 2 adds the schema table and the
// scope indexes that the Users methods read, 3 adds the messages' unit
// column (append keys) and the indexes of append keys and of system
// messages (Tail), 4 adds the recall index's tables (WithRecallIndex; see
// the package documentation, The recall index), 5 keeps the index's
// postings by groups of a user's conversations (the index kept so far is
// rebuilt from the messages by the backfill).
const SchemaVersion = 5

// ErrSchemaVersion is wrapped by the error of New and Open when the tables
// under the table prefix are of a schema version this build cannot use:
// newer than SchemaVersion (a newer build migrated them), or, with
// WithoutDDL, older than it or not created yet.
var ErrSchemaVersion = errors.New("pgstore: unsupported schema version")

// prepareSchema reads the schema version of the tables under the prefix
// and, if they are older than SchemaVersion (or absent) and ddl is set,
// migrates (or creates) them — all in one read committed transaction,
// under a transaction-scoped advisory lock of the prefix, so that stores
// opening at the same moment, from several pools or processes, do not
// collide on the catalog and each sees the version the one before left.
// Tables at SchemaVersion are used as they are: no DDL runs, so a role
// with only DML grants can open them.
func (s *Store) prepareSchema(ctx context.Context, ddl bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: connecting to PostgreSQL at %s: %w", s.addr, err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: connecting to PostgreSQL at %s: %w", s.addr, err)
	}
	defer conn.Release()
	// fnErr is the transaction's own error, worded by migrate; err may
	// also be BEGIN's or COMMIT's.
	var fnErr error
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		fnErr = s.migrate(ctx, tx, ddl)
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("pgstore: opening the tables with prefix %q on %s: %w", s.prefix, s.addr, err)
	}
	return nil
}

// migrate is prepareSchema's transaction.
func (s *Store) migrate(ctx context.Context, tx pgx.Tx, ddl bool) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("schema", s.prefix)); err != nil {
		return fmt.Errorf("pgstore: locking the schema (table prefix %q) on %s: %w", s.prefix, s.addr, err)
	}
	found, err := s.readSchemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	switch {
	case found == SchemaVersion:
		return nil
	case found > SchemaVersion:
		return fmt.Errorf("%w: pgstore: the tables with prefix %q on %s have schema version %d, newer than this build's %d: use a newer build of memstack",
			ErrSchemaVersion, s.prefix, s.addr, found, SchemaVersion)
	case !ddl:
		return fmt.Errorf("%w: pgstore: the tables with prefix %q on %s %s, this build needs version %d, and WithoutDDL forbids creating or migrating them: "+
			"open them once without WithoutDDL, as a role that may (see the package documentation, Roles)",
			ErrSchemaVersion, s.prefix, s.addr, describeVersion(found), SchemaVersion)
	}
	for v := found; v < SchemaVersion; v++ {
		for _, stmt := range s.q.migrations[v] {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return s.migrationError(found, err)
			}
		}
	}
	if _, err := tx.Exec(ctx, s.q.setSchemaVersion, SchemaVersion); err != nil {
		return s.migrationError(found, err)
	}
	return nil
}

// describeVersion says what a found schema version means, for errors.
func describeVersion(v int) string {
	if v == 0 {
		return "do not exist"
	}
	return fmt.Sprintf("have schema version %d", v)
}

func (s *Store) migrationError(from int, err error) error {
	what := fmt.Sprintf("migrating the tables with prefix %q on %s from schema version %d to %d", s.prefix, s.addr, from, SchemaVersion)
	if from == 0 {
		what = fmt.Sprintf("creating the tables with prefix %q on %s (schema version %d)", s.prefix, s.addr, SchemaVersion)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == sqlstatePrivilege {
		return fmt.Errorf("pgstore: %s: %w: the role needs CREATE on the schema and must own the tables; "+
			"a role with only DML grants can open tables already at version %d (see the package documentation, Roles)",
			what, err, SchemaVersion)
	}
	return fmt.Errorf("pgstore: %s: %w", what, err)
}

// readSchemaVersion returns the schema version of the tables under the
// prefix: the schema table's, else 1 when the messages table exists (the
// builds before version 2 kept no version), else 0 (nothing created yet).
// It reads the catalog (to_regclass, which resolves names on the
// search_path as the queries do) and the schema table only.
func (s *Store) readSchemaVersion(ctx context.Context, tx pgx.Tx) (int, error) {
	var hasSchema, hasMessages bool
	err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL",
		s.q.schemaTable, s.q.messagesTable).Scan(&hasSchema, &hasMessages)
	if err != nil {
		return 0, fmt.Errorf("pgstore: looking up the tables with prefix %q on %s: %w", s.prefix, s.addr, err)
	}
	switch {
	case hasSchema:
		var v int
		err := tx.QueryRow(ctx, s.q.schemaVersion).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("%w: pgstore: the schema table %s on %s holds no version", ErrSchemaVersion, s.q.schemaTable, s.addr)
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == sqlstatePrivilege {
			return 0, fmt.Errorf("pgstore: reading the schema version from %s on %s: %w: the role needs SELECT on it (see the package documentation, Roles)",
				s.q.schemaTable, s.addr, err)
		}
		if err != nil {
			return 0, fmt.Errorf("pgstore: reading the schema version from %s on %s: %w", s.q.schemaTable, s.addr, err)
		}
		return v, nil
	case hasMessages:
		return 1, nil
	}
	return 0, nil
}

// checkCtx is the argument check of the calls that take no identity.
func (s *Store) checkCtx(ctx context.Context, op string) error {
	if ctx == nil {
		return fmt.Errorf("%w: pgstore: %s: nil context", store.ErrInvalidArgument, op)
	}
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s: %w", op, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return nil
}
