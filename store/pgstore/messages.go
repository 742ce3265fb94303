package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/storekit"
)

// encodeTurn encodes msgs as Append stores them, all dated at: their
// bodies and system flags. A message that cannot be stored (nil, or
// rejected by the codec) is an error naming its position.
func encodeTurn(msgs []llms.ChatMessage, at time.Time) (bodies [][]byte, system []bool, err error) {
	bodies = make([][]byte, len(msgs))
	system = make([]bool, len(msgs))
	for i, m := range msgs {
		b, err := storekit.EncodeMessageAt(m, at)
		if err != nil {
			return nil, nil, fmt.Errorf("message %d of %d: %w", i+1, len(msgs), err)
		}
		bodies[i] = b
		system[i] = m.GetType() == llms.ChatMessageTypeSystem
	}
	return bodies, system, nil
}

// queueAppend queues the statements that append a turn's encoded
// messages to k's conversation in this store's namespace, after the
// identity's lock (see the package documentation): under the append key
// unit, unless it is "", they store nothing when k has unit stored.
func (s *Store) queueAppend(b *pgx.Batch, k ident, unit string, bodies [][]byte, system []bool) {
	if len(bodies) == 0 {
		return
	}
	insert, update := s.q.insertMessage, s.q.updateConv
	if unit == "" {
		b.Queue(s.q.appendFirst, k.hash, s.ns, k.key, system[0], bodies[0])
	} else {
		b.Queue(s.q.appendKeyed, k.hash, s.ns, k.key, system[0], bodies[0], unit)
		insert, update = s.q.insertAfter, s.q.updateAfter
	}
	for i := 1; i < len(bodies); i++ {
		b.Queue(insert, k.hash, s.ns, k.key, system[i], bodies[i])
	}
	b.Queue(update, k.hash, s.ns, k.key, len(bodies))
}

// Append implements store.Store: one transaction in one round trip (see
// the package documentation). Every message is dated
// storekit.AppendTime(ctx), taken once, by this process. Under an append
// key (store.WithAppendKey) the first message carries the key, and the
// transaction stores nothing when id has the key stored in this store's
// namespace (see the package documentation, Tail and append keys).
func (s *Store) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	if err := s.check(ctx, "Append", id); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	at := storekit.AppendTime(ctx)
	if err := storekit.CheckTime(at); err != nil {
		return fmt.Errorf("pgstore: Append of identity %q: %w", id.Key(), err)
	}
	unit, _, err := storekit.CheckAppendKeyOf(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: Append of identity %q: %w", id.Key(), err)
	}
	bodies, system, err := encodeTurn(msgs, at)
	if err != nil {
		return fmt.Errorf("pgstore: Append of identity %q: %w", id.Key(), err)
	}
	k := identOf(id)
	indexed := func() error {
		return s.appendIndexed(ctx, []int64{s.identityLock(k)}, []indexPart{{k, unit, bodies, system, indexkit.Prepare(msgs)}}, at)
	}
	err = s.writeGuarded(ctx, indexed, func(b *pgx.Batch) { s.lockIdentity(b, k) }, func(b *pgx.Batch) {
		s.queueAppend(b, k, unit, bodies, system)
	})
	if err != nil {
		return s.wrap("Append", k, err)
	}
	return nil
}

// AppendBatches implements store.MultiAppender: every batch is queued as
// Append queues it (each under its own append key), all in one
// transaction, so the batches are stored together or not at all, all
// dated storekit.AppendTime(ctx). The identities' locks are taken first,
// in the order of their lock keys, so two calls that share identities
// never wait for each other in a cycle. A bad batch is an error naming
// it, and nothing is stored.
func (s *Store) AppendBatches(ctx context.Context, batches ...store.Batch) error {
	if len(batches) == 0 {
		return s.check(ctx, "AppendBatches", memstack.Identity{})
	}
	for _, b := range batches {
		if err := s.check(ctx, "AppendBatches", b.ID); err != nil {
			return err
		}
	}
	at := storekit.AppendTime(ctx)
	if err := storekit.CheckTime(at); err != nil {
		return fmt.Errorf("pgstore: AppendBatches of identity %q: %w", batches[0].ID.Key(), err)
	}
	var parts []indexPart
	var msgs [][]llms.ChatMessage // each part's messages, for the index
	var locks []int64
	for i, b := range batches {
		if b.Key != "" {
			if err := storekit.CheckAppendKey(b.Key); err != nil {
				return fmt.Errorf("pgstore: AppendBatches: batch %d of %d (identity %q): %w", i+1, len(batches), b.ID.Key(), err)
			}
		}
		if len(b.Messages) == 0 {
			continue
		}
		bodies, system, err := encodeTurn(b.Messages, at)
		if err != nil {
			return fmt.Errorf("pgstore: AppendBatches: batch %d of %d (identity %q): %w", i+1, len(batches), b.ID.Key(), err)
		}
		k := identOf(b.ID)
		parts = append(parts, indexPart{k: k, unit: b.Key, bodies: bodies, system: system})
		msgs = append(msgs, b.Messages)
		locks = append(locks, s.identityLock(k))
	}
	if len(parts) == 0 {
		return nil
	}
	slices.Sort(locks)
	locks = slices.Compact(locks)
	indexed := func() error {
		for i := range parts {
			parts[i].index = indexkit.Prepare(msgs[i])
		}
		return s.appendIndexed(ctx, locks, parts, at)
	}
	lock := func(b *pgx.Batch) {
		for _, l := range locks {
			b.Queue("SELECT pg_advisory_xact_lock($1)", l)
		}
	}
	err := s.writeGuarded(ctx, indexed, lock, func(b *pgx.Batch) {
		for _, p := range parts {
			s.queueAppend(b, p.k, p.unit, p.bodies, p.system)
		}
	})
	if err != nil {
		return s.wrap("AppendBatches", parts[0].k, err)
	}
	return nil
}

var _ store.MultiAppender = (*Store)(nil)

// Last implements store.Store.
func (s *Store) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	if err := s.check(ctx, "Last", id); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: pgstore: Last(n=%d) of identity %q: n must be at least 1", store.ErrInvalidArgument, n, id.Key())
	}
	k := identOf(id)
	rs, err := s.records(ctx, id, "Last", s.q.last, k.hash, s.ns, k.key, n)
	if err != nil {
		return nil, err
	}
	slices.Reverse(rs)
	return rs, nil
}

// Tail implements store.Store: one statement, so it reads one snapshot,
// over the partial index of the system messages and the primary key read
// backwards from the newest message, so it costs what it returns (see the
// package documentation, Tail and append keys).
func (s *Store) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	if err := s.check(ctx, "Tail", id); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: pgstore: Tail(n=%d) of identity %q: n must be at least 1", store.ErrInvalidArgument, n, id.Key())
	}
	k := identOf(id)
	return s.records(ctx, id, "Tail", s.q.tail, k.hash, s.ns, k.key, after, int64(n))
}

// All implements store.Store.
func (s *Store) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	if err := s.check(ctx, "All", id); err != nil {
		return nil, err
	}
	k := identOf(id)
	return s.records(ctx, id, "All", s.q.all, k.hash, s.ns, k.key)
}

// records runs a query returning (seq, body) rows and decodes them.
func (s *Store) records(ctx context.Context, id memstack.Identity, op, sql string, args ...any) ([]store.Record, error) {
	var out []store.Record
	err := s.retry(ctx, func() error {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		out = []store.Record{}
		var (
			seq  int64
			body []byte
		)
		for rows.Next() {
			if err := rows.Scan(&seq, &body); err != nil {
				return err
			}
			r, err := storekit.DecodeRecord(id, seq, body)
			if err != nil {
				return &decodeError{err}
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	var de *decodeError
	if errors.As(err, &de) {
		return nil, fmt.Errorf("pgstore: %s: %w", op, de.err)
	}
	if err != nil {
		return nil, s.wrap(op, identOf(id), err)
	}
	return out, nil
}

// ReadRanges implements store.RangeReader: one statement (one round trip,
// one snapshot) that seeks the primary key once per range, so it reads
// what it returns.
func (s *Store) ReadRanges(ctx context.Context, ranges []store.SeqRange) ([][]store.Record, error) {
	var first memstack.Identity // named by an error of the call as a whole
	if len(ranges) > 0 {
		first = ranges[0].ID
	}
	if err := s.check(ctx, "ReadRanges", first); err != nil {
		return nil, err
	}
	out := make([][]store.Record, len(ranges))
	var (
		hashes   [][]byte
		keys     []string
		from, to []int64
		index    []int // index[j]: the range of the statement's (j+1)-th
	)
	for i, r := range ranges {
		if r.From >= r.To {
			continue
		}
		k := identOf(r.ID)
		hashes, keys = append(hashes, k.hash), append(keys, k.key)
		from, to = append(from, r.From), append(to, r.To)
		index = append(index, i)
	}
	if len(index) == 0 {
		return out, nil
	}
	failed := -1 // the range whose message did not decode
	err := s.retry(ctx, func() error {
		clear(out)
		rows, err := s.pool.Query(ctx, s.q.ranges, hashes, keys, from, to, s.ns)
		if err != nil {
			return err
		}
		defer rows.Close()
		var (
			j    int64
			seq  int64
			body []byte
		)
		for rows.Next() {
			if err := rows.Scan(&j, &seq, &body); err != nil {
				return err
			}
			if j < 1 || int(j) > len(index) {
				return fmt.Errorf("pgstore: ReadRanges: the server named range %d of %d", j, len(index))
			}
			i := index[j-1]
			r, err := storekit.DecodeRecord(ranges[i].ID, seq, body)
			if err != nil {
				failed = i
				return &decodeError{err}
			}
			out[i] = append(out[i], r)
		}
		return rows.Err()
	})
	var de *decodeError
	if errors.As(err, &de) {
		return nil, fmt.Errorf("pgstore: ReadRanges of %s: %w", ranges[failed].ID.Key(), de.err)
	}
	if err != nil {
		return nil, s.wrap("ReadRanges", identOf(ranges[index[0]].ID), err)
	}
	return out, nil
}

var _ store.RangeReader = (*Store)(nil)

// decodeError carries a stored value's decoding error out of a retried
// read, to be reported without the server's address (it is not the
// server's).
type decodeError struct{ err error }

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// Stat implements store.Store.
func (s *Store) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	if err := s.check(ctx, "Stat", id); err != nil {
		return store.Stat{}, err
	}
	k := identOf(id)
	var (
		st    store.Stat
		count int64
	)
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.q.stat, k.hash, s.ns, k.key).Scan(&count, &st.FirstSeq, &st.LastSeq)
	})
	if errors.Is(err, pgx.ErrNoRows) || err == nil && count == 0 {
		return store.Stat{}, nil
	}
	if err != nil {
		return store.Stat{}, s.wrap("Stat", k, err)
	}
	st.Count = int(count)
	return st, nil
}

// StatMany implements store.MultiStat: Stat's query once per identity,
// sent in one batch (one round trip), each read like Stat.
func (s *Store) StatMany(ctx context.Context, ids []memstack.Identity) ([]store.Stat, error) {
	for _, id := range ids {
		if err := s.check(ctx, "StatMany", id); err != nil {
			return nil, err
		}
	}
	out := make([]store.Stat, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	failed := -1 // the identity whose read failed
	err := s.retry(ctx, func() error {
		failed = -1
		b := &pgx.Batch{}
		for i, id := range ids {
			k := identOf(id)
			b.Queue(s.q.stat, k.hash, s.ns, k.key).QueryRow(func(r pgx.Row) error {
				var count int64
				var st store.Stat
				err := r.Scan(&count, &st.FirstSeq, &st.LastSeq)
				switch {
				case errors.Is(err, pgx.ErrNoRows) || err == nil && count == 0:
					out[i] = store.Stat{}
				case err != nil:
					failed = i
					return err
				default:
					st.Count = int(count)
					out[i] = st
				}
				return nil
			})
		}
		return s.pool.SendBatch(ctx, b).Close()
	})
	if err != nil {
		id := ids[0]
		if failed >= 0 {
			id = ids[failed]
		}
		return nil, s.wrap("StatMany", identOf(id), err)
	}
	return out, nil
}

var _ store.MultiStat = (*Store)(nil)

// RemovePrefix implements store.Store.
func (s *Store) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	if err := s.check(ctx, "RemovePrefix", id); err != nil {
		return 0, err
	}
	k := identOf(id)
	var removed int64
	indexed := func() (err error) {
		removed, err = s.removeIndexed(ctx, k, s.q.removePrefix, through, nil, false, false)
		return err
	}
	err := s.writeGuarded(ctx, indexed, func(b *pgx.Batch) { s.lockIdentity(b, k) }, func(b *pgx.Batch) {
		b.Queue(s.q.removePrefix, k.hash, s.ns, k.key, through).QueryRow(func(r pgx.Row) error { return r.Scan(&removed) })
	})
	if err != nil {
		return 0, s.wrap("RemovePrefix", k, err)
	}
	return int(removed), nil
}
