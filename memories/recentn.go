package memories

import (
	"context"
	"fmt"
	"math"

	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// RecentN shows the last n messages of each conversation: langchaingo's
// ConversationWindowBuffer, counted in messages rather than in pairs, and
// with two rules langchaingo lacks:
//
//   - System messages are pinned: every system message ever added is shown,
//     in its original order, ahead of the window, and does not count toward n.
//   - An AI message that calls tools and the tool results that follow it are
//     a group, shown or dropped whole. When the oldest group in reach does
//     not fit in what remains of n, it is dropped, so the window may hold
//     fewer than n messages but never more, and never half a tool exchange.
//
// RecentN is a view: a load reads the pinned system messages and the
// newest messages (store.Messages.Tail), so it costs O(n) however long the
// conversation has run (when the newest messages are tool results, a load
// also reads back to the message their run starts with, to know whether
// they are a group and what it costs), and it never removes a message from its store —
// other layers may read the same transcript (package store, "One
// transcript"). To keep the store itself small, give it a retention
// (WithRetention(KeepLast(k)), k >= n): it then removes messages older
// than the newest k after each save, in batches.
//
// RecentN is safe for concurrent use.
type RecentN struct {
	base
	n int
}

var (
	_ schema.Memory = (*RecentN)(nil)
	_ fmt.Stringer  = (*RecentN)(nil)
)

// NewRecentN returns a RecentN showing the last n messages. n < 1 is an
// error, as is an invalid option, and a retention that keeps fewer than n
// messages (WithRetention).
func NewRecentN(n int, opts ...RecentNOption) (*RecentN, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: NewRecentN(n=%d): n must be at least 1", ErrInvalidOption, n)
	}
	m := &RecentN{base: newBase(opts, RecentNOption.applyRecentN), n: n}
	if m.err != nil {
		return nil, m.err
	}
	if r := m.cfg.retention; r != nil && r.keep < n {
		return nil, fmt.Errorf("%w: NewRecentN(n=%d): WithRetention(%s) keeps fewer messages than the window shows", ErrInvalidOption, n, r)
	}
	return m, nil
}

func (m *RecentN) window(recs []store.Record) windowed {
	return choose(recs,
		func([]store.Record) int { return m.n },
		func(store.Record) int { return 1 })
}

// load reads and chooses the window of id (see loadWindow).
func (m *RecentN) load(ctx context.Context, id identity) (windowed, error) {
	return loadWindow(ctx, m.cfg.store, id, m.n+firstRead, m.window)
}

// SaveContext stores the turn (validated first; stored whole or not at
// all) and, under a retention, removes what it lets go.
func (m *RecentN) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
	id, msgs, err := m.turn(ctx, inputs, outputs)
	if err != nil {
		return err
	}
	if err := m.append(ctx, id, msgs...); err != nil {
		return err
	}
	m.retain(ctx, id, trimSlack, math.MaxInt64)
	return nil
}

// AddMessage stores one message of any role and, under a retention,
// removes what it lets go.
func (m *RecentN) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
	id, msg, err := m.message(ctx, msg)
	if err != nil {
		return err
	}
	if err := m.append(ctx, id, msg); err != nil {
		return err
	}
	m.retain(ctx, id, trimSlack, math.MaxInt64)
	return nil
}

// LoadMemoryVariables returns the pinned system messages followed by the
// window. The inputs are not used.
func (m *RecentN) LoadMemoryVariables(ctx context.Context, _ map[string]any) (map[string]any, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return nil, err
	}
	w, err := m.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		recordMessages(rec, nil, w.system, w.window)
		recordOutside(rec, nil, w.outside)
	}
	return m.variables(w.messages())
}

// StoreUses implements layer.StoreUser: a RecentN reads the newest n
// messages.
func (m *RecentN) StoreUses() []layer.StoreUse { return m.storeUses(m.n) }

// Clear removes the messages of the identity in ctx, and only that one.
func (m *RecentN) Clear(ctx context.Context) error {
	_, err := m.clear(ctx)
	return err
}

// String describes the memory's configuration.
func (m *RecentN) String() string { return m.describe("RecentN", fmt.Sprintf("n=%d", m.n)) }
