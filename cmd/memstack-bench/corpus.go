package main

import (
	"github.com/memstack/memstack/internal/benchcorpus"
	"sync"

	"github.com/tmc/langchaingo/llms"
)

// The conversation text: deterministic and realistic-ish, the same corpus as
// the repository's bench_test.go, so the numbers of both agree.

// humanText and aiText are turn i's messages, from the corpus shared with
// the other benchmark (internal/benchcorpus).
func humanText(i int) string { return benchcorpus.Human(i) }

func aiText(i int) string { return benchcorpus.AI(i) }

// turn is one chain call's input and output maps.
type turn struct{ in, out map[string]any }

func newTurn(i int) turn {
	return turn{
		in:  map[string]any{"input": humanText(i)},
		out: map[string]any{"output": aiText(i)},
	}
}

// opTurns are the turns the timed loops save, built once so that building
// maps is not part of what is measured. Neither library changes them.
var opTurns = func() []turn {
	t := make([]turn, 4096)
	for i := range t {
		t[i] = newTurn(1_000_000 + i)
	}
	return t
}()

// corpus hands out histories: the messages of turns 0..n/2-1, exactly what
// SaveContext of those turns stores. Every history is a prefix of the
// longest one asked for, which is generated once.
type corpus struct {
	mu   sync.Mutex
	msgs []llms.ChatMessage
}

// history returns the first n messages (n/2 turns). The slice is shared:
// callers must not change it (langchaingo's WithPreviousMessages and the
// stores' Append copy what they keep).
func (c *corpus) history(n int) []llms.ChatMessage {
	n &^= 1
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.msgs) / 2; i < n/2; i++ {
		c.msgs = append(c.msgs, llms.HumanChatMessage{Content: humanText(i)}, llms.AIChatMessage{Content: aiText(i)})
	}
	return c.msgs[:n:n]
}
