package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// scanRecords reads (seq, message) rows and decodes them.
func scanRecords(id memstack.Identity, rows *sql.Rows, capacity int) ([]store.Record, error) {
	defer rows.Close()
	out := make([]store.Record, 0, capacity)
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return nil, err
		}
		rec, err := storekit.DecodeRecord(id, seq, data)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

// Last implements store.Store.
func (s *Store) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	if err := s.begin(ctx, "Last", id); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: sqlitestore: Last(n=%d): n must be at least 1", store.ErrInvalidArgument, n)
	}
	rows, err := s.stmtLast.QueryContext(ctx, s.ns, id.Key(), n)
	if err != nil {
		return nil, s.fail(ctx, "Last", id, err)
	}
	recs, err := scanRecords(id, rows, min(n, 64))
	if err != nil {
		return nil, s.fail(ctx, "Last", id, err)
	}
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	return recs, nil
}

// tailSQL is Tail's one statement: the identity's system messages, from
// the partial index memstack_messages_system, and its newest ?4
// non-system messages with a Seq above ?3, from a backward seek of the
// (ns, identity, seq) index that stops after ?4 rows or at ?3 — so it
// reads what it returns, however long the conversation. INDEXED BY makes
// the statement fail, rather than scan, if either index is missing.
// Its parameters are ns, identity key, after and n.
const tailSQL = `
	SELECT seq, message FROM memstack_messages INDEXED BY memstack_messages_system
		WHERE ns = ?1 AND identity = ?2 AND system = 1
	UNION ALL
	SELECT seq, message FROM (
		SELECT seq, message FROM memstack_messages INDEXED BY memstack_messages_conv
			WHERE ns = ?1 AND identity = ?2 AND seq > ?3 AND system = 0
			ORDER BY seq DESC LIMIT ?4)
	ORDER BY seq`

// Tail implements store.Store in one statement (tailSQL), which reads one
// snapshot of the file: it never shows half of an Append, and costs what
// it returns.
func (s *Store) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	if err := s.begin(ctx, "Tail", id); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: sqlitestore: Tail(n=%d) of %s: n must be at least 1", store.ErrInvalidArgument, n, id.Key())
	}
	rows, err := s.stmtTail.QueryContext(ctx, s.ns, id.Key(), after, n)
	if err != nil {
		return nil, s.fail(ctx, "Tail", id, err)
	}
	recs, err := scanRecords(id, rows, min(n, 64))
	if err != nil {
		return nil, s.fail(ctx, "Tail", id, err)
	}
	return recs, nil
}

// All implements store.Store.
func (s *Store) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	if err := s.begin(ctx, "All", id); err != nil {
		return nil, err
	}
	rows, err := s.stmtAll.QueryContext(ctx, s.ns, id.Key())
	if err != nil {
		return nil, s.fail(ctx, "All", id, err)
	}
	recs, err := scanRecords(id, rows, 16)
	if err != nil {
		return nil, s.fail(ctx, "All", id, err)
	}
	return recs, nil
}

// Stat implements store.Store: one primary-key lookup in memstack_stat,
// which every write keeps in step with the messages in its own
// transaction, so Stat agrees with All at every moment and costs the same
// at 10 messages as at 100k.
func (s *Store) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	if err := s.begin(ctx, "Stat", id); err != nil {
		return store.Stat{}, err
	}
	var st store.Stat
	err := s.stmtStat.QueryRowContext(ctx, s.ns, id.Key()).Scan(&st.Count, &st.FirstSeq, &st.LastSeq)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.Stat{}, nil
	case err != nil:
		return store.Stat{}, s.fail(ctx, "Stat", id, err)
	}
	return st, nil
}

// RemovePrefix implements store.Store.
func (s *Store) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	if err := s.begin(ctx, "RemovePrefix", id); err != nil {
		return 0, err
	}
	key := id.Key()
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`DELETE FROM memstack_messages WHERE ns = ? AND identity = ? AND seq <= ? AND system = 0`,
			s.ns, key, through)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		if err := s.trimIndex(ctx, tx, s.ns, key, through); err != nil {
			return err
		}
		return restat(ctx, tx, s.ns, key, -n)
	})
	if err != nil {
		return 0, s.fail(ctx, "RemovePrefix", id, err)
	}
	return int(n), nil
}

// ReadRanges implements store.RangeReader: one read-only transaction (one
// snapshot of the file), one seek of the (ns, identity, seq) index per
// range, so it reads what it returns.
func (s *Store) ReadRanges(ctx context.Context, ranges []store.SeqRange) ([][]store.Record, error) {
	const what = "ReadRanges"
	if err := s.check(ctx, what); err != nil {
		return nil, err
	}
	out := make([][]store.Record, len(ranges))
	if !slices.ContainsFunc(ranges, func(r store.SeqRange) bool { return r.From < r.To }) {
		return out, nil
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, s.failed(ctx, what, err)
	}
	defer tx.Rollback() //nolint:errcheck // a read
	stmt := tx.StmtContext(ctx, s.stmtRange)
	for i, r := range ranges {
		if r.From >= r.To {
			continue
		}
		rows, err := stmt.QueryContext(ctx, s.ns, r.ID.Key(), r.From, r.To)
		if err != nil {
			return nil, s.fail(ctx, what, r.ID, err)
		}
		if out[i], err = scanRecords(r.ID, rows, 16); err != nil {
			return nil, s.fail(ctx, what, r.ID, err)
		}
	}
	return out, nil
}

var _ store.RangeReader = (*Store)(nil)
