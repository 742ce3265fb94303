package recallbench_test

import (
	"context"
	"fmt"

	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/internal/recallbench"
	"github.com/memstack/memstack/memories"
)

// Generate a small conversation, replay it through two memories and
// compare what they load for the questions asked after it.
func Example() {
	ctx := context.Background()
	conv, err := recallbench.Generate(recallbench.Config{Seed: 1, Sessions: 2, TurnsPerSession: 8, Updates: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, q := range conv.Questions {
		ev := q.Evidence[0]
		fmt.Printf("%s (turn %d: %q)\n", q.Text, ev.Turn, ev.Value)
	}

	recent, err := memories.NewRecentN(4)
	if err != nil {
		fmt.Println(err)
		return
	}
	buffer, err := memories.NewBuffer()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range []struct {
		name string
		mem  schema.Memory
	}{
		{"memstack Buffer", buffer},
		{"memstack RecentN(4)", recent},
	} {
		r, err := recallbench.Replay(ctx, m.name, conv, m.mem)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: evidence recall %.2f (%d/%d), %.0f tokens on average\n", r.Name, r.Recall(), r.Found, r.Evidence, r.MeanTokens)
	}
	// Output:
	// How much did we agree to spend on the bathroom renovation? (turn 8: "2,480 euros")
	// Which town did the team pick for the offsite? (turn 3: "Evora")
	// What date do I turn forty? (turn 12: "19 March")
	// What lessons did I sign up for? (turn 2: "bouldering")
	// memstack Buffer: evidence recall 1.00 (4/4), 744 tokens on average
	// memstack RecentN(4): evidence recall 0.00 (0/4), 96 tokens on average
}
