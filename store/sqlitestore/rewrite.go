package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/storekit"
)

// Rewrite implements store.Rewriter in one transaction: it deletes the
// identity's messages with Seq <= through in this Store's namespace
// (system messages too), with reset removes its state values and gives it
// a fresh Clear mark as Clear does, inserts msgs — new Seqs from the
// file's AUTOINCREMENT, after every Seq before, dated
// storekit.AppendTime(ctx) — and brings its memstack_stat row up to date. A
// reader sees the conversation from before or from after; a failure
// changes nothing.
func (s *Store) Rewrite(ctx context.Context, id memstack.Identity, through int64, reset bool, msgs ...llms.ChatMessage) (int, error) {
	if err := s.begin(ctx, "Rewrite", id); err != nil {
		return 0, err
	}
	rows := make([]appendRow, len(msgs))
	var at time.Time
	if len(msgs) > 0 {
		at = storekit.AppendTime(ctx)
		if err := storekit.CheckTime(at); err != nil {
			return 0, fmt.Errorf("sqlitestore: Rewrite of %s: %w", id.Key(), err)
		}
		for i, m := range msgs {
			data, err := storekit.EncodeMessageAt(m, at)
			if err != nil {
				return 0, fmt.Errorf("sqlitestore: Rewrite of %s: message %d of %d: %w", id.Key(), i+1, len(msgs), err)
			}
			rows[i] = appendRow{system: m.GetType() == llms.ChatMessageTypeSystem, data: data}
		}
	}
	index := indexkit.Prepare(msgs) // tokenised before the transaction
	key := id.Key()
	var removed int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		// The index follows the rewrite if the conversation has an index
		// state, or had no messages and the file keeps the index (a
		// conversation that predates the index is the backfill's).
		_, indexed, err := readConv(ctx, tx, s.ns, key)
		if err != nil {
			return err
		}
		on, err := indexing(ctx, tx)
		if err != nil {
			return err
		}
		if !indexed && on {
			var count int64
			err := tx.QueryRowContext(ctx, `SELECT count FROM memstack_stat WHERE ns = ? AND identity = ?`, s.ns, key).Scan(&count)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			indexed = count == 0
		}
		res, err := tx.ExecContext(ctx,
			`DELETE FROM memstack_messages WHERE ns = ? AND identity = ? AND seq <= ?`, s.ns, key, through)
		if err != nil {
			return err
		}
		if removed, err = res.RowsAffected(); err != nil {
			return err
		}
		if reset {
			if err := resetState(ctx, tx, s.ns, key); err != nil {
				return fmt.Errorf("resetting the state: %w", err)
			}
		}
		ins := tx.StmtContext(ctx, s.stmtInsert)
		added := pendingIndex{key: key, seqs: make([]int64, 0, len(rows)), msgs: index}
		for _, row := range rows {
			res, err := ins.ExecContext(ctx, s.ns, key, row.system, row.data, nil)
			if err != nil {
				return err
			}
			seq, err := res.LastInsertId()
			if err != nil {
				return fmt.Errorf("reading the Seq of a rewritten message: %w", err)
			}
			added.seqs = append(added.seqs, seq)
			added.at = append(added.at, at)
		}
		if removed == 0 && len(rows) == 0 {
			return nil
		}
		if indexed {
			// What the prefix held leaves the index as RemovePrefix's
			// does; the new messages join it as an Append's do.
			if removed > 0 {
				if err := s.trimIndex(ctx, tx, s.ns, key, through); err != nil {
					return err
				}
			}
			if len(rows) > 0 {
				if err := s.indexAppended(ctx, tx, s.ns, added); err != nil {
					return err
				}
			}
		}
		return restat(ctx, tx, s.ns, key, int64(len(rows))-removed)
	})
	if err != nil {
		return 0, s.fail(ctx, "Rewrite", id, err)
	}
	return int(removed), nil
}
