// Command mem is the program of scripts/modgraph.sh: the same
// conversation chain on memstack's TokenWindow, Summary, Facts and Recall
// under one CombinedMemory token budget, with nothing else imported.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms/fake"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	llm := fake.NewFakeLLM([]string{"Hello!", "Noted."})
	window, err := memories.NewTokenWindow(1000) // {{.history}}, the conversation prompt's
	if err != nil {
		return err
	}
	summary, err := memories.NewSummary(summarizer.New(llm), memories.WithMemoryKey("summary"))
	if err != nil {
		return err
	}
	defer summary.Close()
	patterns, err := extract.NewPatterns()
	if err != nil {
		return err
	}
	facts, err := memories.NewFacts(patterns)
	if err != nil {
		return err
	}
	defer facts.Close()
	recall, err := memories.NewRecall()
	if err != nil {
		return err
	}
	mem, err := combined.New([]schema.Memory{window, summary, facts, recall}, combined.WithTokenBudget(2000))
	if err != nil {
		return err
	}
	chain := chains.NewConversation(llm, mem)
	for _, q := range []string{"Hi, I'm Ana.", "I live in Lisbon."} {
		out, err := chains.Call(context.Background(), chain, map[string]any{"input": q})
		if err != nil {
			return err
		}
		fmt.Println(out["text"])
	}
	return nil
}
