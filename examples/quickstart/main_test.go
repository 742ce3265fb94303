package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunPrintsBothParts(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, run(&buf))
	out := buf.String()

	// Key passages of the output, in the order they must appear.
	want := []struct{ name, text string }{
		{"part 1 header", "== Part 1: one memory, two views ==\n"},
		{"memory keys in child order", "Memory keys: [chat_history recent]\n"},
		{"full transcript", "Merged variables:\n[chat_history]\n" +
			"Human: Hello\nAI: Hi!\nHuman: Give me a plan.\nAI: 1. Code\n2. Walk\n3. Read\nHuman: Thanks\n"},
		{"last three messages", "[recent]\nHuman: Give me a plan.\nAI: 1. Code\n2. Walk\n3. Read\nHuman: Thanks\n"},
		{"combined description", "Combined String():\nCombinedMemory(2 children, variables=[\"chat_history\" \"recent\"])\n"},
		{"buffer child", "  Buffer(memory_key=\"chat_history\""},
		{"recent child", "  RecentN(n=3, memory_key=\"recent\""},
		{"part 2 header", "== Part 2: inside a langchaingo conversation chain ==\n"},
		{"turn 1", "Q: What should I code first?\nA: Start with the failing test.\n"},
		{"turn 2", "Q: How long should I walk?\nA: Thirty minutes.\n"},
		{"turn 3", "Q: Any book to read?\nA: Try The Go Programming Language.\n"},
		{"recent after the chain", "Loaded \"recent\" variable:\n" +
			"AI: Thirty minutes.\nHuman: Any book to read?\nAI: Try The Go Programming Language.\n"},
		{"part 3 header", "== Part 3: a running summary, offline ==\n"},
		// 10 messages, 4 kept raw, batches of at least 2 ending before a
		// human message: folds after turns 3, 4 and 5.
		{"summary stats", "Summarizer calls: 3, messages folded: 6\n"},
		{"summary first", "Loaded \"history\" variable:\nSummary of earlier conversation: "},
		{"facts kept", "14 May"},
		{"budget kept", "5,040 euros"},
		{"raw tail", "\nHuman: Can you book the venue?\nAI: I will book LX Factory.\nHuman: Great, thanks.\nAI: You're welcome.\n"},
	}
	rest := out
	for _, w := range want {
		i := strings.Index(rest, w.text)
		if !assert.GreaterOrEqual(t, i, 0, "%s: %q not found (in order) in output:\n%s", w.name, w.text, out) {
			continue
		}
		rest = rest[i+len(w.text):]
	}
	assert.True(t, strings.HasSuffix(out, "AI: You're welcome.\n"), "output ends with the summary memory's raw tail")
}
