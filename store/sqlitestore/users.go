package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// scopeRange returns the range of identity keys within scope: every key
// k with lo <= k < hi starts with scope.KeyPrefix() and no other key is in
// it (a key part never contains ':', and ';' follows ':'). Every table is
// keyed (ns, identity, …), so per namespace the range is one index range.
func scopeRange(scope store.Scope) (lo, hi string) {
	lo = scope.KeyPrefix()
	return lo, lo[:len(lo)-1] + ";"
}

// inScope restricts a query on a table with ns and identity columns to
// the registered namespaces and the identity range ?1 to ?2.
const inScope = `ns IN (` + namespacesSQL + `) AND identity >= ?1 AND identity < ?2`

// scopeIdentitiesSQL lists the identity keys within a scope that hold
// anything: messages (every conversation with messages has a
// memstack_stat row), state values or a Clear mark, by key.
const scopeIdentitiesSQL = `SELECT identity FROM memstack_stat WHERE ` + inScope + `
	UNION SELECT identity FROM memstack_state WHERE ` + inScope + `
	ORDER BY 1`

// checkScope is check for a call on scope, which must be valid.
func (s *Store) checkScope(ctx context.Context, op string, scope store.Scope) (string, error) {
	what := op + " of " + scope.String()
	if err := s.check(ctx, what); err != nil {
		return what, err
	}
	if err := scope.Check(); err != nil {
		return what, fmt.Errorf("sqlitestore: %s: %w", what, err)
	}
	return what, nil
}

// querier is what Identities reads through: the database, or the
// transaction of Export or ForgetScope.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// scopeIdentities runs scopeIdentitiesSQL.
func scopeIdentities(ctx context.Context, q querier, scope store.Scope) ([]memstack.Identity, error) {
	lo, hi := scopeRange(scope)
	rows, err := q.QueryContext(ctx, scopeIdentitiesSQL, lo, hi)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memstack.Identity
	for rows.Next() {
		var key string
		if err := rows.Scan(&key); err != nil {
			return nil, err
		}
		id, err := parseKey(key)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// parseKey parses a stored identity key; one that does not parse was not
// written by a Store.
func parseKey(key string) (memstack.Identity, error) {
	id, err := memstack.ParseKey(key)
	if err != nil {
		return memstack.Identity{}, fmt.Errorf("%w: stored identity key %q: %w", store.ErrCorrupt, key, err)
	}
	return id, nil
}

// Identities implements store.Users: every identity within scope with
// messages, state values or a Clear mark in any namespace of the file,
// ordered by Key — one statement over the memstack_stat and memstack_state
// keys, so its cost grows with the number of conversations, not messages.
func (s *Store) Identities(ctx context.Context, scope store.Scope) ([]memstack.Identity, error) {
	what, err := s.checkScope(ctx, "Identities", scope)
	if err != nil {
		return nil, err
	}
	ids, err := scopeIdentities(ctx, s.db, scope)
	if err != nil {
		return nil, s.failed(ctx, what, err)
	}
	return ids, nil
}

// Follows implements store.ChangeFeed: a Store follows every scope.
func (s *Store) Follows(store.Scope) bool { return true }

// changedSQL lists the identities of the namespace ?1 in the key range
// ?2 to ?3 whose last Seq is above ?4: one range of memstack_stat's
// primary key, which every Append keeps in step in its own transaction.
const changedSQL = `SELECT identity, last_seq FROM memstack_stat
	WHERE ns = ?1 AND identity >= ?2 AND identity < ?3 AND last_seq > ?4 ORDER BY identity`

// Changed implements store.ChangeFeed from memstack_stat: the identities
// of scope, in this Store's namespace, whose last Seq is above mark. Seqs
// come from the file's one AUTOINCREMENT and SQLite runs one write
// transaction at a time (in every process sharing the file), so Seqs are
// committed in increasing order: the statement's snapshot holds every
// message up to the greatest Seq it shows, and next is that Seq (or mark,
// when nothing is newer). It reads the scope's stat rows, one per
// conversation with messages, and writes nothing.
func (s *Store) Changed(ctx context.Context, scope store.Scope, mark int64) ([]memstack.Identity, int64, error) {
	what, err := s.checkScope(ctx, "Changed", scope)
	if err != nil {
		return nil, 0, err
	}
	lo, hi := scopeRange(scope)
	rows, err := s.db.QueryContext(ctx, changedSQL, s.ns, lo, hi, mark)
	if err != nil {
		return nil, 0, s.failed(ctx, what, err)
	}
	defer rows.Close()
	var ids []memstack.Identity
	next := mark
	for rows.Next() {
		var key string
		var last int64
		if err := rows.Scan(&key, &last); err != nil {
			return nil, 0, s.failed(ctx, what, err)
		}
		id, err := parseKey(key)
		if err != nil {
			return nil, 0, s.failed(ctx, what, err)
		}
		ids = append(ids, id)
		next = max(next, last)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, s.failed(ctx, what, err)
	}
	return ids, next, nil
}

// Export implements store.Users: everything the file holds for the
// identities within scope, in every namespace, read in one transaction
// (one snapshot of the file). A stored message that does not decode fails
// the export with an error wrapping store.ErrCorrupt that names the
// identity and Seq.
func (s *Store) Export(ctx context.Context, scope store.Scope) (store.Export, error) {
	what, err := s.checkScope(ctx, "Export", scope)
	if err != nil {
		return store.Export{}, err
	}
	ex, err := s.export(ctx, scope)
	if err != nil {
		return store.Export{}, s.failed(ctx, what, err)
	}
	return ex, nil
}

func (s *Store) export(ctx context.Context, scope store.Scope) (store.Export, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // a plain (deferred) BEGIN
	if err != nil {
		return store.Export{}, err
	}
	defer func() { _ = tx.Rollback() }()
	type place struct{ key, ns string }
	entries := map[place]*store.NamespaceExport{}
	ids := map[string]memstack.Identity{}
	entry := func(key, ns string) (*store.NamespaceExport, memstack.Identity, error) {
		id, ok := ids[key]
		if !ok {
			var err error
			if id, err = parseKey(key); err != nil {
				return nil, id, err
			}
			ids[key] = id
		}
		ne := entries[place{key, ns}]
		if ne == nil {
			ne = &store.NamespaceExport{Namespace: ns, Messages: []store.Record{}, States: map[string]store.State{}}
			entries[place{key, ns}] = ne
		}
		return ne, id, nil
	}
	lo, hi := scopeRange(scope)

	states, err := tx.QueryContext(ctx, `SELECT identity, ns, name, version, value FROM memstack_state WHERE `+inScope, lo, hi)
	if err != nil {
		return store.Export{}, err
	}
	defer states.Close()
	for states.Next() {
		var key, ns, name string
		var st store.State
		if err := states.Scan(&key, &ns, &name, &st.Version, &st.Value); err != nil {
			return store.Export{}, err
		}
		ne, _, err := entry(key, ns)
		if err != nil {
			return store.Export{}, err
		}
		switch {
		case name == "":
			ne.Cleared = true // the Clear mark: not a state value
		case st.Value == nil:
			st.Value = []byte{} // a stored empty value is a value
			fallthrough
		default:
			ne.States[name] = st
		}
	}
	if err := states.Err(); err != nil {
		return store.Export{}, err
	}

	msgs, err := tx.QueryContext(ctx, `SELECT identity, ns, seq, message FROM memstack_messages WHERE `+inScope+`
		ORDER BY ns, identity, seq`, lo, hi)
	if err != nil {
		return store.Export{}, err
	}
	defer msgs.Close()
	for msgs.Next() {
		var key, ns string
		var seq int64
		var data []byte
		if err := msgs.Scan(&key, &ns, &seq, &data); err != nil {
			return store.Export{}, err
		}
		ne, id, err := entry(key, ns)
		if err != nil {
			return store.Export{}, err
		}
		rec, err := storekit.DecodeRecord(id, seq, data)
		if err != nil {
			return store.Export{}, err
		}
		ne.Messages = append(ne.Messages, rec)
	}
	if err := msgs.Err(); err != nil {
		return store.Export{}, err
	}

	out := store.Export{Scope: scope}
	at := map[string]int{}
	for p, ne := range entries {
		i, ok := at[p.key]
		if !ok {
			i = len(out.Identities)
			at[p.key] = i
			out.Identities = append(out.Identities, store.IdentityExport{Identity: ids[p.key]})
		}
		out.Identities[i].Namespaces = append(out.Identities[i].Namespaces, *ne)
	}
	storekit.SortExport(&out)
	return out, nil
}

// ForgetScope implements store.Users in one transaction: it draws a fresh
// file-wide forgotten version first (so every commit that read an
// identity's state before conflicts), then deletes every message, state
// value, Clear mark and memstack_stat row of every identity within scope,
// in every namespace of the file, and returns how many identities held
// anything. Nothing of it is left, not even a mark; the rows of every
// other identity are untouched. The deleted bytes may linger in free pages
// of the file and in the WAL until SQLite reuses them (see "Forgetting" in
// the package documentation).
func (s *Store) ForgetScope(ctx context.Context, scope store.Scope) (int, error) {
	what, err := s.checkScope(ctx, "ForgetScope", scope)
	if err != nil {
		return 0, err
	}
	lo, hi := scopeRange(scope)
	var n int
	err = s.write(ctx, func(tx *sql.Tx) error {
		ids, err := scopeIdentities(ctx, tx, scope)
		if err != nil {
			return err
		}
		n = len(ids)
		if err := moveForgotten(ctx, tx, scope.Tenant, scope.User, scope.AllUsers); err != nil {
			return err
		}
		for _, table := range append([]string{"memstack_messages", "memstack_state", "memstack_stat"}, recallTables...) {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE `+inScope, lo, hi); err != nil {
				return fmt.Errorf("deleting from %s: %w", table, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, s.failed(ctx, what, err)
	}
	return n, nil
}
