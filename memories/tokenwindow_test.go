package memories_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/tokens"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// twWords is a deterministic counter: one token per whitespace-separated
// word.
var twWords = tokens.CounterFunc(func(s string) int { return len(strings.Fields(s)) })

// twCost is the documented cost of a message: the tokens of its rendered
// line plus one for the line break.
func twCost(t testing.TB, c tokens.Counter, m llms.ChatMessage) int {
	t.Helper()
	return c.CountTokens(ctRender(t, []llms.ChatMessage{m}, "Human", "AI")) + 1
}

func twCostAll(t testing.TB, c tokens.Counter, msgs []llms.ChatMessage) int {
	t.Helper()
	sum := 0
	for _, m := range msgs {
		sum += twCost(t, c, m)
	}
	return sum
}

// twNewest returns the newest messages of msgs (plain messages: no system
// messages, no tool calls) whose cost fits in budget.
func twNewest(t testing.TB, c tokens.Counter, msgs []llms.ChatMessage, budget int) []llms.ChatMessage {
	t.Helper()
	start, used := len(msgs), 0
	for start > 0 {
		cost := twCost(t, c, msgs[start-1])
		if used+cost > budget {
			break
		}
		used += cost
		start--
	}
	return msgs[start:]
}

// twConversation is a conversation of plain turns of varying length and
// script, saved with SaveContext.
func twConversation(turns int) []llms.ChatMessage {
	phrases := []string{
		"ok",
		"What is the capital of France?",
		"Paris — la Ville Lumière — is the capital; population ≈ 2.1 million.",
		"func main() { fmt.Println(\"hello, 世界\") }",
		"Supercalifragilisticexpialidocious antidisestablishmentarianism!",
		"Can you summarise our conversation so far in three bullet points, please?",
		"🙂🙂🙂 emoji take several tokens each",
	}
	var out []llms.ChatMessage
	for i := range turns {
		out = append(out,
			llms.HumanChatMessage{Content: fmt.Sprintf("%d. %s", i, phrases[i%len(phrases)])},
			llms.AIChatMessage{Content: phrases[(i*3+1)%len(phrases)] + fmt.Sprintf(" (#%d)", i)})
	}
	return out
}

func twSave(t testing.TB, m ctMemory, ctx context.Context, msgs []llms.ChatMessage) {
	t.Helper()
	for i := 0; i+1 < len(msgs); i += 2 {
		ctSaveTurn(t, m, ctx, msgs[i].GetContent(), msgs[i+1].GetContent())
	}
}

func TestNewTokenWindow_RejectsNonPositiveBudget(t *testing.T) {
	for _, n := range []int{0, -1, -4096} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m, err := memories.NewTokenWindow(n)
			assert.Nil(t, m)
			require.Error(t, err)
			assert.ErrorIs(t, err, memories.ErrInvalidOption)
			assert.Contains(t, err.Error(), "NewTokenWindow")
			assert.Contains(t, err.Error(), fmt.Sprintf("maxTokens=%d", n))
		})
	}
	m, err := memories.NewTokenWindow(1)
	require.NoError(t, err)
	assert.Contains(t, m.String(), "max_tokens=1")
}

func TestTokenWindow_DefaultCounterIsCL100K(t *testing.T) {
	cl100k, err := tokens.CL100K()
	require.NoError(t, err)
	conv := twConversation(30)
	ctx := context.Background()
	sensitive := false // some budget tells cl100k apart from counting words
	for budget := 5; budget <= 500; budget += 11 {
		def, err := memories.NewTokenWindow(budget, memories.WithReturnMessages(true))
		require.NoError(t, err)
		explicit, err := memories.NewTokenWindow(budget, memories.WithReturnMessages(true), memories.WithTokenCounter(cl100k))
		require.NoError(t, err)
		twSave(t, def, ctx, conv)
		twSave(t, explicit, ctx, conv)

		want := twNewest(t, cl100k, conv, budget)
		got := ctLoadMessages(t, def, ctx)
		assert.Equal(t, want, got, "budget %d", budget)
		assert.Equal(t, got, ctLoadMessages(t, explicit, ctx), "budget %d", budget)
		if len(twNewest(t, twWords, conv, budget)) != len(want) {
			sensitive = true
		}
	}
	require.True(t, sensitive, "the conversation must be able to tell counters apart")
}

func TestTokenWindow_WordCounterWindowIsWithinBudgetAndMaximal(t *testing.T) {
	conv := twConversation(12)
	total := twCostAll(t, twWords, conv)
	ctx := context.Background()
	for budget := 1; budget <= total+5; budget += 3 {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			msgMode, err := memories.NewTokenWindow(budget, memories.WithTokenCounter(twWords), memories.WithReturnMessages(true))
			require.NoError(t, err)
			strMode, err := memories.NewTokenWindow(budget, memories.WithTokenCounter(twWords))
			require.NoError(t, err)
			twSave(t, msgMode, ctx, conv)
			twSave(t, strMode, ctx, conv)

			got := ctLoadMessages(t, msgMode, ctx)
			require.LessOrEqual(t, len(got), len(conv))
			assert.Equal(t, conv[len(conv)-len(got):], got, "the window is the newest messages, in order")
			cost := twCostAll(t, twWords, got)
			assert.LessOrEqual(t, cost, budget, "window within budget")
			if len(got) < len(conv) {
				older := conv[len(conv)-len(got)-1]
				assert.Greater(t, cost+twCost(t, twWords, older), budget, "one more older message would not fit")
			}

			s := ctLoadString(t, strMode, ctx)
			assert.Equal(t, ctRender(t, got, "Human", "AI"), s)
			if s != "" {
				lines := strings.Split(s, "\n")
				sum := 0
				for _, l := range lines {
					sum += twWords(l) + 1
				}
				assert.LessOrEqual(t, sum, budget, "sum over rendered lines of counter(line)+1")
			}
		})
	}
}

func TestTokenWindow_DefaultCounterLoadedHistoryWithinBudget(t *testing.T) {
	cl100k, err := tokens.CL100K()
	require.NoError(t, err)
	conv := twConversation(40)
	ctx := ctIDCtx(memstack.Identity{User: "u"})
	prevLen := -1
	for _, budget := range []int{1, 10, 25, 50, 100, 250, 1000, 5000} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			m, err := memories.NewTokenWindow(budget)
			require.NoError(t, err)
			twSave(t, m, ctx, conv)
			s := ctLoadString(t, m, ctx)
			assert.LessOrEqual(t, cl100k.CountTokens(s), budget)
			assert.GreaterOrEqual(t, len(s), prevLen, "a bigger budget never shows less")
			prevLen = len(s)
			if budget >= 50 {
				assert.NotEmpty(t, s)
			}
			if budget >= twCostAll(t, cl100k, conv) {
				assert.Equal(t, ctRender(t, conv, "Human", "AI"), s, "everything fits")
			}
		})
	}
}

func TestTokenWindow_SystemMessagesArePinnedAndCounted(t *testing.T) {
	sys1 := llms.SystemChatMessage{Content: "You are a terse assistant."}
	sys2 := llms.SystemChatMessage{Content: "Answer in English."}
	conv := twConversation(10)
	sysCost := twCost(t, twWords, sys1) + twCost(t, twWords, sys2)
	ctx := context.Background()
	for _, rest := range []int{0, 1, 4, 9, 20, 60} {
		budget := sysCost + rest
		t.Run(fmt.Sprintf("budget=system+%d", rest), func(t *testing.T) {
			m, err := memories.NewTokenWindow(budget, memories.WithTokenCounter(twWords), memories.WithReturnMessages(true))
			require.NoError(t, err)
			require.NoError(t, m.AddMessage(ctx, sys1))
			twSave(t, m, ctx, conv[:10])
			require.NoError(t, m.AddMessage(ctx, sys2)) // a system message in the middle
			twSave(t, m, ctx, conv[10:])

			got := ctLoadMessages(t, m, ctx)
			require.GreaterOrEqual(t, len(got), 2)
			assert.Equal(t, []llms.ChatMessage{sys1, sys2}, got[:2], "system messages first, in order")
			assert.Equal(t, twNewest(t, twWords, conv, rest), got[2:], "the rest of the budget goes to the newest messages")
			assert.LessOrEqual(t, twCostAll(t, twWords, got), budget)
		})
	}
	t.Run("system messages over budget are still shown", func(t *testing.T) {
		m, err := memories.NewTokenWindow(sysCost-1, memories.WithTokenCounter(twWords), memories.WithReturnMessages(true))
		require.NoError(t, err)
		require.NoError(t, m.AddMessage(ctx, sys1))
		require.NoError(t, m.AddMessage(ctx, sys2))
		twSave(t, m, ctx, conv)
		assert.Equal(t, []llms.ChatMessage{sys1, sys2}, ctLoadMessages(t, m, ctx))
	})
}

func TestTokenWindow_ToolCallGroupsAreNeverSplit(t *testing.T) {
	h := func(s string) llms.ChatMessage { return llms.HumanChatMessage{Content: s} }
	a := func(s string) llms.ChatMessage { return llms.AIChatMessage{Content: s} }
	conv := []llms.ChatMessage{
		h("what is the weather"), a("let me check"), h("in Paris and Rome please"),
		rnToolCall("checking both cities now", "c1", "c2"), rnToolResult("c1"), rnToolResult("c2"),
		a("sunny in both"),
	}
	cost := func(msgs ...llms.ChatMessage) int { return twCostAll(t, twWords, msgs) }
	last := cost(conv[6])
	group := cost(conv[3:6]...)
	for _, tc := range []struct {
		name   string
		budget int
		want   []llms.ChatMessage
	}{
		{"boundary inside the group: dropped whole", last + group - 1, conv[6:]},
		{"boundary inside the group, room for the call alone", last + cost(conv[3]), conv[6:]},
		{"group fits exactly", last + group, conv[3:]},
		{"group and one more", last + group + cost(conv[2]), conv[2:]},
		{"everything", cost(conv...), conv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, err := memories.NewTokenWindow(tc.budget, memories.WithTokenCounter(twWords), memories.WithReturnMessages(true))
			require.NoError(t, err)
			for _, msg := range conv {
				require.NoError(t, m.AddMessage(ctx, msg))
				assertNoSplitGroup(t, ctLoadMessages(t, m, ctx))
			}
			got := ctLoadMessages(t, m, ctx)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, cost(got...), tc.budget)
		})
	}

	// A group growing one result at a time past the budget after a long
	// conversation (so that saves trim the store) is still dropped whole.
	// Saves trim in batches, so try every phase of the batch cycle.
	for history := range 25 {
		t.Run(fmt.Sprintf("group growing past the budget after %d turns", history), func(t *testing.T) {
			ctx := context.Background()
			call := rnToolCall("", "c1", "c2", "c3", "c4")
			budget := cost(call, rnToolResult("c1"), rnToolResult("c2"))
			m, err := memories.NewTokenWindow(budget, memories.WithTokenCounter(twWords), memories.WithReturnMessages(true))
			require.NoError(t, err)
			twSave(t, m, ctx, twConversation(history))
			require.NoError(t, m.AddMessage(ctx, call))
			for _, id := range []string{"c1", "c2", "c3", "c4"} {
				require.NoError(t, m.AddMessage(ctx, rnToolResult(id)))
				assertNoSplitGroup(t, ctLoadMessages(t, m, ctx))
			}
			assert.Empty(t, ctLoadMessages(t, m, ctx), "the group no longer fits and is dropped whole")
		})
	}
}

func TestTokenWindow_TokenCountsAreCached(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int
	}{
		{"everything fits", 1_000_000},
		{"small window", 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const turns, loads = 200, 100
			var calls atomic.Int64
			counter := tokens.CounterFunc(func(s string) int {
				calls.Add(1)
				return twWords(s)
			})
			ctx := ctIDCtx(memstack.Identity{User: "u"})
			m, err := memories.NewTokenWindow(tc.budget, memories.WithTokenCounter(counter))
			require.NoError(t, err)
			require.NoError(t, m.AddMessage(ctx, llms.SystemChatMessage{Content: "be brief"}))
			messages := int64(1)
			for i := range turns {
				ctSaveTurn(t, m, ctx, fmt.Sprintf("question %d", i), fmt.Sprintf("answer %d", i))
				messages += 2
				if i%10 == 0 {
					ctLoadString(t, m, ctx)
				}
			}
			last := ctLoadString(t, m, ctx)
			counted := calls.Load()
			assert.LessOrEqual(t, counted, messages, "each message is counted at most once")
			assert.Positive(t, counted)

			for range loads {
				last = ctLoadString(t, m, ctx)
			}
			assert.Equal(t, counted, calls.Load(), "loads count nothing that was counted before")
			assert.NotEmpty(t, last)
		})
	}
}

func TestTokenWindow_RetentionTrimsItsStore(t *testing.T) {
	const budget, turns = 40, 1000
	id := memstack.Identity{Tenant: "t", User: "u"}
	ctx := ctIDCtx(id)
	st := store.NewInMemory()
	// Every turn message renders as two words ("Human: q12"), cost 3, so the
	// window holds at most budget/3 messages: a retention of that many
	// changes nothing a load shows.
	maxWindow := budget / 3
	m, err := memories.NewTokenWindow(budget, memories.WithTokenCounter(twWords), memories.WithStore(st),
		memories.WithRetention(memories.KeepLast(maxWindow)))
	require.NoError(t, err)
	systems := []llms.ChatMessage{llms.SystemChatMessage{Content: "prompt at start"}, llms.SystemChatMessage{Content: "prompt at turn 500"}}

	require.NoError(t, m.AddMessage(ctx, systems[0]))
	sysCount := 1
	var all []llms.ChatMessage
	for i := range turns {
		if i == 500 {
			require.NoError(t, m.AddMessage(ctx, systems[1]))
			sysCount++
		}
		q, a := fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i)
		ctSaveTurn(t, m, ctx, q, a)
		all = append(all, llms.HumanChatMessage{Content: q}, llms.AIChatMessage{Content: a})
		stat, err := st.Stat(context.Background(), id)
		require.NoError(t, err)
		require.LessOrEqual(t, stat.Count, maxWindow+2*16+sysCount, "after turn %d", i)
	}
	stored := ctStored(t, st, id)
	assert.Equal(t, systems, stored[:2], "system messages are never trimmed")
	window := twNewest(t, twWords, all, budget-twCostAll(t, twWords, systems))
	want := append(append([]llms.ChatMessage{}, systems...), window...)
	assert.Equal(t, ctRender(t, want, "Human", "AI"), ctLoadString(t, m, ctx))
}
