package store

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/internal/kit"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// AsHistory returns a langchaingo schema.ChatMessageHistory over one
// conversation (id) of s, so langchaingo's own memories can keep their
// messages in any memstack backend:
//
//	h := store.AsHistory(sqliteStore, id)
//	mem := memory.NewConversationBuffer(memory.WithChatHistory(h))
//
// It is the reverse of FromHistory. Every method maps to one Store call for
// id, so it is as safe for concurrent use, as persistent and as shared as s
// is:
//
//   - AddMessage, AddUserMessage, AddAIMessage: Append of one message.
//   - Messages: All, as fresh copies the caller may change.
//   - Clear: Store.Clear — which also removes id's state values in s's
//     namespace (a summary a memstack memory keeps there, for example).
//   - SetMessages: the smallest change that makes what the caller read
//     the given list, never touching id's state values, and never removing
//     a message the caller did not read. langchaingo's window memories
//     (ConversationWindowBuffer, ConversationTokenBuffer) read the history
//     (Messages) and then call SetMessages with the list minus its oldest
//     messages: the oldest messages are removed (and any new ones
//     appended) in one atomic step (Rewriter), and id's state values and
//     the Seqs of the kept messages stay — a summary or facts that a
//     memstack memory keeps in the same store survive every turn. A list
//     that keeps none of the messages read replaces them, in one step too.
//     What the caller read is what the last Messages of this history
//     value returned (or, without one, everything stored): a message
//     another writer appended after that read — another replica's turn —
//     stays, after the messages kept, and a Clear or Forget of id after
//     that read makes SetMessages fail with an error wrapping ErrConflict
//     rather than write the cleared messages back (read again, then set).
//     A history value shared by goroutines that interleave Messages and
//     SetMessages cannot tell whose read a SetMessages follows: give each
//     its own AsHistory value, as each langchaingo memory is. Between the
//     check for a Clear and the rewrite a Clear can still slip in; the
//     window is one store call. A store that is not a Rewriter gets the
//     same result in two steps — RemovePrefix, which keeps system
//     messages, then Append — that a crash can leave half done.
//
// langchaingo's ChatMessageHistory methods take no identity; the one given
// here is used for every call, whatever identity the call's ctx carries.
//
// Each method passes its ctx on to s, so the time rules of the store
// package hold: a message added with a ctx from memstack.WithTime is
// stored dated with that time, any other with the time it was added
// (storekit.AppendTime), and SetMessages dates all its messages with one time, the
// time of its Append (a langchaingo message has no time of its own, so the
// times the messages had before are not kept). Messages returns no times;
// read them with s.All.
func AsHistory(s Store, id memstack.Identity) schema.ChatMessageHistory {
	return &storeHistory{s: s, id: id}
}

// HistoryStore returns the store and identity a history made by AsHistory
// keeps its messages in, and whether h is such a history: how
// combined.New finds a langchaingo memory that shares a store with other
// layers.
func HistoryStore(h schema.ChatMessageHistory) (Store, memstack.Identity, bool) {
	sh, ok := h.(*storeHistory)
	if !ok || sh == nil || sh.s == nil {
		return nil, memstack.Identity{}, false
	}
	return sh.s, sh.id, true
}

type storeHistory struct {
	s  Store
	id memstack.Identity

	mu   sync.Mutex
	read view // what the last Messages read, for the next SetMessages
}

// view is what a Messages call read: the records it returned and the
// absent version of historyStateName then.
type view struct {
	ok     bool
	recs   []Record
	absent int64
}

var _ schema.ChatMessageHistory = (*storeHistory)(nil)

func (h *storeHistory) check() error {
	if h.s == nil {
		return fmt.Errorf("%w: AsHistory: store is nil", ErrInvalidArgument)
	}
	return nil
}

// AddMessage implements schema.ChatMessageHistory.
func (h *storeHistory) AddMessage(ctx context.Context, message llms.ChatMessage) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.s.Append(ctx, h.id, message)
}

// AddUserMessage implements schema.ChatMessageHistory.
func (h *storeHistory) AddUserMessage(ctx context.Context, message string) error {
	return h.AddMessage(ctx, llms.HumanChatMessage{Content: message})
}

// AddAIMessage implements schema.ChatMessageHistory.
func (h *storeHistory) AddAIMessage(ctx context.Context, message string) error {
	return h.AddMessage(ctx, llms.AIChatMessage{Content: message})
}

// Clear implements schema.ChatMessageHistory.
func (h *storeHistory) Clear(ctx context.Context) error {
	if err := h.check(); err != nil {
		return err
	}
	return h.s.Clear(ctx, h.id)
}

// Messages implements schema.ChatMessageHistory. It notes what it read —
// the newest Seq, and the absent version a Clear or Forget would move —
// for the next SetMessages of this history value.
func (h *storeHistory) Messages(ctx context.Context) ([]llms.ChatMessage, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	st, err := h.s.GetState(ctx, h.id, historyStateName)
	if err != nil {
		return nil, err
	}
	recs, err := h.s.All(ctx, h.id)
	if err != nil {
		return nil, err
	}
	v := view{ok: true, absent: st.Version, recs: recs}
	h.mu.Lock()
	h.read = v
	h.mu.Unlock()
	out := make([]llms.ChatMessage, len(recs))
	for i, r := range recs {
		out[i] = kit.CloneMessage(r.Message)
	}
	return out, nil
}

// SetMessages implements schema.ChatMessageHistory (see AsHistory).
func (h *storeHistory) SetMessages(ctx context.Context, messages []llms.ChatMessage) error {
	if err := h.check(); err != nil {
		return err
	}
	for i, m := range messages {
		if kit.IsNil(m) {
			return fmt.Errorf("%w: SetMessages: message %d of %d is nil", ErrInvalidArgument, i+1, len(messages))
		}
	}
	h.mu.Lock()
	read := h.read
	h.read = view{} // a view is used once: the next SetMessages reads anew
	h.mu.Unlock()
	// What the caller saw: what the last Messages of this value read, else
	// what is stored now. The list given is read against it — the first k
	// seen messages go, the rest stay, what follows them in the list is
	// new — and applied to the store: messages another writer appended
	// after the read stay, in their place, and messages it removed after
	// the read (another replica's window trimming the same conversation)
	// stay removed.
	seen := read.recs
	if read.ok {
		st, err := h.s.GetState(ctx, h.id, historyStateName)
		if err != nil {
			return err
		}
		if st.Version != read.absent {
			return fmt.Errorf("store: SetMessages: %w: the conversation was cleared (or forgotten) after Messages read it; read it again", ErrConflict)
		}
	} else {
		recs, err := h.s.All(ctx, h.id)
		if err != nil {
			return err
		}
		seen = recs
	}
	k, err := overlap(seen, messages)
	if err != nil {
		return fmt.Errorf("store: SetMessages: %w", err)
	}
	add := messages[len(seen)-k:]
	if k == len(seen) { // nothing seen stays: a replacement of what was seen
		add = messages
	}
	if k == 0 && len(seen) > 0 || len(seen) == 0 { // everything seen stays
		return h.s.Append(ctx, h.id, add...)
	}
	through := seen[k-1].Seq
	if rw, ok := h.s.(Rewriter); ok {
		_, err := rw.Rewrite(ctx, h.id, through, false, add...)
		return err
	}
	// No Rewriter: RemovePrefix, which keeps system messages, then Append
	// — two steps a crash can leave half done.
	if _, err := h.s.RemovePrefix(ctx, h.id, through); err != nil {
		return err
	}
	if err := h.s.Append(ctx, h.id, add...); err != nil {
		return fmt.Errorf("store: SetMessages: the oldest messages were removed but the new ones were not stored: %w", err)
	}
	return nil
}

// historyStateName is the state name whose absent version AsHistory
// reads to tell whether a Clear or Forget came between Messages and
// SetMessages. No value is ever stored under it.
const historyStateName = "memstack.ashistory.read"

// overlap returns the smallest k such that the stored messages from k on
// are the first messages of msgs (compared in their stored form): the
// stored ones before k are to go, msgs after the overlap to be appended.
// It is len(recs) when no stored message stays.
func overlap(recs []Record, msgs []llms.ChatMessage) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	stored := make([][]byte, len(recs))
	for i, r := range recs {
		b, err := kit.EncodeMessage(r.Message)
		if err != nil {
			return 0, fmt.Errorf("stored message Seq %d: %w", r.Seq, err)
		}
		stored[i] = b
	}
	given := make([][]byte, 0, min(len(msgs), len(recs)))
	for i, m := range msgs[:min(len(msgs), len(recs))] {
		b, err := kit.EncodeMessage(m)
		if err != nil {
			return 0, fmt.Errorf("message %d of %d: %w", i+1, len(msgs), err)
		}
		given = append(given, b)
	}
	for k := max(0, len(recs)-len(given)); k < len(recs); k++ {
		same := true
		for i := k; i < len(recs); i++ {
			if !bytes.Equal(stored[i], given[i-k]) {
				same = false
				break
			}
		}
		if same {
			return k, nil
		}
	}
	return len(recs), nil
}
