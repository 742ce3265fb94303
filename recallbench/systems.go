package recallbench

import (
	"context"
	"fmt"

	"github.com/tmc/langchaingo/llms"
	lcmemory "github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/tokens"
)

// DefaultBudget is the context budget the benchmark compares memories at,
// in cl100k tokens.
const DefaultBudget = 1000

// The default hybrid stack's settings (see HybridConfig).
const (
	// HybridRecent is the recent window's size, in messages (3 turns).
	HybridRecent = 6
	// HybridK is how many past exchanges Recall shows (memories'
	// default, DefaultRecallK).
	HybridK = memories.DefaultRecallK
	// HybridNeighbours is how many exchanges around each hit Recall
	// shows (memories' default: none).
	HybridNeighbours = 0
)

// HybridConfig configures the hybrid stack NewHybrid builds. The zero
// value of a field means its default; the zero HybridConfig is memstack's
// default hybrid stack.
type HybridConfig struct {
	// Budget is the stack's token budget (default DefaultBudget).
	Budget int
	// Recent is the recent window's size in messages (default
	// HybridRecent).
	Recent int
	// K is how many exchanges Recall shows (default HybridK).
	K int
	// Neighbours is how many exchanges around each hit Recall shows
	// (default HybridNeighbours; it cannot be set to another value and back
	// to 0 — 0 is the default).
	Neighbours int
}

func (c HybridConfig) withDefaults() HybridConfig {
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	if c.Recent == 0 {
		c.Recent = HybridRecent
	}
	if c.K == 0 {
		c.K = HybridK
	}
	return c
}

// Name describes the stack, as the benchmark's table shows it.
func (c HybridConfig) Name() string {
	c = c.withDefaults()
	nb := ""
	if c.Neighbours > 0 {
		nb = fmt.Sprintf(", neighbours=%d", c.Neighbours)
	}
	return fmt.Sprintf("memstack hybrid: RecentN(%d) + Facts(patterns) + Recall(BM25, k=%d%s), budget %d", c.Recent, c.K, nb, c.Budget)
}

// NewHybrid returns a hybrid stack (with the zero HybridConfig,
// memstack's default one): one combined.Memory of
//
//   - memories.RecentN(cfg.Recent), variable "history", layer "recent";
//   - memories.Facts over extract.NewPatterns() (the built-in rules, no
//     model), variable "facts", layer "facts", dated with clock (nil:
//     time.Now);
//   - memories.Recall with its default BM25 index, WithK(cfg.K),
//     WithNeighbours(cfg.Neighbours) and WithExcludeRecent(cfg.Recent)
//     (so it never repeats what the recent window shows), variable
//     "relevant_history", layer "recall";
//
// with combined.WithTokenBudget(cfg.Budget) and the default priorities
// (list order: Recall is trimmed first, the recent window last). opts are
// added to combined.New's options (an observer, for instance). Bad
// settings are reported by the memories' constructors.
func NewHybrid(cfg HybridConfig, clock *Clock, opts ...combined.Option) (*combined.Memory, error) {
	cfg = cfg.withDefaults()
	recent, err := memories.NewRecentN(cfg.Recent)
	if err != nil {
		return nil, err
	}
	rules, err := extract.NewPatterns()
	if err != nil {
		return nil, err
	}
	factOpts := []memories.Option{}
	if clock != nil {
		factOpts = append(factOpts, memories.WithClock(clock.Now))
	}
	facts, err := memories.NewFacts(rules, factOpts...)
	if err != nil {
		return nil, err
	}
	recall, err := memories.NewRecall(
		memories.WithK(cfg.K),
		memories.WithNeighbours(cfg.Neighbours),
		memories.WithExcludeRecent(cfg.Recent),
	)
	if err != nil {
		return nil, err
	}
	all := append([]combined.Option{
		combined.WithTokenBudget(cfg.Budget),
		combined.WithLayerNames("recent", "facts", "recall"),
	}, opts...)
	return combined.New([]schema.Memory{recent, facts, recall}, all...)
}

// System is one memory the benchmark runs: a name and a constructor
// (each run gets a fresh memory).
type System struct {
	Name string
	New  func(clock *Clock) (schema.Memory, error)
}

// WindowTurns returns how many turns of conv fit in budget tokens on
// average: budget divided by the mean size of a rendered turn
// ("Human: ...\nAI: ..."), at least 1. It sizes langchaingo's
// ConversationWindowBuffer, which counts turns, to a token budget.
func WindowTurns(conv *Conversation, budget int, counter tokens.Counter) (int, error) {
	if len(conv.Turns) == 0 {
		return 1, nil
	}
	total := 0
	for _, t := range conv.Turns {
		s, err := llms.GetBufferString([]llms.ChatMessage{
			llms.HumanChatMessage{Content: t.Human}, llms.AIChatMessage{Content: t.AI},
		}, "Human", "AI")
		if err != nil {
			return 0, err
		}
		total += counter.CountTokens(s) + 1 // and the line break between turns
	}
	mean := float64(total) / float64(len(conv.Turns))
	return max(1, int(float64(budget)/mean)), nil
}

// Systems returns the memories the benchmark compares at budget tokens,
// in table order:
//
//   - memstack's default hybrid stack (NewHybrid);
//   - memstack's recent window alone, sized to the same budget
//     (memories.TokenWindow(budget), cl100k);
//   - langchaingo's ConversationTokenBuffer(budget) (v0.1.14 counts
//     characters/4 there, and logs a warning on every save: see the
//     README's benchmark notes);
//   - langchaingo's ConversationWindowBuffer(k), k from WindowTurns;
//   - langchaingo's ConversationBuffer, unbounded: the reference for what
//     keeping everything costs.
func Systems(conv *Conversation, budget int) ([]System, error) {
	counter, err := tokens.CL100K()
	if err != nil {
		return nil, err
	}
	k, err := WindowTurns(conv, budget, counter)
	if err != nil {
		return nil, err
	}
	return []System{
		HybridSystem(HybridConfig{Budget: budget}),
		{
			Name: fmt.Sprintf("memstack TokenWindow(%d)", budget),
			New: func(*Clock) (schema.Memory, error) {
				return memories.NewTokenWindow(budget)
			},
		},
		{
			Name: fmt.Sprintf("langchaingo ConversationTokenBuffer(%d)", budget),
			New: func(*Clock) (schema.Memory, error) {
				return lcmemory.NewConversationTokenBuffer(nil, budget), nil
			},
		},
		{
			Name: fmt.Sprintf("langchaingo ConversationWindowBuffer(%d turns)", k),
			New: func(*Clock) (schema.Memory, error) {
				return lcmemory.NewConversationWindowBuffer(k), nil
			},
		},
		{
			Name: "langchaingo ConversationBuffer (unbounded)",
			New: func(*Clock) (schema.Memory, error) {
				return lcmemory.NewConversationBuffer(), nil
			},
		},
	}, nil
}

// HybridSystem returns the hybrid stack cfg describes as a System.
func HybridSystem(cfg HybridConfig) System {
	return System{
		Name: cfg.Name(),
		New:  func(clock *Clock) (schema.Memory, error) { return NewHybrid(cfg, clock) },
	}
}

// RunAll replays conv through a fresh memory of every system, in order.
func RunAll(ctx context.Context, conv *Conversation, systems []System) ([]Result, error) {
	out := make([]Result, 0, len(systems))
	for _, s := range systems {
		clock := &Clock{}
		mem, err := s.New(clock)
		if err != nil {
			return nil, fmt.Errorf("recallbench: building %s: %w", s.Name, err)
		}
		r, err := Replay(ctx, s.Name, conv, mem, WithClock(clock))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
