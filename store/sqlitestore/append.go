package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/storekit"
)

// appendReq is one Append (or one AppendBatches) waiting to be committed:
// its parts are committed in one transaction, all or none.
type appendReq struct {
	ctx   context.Context
	parts []appendPart
	err   error
	done  chan struct{} // closed when err is final
}

// appendPart is what one request appends to one identity.
type appendPart struct {
	key   string // the identity's key
	unit  string // the append key, "" for none
	rows  []appendRow
	msgs  []llms.ChatMessage // the messages, tokenised for the recall index when the file keeps it
	index []indexkit.Message // the messages as the recall index sees them (nil until tokenised)
	at    time.Time          // the messages' time
}

// span is what one group commit adds to one identity: n messages, Seqs
// first to last.
type span struct {
	key         string
	n           int64
	first, last int64
}

type appendRow struct {
	system bool
	data   []byte
}

// insertSQL inserts one message. Its parameters are ns, identity key,
// system, the encoded message and unit: the append key on a keyed unit's
// first message, else NULL. A first message whose key the conversation
// has already is not inserted (memstack_messages_unit is unique), and
// RowsAffected reports 0.
const insertSQL = `INSERT INTO memstack_messages (ns, identity, system, message, unit) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (ns, identity, unit) WHERE unit IS NOT NULL DO NOTHING`

// Append implements store.Store: the messages are inserted in one
// transaction, so they are stored whole or not at all, contiguously, all
// dated storekit.AppendTime(ctx); the same transaction adds them to the
// identity's memstack_stat row.
//
// Under an append key (store.WithAppendKey) the unit's first message
// carries the key in column unit, unique per conversation: if the
// conversation has the key already — stored by an earlier Append, by
// another Store or process, or by an Append earlier in the same group
// commit — the first message is not inserted, and neither is the rest of
// the unit; nothing is counted and Append returns nil. SQLite's single
// writer makes that exact when Appends race.
//
// Appends are committed in groups: an Append queues its rows and then
// either becomes the writer — and commits every queued Append in one
// transaction — or finds that another writer has committed it meanwhile.
// An Append whose ctx is done before a writer takes it is withdrawn and
// stores nothing; once taken, it is part of a transaction that ends as soon
// as the ctx of any member (or of the writer) is done: the members whose
// ctx is done fail, the rest are queued again rather than failed.
func (s *Store) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	if err := s.begin(ctx, "Append", id); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	at := storekit.AppendTime(ctx)
	if err := storekit.CheckTime(at); err != nil {
		return fmt.Errorf("sqlitestore: Append to %s: %w", id.Key(), err)
	}
	unit, _, err := storekit.CheckAppendKeyOf(ctx)
	if err != nil {
		return fmt.Errorf("sqlitestore: Append to %s: %w", id.Key(), err)
	}
	part, err := newPart(id, unit, msgs, at)
	if err != nil {
		return fmt.Errorf("sqlitestore: Append to %s: %w", id.Key(), err)
	}
	s.tokenize(&part)
	return s.commit(ctx, "Append", id, &appendReq{ctx: ctx, parts: []appendPart{part}, done: make(chan struct{})})
}

// newPart encodes msgs, dated at, as what a request appends to id under
// the append key unit.
func newPart(id memstack.Identity, unit string, msgs []llms.ChatMessage, at time.Time) (appendPart, error) {
	part := appendPart{key: id.Key(), unit: unit, rows: make([]appendRow, len(msgs)), at: at}
	for i, m := range msgs {
		data, err := storekit.EncodeMessageAt(m, at)
		if err != nil {
			return appendPart{}, fmt.Errorf("message %d of %d: %w", i+1, len(msgs), err)
		}
		part.rows[i] = appendRow{system: m.GetType() == llms.ChatMessageTypeSystem, data: data}
	}
	part.msgs = msgs
	return part, nil
}

// commit queues req and waits until a writer (this call or another) has
// committed it; op and id name it in errors.
func (s *Store) commit(ctx context.Context, op string, id memstack.Identity, req *appendReq) error {
	s.enqueue(req)
	for {
		select {
		case <-req.done:
			if req.err != nil {
				return s.fail(ctx, op, id, req.err)
			}
			return nil
		case s.writer <- struct{}{}:
			s.commitQueued(ctx)
			<-s.writer
		case <-ctx.Done():
			if s.withdraw(req) {
				return s.fail(ctx, op, id, ctx.Err())
			}
			<-req.done // taken by a writer: its outcome is ours
			if req.err != nil {
				return s.fail(ctx, op, id, req.err)
			}
			return nil
		}
	}
}

// AppendBatches implements store.MultiAppender: every batch's messages
// are inserted as Append inserts them (each batch under its own append
// key), all in one transaction, so the batches are stored together or
// not at all, all dated storekit.AppendTime(ctx). A bad batch (an invalid
// key, a message that cannot be encoded) is an error naming it, and
// nothing is stored.
func (s *Store) AppendBatches(ctx context.Context, batches ...store.Batch) error {
	if len(batches) == 0 {
		return s.begin(ctx, "AppendBatches", memstack.Identity{})
	}
	for _, b := range batches {
		if err := s.begin(ctx, "AppendBatches", b.ID); err != nil {
			return err
		}
	}
	at := storekit.AppendTime(ctx)
	if err := storekit.CheckTime(at); err != nil {
		return fmt.Errorf("sqlitestore: AppendBatches to %s: %w", batches[0].ID.Key(), err)
	}
	req := &appendReq{ctx: ctx, done: make(chan struct{})}
	for i, b := range batches {
		if b.Key != "" {
			if err := storekit.CheckAppendKey(b.Key); err != nil {
				return fmt.Errorf("sqlitestore: AppendBatches: batch %d of %d (%s): %w", i+1, len(batches), b.ID.Key(), err)
			}
		}
		if len(b.Messages) == 0 {
			continue
		}
		part, err := newPart(b.ID, b.Key, b.Messages, at)
		if err != nil {
			return fmt.Errorf("sqlitestore: AppendBatches: batch %d of %d (%s): %w", i+1, len(batches), b.ID.Key(), err)
		}
		s.tokenize(&part)
		req.parts = append(req.parts, part)
	}
	if len(req.parts) == 0 {
		return nil
	}
	return s.commit(ctx, "AppendBatches", batches[0].ID, req)
}

var _ store.MultiAppender = (*Store)(nil)

var _ store.ChangeFeed = (*Store)(nil)

func (s *Store) enqueue(reqs ...*appendReq) {
	s.qmu.Lock()
	s.queue = append(s.queue, reqs...)
	s.qmu.Unlock()
}

// withdraw removes req from the queue and reports whether it was still
// there (not taken by a writer).
func (s *Store) withdraw(req *appendReq) bool {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	i := slices.Index(s.queue, req)
	if i < 0 {
		return false
	}
	s.queue = slices.Delete(s.queue, i, i+1)
	return true
}

// maxGroup bounds how many Appends one transaction commits.
const maxGroup = 256

// commitQueued commits the queued Appends in one transaction. The caller
// holds the writer semaphore; ctx is the calling Append's.
func (s *Store) commitQueued(ctx context.Context) {
	// Let Appends that are about to queue join this group.
	runtime.Gosched()
	s.qmu.Lock()
	n := min(len(s.queue), maxGroup)
	group := slices.Clone(s.queue[:n])
	s.queue = slices.Delete(s.queue, 0, n)
	s.qmu.Unlock()
	if len(group) == 0 {
		return
	}
	// Appends whose caller gave up before being taken store nothing.
	live := group[:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// The transaction is bounded by the ctx of every Append in it (and the
	// writer's): it ends as soon as any of them is done, so no caller
	// waits past its own deadline for the others.
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	for _, r := range live {
		stop := context.AfterFunc(r.ctx, cancel)
		defer stop()
	}
	err := s.writeLocked(tctx, func(tx *sql.Tx) error {
		// Whether the file keeps the recall index, read in the
		// transaction that writes (another process may have turned it
		// on).
		on, err := indexing(tctx, tx)
		if err != nil {
			return err
		}
		s.indexOn.Store(on)
		ins := tx.StmtContext(tctx, s.stmtInsert)
		// What the group adds to each identity's memstack_stat row, in
		// the order the identities first appear.
		var spans []span
		var pending []pendingIndex // by span
		at := map[string]int{}
		for _, r := range live {
			for _, p := range r.parts {
				for j, row := range p.rows {
					var unit any // NULL
					if j == 0 && p.unit != "" {
						unit = p.unit
					}
					res, err := ins.ExecContext(tctx, s.ns, p.key, row.system, row.data, unit)
					if err != nil {
						return err
					}
					if unit != nil {
						if added, err := res.RowsAffected(); err != nil {
							return fmt.Errorf("reading whether append key %q is new: %w", p.unit, err)
						} else if added == 0 {
							break // the key is stored, and so is its unit: store none of it
						}
					}
					seq, err := res.LastInsertId()
					if err != nil {
						return fmt.Errorf("reading the Seq of an appended message: %w", err)
					}
					i, ok := at[p.key]
					if !ok {
						i = len(spans)
						at[p.key] = i
						spans = append(spans, span{key: p.key, first: seq})
						pending = append(pending, pendingIndex{key: p.key})
					}
					spans[i].n++
					spans[i].last = seq
					pending[i].seqs = append(pending[i].seqs, seq)
					if p.index == nil && on {
						// The index was turned on since this Append
						// looked: tokenised here, under the lock.
						p.index = indexkit.Prepare(p.msgs)
					}
					if on {
						pending[i].msgs = append(pending[i].msgs, p.index[j])
					}
					pending[i].at = append(pending[i].at, p.at)
				}
			}
		}
		// The index, before the counts: a conversation it has no state
		// for is new if it had no messages before this commit.
		for _, pi := range pending {
			if !on {
				break
			}
			if err := s.indexAppended(tctx, tx, s.ns, pi); err != nil {
				return err
			}
		}
		bump := tx.StmtContext(tctx, s.stmtBump)
		for _, sp := range spans {
			if _, err := bump.ExecContext(tctx, s.ns, sp.key, sp.n, sp.first, sp.last); err != nil {
				return fmt.Errorf("counting the appended messages: %w", err)
			}
		}
		return nil
	})
	if err != nil && tctx.Err() != nil {
		// A caller's ctx ended the transaction, which stored nothing: the
		// Appends whose ctx is done fail with it, the others go back to
		// the head of the queue, in order, for the next writer.
		var again []*appendReq
		for _, r := range live {
			if cerr := r.ctx.Err(); cerr != nil {
				r.err = cerr
				close(r.done)
				continue
			}
			again = append(again, r)
		}
		s.qmu.Lock()
		s.queue = append(again, s.queue...)
		s.qmu.Unlock()
		return
	}
	for _, r := range live {
		r.err = err
		close(r.done)
	}
}

// tokenize prepares part's messages for the recall index before the
// transaction, when the file kept the index at this Store's last write
// (a part left untokenised is tokenised in the transaction if the index
// turns out to be on).
func (s *Store) tokenize(part *appendPart) {
	if s.indexOn.Load() || s.cfg.recall {
		part.index = indexkit.Prepare(part.msgs)
	}
}
