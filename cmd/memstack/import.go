package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/replay"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

// stdin is what import reads for FILE "-" (tests replace it).
var stdin io.Reader = os.Stdin

// readConversations reads file ("-": standard input) in either format
// replay.Read knows.
func readConversations(file string) ([]replay.Conversation, error) {
	r := stdin
	name := "standard input"
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		r, name = f, file
	}
	convs, err := replay.Read(r)
	if err != nil {
		return nil, fmt.Errorf("import: %s: %w", name, err)
	}
	return convs, nil
}

// importStack builds the stack the README recommends on the one store s:
// RecentN(6), Summary (extractive), Facts (built-in patterns, per user)
// and Recall. close closes the layers that hold workers.
func importStack(s store.Store) (mem schema.Memory, closeStack func() error, err error) {
	recent, err := memories.NewRecentN(6, memories.WithStore(s))
	if err != nil {
		return nil, nil, err
	}
	sum, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(s))
	if err != nil {
		return nil, nil, err
	}
	patterns, err := extract.NewPatterns()
	if err != nil {
		_ = sum.Close()
		return nil, nil, err
	}
	facts, err := memories.NewFacts(patterns, memories.WithStore(s), memories.WithFactsPerUser(true))
	if err != nil {
		_ = sum.Close()
		return nil, nil, err
	}
	closeStack = func() error { return errors.Join(sum.Close(), facts.Close()) }
	recall, err := memories.NewRecall(memories.WithStore(s))
	if err != nil {
		_ = closeStack()
		return nil, nil, err
	}
	m, err := combined.New([]schema.Memory{recent, sum, facts, recall})
	if err != nil {
		_ = closeStack()
		return nil, nil, err
	}
	return m, closeStack, nil
}

// runImport imports convs as user's conversations into s, where is.
func runImport(ctx context.Context, s store.Store, where string, user memstack.Identity, convs []replay.Conversation, stdout io.Writer) error {
	mem, closeStack, err := importStack(s)
	if err != nil {
		return fmt.Errorf("import: building the stack: %w", err)
	}
	scope := store.UserScope(user.Tenant, user.User)
	st, err := replay.Import(ctx, mem, user, convs, replay.SkipStored(s))
	if cerr := closeStack(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("importing the conversations of %s into %s (%d conversations imported before the failure; running it again stores nothing twice): %w",
			scope, where, st.Conversations, err)
	}
	fmt.Fprintf(stdout, "imported %d conversations, %d exchanges, %d messages (%d already stored, %d skipped)\n", st.Conversations, st.Exchanges, st.Messages, st.Present, st.Skipped)
	return nil
}
