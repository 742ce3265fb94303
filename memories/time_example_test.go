package memories_test

import (
	"context"
	"fmt"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
)

// Importing an old conversation under memstack.WithTime dates its facts
// when they were said, not when they were imported.
func ExampleFacts_replayedHistory() {
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

	ctx := context.Background()
	history := []struct {
		at        time.Time
		human, ai string
	}{
		{time.Date(2023, 5, 8, 10, 0, 0, 0, time.UTC), "Hi, I'm Ana and I live in Lisbon.", "Nice to meet you, Ana!"},
		{time.Date(2024, 2, 1, 10, 0, 0, 0, time.UTC), "I moved to Porto.", "Porto it is."},
	}
	for _, turn := range history {
		turnCtx := memstack.WithTime(ctx, turn.at)
		if err := facts.SaveContext(turnCtx, map[string]any{"input": turn.human}, map[string]any{"output": turn.ai}); err != nil {
			fmt.Println(err)
			return
		}
	}
	vars, err := facts.LoadMemoryVariables(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(vars["facts"])
	// Output:
	// - user location: Porto (since 2024-02-01)
	// - user name: Ana (since 2023-05-08)
}
