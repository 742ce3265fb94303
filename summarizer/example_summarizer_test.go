package summarizer_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
	"github.com/tmc/langchaingo/llms"
)

// userLines is a summarizer of your own, with one rule: keep what the
// user said and leave out the assistant's answers. It follows the
// summarizer.Summarizer contract: the result replaces the previous
// summary and the messages, is never empty without an error, ctx is
// honoured, and it keeps no state, so it is safe for concurrent use.
type userLines struct{}

func (userLines) Summarize(ctx context.Context, previous string, messages []llms.ChatMessage) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var said []string
	for _, m := range messages {
		if m.GetType() == llms.ChatMessageTypeHuman {
			said = append(said, strings.TrimSpace(m.GetContent()))
		}
	}
	switch {
	case len(said) == 0 && previous == "":
		return "", fmt.Errorf("%w: no user message to keep", summarizer.ErrEmptySummary)
	case len(said) == 0:
		return previous, nil
	case previous == "":
		previous = "The user said:"
	}
	return previous + " " + strings.Join(said, " "), nil
}

var _ summarizer.Summarizer = userLines{}

// A summarizer of your own implements summarizer.Summarizer and is given
// to memories.NewSummary, which calls it to fold the older messages into
// the running summary once more than WithMaxMessages are stored, and
// shows the summary ahead of the recent messages.
func ExampleSummarizer() {
	mem, err := memories.NewSummary(userLines{},
		memories.WithMaxMessages(2), // keep at most 2 messages raw...
		memories.WithBatchSize(2))   // ...and fold at least 2 at a time
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mem.Close()

	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "ana"})
	for _, t := range [][2]string{
		{"I run a bakery in Porto.", "Nice! How can I help?"},
		{"I need 40 boxes of flour every Monday.", "Moinhos Lda can deliver them."},
		{"Book Moinhos, please.", "Done: first delivery on 6 May."},
	} {
		if err := mem.SaveContext(ctx, map[string]any{"input": t[0]}, map[string]any{"output": t[1]}); err != nil {
			fmt.Println(err)
			return
		}
	}
	vars, err := mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(vars["history"])
	fmt.Printf("%+v\n", mem.Stats())
	// Output:
	// Summary of earlier conversation: The user said: I run a bakery in Porto. I need 40 boxes of flour every Monday.
	// Human: Book Moinhos, please.
	// AI: Done: first delivery on 6 May.
	// {Calls:2 Failures:0 MessagesFolded:4}
}
