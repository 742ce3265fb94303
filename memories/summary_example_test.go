package memories_test

import (
	"context"
	"fmt"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
)

// ExampleNewSummary keeps a running summary of older turns and the recent
// ones raw. The extractive summarizer runs offline; in production pass
// summarizer.New(llm) to summarize with any llms.Model.
func ExampleNewSummary() {
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "ana"})
	mem, err := memories.NewSummary(summarizer.NewExtractive(summarizer.WithBudget(60)),
		memories.WithMaxMessages(4), // keep at most 4 messages raw...
		memories.WithBatchSize(2))   // ...and fold at least 2 at a time
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mem.Close()

	turns := [][2]string{
		{"I'm Ana Lopez, I run a bakery in Porto.", "Nice to meet you."},
		{"I need 40 boxes of flour every Monday.", "Moinhos Lda charges 850 euros a month."},
		{"Book Moinhos, please.", "Done: first delivery on 6 May."},
		{"Thanks!", "You're welcome."},
	}
	for _, t := range turns {
		if err := mem.SaveContext(ctx, map[string]any{"input": t[0]}, map[string]any{"output": t[1]}); err != nil {
			fmt.Println(err)
			return
		}
	}
	vars, _ := mem.LoadMemoryVariables(ctx, nil)
	fmt.Println(vars["history"])
	fmt.Printf("%+v\n", mem.Stats())
	// Output:
	// Summary of earlier conversation: Human: I'm Ana Lopez, I run a bakery in Porto. I need 40 boxes of flour every Monday. AI: Moinhos Lda charges 850 euros a month.
	// Human: Book Moinhos, please.
	// AI: Done: first delivery on 6 May.
	// Human: Thanks!
	// AI: You're welcome.
	// {Calls:2 Failures:0 MessagesFolded:4}
}

// ExampleWithBackground summarizes off the request path: SaveContext
// returns as soon as the turn is stored, and Flush waits for the summary.
func ExampleWithBackground() {
	ctx := context.Background()
	mem, err := memories.NewSummary(summarizer.NewExtractive(),
		memories.WithMaxMessages(2), memories.WithBatchSize(2),
		memories.WithBackground(true),
		memories.WithSummaryHook(func(e memories.SummaryEvent) {
			fmt.Printf("folded %d messages, error: %v\n", e.Messages, e.Err)
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mem.Close()

	_ = mem.SaveContext(ctx, map[string]any{"input": "The deadline is Friday 14 June."}, map[string]any{"output": "Noted."})
	_ = mem.SaveContext(ctx, map[string]any{"input": "Marta Silva approved the blue logo."}, map[string]any{"output": "Great."})
	if err := mem.Flush(ctx); err != nil {
		fmt.Println(err)
		return
	}
	vars, _ := mem.LoadMemoryVariables(ctx, nil)
	fmt.Println(vars["history"])
	// Output:
	// folded 2 messages, error: <nil>
	// Summary of earlier conversation: Human: The deadline is Friday 14 June.
	// Human: Marta Silva approved the blue logo.
	// AI: Great.
}
