package store

import (
	"context"
	"fmt"

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
//   - SetMessages: Clear, then one Append of all the messages (a single
//     unit: stored whole or not at all). The two steps are not one
//     transaction: if the Append fails, the history is left empty and the
//     error is returned. Like Clear, it removes id's state values.
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

// SetMessages implements schema.ChatMessageHistory.
func (h *storeHistory) SetMessages(ctx context.Context, messages []llms.ChatMessage) error {
	if err := h.check(); err != nil {
		return err
	}
	for i, m := range messages {
		if isNil(m) {
			return fmt.Errorf("%w: SetMessages: message %d of %d is nil", ErrInvalidArgument, i+1, len(messages))
		}
	}
	if err := h.s.Clear(ctx, h.id); err != nil {
		return err
	}
	if err := h.s.Append(ctx, h.id, messages...); err != nil {
		return fmt.Errorf("store: SetMessages: the history was cleared but the new messages were not stored: %w", err)
	}
	return nil
}
