package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/llms/ollama"
	lcmemory "github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/sqlitestore"
)

// The groups a system belongs to: they decide where the report shows it.
const (
	// groupBaseline: the main table and the per-category table.
	groupBaseline = "baseline"
	// groupDefault: the headline default stack (exactly one system): the
	// main and per-category tables, the per-conversation table, the
	// Ablation table and the Speed section.
	groupDefault = "default"
	// groupVariant: a Recall variant in the default stack worth a place in
	// the main tables (the hand-tuned reference): main, per-category and
	// Ablation tables.
	groupVariant = "variant"
	// groupAblation: a Recall variant shown in the Ablation table only.
	groupAblation = "ablation"
	// groupEmbedder: a stack that needs -embedder: the main and
	// per-category tables.
	groupEmbedder = "embedder"
)

// recentN is the size, in messages, of the stacks' recent window.
const recentN = 6

// system is one memory the benchmark runs: a name, a group (see the
// constants) and a factory (every conversation gets a fresh memory).
type system struct {
	name    string
	group   string
	factory func() (schema.Memory, error)
}

// inMain reports whether the main and per-category tables show s.
func (s system) inMain() bool { return s.group != groupAblation }

// inAblation reports whether the Ablation table shows s.
func (s system) inAblation() bool {
	return s.group == groupDefault || s.group == groupVariant || s.group == groupAblation
}

// systems returns what the benchmark compares at budget tokens, in report
// order. emb, when not nil, adds the vector and hybrid stacks, embedding
// with emb under the name embName; their Recall reports index failures to
// failures. To add a variant of the default stack, add one line:
//
//	{"RecentN(6) + Recall(WithK(5))", groupAblation, stack(budget, memories.WithK(5))},
func systems(budget int, emb embeddings.Embedder, embName string, failures *indexFailures) []system {
	list := []system{
		{"langchaingo ConversationBuffer (unbounded)", groupBaseline, func() (schema.Memory, error) {
			return lcmemory.NewConversationBuffer(), nil
		}},
		// v0.1.14 counts tokens without the model it is given (characters/4).
		{fmt.Sprintf("langchaingo ConversationTokenBuffer(%d)", budget), groupBaseline, func() (schema.Memory, error) {
			return lcmemory.NewConversationTokenBuffer(nil, budget), nil
		}},
		{fmt.Sprintf("memstack TokenWindow(%d)", budget), groupBaseline, func() (schema.Memory, error) {
			return memories.NewTokenWindow(budget)
		}},
		{defaultName, groupDefault, stack(budget)},
		{"RecentN(6) + Recall(WithK(8), WithNeighbours(1)) (hand-tuned)", groupVariant, stack(budget, memories.WithK(8), memories.WithNeighbours(1))},
	}
	list = append(list, system{threeLayersName, groupBaseline, threeLayers(budget)})
	list = append(list, ablations(budget)...)
	if emb != nil {
		hook := memories.WithRecallHook(failures.record)
		name := retrieval.WithEmbedderName(embName)
		list = append(list,
			system{fmt.Sprintf("RecentN(6) + Recall(WithVector(%s))", embName), groupEmbedder,
				stack(budget, memories.WithVector(emb, nil, name), hook)},
			system{fmt.Sprintf("RecentN(6) + Recall(WithHybrid(%s))", embName), groupEmbedder,
				stack(budget, memories.WithHybrid(emb, nil, name), hook)},
		)
	}
	return list
}

// defaultName names the default stack.
const defaultName = "RecentN(6) + Recall() (default stack)"

// stack returns the factory of memstack's stack as the README builds it:
// combined.New([]schema.Memory{RecentN(6), NewRecall(opts...)},
// combined.WithTokenBudget(budget)). With no opts it is the default stack.
func stack(budget int, opts ...memories.RecallOption) func() (schema.Memory, error) {
	return func() (schema.Memory, error) {
		st, err := stores.open()
		if err != nil {
			return nil, err
		}
		recent, err := memories.NewRecentN(recentN, memories.WithStore(st))
		if err != nil {
			return nil, err
		}
		recall, err := memories.NewRecall(append([]memories.RecallOption{memories.WithStore(st)}, opts...)...)
		if err != nil {
			return nil, err
		}
		return combined.New([]schema.Memory{recent, recall}, combined.WithTokenBudget(budget))
	}
}

// threeLayersName names the README's long-term stack.
const threeLayersName = "RecentN(6) + Facts(patterns) + Recall(WithExcludeRecent(6)) (the README's three layers)"

// threeLayers returns the factory of the README's long-term stack:
// RecentN(6), Facts over the built-in patterns (no model) and Recall
// leaving out what the window shows, under one budget.
func threeLayers(budget int) func() (schema.Memory, error) {
	return func() (schema.Memory, error) {
		recent, err := memories.NewRecentN(recentN)
		if err != nil {
			return nil, err
		}
		patterns, err := extract.NewPatterns()
		if err != nil {
			return nil, err
		}
		facts, err := memories.NewFacts(patterns)
		if err != nil {
			return nil, err
		}
		recall, err := memories.NewRecall(memories.WithExcludeRecent(recentN))
		if err != nil {
			return nil, err
		}
		return combined.New([]schema.Memory{recent, facts, recall}, combined.WithTokenBudget(budget))
	}
}

// recallOnly returns the factory of the default stack's Recall alone, for
// the Speed section.
func recallOnly() (schema.Memory, error) {
	st, err := stores.open()
	if err != nil {
		return nil, err
	}
	return memories.NewRecall(memories.WithStore(st))
}

// storeKit opens the stores of the memstack stacks (-store): an in-memory
// store, a fresh SQLite file in dir, or fresh tables (a table prefix of
// their own) on the PostgreSQL server at dsn, each kept to be closed by
// close.
type storeKit struct {
	kind   string
	dir    string
	dsn    string
	mu     sync.Mutex
	opened []io.Closer
	n      int
}

// stores is the run's storeKit (run sets it from -store).
var stores = &storeKit{kind: "memory"}

// open returns a new store of the kit's kind.
func (k *storeKit) open() (store.Store, error) {
	if k.kind == "memory" {
		return store.NewInMemory(), nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n++
	var s interface {
		store.Store
		io.Closer
	}
	var err error
	if k.kind == "postgres" {
		s, err = pgstore.Open(context.Background(), k.dsn, pgstore.WithTablePrefix(fmt.Sprintf("stack_%d_", k.n)), pgstore.WithRecallIndex())
	} else {
		s, err = sqlitestore.Open(context.Background(), filepath.Join(k.dir, fmt.Sprintf("stack-%d.db", k.n)), sqlitestore.WithRecallIndex())
	}
	if err != nil {
		return nil, err
	}
	k.opened = append(k.opened, s)
	return s, nil
}

// close closes every store the kit opened.
func (k *storeKit) close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for _, s := range k.opened {
		errs = append(errs, s.Close())
	}
	k.opened = nil
	return errors.Join(errs...)
}

// newEmbedder returns the embedder -embedder names, and its name for the
// vector space: nil and "" with no -embedder. It never pulls the model,
// and embeds a probe text first, so an unreachable server or a missing
// model fails at once.
func newEmbedder(ctx context.Context, o options) (embeddings.Embedder, string, error) {
	if o.embedder == "" {
		return nil, "", nil
	}
	opts := []ollama.Option{ollama.WithModel(o.model)}
	if o.ollamaURL != "" {
		opts = append(opts, ollama.WithServerURL(o.ollamaURL))
	}
	llm, err := ollama.New(opts...)
	if err != nil {
		return nil, "", fmt.Errorf("-embedder ollama -model %s: %w", o.model, err)
	}
	emb, err := embeddings.NewEmbedder(llm)
	if err != nil {
		return nil, "", fmt.Errorf("-embedder ollama -model %s: %w", o.model, err)
	}
	// Fail now, not after a run whose every embedding failed.
	if _, err := emb.EmbedQuery(ctx, "memstack-recall"); err != nil {
		return nil, "", fmt.Errorf("-embedder ollama -model %s: embedding a probe: %w", o.model, err)
	}
	return emb, "ollama/" + o.model, nil
}

// indexFailures collects the index failures Recall reports to its hook
// (an embedder that fails does not fail a save or a load, see
// memories.Recall): the benchmark fails when there is any, since its
// figures would then not be the embedder's.
type indexFailures struct {
	mu    sync.Mutex
	n     int
	first error
}

func (f *indexFailures) record(e memories.RecallEvent) {
	if e.Err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		f.first = fmt.Errorf("%s: %w", e.Op, e.Err)
	}
	f.n++
}

// err returns an error describing the failures, or nil.
func (f *indexFailures) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return nil
	}
	return fmt.Errorf("%d index operations failed, the first: %w", f.n, f.first)
}

var errNoDefault = errors.New("the system list has no default stack")
