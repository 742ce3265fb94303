package observe_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
)

// tally is a sink of your own: it adds up, per layer and operation, the
// calls, the items injected into the prompt and the items dropped, as a
// metrics exporter would. It follows the observe.Sink contract: safe for
// concurrent use (a mutex) and quick (a few additions per report).
type tally struct {
	mu     sync.Mutex
	counts map[[2]string]*counts // {layer, op} -> counts
}

type counts struct{ calls, injected, dropped, failed int }

func (t *tally) Observe(_ context.Context, r observe.Report) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[[2]string]*counts{}
	}
	c := t.counts[[2]string{r.Layer, r.Op}]
	if c == nil {
		c = &counts{}
		t.counts[[2]string{r.Layer, r.Op}] = c
	}
	c.calls++
	c.injected += len(r.Injected)
	c.dropped += len(r.Dropped)
	if r.Err != nil {
		c.failed++
	}
}

// print writes one line per layer and operation, in name order.
func (t *tally) print() {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([][2]string, 0, len(t.counts))
	for k := range t.counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return slices.Compare(a[:], b[:]) })
	for _, k := range keys {
		c := t.counts[k]
		fmt.Printf("%-6s %-4s calls=%d injected=%d dropped=%d failed=%d\n", k[0], k[1], c.calls, c.injected, c.dropped, c.failed)
	}
}

var _ observe.Sink = (*tally)(nil)

// A sink of your own implements observe.Sink; combined.WithObserver hands
// it one Report per layer per call, named as WithLayerNames says. A
// report counts and names items but never carries their text.
func ExampleSink() {
	recent, err := memories.NewRecentN(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	rules, err := extract.NewPatterns()
	if err != nil {
		fmt.Println(err)
		return
	}
	facts, err := memories.NewFacts(rules)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer facts.Close()

	sink := &tally{}
	mem, err := combined.New([]schema.Memory{recent, facts},
		combined.WithLayerNames("recent", "facts"),
		combined.WithObserver(sink))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "ana"})
	for _, q := range []string{"Hi, I'm Ana.", "I live in Lisbon.", "What's the weather like?"} {
		if err := mem.SaveContext(ctx, map[string]any{"input": q}, map[string]any{"output": "..."}); err != nil {
			fmt.Println(err)
			return
		}
	}
	if _, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": "Any plans?"}); err != nil {
		fmt.Println(err)
		return
	}
	sink.print()
	// Output:
	// facts  load calls=1 injected=2 dropped=0 failed=0
	// facts  save calls=3 injected=0 dropped=0 failed=0
	// recent load calls=1 injected=2 dropped=4 failed=0
	// recent save calls=3 injected=0 dropped=0 failed=0
}
