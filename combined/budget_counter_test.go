package combined_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/tokens"
)

// Issue 17, item 10: a token counter's negative count or panic fails a
// budgeted load with an error; it never returns more than the budget and
// never crashes the caller.

// Counters that break the tokens.Counter contract; each error must name
// the counter's type. The "Lines" ones are bad only on texts of several
// lines — the rendered variables the budget counts exactly — and count
// words otherwise, so the plan made with the items' estimates succeeds.
type (
	cbNegative      struct{}
	cbNegativeLines struct{}
	cbPanicking     struct{}
	cbPanickyLines  struct{}
)

func (cbNegative) CountTokens(string) int  { return -1 }
func (cbPanicking) CountTokens(string) int { panic("tokenizer exploded") }
func (cbNegativeLines) CountTokens(s string) int {
	if strings.Contains(s, "\n") {
		return -1
	}
	return len(strings.Fields(s))
}
func (cbPanickyLines) CountTokens(s string) int {
	if strings.Contains(s, "\n") {
		panic("tokenizer exploded")
	}
	return len(strings.Fields(s))
}

// cbStacks are the children a budgeted load counts: an Itemizer, a
// langchaingo memory's messages and a plain string variable.
func cbStacks() map[string]func() []schema.Memory {
	return map[string]func() []schema.Memory{
		"buffer": func() []schema.Memory { return []schema.Memory{mustBuffer()} },
		"langchaingo messages": func() []schema.Memory {
			return []schema.Memory{memory.NewConversationBuffer(memory.WithReturnMessages(true))}
		},
		"user string": func() []schema.Memory { return []schema.Memory{newUserMemory("user")} },
	}
}

func TestBudget_BadCounterFailsTheLoad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		counter tokens.Counter
		want    []string
	}{
		{"negative", cbNegative{}, []string{"combined_test.cbNegative", "returned -1"}},
		{"negative on rendered values", cbNegativeLines{}, []string{"combined_test.cbNegativeLines", "returned -1"}},
		{"panicking", cbPanicking{}, []string{"combined_test.cbPanicking", "panicked", "tokenizer exploded"}},
		{"panicking on rendered values", cbPanickyLines{}, []string{"combined_test.cbPanickyLines", "panicked"}},
	} {
		for stack, list := range cbStacks() {
			for _, observed := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/observed=%t", tc.name, stack, observed), func(t *testing.T) {
					ctx := context.Background()
					var log trimLog
					var opts []combined.Option
					if observed {
						sink, _ := collect()
						opts = append(opts, combined.WithObserver(sink))
					}
					m := newBudgeted(t, list(), 50, []combined.BudgetOption{combined.WithTokenCounter(tc.counter), combined.WithTrimHook(log.hook)}, opts...)
					for i := range 200 {
						in, out := turn(fmt.Sprintf("question number %d", i), fmt.Sprintf("answer number %d", i))
						require.NoError(t, m.SaveContext(ctx, in, out))
					}
					var vars map[string]any
					var err error
					require.NotPanics(t, func() { vars, err = m.LoadMemoryVariables(ctx, nil) })
					require.Error(t, err, "a bad count must fail the load, not return %d tokens for a budget of 50", totalSize(t, cl100k(t), vars))
					assert.Nil(t, vars)
					assert.ErrorIs(t, err, tokens.ErrBadCount)
					for _, w := range tc.want {
						assert.Contains(t, err.Error(), w)
					}
					log.mu.Lock()
					defer log.mu.Unlock()
					assert.Empty(t, log.trims, "the trim hook is called for loads that succeeded only")
				})
			}
		}
	}
}

// TestBudget_BadCounterInNestedBudget: an observed nested combined memory
// (the budget records on its parent's recorder) fails the same way.
func TestBudget_BadCounterInObservedLayer(t *testing.T) {
	ctx := context.Background()
	inner := newBudgeted(t, []schema.Memory{mustBuffer()}, 50, []combined.BudgetOption{combined.WithTokenCounter(cbNegativeLines{})})
	for i := range 50 {
		in, out := turn(fmt.Sprintf("question number %d", i), fmt.Sprintf("answer number %d", i))
		require.NoError(t, inner.SaveContext(ctx, in, out))
	}
	rec := observe.NewRecorder(observe.OpLoad, "inner", "")
	_, err := inner.LoadMemoryVariables(observe.WithRecorder(ctx, rec), nil)
	require.ErrorIs(t, err, tokens.ErrBadCount)
}

// TestBudget_HugeCountsStayWithinBudget: a valid but enormous count (up
// to math.MaxInt) makes an item too big to keep; sums of such counts must
// not wrap around into "fits".
func TestBudget_HugeCountsStayWithinBudget(t *testing.T) {
	huge := tokens.CounterFunc(func(s string) int {
		if s == "" {
			return 0
		}
		return math.MaxInt
	})
	for stack, list := range cbStacks() {
		t.Run(stack, func(t *testing.T) {
			ctx := context.Background()
			var log trimLog
			m := newBudgeted(t, list(), 50, []combined.BudgetOption{combined.WithTokenCounter(huge), combined.WithTrimHook(log.hook)})
			for i := range 20 {
				in, out := turn(fmt.Sprintf("question number %d", i), fmt.Sprintf("answer number %d", i))
				require.NoError(t, m.SaveContext(ctx, in, out))
			}
			if err := m.AddMessage(ctx, llms.SystemChatMessage{Content: "Be brief."}); !errors.Is(err, combined.ErrNoMessageTaker) {
				require.NoError(t, err)
			}
			vars, err := m.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			for k, v := range vars {
				switch x := v.(type) {
				case string:
					assert.Empty(t, x, "%s: nothing fits", k)
				case []llms.ChatMessage:
					assert.Empty(t, x, "%s: nothing fits", k)
				}
			}
			tr := log.last(t)
			assert.LessOrEqual(t, tr.Tokens, 50)
			assert.GreaterOrEqual(t, tr.Tokens, 0)
		})
	}
}

// TestBudget_ManyNewItemsCountedExactly: a load whose items were never
// counted before (tens of kilobytes: counted on several goroutines) keeps
// what fits exactly as a load with every count cached does, and its
// tokens are the exact count of what it returns, within the budget.
func TestBudget_ManyNewItemsCountedExactly(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	var log trimLog
	m := newBudgeted(t, []schema.Memory{mustBuffer()}, 2000, []combined.BudgetOption{combined.WithTrimHook(log.hook)})
	for i := range 300 {
		in, out := turn(fmt.Sprintf("question %d about the %s ferry timetable, and the weather on day %d?", i, strings.Repeat("x", i%7), i*31),
			fmt.Sprintf("Answer %d: the ferry leaves at %d:%02d; bring %d coats.", i, i%24, i%60, i%5))
		require.NoError(t, m.SaveContext(ctx, in, out))
	}
	first, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	tr := log.last(t)
	assert.Equal(t, totalSize(t, c, first), tr.Tokens, "the tokens reported are the exact count")
	assert.LessOrEqual(t, tr.Tokens, 2000)
	assert.Greater(t, tr.Tokens, 1900, "the budget is filled")
	again, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, first, again, "cached counts keep the same items")
}

// cbWords counts words.
type cbWords struct{}

func (cbWords) CountTokens(s string) int { return len(strings.Fields(s)) }

// TestBudgetsShareTheDefaultCountCache: every budget counting with the
// default counter shares one token-count cache (a server with a stack per
// user holds one bounded cache, not one per stack); a budget with a
// counter of its own keeps its own. Loads through either are unchanged.
func TestBudgetsShareTheDefaultCountCache(t *testing.T) {
	ctx := context.Background()
	mk := func(bopts ...combined.BudgetOption) *combined.Memory {
		buf := memory.NewConversationBuffer(memory.WithMemoryKey("lc"))
		require.NoError(t, buf.SaveContext(ctx, map[string]any{"input": "Where is the offsite?"}, map[string]any{"output": "Lisbon, in June."}))
		return newBudgeted(t, []schema.Memory{buf}, 100, bopts)
	}
	a, b := mk(), mk()
	own := mk(combined.WithTokenCounter(cbWords{}))
	assert.True(t, combined.CountsShared(a, b), "two budgets with the default counter share its cache")
	assert.False(t, combined.CountsShared(a, own), "a budget with its own counter keeps its own cache")
	for _, m := range []*combined.Memory{a, b, own} {
		vars, err := m.LoadMemoryVariables(ctx, map[string]any{"input": "offsite?"})
		require.NoError(t, err)
		assert.Equal(t, "Human: Where is the offsite?\nAI: Lisbon, in June.", vars["lc"])
	}
}
