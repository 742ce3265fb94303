package memories

import (
	"context"
	"fmt"
	"math"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/tokens"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// TokenWindow shows the newest messages of each conversation that fit in a
// token budget: langchaingo's ConversationTokenBuffer, with the token count
// done right.
//
// Counting: a message costs the tokens of its rendered line ("AI: ...", as
// in the history string) plus one for the line break, so the rendered
// history of the window never exceeds maxTokens by the counter's measure.
// The counter is an interface (WithTokenCounter); the default counts
// cl100k_base tokens offline, never touches the network and never logs.
// Counts are cached per stored message (keyed by identity and sequence
// number), so a turn counts only its new messages, never the whole history.
//
// A counter that breaks its contract (tokens.Counter) is not trusted: a
// negative count or a panic while a load counts fails that load
// (LoadMemoryVariables, LoadItems) with an error wrapping
// tokens.ErrBadCount that names the counter's type — never a window over
// the budget, never a crash — and the bad count is not cached, so a later
// load asks again. A count too large to fit (up to math.MaxInt) is valid:
// the message is not shown. Saving (SaveContext, AddMessage) never counts
// tokens, so a bad counter never loses a turn: it is stored, and the
// loads report the counter until it is fixed.
//
// Pinning and grouping follow RecentN: system messages are always shown,
// ahead of the window, in their original order; their tokens are counted
// first, and the rest of the budget goes to the newest messages. (System
// messages are shown even if they alone exceed the budget: they are the
// agent's instructions.) A tool call and its results are shown or dropped
// together. Like RecentN, TokenWindow is a view: a load reads the pinned
// system messages and the newest messages (store.Messages.Tail), as many
// as the budget may need, so its cost does not grow with the
// conversation, and it removes no message from its store unless given a
// retention (WithRetention).
//
// TokenWindow is safe for concurrent use.
type TokenWindow struct {
	base
	maxTokens int
	counter   tokens.Counter
	counts    *lru.Cache[tokenKey, int]
}

type tokenKey struct {
	id  identity
	seq int64
}

var (
	_ schema.Memory = (*TokenWindow)(nil)
	_ fmt.Stringer  = (*TokenWindow)(nil)
)

// NewTokenWindow returns a TokenWindow with a budget of maxTokens tokens.
// maxTokens < 1 is an error, as is an invalid option and a retention that
// keeps no message (WithRetention(KeepLast(0))).
func NewTokenWindow(maxTokens int, opts ...TokenWindowOption) (*TokenWindow, error) {
	if maxTokens < 1 {
		return nil, fmt.Errorf("%w: NewTokenWindow(maxTokens=%d): maxTokens must be at least 1", ErrInvalidOption, maxTokens)
	}
	m := &TokenWindow{base: newBase(opts, TokenWindowOption.applyTokenWindow), maxTokens: maxTokens}
	if m.err != nil {
		return nil, m.err
	}
	if r := m.cfg.retention; r != nil && r.keep < 1 {
		return nil, fmt.Errorf("%w: NewTokenWindow(maxTokens=%d): WithRetention(%s) keeps no message to show", ErrInvalidOption, maxTokens, r)
	}
	m.counter = m.cfg.counter
	if m.counter == nil {
		c, err := tokens.CL100K()
		if err != nil {
			return nil, err
		}
		m.counter = c
	}
	if m.cfg.cacheSize > 0 {
		m.counts, _ = lru.New[tokenKey, int](64 * m.cfg.cacheSize)
	}
	return m, nil
}

// tooBig is the cost of a message that can never fit: one that cannot be
// rendered, or whose count is enormous (costs are capped at it, so that no
// sum of costs wraps around).
const tooBig = math.MaxInt / 4

// count returns the token cost of one stored message of id, cached: the
// tokens of its rendered line (counted through tokens.Count) plus one. A
// message that cannot be rendered costs tooBig (it never fits); a bad
// count (tokens.ErrBadCount) is an error, and is not cached.
func (m *TokenWindow) count(id identity, r store.Record) (int, error) {
	n, err := m.lineCost(m.counts, m.counter, id, r, tooBig-1)
	if err != nil {
		return 0, fmt.Errorf("memstack: TokenWindow: counting the tokens of message %d: %w", r.Seq, err)
	}
	return n, nil
}

// lineCost returns the token cost of one stored message of id, cached in
// counts (if not nil): the tokens of its rendered line (counted with
// counter through tokens.Count), capped at limit, plus one. A message
// that cannot be rendered costs tooBig; a bad count (tokens.ErrBadCount)
// is an error, and is not cached.
func (b *base) lineCost(counts *lru.Cache[tokenKey, int], counter tokens.Counter, id identity, r store.Record, limit int) (int, error) {
	k := tokenKey{id, r.Seq}
	if counts != nil {
		if n, ok := counts.Get(k); ok {
			return n, nil
		}
	}
	line, err := adapter.RenderLine(r.Message, b.cfg.humanPrefix, b.cfg.aiPrefix)
	if err != nil {
		return tooBig, nil // cannot be rendered: never fits
	}
	n, err := tokens.Count(counter, line)
	if err != nil {
		return 0, err
	}
	n = min(n, limit) + 1
	if counts != nil {
		counts.Add(k, n)
	}
	return n, nil
}

// counting is the cost function of one load: it keeps the first bad count
// in err, and from then on every message costs tooBig, so nothing more
// fits and no more counting is done; the load then returns err.
type counting struct {
	m   *TokenWindow
	id  identity
	err error
}

func (c *counting) cost(r store.Record) int {
	if c.err != nil {
		return tooBig
	}
	n, err := c.m.count(c.id, r)
	if err != nil {
		c.err = err
		return tooBig
	}
	return n
}

// cost returns the cost function of reports (observe): the messages' costs
// as a load counts them, 0 ("unknown", as observe.Item.Tokens has it) for
// a bad count. Reporting never fails a load: the load itself has counted
// every message it shows, and fails on a bad count (see load).
func (m *TokenWindow) cost(id identity) func(store.Record) int {
	return func(r store.Record) int {
		n, err := m.count(id, r)
		if err != nil {
			return 0
		}
		return n
	}
}

func (m *TokenWindow) window(c *counting, recs []store.Record) windowed {
	return choose(recs, func(system []store.Record) int {
		left := m.maxTokens
		for _, r := range system {
			if n := c.cost(r); n > left {
				left = -1 // nothing fits; and never wraps around
			} else {
				left -= n
			}
		}
		return left
	}, c.cost)
}

// load reads and chooses the window of id (see loadWindow): the first
// read asks for at most 64 messages, or fewer with a small budget. A bad
// count of any message it counts (tokens.ErrBadCount: the counter returned
// a negative count or panicked) fails it with an error naming the counter.
func (m *TokenWindow) load(ctx context.Context, id identity) (windowed, error) {
	c := &counting{m: m, id: id}
	w, err := loadWindow(ctx, m.cfg.store, id, min(m.maxTokens, 64)+firstRead, func(recs []store.Record) windowed {
		return m.window(c, recs)
	})
	if err != nil {
		return windowed{}, err
	}
	if c.err != nil {
		return windowed{}, c.err
	}
	return w, nil
}

// SaveContext stores the turn (validated first; stored whole or not at
// all) and, under a retention, removes what it lets go.
func (m *TokenWindow) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
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
func (m *TokenWindow) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
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
// newest messages that fit in the budget. The inputs are not used.
func (m *TokenWindow) LoadMemoryVariables(ctx context.Context, _ map[string]any) (map[string]any, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return nil, err
	}
	w, err := m.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		cost := m.cost(id)
		recordMessages(rec, cost, w.system, w.window)
		recordOutside(rec, cost, w.outside)
	}
	return m.variables(w.messages())
}

// StoreUses implements layer.StoreUser: how many messages a TokenWindow
// reads depends on their lengths, so it counts as reading them all.
func (m *TokenWindow) StoreUses() []layer.StoreUse { return m.storeUses(0) }

// Clear removes the messages of the identity in ctx, and only that one.
func (m *TokenWindow) Clear(ctx context.Context) error {
	_, err := m.clear(ctx)
	return err
}

// String describes the memory's configuration.
func (m *TokenWindow) String() string {
	return m.describe("TokenWindow", fmt.Sprintf("max_tokens=%d", m.maxTokens))
}
