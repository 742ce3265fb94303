package pgstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/storekit"
)

// The recall index (schema version 4; see store.RecallSearcher and
// package indexkit), the same rows sqlitestore keeps: per conversation
// its indexkit.Conv state, its unit entries by chunk, its postings by
// (term, chunk) and the units each day opened. Identity keys may be longer
// than a B-tree entry, so rows name a conversation by its id_hash and the
// scopes it belongs to by the SHA-256 of their key prefixes (scope_t of
// "tenant:", scope_u of "tenant:user:"): the postings' primary key
// (ns, term, scope_t, scope_u, id_hash, chunk) makes a tenant's, a user's
// and a conversation's postings of a term one key range each. The meta
// row records whether the index is on and complete (tables migrated from
// version 3 are indexed in the background once it is turned on).
//
// Writes. While the index is on, an Append is one transaction in two
// round trips instead of one: the first takes the identity's lock, reads
// the conversation's index state and inserts the messages (returning
// their Seqs, which the server draws); the second appends the index
// entries (one statement per table, arrays unnested) and commits. A Store
// that last saw the index off appends in one round trip with a guard
// statement that fails the transaction if the index is on by then (another
// process turned it on): the Append then runs again the indexed way, so
// no message is ever stored unindexed in a database that keeps the index.
// RemovePrefix and Rewrite, rarer, run as interactive transactions.

// recallSQL holds the recall index's statements, built from the prefix.
type recallSQL struct {
	conv, units, terms, days, meta string // table names
	create                         []string
	enable, readMeta, guard        string
	readState, writeState          string
	upUnits, upTerms, upDays       string
	count                          string
	deleteConv                     []string // of (id_hash, ns)
	deleteAll                      []string // of id_hash, every namespace
	// Returning variants of the append statements (their Seqs).
	appendFirst, insertMessage, appendKeyed, insertAfter string
	readMessages, readMessage                            string
	unitChunks, termsOfChunk                             string
	setUnits, deleteUnits, setTerm, deleteTerm           string
	deleteThrough                                        [2]string
	deleteDays                                           string
	missing, complete                                    string
	searchConvs, searchRows                              [3]string // by scope level: tenant, user, conversation
	dated                                                [3]string
}

// Scope levels of the search statements.
const (
	levelTenant = iota
	levelUser
	levelConv
)

func buildRecallSQL(prefix string, q queries) recallSQL {
	name := func(s string) string { return pgx.Identifier{prefix + s}.Sanitize() }
	r := recallSQL{
		conv: name("recall_conv"), units: name("recall_units"), terms: name("recall_terms"),
		days: name("recall_days"), meta: name("recall_meta"),
	}
	r.create = []string{
		"CREATE TABLE IF NOT EXISTS " + r.conv + ` (
	id_hash bytea NOT NULL,
	ns      text  NOT NULL,
	scope_t bytea NOT NULL,
	scope_u bytea NOT NULL,
	id_key  text  NOT NULL,
	state   bytea NOT NULL,
	PRIMARY KEY (id_hash, ns))`,
		"CREATE INDEX IF NOT EXISTS " + name("recall_conv_scope") + " ON " + r.conv + " (ns, scope_t, scope_u)",
		"CREATE TABLE IF NOT EXISTS " + r.units + ` (
	id_hash bytea  NOT NULL,
	ns      text   NOT NULL,
	chunk   bigint NOT NULL,
	data    bytea  NOT NULL,
	PRIMARY KEY (id_hash, ns, chunk))`,
		"CREATE TABLE IF NOT EXISTS " + r.terms + ` (
	ns      text   NOT NULL,
	term    text   COLLATE "C" NOT NULL,
	scope_t bytea  NOT NULL,
	scope_u bytea  NOT NULL,
	id_hash bytea  NOT NULL,
	chunk   bigint NOT NULL,
	data    bytea  NOT NULL,
	PRIMARY KEY (ns, term, scope_t, scope_u, id_hash, chunk))`,
		"CREATE INDEX IF NOT EXISTS " + name("recall_terms_conv") + " ON " + r.terms + " (id_hash, ns, chunk)",
		"CREATE TABLE IF NOT EXISTS " + r.days + ` (
	ns      text    NOT NULL,
	scope_t bytea   NOT NULL,
	scope_u bytea   NOT NULL,
	day     integer NOT NULL,
	id_hash bytea   NOT NULL,
	chunk   bigint  NOT NULL,
	data    bytea   NOT NULL,
	PRIMARY KEY (ns, scope_t, scope_u, day, id_hash, chunk))`,
		"CREATE INDEX IF NOT EXISTS " + name("recall_days_conv") + " ON " + r.days + " (id_hash, ns, day)",
		"CREATE TABLE IF NOT EXISTS " + r.meta + ` (
	id       integer NOT NULL PRIMARY KEY CHECK (id = 1),
	enabled  boolean NOT NULL,
	complete boolean NOT NULL)`,
		"INSERT INTO " + r.meta + " (id, enabled, complete) VALUES (1, false, false) ON CONFLICT (id) DO NOTHING",
	}
	c := pgx.Identifier{prefix + "conversations"}.Sanitize()
	m := pgx.Identifier{prefix + "messages"}.Sanitize()
	// A database without messages has nothing to index: complete at once.
	r.enable = "UPDATE " + r.meta + " SET enabled = true, complete = NOT EXISTS (SELECT FROM " + c + " WHERE count > 0) WHERE NOT enabled"
	r.readMeta = "SELECT enabled, complete FROM " + r.meta + " WHERE id = 1"
	// The guard of a write that does not index: division by zero (22012)
	// when the index is on.
	r.guard = "SELECT 1 / (CASE WHEN enabled THEN 0 ELSE 1 END) FROM " + r.meta + " WHERE id = 1"
	r.readState = "SELECT state FROM " + r.conv + " WHERE id_hash = $1 AND ns = $2"
	r.writeState = "INSERT INTO " + r.conv + " AS r (id_hash, ns, scope_t, scope_u, id_key, state) VALUES ($1, $2, $3, $4, $5, $6)" +
		" ON CONFLICT (id_hash, ns) DO UPDATE SET state = EXCLUDED.state"
	r.upUnits = "INSERT INTO " + r.units + " AS r (id_hash, ns, chunk, data)" +
		" SELECT $1::bytea, $2::text, u.chunk, u.data FROM unnest($3::bigint[], $4::bytea[]) AS u (chunk, data)" +
		" ON CONFLICT (id_hash, ns, chunk) DO UPDATE SET data = r.data || EXCLUDED.data"
	r.upTerms = "INSERT INTO " + r.terms + " AS r (ns, term, scope_t, scope_u, id_hash, chunk, data)" +
		" SELECT $1::text, u.term, $2::bytea, $3::bytea, $4::bytea, u.chunk, u.data FROM unnest($5::text[], $6::bigint[], $7::bytea[]) AS u (term, chunk, data)" +
		" ON CONFLICT (ns, term, scope_t, scope_u, id_hash, chunk) DO UPDATE SET data = r.data || EXCLUDED.data"
	r.upDays = "INSERT INTO " + r.days + " AS r (ns, scope_t, scope_u, day, id_hash, chunk, data)" +
		" SELECT $1::text, $2::bytea, $3::bytea, u.day, $4::bytea, u.chunk, u.data FROM unnest($5::integer[], $6::bigint[], $7::bytea[]) AS u (day, chunk, data)" +
		" ON CONFLICT (ns, scope_t, scope_u, day, id_hash, chunk) DO UPDATE SET data = r.data || EXCLUDED.data"
	r.count = "SELECT count FROM " + c + " WHERE id_hash = $1 AND ns = $2"
	for _, t := range []string{r.conv, r.units, r.terms, r.days} {
		r.deleteConv = append(r.deleteConv, "DELETE FROM "+t+" WHERE id_hash = $1 AND ns = $2")
		r.deleteAll = append(r.deleteAll, "DELETE FROM "+t+" WHERE id_hash = $1")
	}
	// The append statements of queries, returning each message's Seq (none
	// when a keyed unit is already stored).
	r.appendFirst = strings.Replace(q.appendFirst, " INSERT INTO "+c, " , c AS (INSERT INTO "+c, 1) + ") SELECT seq FROM i"
	r.appendKeyed = strings.Replace(q.appendKeyed, " INSERT INTO "+c, " , c AS (INSERT INTO "+c, 1) + ") SELECT seq FROM i"
	r.insertMessage = q.insertMessage + " RETURNING seq"
	r.insertAfter = q.insertAfter + " RETURNING seq"
	r.readMessages = "SELECT seq, body FROM " + m + " WHERE id_hash = $1 AND ns = $2 AND id_key = $3 ORDER BY seq"
	r.readMessage = "SELECT body FROM " + m + " WHERE id_hash = $1 AND ns = $2 AND seq = $3"
	r.unitChunks = "SELECT chunk, data FROM " + r.units + " WHERE id_hash = $1 AND ns = $2 ORDER BY chunk"
	r.termsOfChunk = "SELECT term, data FROM " + r.terms + " WHERE id_hash = $1 AND ns = $2 AND chunk = $3"
	r.setUnits = "UPDATE " + r.units + " SET data = $4 WHERE id_hash = $1 AND ns = $2 AND chunk = $3"
	r.deleteUnits = "DELETE FROM " + r.units + " WHERE id_hash = $1 AND ns = $2 AND chunk = $3"
	r.setTerm = "UPDATE " + r.terms + " SET data = $5 WHERE id_hash = $1 AND ns = $2 AND chunk = $3 AND term = $4"
	r.deleteTerm = "DELETE FROM " + r.terms + " WHERE id_hash = $1 AND ns = $2 AND chunk = $3 AND term = $4"
	r.deleteThrough = [2]string{
		"DELETE FROM " + r.units + " WHERE id_hash = $1 AND ns = $2 AND chunk <= $3",
		"DELETE FROM " + r.terms + " WHERE id_hash = $1 AND ns = $2 AND chunk <= $3",
	}
	r.deleteDays = "DELETE FROM " + r.days + " WHERE id_hash = $1 AND ns = $2 AND chunk < $3"
	// Conversations with messages and no index state, after ($1, $2).
	r.missing = "SELECT c.id_hash, c.ns, c.id_key FROM " + c + " c WHERE c.count > 0 AND (c.id_hash, c.ns) > ($1::bytea, $2::text)" +
		" AND NOT EXISTS (SELECT FROM " + r.conv + " r WHERE r.id_hash = c.id_hash AND r.ns = c.ns) ORDER BY c.id_hash, c.ns LIMIT 64"
	r.complete = "UPDATE " + r.meta + " SET complete = true WHERE id = 1"
	// Each level's parameters: $1 ns, $2 scope_t, then $3 scope_u (user
	// and conversation), then $4 id_hash (conversation); the terms, or the
	// days, follow them.
	where := [3]string{
		"ns = $1 AND scope_t = $2",
		"ns = $1 AND scope_t = $2 AND scope_u = $3",
		"ns = $1 AND scope_t = $2 AND scope_u = $3 AND id_hash = $4",
	}
	for l, w := range where {
		next := func(i int) string { return "$" + strconv.Itoa(l+2+i) }
		r.searchConvs[l] = "SELECT id_hash, id_key, state FROM " + r.conv + " WHERE " + w
		// The postings of the query's terms (each term one key range of
		// the primary key), then the unit entries of the conversations
		// they name: one statement, so one snapshot, and the postings
		// are read once (term is NULL on a unit row). Rows come in any
		// order: indexkit.Search orders each conversation's chunks. The
		// unit rows are looked up by key from an array of the
		// conversations found (not a join, which a generic plan of a
		// cached statement may answer with a scan of the whole units
		// table, estimating a hundred conversations).
		terms := " AND term = ANY(" + next(1) + "::text[])"
		r.searchRows[l] = "WITH t AS MATERIALIZED (SELECT term, id_hash, data FROM " + r.terms + " WHERE " + w + terms + ")" +
			" SELECT term, id_hash, data FROM t UNION ALL SELECT NULL, u.id_hash, u.data FROM " + r.units + " u" +
			" WHERE u.ns = $1 AND u.id_hash = ANY(ARRAY(SELECT DISTINCT id_hash FROM t))"
		r.dated[l] = "SELECT c.id_key, d.data FROM " + r.days + " d JOIN " + r.conv + " c ON c.id_hash = d.id_hash AND c.ns = d.ns WHERE " +
			strings.NewReplacer("ns =", "d.ns =", "scope_t", "d.scope_t", "scope_u", "d.scope_u", "id_hash", "d.id_hash").Replace(w) +
			" AND d.day >= " + next(1) + " AND d.day <= " + next(2)
	}
	return r
}

// WithRecallIndex turns on the recall index of the tables under the
// prefix (store.RecallSearcher; package indexkit): once any Store opened
// them with it, every Store of this build writing them — in any process,
// with the option or without — keeps the index in the transactions of its
// writes, and a memories.Recall over any of them with the default index
// searches the database instead of building an index in its process. It
// stays on. Messages stored before are indexed in the background, a
// conversation per transaction, by every Store of the database that saw
// the index incomplete (each resumes where the rows show the work
// stopped); until then SearchRecall returns store.ErrRecallNotReady and
// Recall indexes in process. It is off by default because an Append then
// takes two round trips instead of one and writes its messages' postings
// (about three times the rows' bytes); see the package documentation, The
// recall index.
func WithRecallIndex() Option {
	return func(c *config) error {
		c.recall = true
		return nil
	}
}

// derivedKey reports whether the identity key names a derived identity
// (storekit.Derived: memstack's own, such as a user's facts or a recall
// journal), which the index leaves out: a search never counts or returns
// one, as memories.Recall's in-process index never holds one.
func derivedKey(key string) bool {
	id, err := memstack.ParseKey(key)
	return err == nil && storekit.Derived(id)
}

// scopeHashes returns the hashes of the tenant and user scopes of the
// identity key (tenant:user:conversation, each part escaped so it holds
// no ':'): SHA-256 of "tenant:" and of "tenant:user:", the key prefixes of
// store.Scope.
func scopeHashes(key string) (t, u []byte) {
	i := strings.IndexByte(key, ':')
	j := i + 1 + strings.IndexByte(key[i+1:], ':')
	ht, hu := sha256.Sum256([]byte(key[:i+1])), sha256.Sum256([]byte(key[:j+1]))
	return ht[:], hu[:]
}

// scopeArgs returns the search statements' level and the arguments of
// its scope for in.
func (s *Store) scopeArgs(in store.RecallScope) (int, []any) {
	if in.Conversation != nil {
		k := identOf(*in.Conversation)
		t, u := scopeHashes(k.key)
		return levelConv, []any{s.ns, t, u, k.hash}
	}
	p := in.Scope.KeyPrefix()
	t := sha256.Sum256([]byte(p[:strings.IndexByte(p, ':')+1]))
	if in.Scope.AllUsers {
		return levelTenant, []any{s.ns, t[:]}
	}
	u := sha256.Sum256([]byte(p))
	return levelUser, []any{s.ns, t[:], u[:]}
}

// errCorruptIndex wraps store.ErrCorrupt for an index row that does not
// decode (not a message: the index is rebuilt from the messages).
var errCorruptIndex = fmt.Errorf("%w (an index row, not a message)", store.ErrCorrupt)

// sqlstateDivisionByZero is the guard's failure: the index is on.
const sqlstateDivisionByZero = "22012"

// recallLock is the advisory lock that orders the guard against the
// enable: a guarded write holds it shared until it commits; the enable
// takes it exclusively, so it waits for every guarded write in flight
// and then reads (in a new statement, a new snapshot) what they wrote.
func (s *Store) recallLock() int64 { return lockKey("recall", s.prefix) }

// writeGuarded is every write that keeps the index: indexed, the
// indexed way, while this Store knows the index on; else one write
// (s.write) of lock's statements (the identities' locks), the guard (the
// recall lock shared, then r.guard) and plain's statements — run again
// as indexed when the guard finds the index on.
func (s *Store) writeGuarded(ctx context.Context, indexed func() error, lock, plain func(b *pgx.Batch)) error {
	if s.indexOn.Load() {
		return indexed()
	}
	err := s.write(ctx, func(b *pgx.Batch) {
		lock(b)
		b.Queue("SELECT pg_advisory_xact_lock_shared($1)", s.recallLock())
		b.Queue(s.q.recall.guard)
		plain(b)
	})
	if s.indexTurnedOn(err) {
		return indexed()
	}
	return err
}

// indexTurnedOn reports whether err is the guard's failure (r.guard):
// the write did not index, and the index is on. It records that the index
// is on, so the write runs again the indexed way.
func (s *Store) indexTurnedOn(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == sqlstateDivisionByZero {
		s.indexOn.Store(true)
		return true
	}
	return false
}

// indexRows queues in b the statements that append w's entries (and the
// days of the units it opened, whose Seqs are among seqs, dated at) to
// the rows of k in namespace ns, then the state st.
func (s *Store) indexRows(b *pgx.Batch, ns string, k ident, w indexkit.Writes, seqs []int64, at []time.Time, st indexkit.Conv) {
	r := &s.q.recall
	t, u := scopeHashes(k.key)
	if len(w.Units) > 0 {
		chunks, data := make([]int64, len(w.Units)), make([][]byte, len(w.Units))
		for i, c := range w.Units {
			chunks[i], data[i] = c.Chunk, c.Data
		}
		b.Queue(r.upUnits, k.hash, ns, chunks, data)
	}
	if len(w.Terms) > 0 {
		terms, chunks, data := make([]string, len(w.Terms)), make([]int64, len(w.Terms)), make([][]byte, len(w.Terms))
		for i, c := range w.Terms {
			terms[i], chunks[i], data[i] = c.Term, c.Chunk, c.Data
		}
		b.Queue(r.upTerms, ns, t, u, k.hash, terms, chunks, data)
	}
	if rows := indexkit.DayRows(w.Opened, seqs, at); len(rows) > 0 {
		days, chunks, data := make([]int32, len(rows)), make([]int64, len(rows)), make([][]byte, len(rows))
		for i, d := range rows {
			days[i], chunks[i], data[i] = d.Day, d.Chunk, d.Data
		}
		b.Queue(r.upDays, ns, t, u, k.hash, days, chunks, data)
	}
	state, _ := st.MarshalBinary()
	b.Queue(r.writeState, k.hash, ns, t, u, k.key, state)
}

// indexPart is one identity's messages of an indexed append.
type indexPart struct {
	k      ident
	unit   string
	bodies [][]byte
	system []bool
	index  []indexkit.Message
}

// appendIndexed stores parts (their identities' locks, sorted, are locks)
// as Append and AppendBatches do, with their index entries, in one
// transaction of two round trips (see The recall index above): the
// first inserts the messages and reads the identities' index states, the
// second appends the entries and commits. The outcome of a transaction
// whose reply was lost is unknown, as write's.
func (s *Store) appendIndexed(ctx context.Context, locks []int64, parts []indexPart, at time.Time) error {
	return s.writeTx(ctx, func(conn *pgx.Conn, b *pgx.Batch) (func(b *pgx.Batch) error, error) {
		r := &s.q.recall
		for _, l := range locks {
			b.Queue("SELECT pg_advisory_xact_lock($1)", l)
		}
		var on bool
		b.Queue(r.readMeta).QueryRow(func(row pgx.Row) error {
			var complete bool
			return row.Scan(&on, &complete)
		})
		// Each identity's state and count, before its appends.
		type conv struct {
			k      ident
			state  []byte
			count  int64
			seqs   []int64
			msgs   []indexkit.Message
			system []bool
		}
		var convs []*conv
		byKey := map[string]*conv{}
		for _, p := range parts {
			if byKey[p.k.key] != nil {
				continue
			}
			c := &conv{k: p.k}
			byKey[p.k.key] = c
			convs = append(convs, c)
			b.Queue(r.readState, p.k.hash, s.ns).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					if err := rows.Scan(&c.state); err != nil {
						return err
					}
				}
				return rows.Err()
			})
			b.Queue(r.count, p.k.hash, s.ns).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					if err := rows.Scan(&c.count); err != nil {
						return err
					}
				}
				return rows.Err()
			})
		}
		for _, p := range parts {
			c := byKey[p.k.key]
			var got []int64
			n := len(p.bodies)
			collect := func(rows pgx.Rows) error {
				for rows.Next() {
					var seq int64
					if err := rows.Scan(&seq); err != nil {
						return err
					}
					got = append(got, seq)
				}
				if err := rows.Err(); err != nil {
					return err
				}
				if len(got) == n {
					// Every message of the part was stored (a keyed unit
					// already stored stores none).
					c.seqs = append(c.seqs, got...)
					c.msgs = append(c.msgs, p.index...)
				}
				return nil
			}
			first, rest, update := r.appendFirst, r.insertMessage, s.q.updateConv
			args := []any{p.k.hash, s.ns, p.k.key, p.system[0], p.bodies[0]}
			if p.unit != "" {
				first, rest, update = r.appendKeyed, r.insertAfter, s.q.updateAfter
				args = append(args, p.unit)
			}
			b.Queue(first, args...).Query(collect)
			for i := 1; i < n; i++ {
				b.Queue(rest, p.k.hash, s.ns, p.k.key, p.system[i], p.bodies[i]).Query(collect)
			}
			b.Queue(update, p.k.hash, s.ns, p.k.key, n)
		}
		return func(b *pgx.Batch) error {
			if !on {
				return nil
			}
			for _, c := range convs {
				if len(c.seqs) == 0 || derivedKey(c.k.key) {
					continue
				}
				var st indexkit.Conv
				switch {
				case c.state == nil && c.count > 0:
					// Stored before the index: the backfill's.
					continue
				case c.state == nil:
					st = indexkit.NewConv()
				default:
					if err := st.UnmarshalBinary(c.state); err != nil {
						// A state that does not decode is rebuilt from the
						// messages, the new ones included.
						if err := s.reindex(ctx, conn, b, s.ns, c.k); err != nil {
							return err
						}
						continue
					}
				}
				w, err := st.Add(c.seqs, c.msgs)
				if err != nil {
					return fmt.Errorf("recall index: %w", err)
				}
				times := make([]time.Time, len(c.seqs))
				for i := range times {
					times[i] = at
				}
				s.indexRows(b, s.ns, c.k, w, c.seqs, times, st)
			}
			return nil
		}, nil
	})
}

// writeTx runs a transaction of two batches on one connection, at read
// committed, retried as write retries: first's statements (after BEGIN),
// whose callbacks scan their results, then the statements the function
// first returns queues (it may also query conn, inside the transaction)
// and COMMIT. Errors and the unknown outcome of a lost reply are as
// write's.
func (s *Store) writeTx(ctx context.Context, first func(conn *pgx.Conn, b *pgx.Batch) (func(b *pgx.Batch) error, error)) error {
	return s.retry(ctx, func() error {
		pc, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer pc.Release()
		conn := pc.Conn()
		b := &pgx.Batch{}
		b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		then, err := first(conn, b)
		if err != nil {
			return err
		}
		br := conn.SendBatch(ctx, b)
		tx := br.Tx()
		err = br.Close()
		if err == nil {
			b2 := &pgx.Batch{}
			if err = then(b2); err == nil {
				b2.Queue("COMMIT")
				err = conn.SendBatch(ctx, b2).Close()
				if err == nil {
					// Committed: tx does not know it (the COMMIT was not
					// its own), so no Rollback, which would send a
					// ROLLBACK and could fail after the commit.
					return nil
				}
				if mayHaveCommitted(err) {
					err = fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
				}
			}
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if rerr := tx.Rollback(rctx); err == nil && rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			err = rerr
		}
		return err
	})
}

// interactive runs fn in a read committed transaction of its own
// connection, retried as write retries; a COMMIT whose reply was lost
// leaves the outcome unknown (store.ErrOutcomeUnknown).
func (s *Store) interactive(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.retry(ctx, func() error {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return err
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			_ = tx.Rollback(rctx)
		}()
		if err := fn(tx); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			if mayHaveCommitted(err) {
				return fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
			}
			return err
		}
		return nil
	})
}

// querier runs a query: a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// indexed reports, in tx, whether k's rows are to be kept in the index:
// the index is on and k has an index state, or had no messages (a
// conversation that predates the index is the backfill's). It returns the
// state (NewConv for a new one); a state that does not decode is
// ErrCorrupt.
func (s *Store) indexed(ctx context.Context, tx querier, k ident) (on bool, st indexkit.Conv, ok bool, err error) {
	r := &s.q.recall
	var complete bool
	if err := scanOne(ctx, tx, r.readMeta, nil, &on, &complete); err != nil {
		return false, st, false, fmt.Errorf("recall index: reading whether it is on: %w", err)
	}
	if !on || derivedKey(k.key) {
		return on, st, false, nil
	}
	var data []byte
	found := false
	if err := scanOne(ctx, tx, r.readState, []any{k.hash, s.ns}, &data); err == nil {
		found = true
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return true, st, false, fmt.Errorf("recall index: reading the state of %s: %w", k.key, err)
	}
	if found {
		if err := st.UnmarshalBinary(data); err != nil {
			return true, st, true, fmt.Errorf("%w: recall index: the state of %s: %w", errCorruptIndex, k.key, err)
		}
		return true, st, true, nil
	}
	var count int64
	if err := scanOne(ctx, tx, r.count, []any{k.hash, s.ns}, &count); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return true, st, false, fmt.Errorf("recall index: reading the message count: %w", err)
	}
	return true, indexkit.NewConv(), count == 0, nil
}

// scanOne scans the first row of query into dest: pgx.ErrNoRows if
// there is none.
func scanOne(ctx context.Context, q querier, query string, args []any, dest ...any) error {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// reindex queues in b the statements that index k's stored messages
// afresh, in namespace ns (read now through q, in the transaction): Rewrite, a corrupt
// index, and the backfill. A stored message that does not decode is left
// out (it cannot be shown either).
func (s *Store) reindex(ctx context.Context, q querier, b *pgx.Batch, ns string, k ident) error {
	for _, d := range s.q.recall.deleteConv {
		b.Queue(d, k.hash, ns)
	}
	if derivedKey(k.key) {
		return nil // never indexed: its messages are not read
	}
	id, err := memstack.ParseKey(k.key)
	if err != nil {
		return fmt.Errorf("recall index: %w", err)
	}
	rows, err := q.Query(ctx, s.q.recall.readMessages, k.hash, ns, k.key)
	if err != nil {
		return fmt.Errorf("recall index: reading the messages of %s: %w", k.key, err)
	}
	var seqs []int64
	var msgs []llms.ChatMessage
	var at []time.Time
	var seq int64
	var body []byte
	_, err = pgx.ForEachRow(rows, []any{&seq, &body}, func() error {
		if rec, err := storekit.DecodeRecord(id, seq, body); err == nil {
			seqs, msgs, at = append(seqs, seq), append(msgs, rec.Message), append(at, rec.Time)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recall index: reading the messages of %s: %w", k.key, err)
	}
	st := indexkit.NewConv()
	w, err := st.Add(seqs, indexkit.Prepare(msgs))
	if err != nil {
		return fmt.Errorf("recall index: %w", err)
	}
	s.indexRows(b, ns, k, w, seqs, at, st)
	return nil
}

// sendAll sends b through q and reads every result.
func sendAll(ctx context.Context, q querier, b *pgx.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	return q.SendBatch(ctx, b).Close()
}

// trimIndex takes the messages a prefix removal removed (non-system, Seq
// <= through) out of k's index, in tx, after the removal: the chunks they
// fill are deleted, the one they share with later messages filtered, and
// the state recomputed from the entries left. Rows that do not decode
// make it index the conversation afresh.
func (s *Store) trimIndex(ctx context.Context, tx pgx.Tx, k ident, st indexkit.Conv, through int64) error {
	b := &pgx.Batch{}
	err := s.trimIndexRows(ctx, tx, b, k, st, through)
	if errors.Is(err, store.ErrCorrupt) {
		b = &pgx.Batch{}
		err = s.reindex(ctx, tx, b, s.ns, k)
	}
	if err != nil {
		return err
	}
	return sendAll(ctx, tx, b)
}

func (s *Store) trimIndexRows(ctx context.Context, tx pgx.Tx, b *pgx.Batch, k ident, st indexkit.Conv, through int64) error {
	r := &s.q.recall
	chunks, err := blobs[int64](ctx, tx, r.unitChunks, k.hash, s.ns)
	if err != nil {
		return fmt.Errorf("recall index: reading unit entries: %w", err)
	}
	var all []byte
	emptied, prefix := int64(-1), true
	for _, c := range chunks {
		kept, err := indexkit.DropThrough(c.data, false, through)
		if err != nil {
			return fmt.Errorf("%w: recall index of %s, chunk %d: %w", errCorruptIndex, k.key, c.key, err)
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
		if len(kept) == 0 {
			b.Queue(r.deleteUnits, k.hash, s.ns, c.key)
		} else {
			b.Queue(r.setUnits, k.hash, s.ns, c.key, kept)
		}
		terms, err := blobs[string](ctx, tx, r.termsOfChunk, k.hash, s.ns, c.key)
		if err != nil {
			return fmt.Errorf("recall index: reading postings: %w", err)
		}
		for _, t := range terms {
			left, err := indexkit.DropThrough(t.data, true, through)
			if err != nil {
				return fmt.Errorf("%w: recall index of %s, term %q: %w", errCorruptIndex, k.key, t.key, err)
			}
			switch {
			case len(left) == len(t.data):
			case len(left) == 0:
				b.Queue(r.deleteTerm, k.hash, s.ns, c.key, t.key)
			default:
				b.Queue(r.setTerm, k.hash, s.ns, c.key, t.key, left)
			}
		}
	}
	if emptied >= 0 {
		for _, d := range r.deleteThrough {
			b.Queue(d, k.hash, s.ns, emptied)
		}
	}
	b.Queue(r.deleteDays, k.hash, s.ns, (through+1)/indexkit.DaySeqs)
	st, err = indexkit.Rebuild(all, st.Msgs)
	if err != nil {
		return fmt.Errorf("%w: recall index of %s: %w", errCorruptIndex, k.key, err)
	}
	var w indexkit.Writes
	var seqs []int64
	var at []time.Time
	// A unit the removal cut now starts at its first message left: filed
	// under that message's day (again, if it opened the unit).
	first, ok, err := indexkit.FirstOpened(all, st)
	if err != nil {
		return fmt.Errorf("%w: recall index of %s: %w", errCorruptIndex, k.key, err)
	}
	if ok {
		var body []byte
		if err := scanOne(ctx, tx, r.readMessage, []any{k.hash, s.ns, first.Seq}, &body); err != nil {
			return fmt.Errorf("recall index: reading the first message left: %w", err)
		}
		id, err := memstack.ParseKey(k.key)
		if err != nil {
			return fmt.Errorf("recall index: %w", err)
		}
		if rec, err := storekit.DecodeRecord(id, first.Seq, body); err == nil {
			w.Opened, seqs, at = []indexkit.Opened{first}, []int64{first.Seq}, []time.Time{rec.Time}
		}
	}
	s.indexRows(b, s.ns, k, w, seqs, at, st)
	return nil
}

// blobRow is a row of a key and a blob value.
type blobRow[K any] struct {
	key  K
	data []byte
}

// blobs runs query and returns its (key, blob) rows.
func blobs[K any](ctx context.Context, q querier, query string, args ...any) ([]blobRow[K], error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []blobRow[K]
	var row blobRow[K]
	_, err = pgx.ForEachRow(rows, []any{&row.key, &row.data}, func() error {
		out = append(out, row)
		row.data = nil // Scan allocates a fresh slice for the next row
		return nil
	})
	return out, err
}

// removeIndexed is RemovePrefix and Rewrite with the index kept: in one
// transaction, under the identity's lock, the removal (the statement
// removal, which returns how many messages it removed), the index trimmed
// or rebuilt, then more (Rewrite's appends) and, when rebuild is set, the
// conversation indexed afresh from what the transaction left.
func (s *Store) removeIndexed(ctx context.Context, k ident, removal string, through int64, more func(b *pgx.Batch), appends, rebuild bool) (int64, error) {
	var removed int64
	err := s.interactive(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.identityLock(k)); err != nil {
			return err
		}
		on, st, ok, err := s.indexed(ctx, tx, k)
		corrupt := errors.Is(err, store.ErrCorrupt)
		if err != nil && !corrupt {
			return err
		}
		if err := scanOne(ctx, tx, removal, []any{k.hash, s.ns, k.key, through}, &removed); err != nil {
			return err
		}
		b := &pgx.Batch{}
		if more != nil {
			more(b)
		}
		if err := sendAll(ctx, tx, b); err != nil {
			return err
		}
		if !on || !ok && !corrupt {
			return nil
		}
		if removed == 0 && !appends {
			return nil // nothing changed (sqlitestore's early return)
		}
		if rebuild || corrupt {
			b := &pgx.Batch{}
			if err := s.reindex(ctx, tx, b, s.ns, k); err != nil {
				return err
			}
			return sendAll(ctx, tx, b)
		}
		if removed == 0 {
			return nil
		}
		return s.trimIndex(ctx, tx, k, st, through)
	})
	return removed, err
}

// queueDeleteIndex queues the deletes of k's index rows: in this store's
// namespace (Clear), or in every namespace (Forget).
func (s *Store) queueDeleteIndex(b *pgx.Batch, k ident, everyNamespace bool) {
	if everyNamespace {
		for _, d := range s.q.recall.deleteAll {
			b.Queue(d, k.hash)
		}
		return
	}
	for _, d := range s.q.recall.deleteConv {
		b.Queue(d, k.hash, s.ns)
	}
}

// backfillBatch is how many conversations one backfill pass lists.
// afterBackfillTx, if not nil, is called after each conversation the
// backfill indexed (tests stop a backfill part-way with it).
var afterBackfillTx func()

// backfill indexes every conversation of the tables (every namespace)
// with messages and no index state — those stored before the index was
// turned on — one transaction each, under the identity's lock, then
// records the index complete. Appends meanwhile index the conversations
// that have a state (or had no messages) and leave the others to it.
// Several processes may run it at once: a conversation another indexed
// meanwhile is seen to have a state and skipped. It stops when ctx is
// done or a transaction fails; any Store that opens the tables later
// starts it again, and it resumes where the rows show it stopped.
func (s *Store) backfill(ctx context.Context) error {
	r := &s.q.recall
	after := [2]any{[]byte{}, ""}
	for {
		rows, err := s.pool.Query(ctx, r.missing, after[0], after[1])
		if err != nil {
			return err
		}
		type conv struct {
			hash []byte
			ns   string
			key  string
		}
		var got []conv
		var c conv
		_, err = pgx.ForEachRow(rows, []any{&c.hash, &c.ns, &c.key}, func() error {
			got = append(got, c)
			c.hash = nil
			return nil
		})
		if err != nil {
			return err
		}
		if len(got) == 0 {
			if _, err := s.pool.Exec(ctx, r.complete); err != nil {
				return err
			}
			s.recallReady.Store(true)
			return nil
		}
		for _, c := range got {
			k := identOfKey(c.key)
			err := s.interactive(ctx, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.identityLock(k)); err != nil {
					return err
				}
				var state []byte
				err := scanOne(ctx, tx, r.readState, []any{k.hash, c.ns}, &state)
				if err == nil {
					return nil // indexed meanwhile
				}
				if !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				// Still stored? (Forgotten or cleared since the listing:
				// nothing to index, and no state row to leave behind.)
				var count int64
				if err := scanOne(ctx, tx, r.count, []any{k.hash, c.ns}, &count); errors.Is(err, pgx.ErrNoRows) || err == nil && count == 0 {
					return nil
				} else if err != nil {
					return err
				}
				b := &pgx.Batch{}
				if err := s.reindex(ctx, tx, b, c.ns, k); err != nil {
					return err
				}
				return sendAll(ctx, tx, b)
			})
			if err != nil {
				return err
			}
			if afterBackfillTx != nil {
				afterBackfillTx()
			}
			after = [2]any{c.hash, c.ns}
		}
	}
}

// startRecall turns the index on when the configuration asks, and starts
// the backfill when the index is on and not complete.
func (s *Store) startRecall(ctx context.Context, enable bool) error {
	r := &s.q.recall
	if enable {
		err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.recallLock()); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, r.enable)
			return err
		})
		if err != nil {
			return fmt.Errorf("pgstore: turning the recall index on (tables with prefix %q on %s): %w", s.prefix, s.addr, err)
		}
	}
	var on, complete bool
	if err := s.pool.QueryRow(ctx, r.readMeta).Scan(&on, &complete); err != nil {
		return fmt.Errorf("pgstore: reading whether the recall index is on (tables with prefix %q on %s): %w", s.prefix, s.addr, err)
	}
	s.indexOn.Store(on)
	if !on {
		return nil
	}
	if complete {
		s.recallReady.Store(true)
		return nil
	}
	bctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stopBackfill = func() { cancel(); <-done }
	go func() {
		defer close(done)
		if err := s.backfill(bctx); err != nil && bctx.Err() == nil {
			// Retried by the next Store that opens the tables;
			// SearchRecall names it meanwhile.
			s.backfillErr.Store(&err)
		}
	}()
	return nil
}

// ready reports whether the index is on and complete, reading the meta
// row until it is (it never becomes off or incomplete again).
func (s *Store) ready(ctx context.Context) (bool, error) {
	if s.recallReady.Load() {
		return true, nil
	}
	var on, complete bool
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.q.recall.readMeta).Scan(&on, &complete)
	})
	if err != nil {
		return false, err
	}
	if on {
		s.indexOn.Store(true)
	}
	if on && complete {
		s.recallReady.Store(true)
	}
	return on && complete, nil
}

// checkRecall checks a RecallSearcher call's scope and the index's
// readiness; it returns the description of the call for errors.
func (s *Store) checkRecall(ctx context.Context, op string, in store.RecallScope) (string, error) {
	what := op + " of " + in.String()
	if in.Conversation != nil {
		if err := s.check(ctx, op, *in.Conversation); err != nil {
			return what, err
		}
	} else if err := s.checkScope(ctx, op, in.Scope); err != nil {
		return what, err
	}
	return what, nil
}

// notReady is the error of a search while the index is not complete.
func (s *Store) notReady(ctx context.Context, what string) error {
	ok, err := s.ready(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: %s on %s: %w", what, s.addr, err)
	}
	if ok {
		return nil
	}
	if e := s.backfillErr.Load(); e != nil {
		return fmt.Errorf("pgstore: %s: %w (indexing the older messages stopped: %v; the next Open goes on)", what, store.ErrRecallNotReady, *e)
	}
	return fmt.Errorf("pgstore: %s: %w", what, store.ErrRecallNotReady)
}

// SearchRecall implements store.RecallSearcher, reading in one round trip
// and one snapshot (a read-only repeatable read transaction): the index
// state of every conversation of the scope, the postings of the query's
// terms (one key range each) and the unit entries of the conversations
// they name; then it scores in Go (indexkit.Search). Its cost grows with
// the scope's conversations and the postings of the query's terms, not
// with the messages stored.
func (s *Store) SearchRecall(ctx context.Context, in store.RecallScope, q indexkit.Query) ([]store.RecallHit, error) {
	what, err := s.checkRecall(ctx, "SearchRecall", in)
	if err != nil {
		return nil, err
	}
	if q.K < 1 {
		return nil, fmt.Errorf("%w: pgstore: %s: k=%d: k must be at least 1", store.ErrInvalidArgument, what, q.K)
	}
	if _, err := indexkit.Search(indexkit.Query{Terms: []string{"x"}, Kind: q.Kind, Near: q.Near, K: 1}, nil); err != nil {
		return nil, fmt.Errorf("%w: pgstore: %s: %w", store.ErrInvalidArgument, what, err)
	}
	if err := s.notReady(ctx, what); err != nil {
		return nil, err
	}
	if len(q.Terms) == 0 {
		return nil, nil
	}
	level, args := s.scopeArgs(in)
	var hits []store.RecallHit
	err = s.retry(ctx, func() error {
		var err error
		hits, err = s.searchRecall(ctx, level, args, q)
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrCorrupt) {
			return nil, fmt.Errorf("pgstore: %s: %w", what, err)
		}
		return nil, fmt.Errorf("pgstore: %s on %s: %w", what, s.addr, err)
	}
	return hits, nil
}

func (s *Store) searchRecall(ctx context.Context, level int, args []any, q indexkit.Query) ([]store.RecallHit, error) {
	r := &s.q.recall
	convArgs := args
	termArgs := append(slices.Clone(args), q.Terms)
	at := map[string]int{} // term → its index in q.Terms
	for i, t := range q.Terms {
		at[t] = i
	}
	convs := map[string]*indexkit.ConvData{} // by id_hash
	var order []string
	var corrupt error
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	b.Queue(r.searchConvs[level], convArgs...).Query(func(rows pgx.Rows) error {
		var hash, state []byte
		var key string
		_, err := pgx.ForEachRow(rows, []any{&hash, &key, &state}, func() error {
			d := &indexkit.ConvData{ID: key, Postings: make([][]byte, len(q.Terms))}
			if err := d.State.UnmarshalBinary(state); err != nil && corrupt == nil {
				corrupt = fmt.Errorf("%w: recall index: the state of %s: %w", errCorruptIndex, key, err)
			}
			convs[string(hash)] = d
			order = append(order, string(hash))
			return nil
		})
		return err
	})
	b.Queue(r.searchRows[level], termArgs...).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		add := func(term, hash, data []byte, unit bool) {
			d := convs[string(hash)]
			switch {
			case d == nil:
			case unit:
				d.Units = append(d.Units, data...)
			default:
				if i, ok := at[string(term)]; ok {
					d.Postings[i] = append(d.Postings[i], data...)
				}
			}
		}
		// A text's raw value is its bytes, and so is a bytea's in binary
		// format (the default query mode): read in place, not copied per
		// row. (The simple protocol sends bytea as text: scanned.)
		fd := rows.FieldDescriptions()
		raw := len(fd) == 3 && fd[1].Format == pgx.BinaryFormatCode && fd[2].Format == pgx.BinaryFormatCode
		var term pgtype.Text
		var hash, data []byte
		for rows.Next() {
			if raw {
				v := rows.RawValues()
				add(v[0], v[1], v[2], v[0] == nil)
				continue
			}
			if err := rows.Scan(&term, &hash, &data); err != nil {
				return err
			}
			add([]byte(term.String), hash, data, !term.Valid)
		}
		return rows.Err()
	})
	b.Queue("COMMIT")
	br := s.pool.SendBatch(ctx, b)
	err := br.Close()
	// The pool's connection goes back with the transaction's end (after
	// the COMMIT, Rollback only releases it).
	if tx := br.Tx(); tx != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		_ = tx.Rollback(rctx)
		cancel()
	}
	if err != nil {
		return nil, err
	}
	if corrupt != nil {
		return nil, corrupt
	}
	data := make([]indexkit.ConvData, 0, len(order))
	for _, h := range order {
		data = append(data, *convs[h])
	}
	// By identity key, as sqlitestore reads them: the scope's totals are
	// float sums, whose last bits follow their order.
	slices.SortFunc(data, func(a, b indexkit.ConvData) int { return strings.Compare(a.ID, b.ID) })
	found, err := indexkit.Search(q, data)
	if err != nil {
		return nil, fmt.Errorf("%w: recall index: %w", errCorruptIndex, err)
	}
	hits := make([]store.RecallHit, len(found))
	for i, h := range found {
		id, err := memstack.ParseKey(h.ID)
		if err != nil {
			return nil, fmt.Errorf("%w: recall index: %w", errCorruptIndex, err)
		}
		hits[i] = store.RecallHit{ID: id, Seq: h.Seq, Score: h.Score, From: h.From, To: h.To}
	}
	return hits, nil
}

var _ store.RecallSearcher = (*Store)(nil)

// RecallDated implements store.RecallSearcher: the day rows of the scope
// in the day range, one statement.
func (s *Store) RecallDated(ctx context.Context, in store.RecallScope, kind indexkit.Kind, from, to int32) ([]store.RecallHit, error) {
	what, err := s.checkRecall(ctx, "RecallDated", in)
	if err != nil {
		return nil, err
	}
	if kind != indexkit.Turns && kind != indexkit.Exchanges {
		return nil, fmt.Errorf("%w: pgstore: %s: unknown unit kind %d", store.ErrInvalidArgument, what, int(kind))
	}
	if from > to {
		return nil, fmt.Errorf("%w: pgstore: %s: days %d to %d: the first is after the last", store.ErrInvalidArgument, what, from, to)
	}
	if err := s.notReady(ctx, what); err != nil {
		return nil, err
	}
	level, args := s.scopeArgs(in)
	args = append(args, from, to)
	seen := map[string][]int64{}
	var keys []string
	err = s.retry(ctx, func() error {
		clear(seen)
		keys = keys[:0]
		rows, err := s.pool.Query(ctx, s.q.recall.dated[level], args...)
		if err != nil {
			return err
		}
		var key string
		var data []byte
		_, err = pgx.ForEachRow(rows, []any{&key, &data}, func() error {
			seqs, err := indexkit.OpenedSeqs(data, kind)
			if err != nil {
				return fmt.Errorf("%w: recall index: the units of a day of %s: %w", errCorruptIndex, key, err)
			}
			if _, ok := seen[key]; !ok {
				keys = append(keys, key)
			}
			seen[key] = append(seen[key], seqs...)
			return nil
		})
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrCorrupt) {
			return nil, fmt.Errorf("pgstore: %s: %w", what, err)
		}
		return nil, fmt.Errorf("pgstore: %s on %s: %w", what, s.addr, err)
	}
	slices.Sort(keys)
	var out []store.RecallHit
	for _, key := range keys {
		id, err := memstack.ParseKey(key)
		if err != nil {
			return nil, fmt.Errorf("pgstore: %s: %w: recall index: %w", what, errCorruptIndex, err)
		}
		seqs := seen[key]
		slices.Sort(seqs)
		for _, seq := range slices.Compact(seqs) {
			out = append(out, store.RecallHit{ID: id, Seq: seq})
		}
	}
	return out, nil
}
