package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/prompts"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/tokens"
)

func TestRun(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, run(context.Background(), &buf))
	out := buf.String()

	// The first session went through the chain: every scripted answer is
	// printed after its question.
	for _, turn := range week1 {
		assert.Contains(t, out, "Human: "+turn[0]+"\nAI: "+turn[1]+"\n")
	}
	assert.Contains(t, out, "== A week later (2026-03-09), same conversation ==\nHuman: What did we settle on?\n")

	reports := section(t, out, "What each layer injected", "\nThe prompt the model saw:")
	recent := section(t, reports, "[recent]", "[facts]")
	facts := section(t, reports, "[facts]", "[recall]")
	recall := section(t, reports, "[recall]", "\nbudget: ")

	// RecentN shows the last two turns only.
	assert.True(t, strings.HasPrefix(recent, "[recent] 4 injected,"), recent)
	assert.Equal(t, 4, strings.Count(recent, "\n  + "), recent)
	for _, msg := range []string{"What do we need to migrate?", "Thanks, that's all for today.", "You're welcome, Ana. Talk soon!"} {
		assert.Contains(t, recent, strconv.Quote(msg))
	}
	assert.NotContains(t, recent, "settled")

	// The decision fact is injected, and so are the name and location.
	assert.Contains(t, facts, "  + fact we decision:the blue plan, ")
	assert.Contains(t, facts, "  + fact user name, ")
	assert.Contains(t, facts, "  + fact user location, ")

	// Recall found the turn with the decision, with a score.
	hit := regexp.MustCompile(`  \+ turn \d+ \(score (0\.\d\d)\): "Okay, we settled on the blue plan, starting in March\.", \d+ tokens`).FindStringSubmatch(recall)
	require.NotNil(t, hit, "recall report:\n%s", recall)
	assert.NotEqual(t, "0.00", hit[1])
	// What it left out is said, with the reason.
	assert.Regexp(t, `  - turn \d+ \(score 0\.\d\d\): ".*" \[budget\]`, recall)

	// The budget held: the layers' tokens add up to what the budget says it
	// used, within the budget.
	used := regexp.MustCompile(`(?m)^budget: (\d+) of (\d+) tokens used`).FindStringSubmatch(reports)
	require.NotNil(t, used, reports)
	assert.Equal(t, strconv.Itoa(Budget), used[2])
	total := 0
	for _, m := range regexp.MustCompile(`(?m)^\[\w+\] .*, (\d+) tokens$`).FindAllStringSubmatch(reports, -1) {
		total += atoi(t, m[1])
	}
	assert.Equal(t, atoi(t, used[1]), total)
	assert.LessOrEqual(t, total, Budget)

	// The prompt the model saw holds all three layers.
	prompt := section(t, out, "The prompt the model saw:\n-----\n", "\n-----\n")
	assert.Contains(t, prompt, "Known facts about the user:\n")
	assert.Contains(t, prompt, "- we decision: the blue plan (since 2026-03-02)\n")
	earlier := section(t, prompt, "Earlier exchanges that may be relevant:\n", "\n\nRecent conversation:")
	assert.True(t, strings.HasPrefix(earlier, "Earlier exchanges that may be relevant:\n[2 March 2026]\n"), "recalled turns show their date: %q", earlier)
	assert.Contains(t, earlier, "Human: Okay, we settled on the blue plan, starting in March.\nAI: Great: the blue plan from March.")
	assert.Contains(t, prompt, "Recent conversation:\nHuman: What do we need to migrate?\n"+
		"AI: The patient list, the appointment slots and the staff calendars.\n"+
		"Human: Thanks, that's all for today.\nAI: You're welcome, Ana. Talk soon!\n\nHuman: What did we settle on?\nAI:")
	counter, err := tokens.CL100K()
	require.NoError(t, err)
	assert.Less(t, counter.CountTokens(prompt), Budget+100, "the prompt is the budgeted memory plus the template")
	assert.Contains(t, out, "\nAI: "+answer+"\n")

	// A new conversation of the same user: the facts carry over, and so
	// does the decision, recalled from the user's earlier conversation
	// and marked as such; the recent window starts empty.
	fresh := section(t, out, "== The same user in a new conversation", "Facts are kept per user")
	assert.Contains(t, fresh, "[history]\n(empty)\n")
	assert.Contains(t, fresh, "[relevant_history]\n[2 March 2026, "+memories.RecallOtherConversation+"]\n")
	assert.Contains(t, fresh, "Human: Okay, we settled on the blue plan, starting in March.\n")
	assert.Contains(t, fresh, "[facts]\n")
	assert.Contains(t, fresh, "- we decision: the blue plan (since 2026-03-02)\n")
}

// Every load of the stack — each week-1 turn and the question — stays in
// the budget, and each layer reports every load.
func TestBudgetHeldOnEveryLoad(t *testing.T) {
	ctx := memstack.WithIdentity(context.Background(), thread)
	clk := &clock{}
	clk.set(start)
	s, err := newStack(clk)
	require.NoError(t, err)
	llm := &scriptedModel{}
	chain := chains.NewLLMChain(llm, prompts.NewPromptTemplate(promptTemplate,
		[]string{"facts", "relevant_history", "history", "input"}))
	chain.Memory = s.mem
	for _, turn := range append(week1, [2]string{Question, answer}) {
		llm.script(turn[1])
		_, err := chains.Predict(ctx, chain, map[string]any{"input": turn[0]})
		require.NoError(t, err)
	}
	reports, trims := s.loads()
	require.Len(t, trims, len(week1)+1)
	for i, tr := range trims {
		assert.Equal(t, Budget, tr.Budget)
		assert.LessOrEqual(t, tr.Tokens, Budget, "load %d", i+1)
	}
	require.Len(t, reports, 3*(len(week1)+1))
	for _, r := range reports {
		assert.Contains(t, []string{"recent", "facts", "recall"}, r.Layer)
		assert.Equal(t, thread.Hash(), r.IdentityHash, "reports name the identity by its hash only")
		assert.NoError(t, r.Err)
	}
	last := reports[len(reports)-3:]
	assert.Equal(t, trims[len(trims)-1].Tokens, last[0].Tokens+last[1].Tokens+last[2].Tokens)
	assert.Equal(t, observe.OpLoad, last[2].Op)
}

func section(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	require.GreaterOrEqual(t, i, 0, "%q not in:\n%s", from, s)
	s = s[i:]
	j := strings.Index(s[len(from):], to)
	require.GreaterOrEqual(t, j, 0, "%q not after %q in:\n%s", to, from, s)
	return s[:len(from)+j]
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
