package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/storekit"
)

// The recall index (schema version 4; see store.RecallSearcher and
// package indexkit): per conversation its indexkit.Conv state, its unit
// entries by chunk, and its postings by (term, chunk). Postings are keyed
// by term first, so a search of a user's or a tenant's conversations
// reads one key range per query term; memstack_recall_terms_conv finds a
// conversation's postings for a Clear, a Forget or a prefix removal.
// memstack_recall_meta records whether every conversation of the file is
// indexed (a file migrated from version 3 is indexed in the background).
var recallSchema = []string{
	`CREATE TABLE IF NOT EXISTS memstack_recall_conv (
		ns       TEXT NOT NULL,
		identity TEXT NOT NULL,
		state    BLOB NOT NULL,
		PRIMARY KEY (ns, identity)
	) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS memstack_recall_units (
		ns       TEXT    NOT NULL,
		identity TEXT    NOT NULL,
		chunk    INTEGER NOT NULL,
		data     BLOB    NOT NULL,
		PRIMARY KEY (ns, identity, chunk)
	) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS memstack_recall_terms (
		ns       TEXT    NOT NULL,
		term     TEXT    NOT NULL,
		identity TEXT    NOT NULL,
		chunk    INTEGER NOT NULL,
		data     BLOB    NOT NULL,
		PRIMARY KEY (ns, term, identity, chunk)
	) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS memstack_recall_terms_conv ON memstack_recall_terms (ns, identity, chunk)`,
	`CREATE TABLE IF NOT EXISTS memstack_recall_days (
		ns       TEXT    NOT NULL,
		day      INTEGER NOT NULL,
		identity TEXT    NOT NULL,
		chunk    INTEGER NOT NULL,
		data     BLOB    NOT NULL,
		PRIMARY KEY (ns, day, identity, chunk)
	) WITHOUT ROWID`,
	`CREATE INDEX IF NOT EXISTS memstack_recall_days_conv ON memstack_recall_days (ns, identity, day)`,
	`CREATE TABLE IF NOT EXISTS memstack_recall_meta (
		id       INTEGER PRIMARY KEY CHECK (id = 1),
		enabled  INTEGER NOT NULL,
		complete INTEGER NOT NULL
	)`,
	`INSERT OR IGNORE INTO memstack_recall_meta (id, enabled, complete) VALUES (1, 0, 0)`,
}

// enableSQL turns the file's recall index on (WithRecallIndex), once: a
// file without messages has nothing to index and is complete at once,
// another is indexed by the backfill.
const enableSQL = `UPDATE memstack_recall_meta SET enabled = 1, complete = NOT EXISTS (SELECT 1 FROM memstack_stat) WHERE enabled = 0`

// WithRecallIndex turns on the file's recall index (store.RecallSearcher;
// see "The recall index" in the package documentation): from then on every
// Store writing the file — with the option or without, in any process —
// keeps it in its transactions, and a memories.Recall with the default
// index over the file searches it. The index is the file's: once on, it
// stays on. Turning it on for a file with messages indexes them in the
// background. Without it (the default) an Append writes what it wrote
// before the index existed: the index costs an append several times over
// (see docs/stores.md). A read-only Store (WithReadOnly) refuses it.
func WithRecallIndex() Option {
	return func(c *config) error {
		c.recall = true
		return nil
	}
}

// indexing reports, in a write transaction, whether the file keeps the
// recall index: every writer reads it in the transaction it writes in, so
// a Store of another process that turned it on meanwhile is followed.
func indexing(ctx context.Context, tx *sql.Tx) (bool, error) {
	var on bool
	if err := tx.QueryRowContext(ctx, `SELECT enabled FROM memstack_recall_meta`).Scan(&on); err != nil {
		return false, fmt.Errorf("recall index: reading whether it is on: %w", err)
	}
	return on, nil
}

// recallTables are the index's tables keyed (ns, identity, …), for the
// deletes of Clear, Forget and ForgetScope.
var recallTables = []string{"memstack_recall_conv", "memstack_recall_units", "memstack_recall_terms", "memstack_recall_days"}

// errCorruptIndex wraps store.ErrCorrupt for an index row that does not
// decode (not a message: the index is rebuilt from the messages).
var errCorruptIndex = fmt.Errorf("%w (an index row, not a message)", store.ErrCorrupt)

// pendingIndex is what one group commit appends to one identity, for
// the index.
type pendingIndex struct {
	key  string
	seqs []int64
	msgs []indexkit.Message
	at   []time.Time // each message's time (storekit.AppendTime of its Append)
}

// derivedKey reports whether the identity key names a derived identity
// (storekit.Derived: memstack's own, such as a user's facts or a recall
// journal), which the index leaves out: a search never counts or returns
// one, as memories.Recall's in-process index never holds one.
func derivedKey(key string) bool {
	id, err := memstack.ParseKey(key)
	return err == nil && storekit.Derived(id)
}

// indexAppended adds p's messages, just inserted in tx, to the index. A
// conversation with no index state that had messages before (count, read
// before this commit's are counted) predates the index: the backfill
// indexes it whole, so it is left alone here.
func (s *Store) indexAppended(ctx context.Context, tx *sql.Tx, ns string, p pendingIndex) error {
	if derivedKey(p.key) {
		return nil
	}
	st, ok, err := readConv(ctx, tx, ns, p.key)
	if errors.Is(err, store.ErrCorrupt) {
		// The index is derived from the messages: a state that does not
		// decode (a row changed behind the store's back) is rebuilt from
		// them, the new ones included, never an append's failure.
		_, err := s.reindex(ctx, tx, ns, p.key)
		return err
	}
	if err != nil {
		return err
	}
	if !ok {
		var count int64
		err := tx.QueryRowContext(ctx, `SELECT count FROM memstack_stat WHERE ns = ? AND identity = ?`, ns, p.key).Scan(&count)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("recall index: reading the message count: %w", err)
		}
		if count > 0 {
			return nil
		}
		st = indexkit.NewConv()
	}
	w, err := st.Add(p.seqs, p.msgs)
	if err != nil {
		return fmt.Errorf("recall index: %w", err)
	}
	if err := s.writeRows(ctx, tx, ns, p.key, w); err != nil {
		return err
	}
	if err := s.writeDays(ctx, tx, ns, p.key, w.Opened, p.seqs, p.at); err != nil {
		return err
	}
	return writeConv(ctx, tx, ns, p.key, st)
}

// upsertDaysSQL appends opened units' entries to a day row.
const upsertDaysSQL = `INSERT INTO memstack_recall_days (ns, day, identity, chunk, data) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (ns, day, identity, chunk) DO UPDATE SET data = data || excluded.data`

// writeDays files the units opened (their Seqs among seqs, whose times
// are at) under their days: one row per day and conversation
// (indexkit.DayRows).
func (s *Store) writeDays(ctx context.Context, tx *sql.Tx, ns, key string, opened []indexkit.Opened, seqs []int64, at []time.Time) error {
	rows := indexkit.DayRows(opened, seqs, at)
	if len(rows) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, s.stmtUpDays)
	for _, r := range rows {
		if _, err := st.ExecContext(ctx, ns, r.Day, key, r.Chunk, r.Data); err != nil {
			return fmt.Errorf("recall index: writing the units of a day: %w", err)
		}
	}
	return nil
}

func readConv(ctx context.Context, tx *sql.Tx, ns, key string) (indexkit.Conv, bool, error) {
	var data []byte
	err := tx.QueryRowContext(ctx, `SELECT state FROM memstack_recall_conv WHERE ns = ? AND identity = ?`, ns, key).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return indexkit.Conv{}, false, nil
	}
	if err != nil {
		return indexkit.Conv{}, false, fmt.Errorf("recall index: reading the state of %s: %w", key, err)
	}
	var c indexkit.Conv
	if err := c.UnmarshalBinary(data); err != nil {
		return indexkit.Conv{}, false, fmt.Errorf("%w: recall index: the state of %s: %w", errCorruptIndex, key, err)
	}
	return c, true, nil
}

func writeConv(ctx context.Context, tx *sql.Tx, ns, key string, c indexkit.Conv) error {
	data, _ := c.MarshalBinary()
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO memstack_recall_conv (ns, identity, state) VALUES (?, ?, ?)`, ns, key, data); err != nil {
		return fmt.Errorf("recall index: writing the state of %s: %w", key, err)
	}
	return nil
}

// Upserts of one chunk row: appended to the row's value (SQL's ||), one
// row a statement — a statement of several rows would need SQLite's
// statement journal, a temporary file written on every append.
const (
	upsertUnitsSQL = `INSERT INTO memstack_recall_units (ns, identity, chunk, data) VALUES (?, ?, ?, ?)
		ON CONFLICT (ns, identity, chunk) DO UPDATE SET data = data || excluded.data`
	upsertTermsSQL = `INSERT INTO memstack_recall_terms (ns, term, identity, chunk, data) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (ns, term, identity, chunk) DO UPDATE SET data = data || excluded.data`
)

// writeRows appends w's entries to their chunk rows.
func (s *Store) writeRows(ctx context.Context, tx *sql.Tx, ns, key string, w indexkit.Writes) error {
	units := tx.StmtContext(ctx, s.stmtUpUnits)
	for _, u := range w.Units {
		if _, err := units.ExecContext(ctx, ns, key, u.Chunk, u.Data); err != nil {
			return fmt.Errorf("recall index: writing unit entries: %w", err)
		}
	}
	terms := tx.StmtContext(ctx, s.stmtUpTerms)
	for _, t := range w.Terms {
		if _, err := terms.ExecContext(ctx, ns, t.Term, key, t.Chunk, t.Data); err != nil {
			return fmt.Errorf("recall index: writing postings: %w", err)
		}
	}
	return nil
}

// deleteIndex removes the index rows of key in ns: Clear, and Rewrite
// before it indexes the conversation again.
func deleteIndex(ctx context.Context, tx *sql.Tx, ns, key string) error {
	for _, table := range recallTables {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE ns = ? AND identity = ?`, ns, key); err != nil {
			return fmt.Errorf("recall index: deleting from %s: %w", table, err)
		}
	}
	return nil
}

// trimIndex takes the messages RemovePrefix removed (non-system, Seq <=
// through) out of key's index: the chunks they fill are deleted, the one
// they share with later messages filtered, and the state recomputed from
// the entries left (O(the conversation's unit entries)).
func (s *Store) trimIndex(ctx context.Context, tx *sql.Tx, ns, key string, through int64) error {
	err := s.trimIndexRows(ctx, tx, ns, key, through)
	if errors.Is(err, store.ErrCorrupt) {
		// Rows that do not decode: the conversation's index is rebuilt
		// from the messages left (the removal already happened in tx).
		_, err = s.reindex(ctx, tx, ns, key)
	}
	return err
}

// trimIndexRows is trimIndex over rows that decode; a row that does not is
// an error wrapping store.ErrCorrupt.
func (s *Store) trimIndexRows(ctx context.Context, tx *sql.Tx, ns, key string, through int64) error {
	st, ok, err := readConv(ctx, tx, ns, key)
	if err != nil || !ok {
		return err
	}
	chunks, err := queryBlobs[int64](ctx, tx, `SELECT chunk, data FROM memstack_recall_units WHERE ns = ? AND identity = ? ORDER BY chunk`, ns, key)
	if err != nil {
		return fmt.Errorf("recall index: reading unit entries: %w", err)
	}
	var all []byte
	// Chunks the removal empties are deleted with one range delete per
	// table (they come first: chunks follow Seqs); a chunk it cuts is
	// filtered.
	emptied, prefix := int64(-1), true
	for _, c := range chunks {
		kept, err := indexkit.DropThrough(c.data, false, through)
		if err != nil {
			return fmt.Errorf("%w: recall index of %s, chunk %d: %w", errCorruptIndex, key, c.key, err)
		}
		all = append(all, kept...)
		switch {
		case len(kept) == len(c.data):
			prefix = false
			continue
		case len(kept) == 0 && prefix:
			emptied = c.key
			continue
		}
		prefix = false
		if err := trimChunk(ctx, tx, ns, key, c.key, kept, through); err != nil {
			return err
		}
	}
	if emptied >= 0 {
		for _, table := range []string{"memstack_recall_units", "memstack_recall_terms"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE ns = ? AND identity = ? AND chunk <= ?`, ns, key, emptied); err != nil {
				return fmt.Errorf("recall index: deleting emptied chunks: %w", err)
			}
		}
	}
	// Day rows whose Seqs the removal took all of (a row's are below
	// (chunk+1)·indexkit.DaySeqs); a row it cut keeps entries a reader skips.
	if _, err := tx.ExecContext(ctx, `DELETE FROM memstack_recall_days WHERE ns = ? AND identity = ? AND chunk < ?`, ns, key, (through+1)/indexkit.DaySeqs); err != nil {
		return fmt.Errorf("recall index: deleting the days of removed units: %w", err)
	}
	st, err = indexkit.Rebuild(all, st.Msgs)
	if err != nil {
		return fmt.Errorf("%w: recall index of %s: %w", errCorruptIndex, key, err)
	}
	// A unit the removal cut now starts at its first message left: filed
	// under that message's day (again, if it opened the unit).
	if first, ok, err := indexkit.FirstOpened(all, st); err != nil {
		return fmt.Errorf("%w: recall index of %s: %w", errCorruptIndex, key, err)
	} else if ok {
		var data []byte
		err := tx.QueryRowContext(ctx, `SELECT message FROM memstack_messages WHERE ns = ? AND identity = ? AND seq = ?`, ns, key, first.Seq).Scan(&data)
		if err != nil {
			return fmt.Errorf("recall index: reading the first message left: %w", err)
		}
		id, err := parseKey(key)
		if err != nil {
			return err
		}
		if rec, err := storekit.DecodeRecord(id, first.Seq, data); err == nil {
			if err := s.writeDays(ctx, tx, ns, key, []indexkit.Opened{first}, []int64{first.Seq}, []time.Time{rec.Time}); err != nil {
				return err
			}
		}
	}
	return writeConv(ctx, tx, ns, key, st)
}

// trimChunk writes what is left of one chunk after a prefix removal: its
// unit entries kept, and its postings filtered the same way.
func trimChunk(ctx context.Context, tx *sql.Tx, ns, key string, chunk int64, kept []byte, through int64) error {
	if len(kept) == 0 {
		for _, q := range []string{
			`DELETE FROM memstack_recall_units WHERE ns = ? AND identity = ? AND chunk = ?`,
			`DELETE FROM memstack_recall_terms WHERE ns = ? AND identity = ? AND chunk = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, ns, key, chunk); err != nil {
				return fmt.Errorf("recall index: deleting a chunk: %w", err)
			}
		}
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE memstack_recall_units SET data = ? WHERE ns = ? AND identity = ? AND chunk = ?`, kept, ns, key, chunk); err != nil {
		return fmt.Errorf("recall index: rewriting a chunk: %w", err)
	}
	terms, err := queryBlobs[string](ctx, tx, `SELECT term, data FROM memstack_recall_terms WHERE ns = ? AND identity = ? AND chunk = ?`, ns, key, chunk)
	if err != nil {
		return fmt.Errorf("recall index: reading postings: %w", err)
	}
	for _, t := range terms {
		left, err := indexkit.DropThrough(t.data, true, through)
		if err != nil {
			return fmt.Errorf("%w: recall index of %s, term %q: %w", errCorruptIndex, key, t.key, err)
		}
		var q string
		args := []any{ns, t.key, key, chunk}
		switch {
		case len(left) == len(t.data):
			continue
		case len(left) == 0:
			q = `DELETE FROM memstack_recall_terms WHERE ns = ? AND term = ? AND identity = ? AND chunk = ?`
		default:
			q = `UPDATE memstack_recall_terms SET data = ? WHERE ns = ? AND term = ? AND identity = ? AND chunk = ?`
			args = append([]any{left}, args...)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("recall index: rewriting postings: %w", err)
		}
	}
	return nil
}

// reindex indexes key's stored messages afresh: Rewrite, and the
// backfill of a migrated file. A stored message that does not decode is
// left out of the index (it cannot be shown either); the rest is indexed.
// It returns how many messages it read.
func (s *Store) reindex(ctx context.Context, tx *sql.Tx, ns, key string) (int, error) {
	if err := deleteIndex(ctx, tx, ns, key); err != nil {
		return 0, err
	}
	id, err := parseKey(key)
	if err != nil {
		return 0, err
	}
	if storekit.Derived(id) {
		return 0, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, message FROM memstack_messages WHERE ns = ? AND identity = ? ORDER BY seq`, ns, key)
	if err != nil {
		return 0, fmt.Errorf("recall index: reading the messages of %s: %w", key, err)
	}
	var seqs []int64
	var msgs []llms.ChatMessage
	var at []time.Time
	n := 0
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			rows.Close()
			return 0, fmt.Errorf("recall index: reading the messages of %s: %w", key, err)
		}
		n++
		rec, err := storekit.DecodeRecord(id, seq, data)
		if err != nil {
			continue
		}
		seqs, msgs, at = append(seqs, seq), append(msgs, rec.Message), append(at, rec.Time)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("recall index: reading the messages of %s: %w", key, err)
	}
	st := indexkit.NewConv()
	w, err := st.Add(seqs, indexkit.Prepare(msgs))
	if err != nil {
		return 0, fmt.Errorf("recall index: %w", err)
	}
	if err := s.writeRows(ctx, tx, ns, key, w); err != nil {
		return 0, err
	}
	if err := s.writeDays(ctx, tx, ns, key, w.Opened, seqs, at); err != nil {
		return 0, err
	}
	return n, writeConv(ctx, tx, ns, key, st)
}

// backfillBatch is how many messages one backfill transaction indexes at
// most (a conversation is indexed whole, in one transaction, however
// long), so appends wait for the write lock briefly. A variable for tests.
var backfillBatch = 5000

// afterBackfillTx, if not nil, is called after each backfill transaction
// commits (tests stop a backfill part-way with it).
var afterBackfillTx func()

// backfill indexes, a transaction at a time, every conversation of the
// file (every namespace) that has no index state — those stored before
// the file had the index — in key order, then records the index
// complete. Appends meanwhile index the conversations that have a state
// (or none before) and leave the others to it. It stops when ctx is done
// or a transaction fails; the next Open of the file (by any process)
// starts again where the rows written show it stopped.
func (s *Store) backfill(ctx context.Context) error {
	var after [2]string // the last (ns, identity) looked at, committed
	for {
		// The body may run again (write retries a busy transaction): it
		// starts from after each time, and after moves only once the
		// transaction committed.
		var done bool
		var next [2]string
		err := s.write(ctx, func(tx *sql.Tx) error {
			n := 0
			done = false
			cursor := after
			for n < backfillBatch {
				rows, err := tx.QueryContext(ctx, `SELECT s.ns, s.identity, c.ns IS NOT NULL FROM memstack_stat s
					LEFT JOIN memstack_recall_conv c ON c.ns = s.ns AND c.identity = s.identity
					WHERE (s.ns, s.identity) > (?, ?) ORDER BY s.ns, s.identity LIMIT 64`, cursor[0], cursor[1])
				if err != nil {
					return err
				}
				type row struct {
					k       [2]string
					indexed bool
				}
				var got []row
				for rows.Next() {
					var r row
					if err := rows.Scan(&r.k[0], &r.k[1], &r.indexed); err != nil {
						rows.Close()
						return err
					}
					got = append(got, r)
				}
				rows.Close()
				if err := rows.Err(); err != nil {
					return err
				}
				seen := len(got)
				for _, r := range got {
					if n >= backfillBatch {
						break
					}
					cursor = r.k
					if r.indexed {
						continue
					}
					m, err := s.reindex(ctx, tx, r.k[0], r.k[1])
					if err != nil {
						return err
					}
					n += m
				}
				if seen == 0 {
					// Past the last conversation: every one with messages
					// has its state (appends index those they create).
					if _, err := tx.ExecContext(ctx, `UPDATE memstack_recall_meta SET complete = 1`); err != nil {
						return err
					}
					done = true
					break
				}
			}
			next = cursor
			return nil
		})
		if err != nil {
			return fmt.Errorf("sqlitestore: indexing %s for recall: %w", s.path, err)
		}
		after = next
		if afterBackfillTx != nil {
			afterBackfillTx()
		}
		if done {
			s.recallReady.Store(true)
			return nil
		}
	}
}

// startBackfill runs backfill in the background when the file's index is
// not complete, until Close.
func (s *Store) startBackfill() {
	if s.cfg.readOnly {
		return
	}
	var on, complete bool
	if err := s.db.QueryRowContext(context.Background(), `SELECT enabled, complete FROM memstack_recall_meta`).Scan(&on, &complete); err != nil || !on || complete {
		if on && complete {
			s.recallReady.Store(true)
		}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stopBackfill = func() { cancel(); <-done }
	go func() {
		defer close(done)
		if err := s.backfill(ctx); err != nil && ctx.Err() == nil {
			// Retried by the next Open; SearchRecall names it meanwhile.
			s.backfillErr.Store(&err)
		}
	}()
}

// ready reports whether the file keeps the index and it is complete,
// reading the meta row until it is (it never becomes off or incomplete
// again).
func (s *Store) ready(ctx context.Context) (bool, error) {
	if s.recallReady.Load() {
		return true, nil
	}
	var on, complete bool
	if err := s.db.QueryRowContext(ctx, `SELECT enabled, complete FROM memstack_recall_meta`).Scan(&on, &complete); err != nil {
		return false, err
	}
	if on && complete {
		s.recallReady.Store(true)
	}
	return on && complete, nil
}

// Upper bounds of a conversation's key range: key itself only.
func convRange(key string) (lo, hi string) { return key, key + "\x00" }

// SearchRecall implements store.RecallSearcher, reading in one
// transaction (one snapshot): the index state of every conversation of
// the scope, the postings of the query's terms (one key range each), and
// the unit entries of the conversations they name. Its cost grows with
// the scope's conversations and the postings of the query's terms, not
// with the messages stored. While a migrated file is still being indexed
// it returns an error wrapping store.ErrRecallNotReady.
func (s *Store) SearchRecall(ctx context.Context, in store.RecallScope, q indexkit.Query) ([]store.RecallHit, error) {
	what := "SearchRecall of " + in.String()
	if in.Conversation == nil {
		var err error
		if what, err = s.checkScope(ctx, "SearchRecall", in.Scope); err != nil {
			return nil, err
		}
	} else if err := s.begin(ctx, "SearchRecall", *in.Conversation); err != nil {
		return nil, err
	}
	if q.K < 1 {
		return nil, fmt.Errorf("%w: sqlitestore: %s: k=%d: k must be at least 1", store.ErrInvalidArgument, what, q.K)
	}
	if _, err := indexkit.Search(indexkit.Query{Terms: []string{"x"}, Kind: q.Kind, Near: q.Near, K: 1}, nil); err != nil {
		return nil, fmt.Errorf("%w: sqlitestore: %s: %w", store.ErrInvalidArgument, what, err)
	}
	ok, err := s.ready(ctx)
	if err != nil {
		return nil, s.failed(ctx, what, err)
	}
	if !ok {
		if e := s.backfillErr.Load(); e != nil {
			return nil, fmt.Errorf("sqlitestore: %s: %w (indexing the older messages stopped: %v; the next Open goes on)", what, store.ErrRecallNotReady, *e)
		}
		return nil, fmt.Errorf("sqlitestore: %s: %w", what, store.ErrRecallNotReady)
	}
	if len(q.Terms) == 0 {
		return nil, nil
	}
	var lo, hi string
	if in.Conversation != nil {
		lo, hi = convRange(in.Conversation.Key())
	} else {
		lo, hi = scopeRange(in.Scope)
	}
	hits, err := s.searchRecall(ctx, lo, hi, q)
	if err != nil {
		return nil, s.failed(ctx, what, err)
	}
	return hits, nil
}

func (s *Store) searchRecall(ctx context.Context, lo, hi string, q indexkit.Query) ([]store.RecallHit, error) {
	// A read-only transaction: one snapshot, and never the write lock
	// (New's database may BEGIN IMMEDIATE by default).
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // a read
	convs := map[string]*indexkit.ConvData{}
	var order []string
	err = eachBlob(ctx, tx, func(key string, data []byte) error {
		d := &indexkit.ConvData{ID: key, Postings: make([][]byte, len(q.Terms))}
		if err := d.State.UnmarshalBinary(data); err != nil {
			return fmt.Errorf("%w: recall index: the state of %s: %w", errCorruptIndex, key, err)
		}
		convs[key] = d
		order = append(order, key)
		return nil
	}, `SELECT identity, state FROM memstack_recall_conv WHERE ns = ? AND identity >= ? AND identity < ?`, s.ns, lo, hi)
	if err != nil {
		return nil, err
	}
	if len(order) == 0 {
		return nil, nil
	}
	terms, err := tx.PrepareContext(ctx, `SELECT identity, data FROM memstack_recall_terms
		WHERE ns = ? AND term = ? AND identity >= ? AND identity < ? ORDER BY identity, chunk`)
	if err != nil {
		return nil, err
	}
	defer terms.Close()
	for i, term := range q.Terms {
		err := eachRaw(func(key string, data []byte) error {
			if d := convs[key]; d != nil {
				d.Postings[i] = append(d.Postings[i], data...)
			}
			return nil
		})(terms.QueryContext(ctx, s.ns, term, lo, hi))
		if err != nil {
			return nil, err
		}
	}
	var need []string
	for _, key := range order {
		if convs[key].HasPostings() {
			need = append(need, key)
		}
	}
	addUnits := func(key string, data []byte) error {
		if d := convs[key]; d != nil && d.HasPostings() {
			d.Units = append(d.Units, data...)
		}
		return nil
	}
	if len(need) > 16 && 2*len(need) > len(order) {
		// Most of the scope: one range.
		if err := eachRaw(addUnits)(tx.QueryContext(ctx, `SELECT identity, data FROM memstack_recall_units
			WHERE ns = ? AND identity >= ? AND identity < ? ORDER BY identity, chunk`, s.ns, lo, hi)); err != nil {
			return nil, err
		}
	} else {
		units, err := tx.PrepareContext(ctx, `SELECT identity, data FROM memstack_recall_units
			WHERE ns = ? AND identity = ? ORDER BY chunk`)
		if err != nil {
			return nil, err
		}
		defer units.Close()
		for _, key := range need {
			if err := eachRaw(addUnits)(units.QueryContext(ctx, s.ns, key)); err != nil {
				return nil, err
			}
		}
	}
	data := make([]indexkit.ConvData, 0, len(order))
	for _, key := range order {
		data = append(data, *convs[key])
	}
	found, err := indexkit.Search(q, data)
	if err != nil {
		return nil, fmt.Errorf("%w: recall index: %w", errCorruptIndex, err)
	}
	hits := make([]store.RecallHit, len(found))
	for i, h := range found {
		id, err := parseKey(h.ID)
		if err != nil {
			return nil, err
		}
		hits[i] = store.RecallHit{ID: id, Seq: h.Seq, Score: h.Score, From: h.From, To: h.To}
	}
	return hits, nil
}

var _ store.RecallSearcher = (*Store)(nil)

// RecallDated implements store.RecallSearcher: one range of
// memstack_recall_days's key per day range (its rows of the scope's
// conversations), in a read-only transaction.
func (s *Store) RecallDated(ctx context.Context, in store.RecallScope, kind indexkit.Kind, from, to int32) ([]store.RecallHit, error) {
	what := "RecallDated of " + in.String()
	if in.Conversation == nil {
		var err error
		if what, err = s.checkScope(ctx, "RecallDated", in.Scope); err != nil {
			return nil, err
		}
	} else if err := s.begin(ctx, "RecallDated", *in.Conversation); err != nil {
		return nil, err
	}
	if kind != indexkit.Turns && kind != indexkit.Exchanges {
		return nil, fmt.Errorf("%w: sqlitestore: %s: unknown unit kind %d", store.ErrInvalidArgument, what, int(kind))
	}
	if from > to {
		return nil, fmt.Errorf("%w: sqlitestore: %s: days %d to %d: the first is after the last", store.ErrInvalidArgument, what, from, to)
	}
	ok, err := s.ready(ctx)
	if err != nil {
		return nil, s.failed(ctx, what, err)
	}
	if !ok {
		return nil, fmt.Errorf("sqlitestore: %s: %w", what, store.ErrRecallNotReady)
	}
	var lo, hi string
	if in.Conversation != nil {
		lo, hi = convRange(in.Conversation.Key())
	} else {
		lo, hi = scopeRange(in.Scope)
	}
	hits, err := s.recallDated(ctx, lo, hi, kind, from, to)
	if err != nil {
		return nil, s.failed(ctx, what, err)
	}
	return hits, nil
}

func (s *Store) recallDated(ctx context.Context, lo, hi string, kind indexkit.Kind, from, to int32) ([]store.RecallHit, error) {
	seen := map[string][]int64{}
	var keys []string
	err := eachBlob(ctx, s.db, func(key string, data []byte) error {
		seqs, err := indexkit.OpenedSeqs(data, kind)
		if err != nil {
			return fmt.Errorf("%w: recall index: the units of a day of %s: %w", errCorruptIndex, key, err)
		}
		if _, ok := seen[key]; !ok {
			keys = append(keys, key)
		}
		seen[key] = append(seen[key], seqs...)
		return nil
	}, `SELECT identity, data FROM memstack_recall_days
		WHERE ns = ? AND day >= ? AND day <= ? AND identity >= ? AND identity < ?`, s.ns, from, to, lo, hi)
	if err != nil {
		return nil, err
	}
	slices.Sort(keys)
	var out []store.RecallHit
	for _, key := range keys {
		id, err := parseKey(key)
		if err != nil {
			return nil, err
		}
		seqs := seen[key]
		slices.Sort(seqs)
		for _, seq := range slices.Compact(seqs) {
			out = append(out, store.RecallHit{ID: id, Seq: seq})
		}
	}
	return out, nil
}

// blobRow is a row of a key and a blob value.
type blobRow[K any] struct {
	key  K
	data []byte
}

// queryBlobs runs query in q and returns its (key, blob) rows.
func queryBlobs[K any](ctx context.Context, q querier, query string, args ...any) ([]blobRow[K], error) {
	var out []blobRow[K]
	err := eachBlob(ctx, q, func(key K, data []byte) error {
		out = append(out, blobRow[K]{key, slices.Clone(data)})
		return nil
	}, query, args...)
	return out, err
}

// eachBlob runs query in q and calls f with each (key, blob) row, in
// order, until f returns an error (see eachRaw: data is valid only during
// the call).
func eachBlob[K any](ctx context.Context, q querier, f func(key K, data []byte) error, query string, args ...any) error {
	return eachRaw(f)(q.QueryContext(ctx, query, args...))
}

// eachRaw returns a function that calls f with each (key, blob) row of
// rows (a query's answer, err its error), in order, until f returns an
// error; data is valid only during the call (sql.RawBytes: no copy per
// row), so f copies what it keeps.
func eachRaw[K any](f func(key K, data []byte) error) func(rows *sql.Rows, err error) error {
	return func(rows *sql.Rows, err error) error {
		if err != nil {
			return err
		}
		defer rows.Close()
		var key K
		var data sql.RawBytes
		for rows.Next() {
			if err := rows.Scan(&key, &data); err != nil {
				return err
			}
			if err := f(key, data); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}
