package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/storekit"
)

// moveForgotten draws a fresh forgotten version and stores it in the
// reserved row of the bucket (empty ns and name, identity bucketKey) of
// tenant's user — or, with every set, of every bucket and the file-wide
// row: Forget and ForgetScope do it first.
func moveForgotten(ctx context.Context, tx *sql.Tx, tenant, user string, every bool) error {
	forgotten, err := drawVersion(ctx, tx)
	if err != nil {
		return err
	}
	const upsert = ` ON CONFLICT (ns, identity, name) DO UPDATE SET version = excluded.version`
	if every {
		_, err = tx.ExecContext(ctx, `WITH RECURSIVE b(n) AS (SELECT -1 UNION ALL SELECT n + 1 FROM b WHERE n < ?)
			INSERT INTO memstack_state (ns, identity, name, version, value)
			SELECT '', CASE WHEN n < 0 THEN '' ELSE '#' || n END, '', ?, X'' FROM b WHERE true`+upsert, storekit.ForgetBuckets-1, forgotten)
	} else {
		_, err = tx.ExecContext(ctx, `INSERT INTO memstack_state (ns, identity, name, version, value) VALUES ('', ?, '', ?, X'')`+upsert,
			bucketKey(memstack.Identity{Tenant: tenant, User: user}), forgotten)
	}
	if err != nil {
		return fmt.Errorf("storing the forgotten version: %w", err)
	}
	return nil
}

// namespacesSQL lists every namespace of the file (Open and New register
// theirs before they write); the empty ns of the forgotten version's
// row is none.
const namespacesSQL = `SELECT ns FROM memstack_namespaces WHERE ns <> ''`

// Clear implements store.Store: in one transaction it removes the
// identity's messages and state in this Store's namespace and gives the
// identity a fresh Clear mark there, so a commit that read before the
// Clear conflicts.
func (s *Store) Clear(ctx context.Context, id memstack.Identity) error {
	if err := s.begin(ctx, "Clear", id); err != nil {
		return err
	}
	key := id.Key()
	err := s.write(ctx, func(tx *sql.Tx) error { return clearTx(ctx, tx, s.ns, key) })
	if err != nil {
		return s.fail(ctx, "Clear", id, err)
	}
	return nil
}

// clearTx removes the messages and state of key in ns and gives it a
// fresh Clear mark: Clear, and Rewrite with reset.
func clearTx(ctx context.Context, tx *sql.Tx, ns, key string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM memstack_messages WHERE ns = ? AND identity = ?`, ns, key); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM memstack_stat WHERE ns = ? AND identity = ?`, ns, key); err != nil {
		return err
	}
	if err := deleteIndex(ctx, tx, ns, key); err != nil {
		return err
	}
	return resetState(ctx, tx, ns, key)
}

// resetState removes the state values of key in ns and gives it a fresh
// Clear mark.
func resetState(ctx context.Context, tx *sql.Tx, ns, key string) error {
	// Every state row of the identity goes, its old mark included.
	if _, err := tx.ExecContext(ctx, `DELETE FROM memstack_state WHERE ns = ? AND identity = ?`, ns, key); err != nil {
		return err
	}
	mark, err := drawVersion(ctx, tx)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx,
		`INSERT INTO memstack_state (ns, identity, name, version, value) VALUES (?, ?, '', ?, X'')`, ns, key, mark)
	return err
}

// Forget implements store.Store: in one transaction it moves the
// forgotten version of the identity's user bucket (storekit.ForgetBucket),
// then removes the identity's messages, state and Clear
// marks in every namespace of the file.
func (s *Store) Forget(ctx context.Context, id memstack.Identity) error {
	if err := s.begin(ctx, "Forget", id); err != nil {
		return err
	}
	key := id.Key()
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := moveForgotten(ctx, tx, id.Tenant, id.User, false); err != nil {
			return err
		}
		// Every namespace that has rows is registered (Open does it), and
		// the IN list lets every delete seek the (ns, identity, …) keys.
		// ns '' is never a namespace: the forgotten version stays.
		for _, q := range []string{
			`DELETE FROM memstack_messages WHERE ns IN (` + namespacesSQL + `) AND identity = ?`,
			`DELETE FROM memstack_state WHERE ns IN (` + namespacesSQL + `) AND identity = ?`,
			`DELETE FROM memstack_stat WHERE ns IN (` + namespacesSQL + `) AND identity = ?`,
			`DELETE FROM memstack_recall_conv WHERE ns IN (` + namespacesSQL + `) AND identity = ?`,
			`DELETE FROM memstack_recall_units WHERE ns IN (` + namespacesSQL + `) AND identity = ?`,
			`DELETE FROM memstack_recall_terms WHERE ns IN (` + namespacesSQL + `) AND identity = ?`,
			`DELETE FROM memstack_recall_days WHERE ns IN (` + namespacesSQL + `) AND identity = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, key); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.fail(ctx, "Forget", id, err)
	}
	return nil
}
