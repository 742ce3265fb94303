package combined_test

import (
	"context"
	"fmt"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
)

// One budget over two layers: the recent window (first, so highest
// priority) stays whole, and the full transcript loses its oldest messages
// — whole messages, never half of one — until everything fits in 35 tokens.
func ExampleWithTokenBudget() {
	ctx := context.Background()
	recent, err := memories.NewRecentN(2, memories.WithMemoryKey("recent"))
	if err != nil {
		fmt.Println(err)
		return
	}
	full, err := memories.NewBuffer(memories.WithMemoryKey("transcript"))
	if err != nil {
		fmt.Println(err)
		return
	}
	mem, err := combined.New([]schema.Memory{recent, full},
		combined.WithTokenBudget(35, combined.WithTrimHook(func(_ context.Context, t combined.Trim) {
			fmt.Printf("budget %d, used %d, dropped:\n", t.Budget, t.Tokens)
			for _, d := range t.Dropped {
				fmt.Printf("  %s: %s %s (%d tokens, %s)\n", d.Layer, d.Item.Kind, d.Item.ID, d.Item.Tokens, d.Item.Reason)
			}
		})),
		combined.WithLayerNames("recent", "transcript"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, msg := range []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Plan my day."},
		llms.AIChatMessage{Content: "1. Code\n2. Walk\n3. Read"},
		llms.HumanChatMessage{Content: "And tomorrow?"},
		llms.AIChatMessage{Content: "Rest."},
	} {
		if err := mem.AddMessage(ctx, msg); err != nil {
			fmt.Println(err)
			return
		}
	}
	vars, err := mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("[recent]\n%s\n[transcript]\n%s\n", vars["recent"], vars["transcript"])
	// Output:
	// budget 35, used 33, dropped:
	//   transcript: message 1 (6 tokens, budget)
	// [recent]
	// Human: And tomorrow?
	// AI: Rest.
	// [transcript]
	// AI: 1. Code
	// 2. Walk
	// 3. Read
	// Human: And tomorrow?
	// AI: Rest.
}

// WithObserver reports what every layer did in every call; here a plain Go
// hook prints the loads.
func ExampleWithObserver() {
	ctx := context.Background()
	recent, err := memories.NewRecentN(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	sink := observe.SinkFunc(func(_ context.Context, r observe.Report) {
		if r.Op == observe.OpLoad {
			fmt.Printf("%s %s: injected %d, dropped %d %v\n", r.Op, r.Layer, len(r.Injected), len(r.Dropped), observe.CountReasons(r.Dropped))
		}
	})
	full, err := memories.NewBuffer(memories.WithMemoryKey("full"))
	if err != nil {
		fmt.Println(err)
		return
	}
	mem, err := combined.New([]schema.Memory{recent, full}, combined.WithObserver(sink))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, q := range []string{"Hello", "How are you?", "Bye"} {
		if err := mem.SaveContext(ctx, map[string]any{"input": q}, map[string]any{"output": "..."}); err != nil {
			fmt.Println(err)
			return
		}
	}
	if _, err := mem.LoadMemoryVariables(ctx, nil); err != nil {
		fmt.Println(err)
	}
	// Output:
	// load 1:RecentN: injected 2, dropped 4 map[outside_window:4]
	// load 2:Buffer: injected 6, dropped 0 map[]
}
