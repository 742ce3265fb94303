package store

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/memstack/memstack"
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
//   - SetMessages: the smallest change that makes the conversation the
//     given list. langchaingo's window memories (ConversationWindowBuffer,
//     ConversationTokenBuffer) call it with the stored list minus its
//     oldest messages, maybe plus new ones at the end: then the oldest
//     messages are removed and the new ones appended in one atomic step
//     (Rewriter), and id's state values and the Seqs of the kept
//     messages stay — a summary or facts that a memstack memory keeps in
//     the same store survive every turn. (An empty list is such a trim:
//     every message goes, the state stays; Clear is the call that wipes
//     the state too.) A list that keeps none of the stored messages
//     replaces them and, like Clear, removes id's state values and moves
//     its absent version, in one atomic step too. A store that is not a
//     Rewriter gets the same result in two steps — RemovePrefix then
//     Append, or Clear then Append — that a crash can leave half done.
//     SetMessages works on what it reads first: a message another writer
//     appends meanwhile is kept, after the list; and a Clear between a
//     caller's Messages and its SetMessages cannot be told from an empty
//     history, so the list the caller derived from the cleared messages
//     is stored again (langchaingo's buffers read, then set) — clear
//     through the memory that uses the history, not around it.
//
// langchaingo's ChatMessageHistory methods take no identity; the one given
// here is used for every call, whatever identity the call's ctx carries.
//
// Each method passes its ctx on to s, so the time rules of the store
// package hold: a message added with a ctx from memstack.WithTime is
// stored dated with that time, any other with the time it was added
// (AppendTime), and SetMessages dates all its messages with one time, the
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

// Messages implements schema.ChatMessageHistory.
func (h *storeHistory) Messages(ctx context.Context) ([]llms.ChatMessage, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	recs, err := h.s.All(ctx, h.id)
	if err != nil {
		return nil, err
	}
	out := make([]llms.ChatMessage, len(recs))
	for i, r := range recs {
		out[i] = CloneMessage(r.Message)
	}
	return out, nil
}

// SetMessages implements schema.ChatMessageHistory (see AsHistory).
func (h *storeHistory) SetMessages(ctx context.Context, messages []llms.ChatMessage) error {
	if err := h.check(); err != nil {
		return err
	}
	for i, m := range messages {
		if isNil(m) {
			return fmt.Errorf("%w: SetMessages: message %d of %d is nil", ErrInvalidArgument, i+1, len(messages))
		}
	}
	recs, err := h.s.All(ctx, h.id)
	if err != nil {
		return err
	}
	k, err := overlap(recs, messages)
	if err != nil {
		return fmt.Errorf("store: SetMessages: %w", err)
	}
	add := messages[len(recs)-k:]
	rw, atomic := h.s.(Rewriter)
	switch {
	case k == 0: // the stored messages all stay: append the rest
		return h.s.Append(ctx, h.id, add...)
	case k < len(recs) || len(messages) == 0: // a trim, maybe with new messages
		through := recs[k-1].Seq
		if atomic {
			_, err := rw.Rewrite(ctx, h.id, through, false, add...)
			return err
		}
		if !hasSystem(recs[:k]) {
			if _, err := h.s.RemovePrefix(ctx, h.id, through); err != nil {
				return err
			}
			if err := h.s.Append(ctx, h.id, add...); err != nil {
				return fmt.Errorf("store: SetMessages: the oldest messages were removed but the new ones were not stored: %w", err)
			}
			return nil
		}
	}
	// Nothing stored is kept (or a trim of system messages on a store
	// RemovePrefix cannot do it on): replace everything that was read —
	// a message another writer appended since stays, after the new ones.
	if atomic {
		through := int64(math.MaxInt64)
		if len(recs) > 0 {
			through = recs[len(recs)-1].Seq
		}
		_, err := rw.Rewrite(ctx, h.id, through, true, messages...)
		return err
	}
	if err := h.s.Clear(ctx, h.id); err != nil {
		return err
	}
	if err := h.s.Append(ctx, h.id, messages...); err != nil {
		return fmt.Errorf("store: SetMessages: the history was cleared but the new messages were not stored: %w", err)
	}
	return nil
}

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
		b, err := EncodeMessage(r.Message)
		if err != nil {
			return 0, fmt.Errorf("stored message Seq %d: %w", r.Seq, err)
		}
		stored[i] = b
	}
	given := make([][]byte, 0, min(len(msgs), len(recs)))
	for i, m := range msgs[:min(len(msgs), len(recs))] {
		b, err := EncodeMessage(m)
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

func hasSystem(recs []Record) bool {
	for _, r := range recs {
		if r.Message.GetType() == llms.ChatMessageTypeSystem {
			return true
		}
	}
	return false
}
