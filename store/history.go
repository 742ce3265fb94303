package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/internal/kit"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// ErrWrongIdentity is returned by a History store called for an identity
// other than the one it serves.
var ErrWrongIdentity = errors.New("store: this store serves one identity only")

// History is a Store over one langchaingo schema.ChatMessageHistory, for one
// conversation: it lets any memstack memory keep its messages in any history
// langchaingo or a third party provides.
//
// A ChatMessageHistory holds a single conversation, so a History serves
// exactly one identity, given to FromHistory; a call for any other identity
// returns ErrWrongIdentity rather than mixing two users' messages.
//
// Calls are serialised by a mutex, so a History is safe for concurrent use
// within one process as long as nothing else writes to the underlying
// history. Append adds the messages one by one with AddMessage and, if one
// fails, restores the earlier messages with SetMessages, so a turn is stored
// whole or not at all as far as the history allows. Sequence numbers are kept
// by the History value; if the history is changed behind its back — another
// length, or other messages at the same length (each message's stored form
// is hashed and compared on every read) — the History numbers every message
// anew, which makes the memories above it rebuild their caches.
//
// A ChatMessageHistory has no place for state values, so a History keeps
// them in process memory: they do not survive a restart. Forget is Clear.
//
// Nor has it a place for times: a History does not keep the time of an
// Append (memstack.WithTime is ignored), and every Record it returns has a
// zero Time. Memories treat a zero Time as unknown (Facts dates a fact
// from such a message with its clock).
type History struct {
	mu    sync.Mutex
	h     schema.ChatMessageHistory
	id    memstack.Identity
	seqs  []int64  // seqs[i] is the Seq of the history's message i
	sums  []uint64 // sums[i] is a hash of message i as it was numbered
	next  int64
	state map[string]State
	// keys holds the append keys of the units appended through this
	// History (see WithAppendKey), with the Seq of each unit's first
	// message; like state, in process memory only.
	keys map[string]int64
	// cleared is the absent version state values have after a Clear (0
	// before the first), drawn from next like versions.
	cleared int64
}

var (
	_ Store        = (*History)(nil)
	_ ProcessState = (*History)(nil)
)

// StateInProcess reports true: a History keeps state values in process
// memory (see ProcessState).
func (s *History) StateInProcess() bool { return true }

// FromHistory returns a Store that keeps the conversation of id in h.
func FromHistory(h schema.ChatMessageHistory, id memstack.Identity) (*History, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: FromHistory: history is nil", ErrInvalidArgument)
	}
	return &History{h: h, id: id}, nil
}

func (s *History) check(ctx context.Context, id memstack.Identity) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	if id != s.id {
		return fmt.Errorf("%w: it serves %q, not %q", ErrWrongIdentity, s.id.Key(), id.Key())
	}
	return nil
}

// records reads the history and pairs every message with its Seq. The
// caller holds s.mu.
func (s *History) records(ctx context.Context) ([]Record, error) {
	msgs, err := s.h.Messages(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: reading chat history: %w", err)
	}
	sums := make([]uint64, len(msgs))
	for i, m := range msgs {
		sums[i] = messageSum(m)
	}
	if !slices.Equal(sums, s.sums) || len(msgs) != len(s.seqs) {
		// Changed behind this store's back — another length, or other
		// messages at the same length: number every message anew, so the
		// memories above notice (their caches key on Seqs).
		s.seqs = make([]int64, len(msgs))
		for i := range s.seqs {
			s.next++
			s.seqs[i] = s.next
		}
		s.sums = sums
	}
	out := make([]Record, len(msgs))
	for i, m := range msgs {
		out[i] = Record{Seq: s.seqs[i], Message: kit.CloneMessage(m)}
	}
	return out, nil
}

// Append implements Store.
func (s *History) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	if err := s.check(ctx, id); err != nil {
		return err
	}
	for i, m := range msgs {
		if kit.IsNil(m) {
			return fmt.Errorf("%w: message %d of %d is nil", ErrInvalidArgument, i+1, len(msgs))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	key, keyed, err := kit.CheckAppendKeyOf(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before, err := s.records(ctx)
	if err != nil {
		return err
	}
	if keyed {
		if seq, dup := s.keys[key]; dup {
			if _, ok := findSeq(before, seq); ok {
				return nil // stored already, under this key
			}
			delete(s.keys, key)
		}
	}
	for i, m := range msgs {
		if err := s.h.AddMessage(ctx, kit.CloneMessage(m)); err != nil {
			if i > 0 {
				old := make([]llms.ChatMessage, len(before))
				for j, r := range before {
					old[j] = r.Message
				}
				if rerr := s.h.SetMessages(context.WithoutCancel(ctx), old); rerr != nil {
					return fmt.Errorf("store: adding message %d of %d to chat history: %w (and restoring the history failed: %v)", i+1, len(msgs), err, rerr)
				}
			}
			return fmt.Errorf("store: adding message %d of %d to chat history: %w", i+1, len(msgs), err)
		}
	}
	for i, m := range msgs {
		s.next++
		s.seqs = append(s.seqs, s.next)
		s.sums = append(s.sums, messageSum(m))
		if keyed && i == 0 {
			if s.keys == nil {
				s.keys = make(map[string]int64)
			}
			s.keys[key] = s.next
		}
	}
	return nil
}

// Tail implements Store. A History reads the whole history on every call
// (a ChatMessageHistory has no other read), so its Tail costs what All
// costs.
func (s *History) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]Record, error) {
	if err := s.check(ctx, id); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: Tail(n=%d): n must be at least 1", ErrInvalidArgument, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, err := s.records(ctx)
	if err != nil {
		return nil, err
	}
	return tailOf(rs, n, after), nil
}

// messageSum is a hash of msg's stored form: what records compares to see
// whether the history changed.
func messageSum(msg llms.ChatMessage) uint64 {
	h := fnv.New64a()
	if b, err := kit.EncodeMessage(msg); err == nil {
		h.Write(b)
	} else {
		fmt.Fprintf(h, "%T %+v", msg, msg)
	}
	return h.Sum64()
}

// Last implements Store.
func (s *History) Last(ctx context.Context, id memstack.Identity, n int) ([]Record, error) {
	if err := s.check(ctx, id); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: Last(n=%d): n must be at least 1", ErrInvalidArgument, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, err := s.records(ctx)
	if err != nil {
		return nil, err
	}
	return rs[max(len(rs)-n, 0):], nil
}

// All implements Store.
func (s *History) All(ctx context.Context, id memstack.Identity) ([]Record, error) {
	if err := s.check(ctx, id); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records(ctx)
}

// Stat implements Store.
func (s *History) Stat(ctx context.Context, id memstack.Identity) (Stat, error) {
	if err := s.check(ctx, id); err != nil {
		return Stat{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, err := s.records(ctx)
	if err != nil || len(rs) == 0 {
		return Stat{}, err
	}
	return Stat{Count: len(rs), FirstSeq: rs[0].Seq, LastSeq: rs[len(rs)-1].Seq}, nil
}

// RemovePrefix implements Store.
func (s *History) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	if err := s.check(ctx, id); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, err := s.records(ctx)
	if err != nil {
		return 0, err
	}
	removed := removePrefix(&rs, through)
	if removed == 0 {
		return 0, nil
	}
	msgs := make([]llms.ChatMessage, len(rs))
	seqs := make([]int64, len(rs))
	sums := make([]uint64, len(rs))
	for i, r := range rs {
		msgs[i], seqs[i], sums[i] = r.Message, r.Seq, messageSum(r.Message)
	}
	if err := s.h.SetMessages(ctx, msgs); err != nil {
		return 0, fmt.Errorf("store: rewriting chat history: %w", err)
	}
	s.seqs, s.sums = seqs, sums
	return removed, nil
}

// Clear implements Store.
func (s *History) Clear(ctx context.Context, id memstack.Identity) error {
	if err := s.check(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.h.Clear(ctx); err != nil {
		return fmt.Errorf("store: clearing chat history: %w", err)
	}
	s.seqs, s.sums = nil, nil
	s.state, s.keys = nil, nil
	s.next++
	s.cleared = s.next
	return nil
}

// Forget implements Store; for a single-conversation History it is Clear.
func (s *History) Forget(ctx context.Context, id memstack.Identity) error {
	return s.Clear(ctx, id)
}

// GetState implements Store (in process memory; see History).
func (s *History) GetState(ctx context.Context, id memstack.Identity, name string) (State, error) {
	if err := s.check(ctx, id); err != nil {
		return State{}, err
	}
	if err := kit.CheckStateName(name); err != nil {
		return State{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.state[name]
	if !ok {
		return State{Version: s.cleared}, nil
	}
	st.Value = bytes.Clone(st.Value)
	return st, nil
}

// PutState implements Store (in process memory; see History).
func (s *History) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	if err := s.check(ctx, id); err != nil {
		return 0, err
	}
	if err := kit.CheckStateName(name); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.state[name]
	if !ok {
		cur.Version = s.cleared
	}
	if cur.Version != expect {
		return 0, fmt.Errorf("%w: state %q is at version %d, not %d", ErrConflict, name, cur.Version, expect)
	}
	if value == nil {
		delete(s.state, name)
		return s.cleared, nil
	}
	if s.state == nil {
		s.state = make(map[string]State)
	}
	s.next++
	s.state[name] = State{Value: bytes.Clone(value), Version: s.next}
	return s.next, nil
}
