// Command quickstart is a first look at memstack. It runs offline: no
// services, no API keys, and a scripted stand-in for the model.
//
// Part 1 stacks two views of one conversation, the full transcript and the
// last three messages, behind a single memory and shows what a prompt would
// receive. Part 2 drops the same kind of stack into langchaingo's
// conversation chain. Part 3 keeps a running summary of older turns with
// the offline summarizer.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/fake"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run writes both parts of the quickstart to w.
func run(w io.Writer) error {
	ctx := context.Background()
	fmt.Fprintln(w, "== Part 1: one memory, two views ==")
	if err := twoViews(ctx, w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Part 2: inside a langchaingo conversation chain ==")
	if err := inAChain(ctx, w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Part 3: a running summary, offline ==")
	return runningSummary(ctx, w)
}

// runningSummary keeps the last four messages raw and folds older ones into
// a summary. The offline extractive summarizer needs no model; with a real
// one, use summarizer.New(llm) instead.
func runningSummary(ctx context.Context, w io.Writer) error {
	mem, err := memories.NewSummary(summarizer.NewExtractive(),
		memories.WithMaxMessages(4), memories.WithBatchSize(2))
	if err != nil {
		return err
	}
	defer mem.Close()
	for _, turn := range [][2]string{
		{"Hi, I'm Ana from Lisbon.", "Welcome, Ana!"},
		{"We decided to launch on 14 May.", "Noted: launch on 14 May."},
		{"The budget is 5,040 euros.", "Budget noted."},
		{"Can you book the venue?", "I will book LX Factory."},
		{"Great, thanks.", "You're welcome."},
	} {
		if err := mem.SaveContext(ctx, map[string]any{"input": turn[0]}, map[string]any{"output": turn[1]}); err != nil {
			return err
		}
	}
	vars, err := mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		return err
	}
	st := mem.Stats()
	fmt.Fprintf(w, "Summarizer calls: %d, messages folded: %d\n", st.Calls, st.MessagesFolded)
	fmt.Fprintf(w, "Loaded %q variable:\n%s\n", "history", vars["history"])
	return nil
}

// newStack returns a CombinedMemory of the full transcript (loaded under
// fullKey) and the last three messages (loaded under "recent").
func newStack(fullKey string) (*combined.Memory, error) {
	full, err := memories.NewBuffer(memories.WithMemoryKey(fullKey))
	if err != nil {
		return nil, err
	}
	recent, err := memories.NewRecentN(3, memories.WithMemoryKey("recent"))
	if err != nil {
		return nil, err
	}
	// Any schema.Memory can be a child: memstack's, langchaingo's or yours.
	return combined.New([]schema.Memory{full, recent})
}

func twoViews(ctx context.Context, w io.Writer) error {
	mem, err := newStack("chat_history")
	if err != nil {
		return err
	}

	// AddMessage stores one message of any role in every child. (Chains
	// store whole turns with SaveContext instead.)
	for _, msg := range []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Hello"},
		llms.AIChatMessage{Content: "Hi!"},
		llms.HumanChatMessage{Content: "Give me a plan."},
		llms.AIChatMessage{Content: "1. Code\n2. Walk\n3. Read"},
		llms.HumanChatMessage{Content: "Thanks"},
	} {
		if err := mem.AddMessage(ctx, msg); err != nil {
			return err
		}
	}

	// The variables a prompt template can use: {{.chat_history}}, {{.recent}}.
	fmt.Fprintln(w, "Memory keys:", mem.MemoryVariables(ctx))

	// One load gives every child's variable, merged into one map.
	vars, err := mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "Merged variables:")
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		fmt.Fprintf(w, "[%s]\n%s\n", k, vars[k])
	}

	fmt.Fprintln(w, "Combined String():")
	fmt.Fprintln(w, mem.String())
	return nil
}

func inAChain(ctx context.Context, w io.Writer) error {
	// chains.NewConversation's prompt reads {{.history}}, so here the full
	// transcript keeps langchaingo's default key "history". The "recent"
	// view rides along; a prompt that does not use it simply ignores it.
	mem, err := newStack("history")
	if err != nil {
		return err
	}

	// A scripted stand-in for a real model such as openai.New().
	llm := fake.NewFakeLLM([]string{
		"Start with the failing test.",
		"Thirty minutes.",
		"Try The Go Programming Language.",
	})
	chain := chains.NewConversation(llm, mem)

	// Each call loads the memory into the prompt, asks the model and saves
	// the turn. For many users, give each call its own identity:
	// ctx = memstack.WithIdentity(ctx, memstack.Identity{User: "u42"}).
	for _, q := range []string{
		"What should I code first?",
		"How long should I walk?",
		"Any book to read?",
	} {
		a, err := chains.Run(ctx, chain, q)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "Q: %s\nA: %s\n", q, a)
	}

	vars, err := mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Loaded %q variable:\n%s\n", "recent", vars["recent"])
	return nil
}
