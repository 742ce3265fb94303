package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// getStateQuery reads a state value, or the absent version of a name
// without one, in one statement: the value (rank 0), else the identity's
// Clear mark in the namespace (rank 1), else the forgotten version of the
// identity's user bucket (storekit.ForgetBucket), or the file-wide one that
// builds before buckets moved, whichever is greater, or 0 (rank 2). Each
// branch is a primary-key lookup. Its parameters are ns, identity key,
// name and the bucket's reserved identity (bucketKey).
const getStateQuery = `
	SELECT version, value, 0 FROM memstack_state WHERE ns = ?1 AND identity = ?2 AND name = ?3
	UNION ALL
	SELECT version, NULL, 1 FROM memstack_state WHERE ns = ?1 AND identity = ?2 AND name = ''
	UNION ALL
	SELECT coalesce(max(version), 0), NULL, 2 FROM memstack_state WHERE ns = '' AND name = '' AND identity IN ('', ?4)
	ORDER BY 3 LIMIT 1`

// bucketKey is the reserved identity of the row holding the forgotten
// version of id's user bucket: '#' and the bucket number, which no
// identity key (always two colons) can be.
func bucketKey(id memstack.Identity) string {
	return "#" + strconv.Itoa(storekit.ForgetBucket(id.Tenant, id.User))
}

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
func (s *Store) readState(ctx context.Context, st *sql.Stmt, id memstack.Identity, name string) (store.State, error) {
	var out store.State
	var rank int
	if err := st.QueryRowContext(ctx, s.ns, id.Key(), name, bucketKey(id)).Scan(&out.Version, &out.Value, &rank); err != nil {
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

// GetState implements store.Store: one statement, so it sees a Clear or
// Forget all before or all after.
func (s *Store) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	if err := s.begin(ctx, "GetState", id); err != nil {
		return store.State{}, err
	}
	if err := storekit.CheckStateName(name); err != nil {
		return store.State{}, err
	}
	st, err := s.readState(ctx, s.stmtGetState, id, name)
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
	if err := storekit.CheckStateName(name); err != nil {
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
		cur, err := s.readState(ctx, get, id, name)
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
			after, err := s.readState(ctx, get, id, name)
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
