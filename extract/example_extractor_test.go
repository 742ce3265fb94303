package extract_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/tmc/langchaingo/llms"
)

// rememberCommand is an extractor of your own: it takes a fact only when
// the user asks for it to be kept, as in "Remember: my seat is 14C" (the
// fact "user seat" = "14C"). It follows the extract.Extractor contract:
// it honours ctx, keeps nothing of msgs, holds no state (so it is safe
// for concurrent use), names the message each fact came from, and returns
// no facts and no error when there is nothing to remember.
type rememberCommand struct{}

func (rememberCommand) Extract(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var found []extract.Candidate
	for i, m := range msgs {
		if m.GetType() != llms.ChatMessageTypeHuman {
			continue // only the user gives the command
		}
		rest, ok := strings.CutPrefix(m.GetContent(), "Remember: my ")
		if !ok {
			continue
		}
		attr, value, ok := strings.Cut(strings.TrimSuffix(rest, "."), " is ")
		if !ok {
			continue
		}
		subject, attribute := extract.Normalize(extract.SubjectUser, attr)
		found = append(found, extract.Candidate{
			Subject: subject, Attribute: attribute, Value: strings.TrimSpace(value),
			Sources: []int{i}, Rule: "remember-command",
		})
	}
	return found, nil
}

var _ extract.Extractor = rememberCommand{}

// An extractor of your own implements extract.Extractor and is given to
// memories.NewFacts, which runs it on every saved turn, stores what it
// finds, and shows the facts on load; a new value for the same key
// (subject and attribute) supersedes the old one.
func ExampleExtractor() {
	day := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	facts, err := memories.NewFacts(rememberCommand{}, memories.WithClock(func() time.Time { return day }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer facts.Close()

	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "air", User: "ana"})
	save := func(input, output string) {
		if err := facts.SaveContext(ctx, map[string]any{"input": input}, map[string]any{"output": output}); err != nil {
			fmt.Println(err)
		}
	}
	save("Remember: my seat is 14C.", "Noted.")
	save("Remember: my meal is vegetarian.", "Noted.")
	save("What time do we board?", "At 9:40.") // nothing to remember
	day = day.AddDate(0, 0, 2)
	save("Remember: my seat is 15A.", "Updated.")

	vars, err := facts.LoadMemoryVariables(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(vars["facts"])
	// Output:
	// - user seat: 15A (since 2026-12-02)
	// - user meal: vegetarian (since 2026-11-30)
}
