package memories_test

import (
	"context"
	"fmt"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/tmc/langchaingo/llms"
)

func ExampleNewFacts() {
	ctx := context.Background()
	day := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return day }

	rules, _ := extract.NewPatterns() // the built-in English rules; no model
	facts, err := memories.NewFacts(rules, memories.WithClock(clock))
	if err != nil {
		panic(err)
	}
	defer facts.Close()

	_ = facts.SaveContext(ctx, map[string]any{"input": "Hi, I'm Ana. I live in Lisbon and I love hiking."},
		map[string]any{"output": "Nice to meet you, Ana!"})
	day = day.AddDate(0, 0, 3)
	_ = facts.SaveContext(ctx, map[string]any{"input": "I moved to Porto. Which database for the app?"},
		map[string]any{"output": "Let's go with Postgres."})

	vars, _ := facts.LoadMemoryVariables(ctx, nil)
	fmt.Println(vars["facts"])

	history, _ := facts.History(ctx)
	old := history[1] // the superseded location, kept with its end time
	fmt.Printf("%s = %s, from %s to %s\n", old.Key, old.Value,
		old.ValidFrom.Format(time.DateOnly), old.ValidTo.Format(time.DateOnly))
	// Output:
	// - we decision: Postgres (since 2026-12-03)
	// - user location: Porto (since 2026-12-03)
	// - user preference: loves hiking (since 2026-11-30)
	// - user name: Ana (since 2026-11-30)
	// user location = Lisbon, from 2026-11-30 to 2026-12-03
}

func ExampleFacts_LoadMemoryVariables_messages() {
	ctx := context.Background()
	rules, _ := extract.NewPatterns()
	facts, _ := memories.NewFacts(rules,
		memories.WithReturnMessages(true),
		memories.WithClock(func() time.Time { return time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) }))
	defer facts.Close()

	_ = facts.AddMessage(ctx, llms.HumanChatMessage{Content: "Call me Bruno, I work as a pilot."})

	rec := observe.NewRecorder(observe.OpLoad, "facts", "")
	vars, _ := facts.LoadMemoryVariables(observe.WithRecorder(ctx, rec), nil)
	for _, m := range vars["facts"].([]llms.ChatMessage) {
		fmt.Printf("[%s] %s\n", m.GetType(), m.GetContent())
	}
	for _, it := range rec.Finish(0, nil).Injected {
		fmt.Println("injected", it.Kind, it.ID)
	}
	// Output:
	// [system] Known facts:
	// - user job: pilot (since 2026-11-30)
	// - user name: Bruno (since 2026-11-30)
	// injected fact user job
	// injected fact user name
}

func ExampleWithFactsHook() {
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c7"})
	// An extractor that always fails, as a model that is down would.
	down := extract.ExtractorFunc(func(context.Context, []llms.ChatMessage) ([]extract.Candidate, error) {
		return nil, fmt.Errorf("model unavailable")
	})
	// The hook runs on the background worker; collect its events and
	// print them after Flush, so the output does not race the save.
	events := make(chan memories.FactsEvent, 1)
	facts, _ := memories.NewFacts(down,
		memories.WithBackground(true),
		memories.WithFactsHook(func(ev memories.FactsEvent) { events <- ev }))
	defer facts.Close()

	err := facts.SaveContext(ctx, map[string]any{"input": "I'm Ana"}, map[string]any{"output": "Hi!"})
	fmt.Println("save:", err) // the turn is stored; extraction failures never fail a save
	_ = facts.Flush(ctx)
	fmt.Println("hook:", (<-events).Err)
	fmt.Printf("%+v\n", facts.Stats())
	// Output:
	// save: <nil>
	// hook: extracting facts from 2 messages of identity 6710d558be79: model unavailable
	// {Extractions:1 Failures:1 FactsStored:0 Superseded:0}
}
