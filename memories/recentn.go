package memories

import (
	"context"
	"fmt"

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
// RecentN owns what it stores under each identity: after a save it trims
// messages that can never be shown again (keeping system messages), in
// batches, so its store holds O(n) messages and the cost of a save or a load
// is O(n) however long the conversation has run. Trimming is best effort (a
// failure is retried at the next save) and never changes what a load shows.
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
// error, as is an invalid option.
func NewRecentN(n int, opts ...Option) (*RecentN, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: NewRecentN(n=%d): n must be at least 1", ErrInvalidOption, n)
	}
	m := &RecentN{base: newBase("RecentN", 0, opts), n: n}
	if m.err != nil {
		return nil, m.err
	}
	return m, nil
}

func (m *RecentN) window(recs []store.Record) windowed {
	return choose(recs,
		func([]store.Record) int { return m.n },
		func(store.Record) int { return 1 })
}

// SaveContext stores the turn (validated first; stored whole or not at all)
// and trims the store.
func (m *RecentN) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
	id, msgs, err := m.turn(ctx, inputs, outputs)
	if err != nil {
		return err
	}
	if err := m.append(ctx, id, msgs...); err != nil {
		return err
	}
	m.trim(ctx, id)
	return nil
}

// AddMessage stores one message of any role and trims the store.
func (m *RecentN) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
	id, msg, err := m.message(ctx, msg)
	if err != nil {
		return err
	}
	if err := m.append(ctx, id, msg); err != nil {
		return err
	}
	m.trim(ctx, id)
	return nil
}

func (m *RecentN) trim(ctx context.Context, id identity) {
	// Cheap gate: with this few messages stored, nothing needs trimming.
	if st, err := m.cfg.store.Stat(ctx, id); err != nil || st.Count <= m.n+trimSlack {
		return
	}
	recs, err := m.cfg.store.All(ctx, id)
	if err != nil {
		return
	}
	trim(ctx, m.cfg.store, id, m.window(recs))
}

// LoadMemoryVariables returns the pinned system messages followed by the
// window. The inputs are not used.
func (m *RecentN) LoadMemoryVariables(ctx context.Context, _ map[string]any) (map[string]any, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := loadAll(ctx, m.cfg.store, id)
	if err != nil {
		return nil, err
	}
	w := m.window(recs)
	if rec := observe.FromContext(ctx); rec.Enabled() {
		recordMessages(rec, nil, w.system, w.window)
		recordOutside(rec, nil, w.outside)
	}
	return m.variables(w.messages())
}

// Clear removes the messages of the identity in ctx, and only that one.
func (m *RecentN) Clear(ctx context.Context) error {
	_, err := m.clear(ctx)
	return err
}

// String describes the memory's configuration.
func (m *RecentN) String() string { return m.describe("RecentN", fmt.Sprintf("n=%d", m.n)) }
