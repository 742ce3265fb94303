package combined_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
	"github.com/memstack/memstack/tokens"
)

// ---------------------------------------------------------------------------
// Helpers: an independent token count and "whole items" checks.
// ---------------------------------------------------------------------------

func cl100k(t testing.TB) tokens.Counter {
	t.Helper()
	c, err := tokens.CL100K()
	require.NoError(t, err)
	return c
}

// sizeOf counts a loaded value as the budget documents it: a string as is,
// messages as llms.GetBufferString renders them.
func sizeOf(t testing.TB, c tokens.Counter, v any) int {
	t.Helper()
	switch x := v.(type) {
	case string:
		return c.CountTokens(x)
	case []llms.ChatMessage:
		s, err := llms.GetBufferString(x, "Human", "AI")
		require.NoError(t, err)
		return c.CountTokens(s)
	}
	t.Fatalf("unexpected value of type %T", v)
	return 0
}

func totalSize(t testing.TB, c tokens.Counter, vars map[string]any) int {
	t.Helper()
	n := 0
	for _, v := range vars {
		n += sizeOf(t, c, v)
	}
	return n
}

// joinOf reports whether s is some of parts, in their order, joined by
// "\n": the rendering of whole messages, none of them cut.
func joinOf(s string, parts []string) bool {
	if s == "" {
		return true
	}
	type key struct{ pos, i int }
	memo := map[key]bool{}
	var match func(pos, i int) bool
	match = func(pos, i int) bool {
		k := key{pos, i}
		if v, ok := memo[k]; ok {
			return v
		}
		ok := false
		for j := i; j < len(parts) && !ok; j++ {
			p := parts[j]
			if !strings.HasPrefix(s[pos:], p) {
				continue
			}
			end := pos + len(p)
			if end == len(s) || (s[end] == '\n' && end+1 < len(s) && match(end+1, j+1)) {
				ok = true
			}
		}
		memo[k] = ok
		return ok
	}
	return match(0, 0)
}

func TestJoinOfHelper(t *testing.T) {
	parts := []string{"Human: a", "AI: 1.\n2.", "Human: b"}
	assert.True(t, joinOf("", parts))
	assert.True(t, joinOf("Human: a\nHuman: b", parts))
	assert.True(t, joinOf("AI: 1.\n2.\nHuman: b", parts))
	assert.False(t, joinOf("2.\nHuman: b", parts), "half a message")
	assert.False(t, joinOf("Human: b\nHuman: a", parts), "out of order")
	assert.False(t, joinOf("Human: a\n", parts))
}

// isSubsequence reports whether got is some of all, in order.
func isSubsequence(got, all []llms.ChatMessage) bool {
	j := 0
	for _, g := range got {
		for j < len(all) && !assert.ObjectsAreEqual(g, all[j]) {
			j++
		}
		if j == len(all) {
			return false
		}
		j++
	}
	return true
}

// line renders messages as a history does (one message: its line).
func line(t testing.TB, m ...llms.ChatMessage) string {
	t.Helper()
	s, err := llms.GetBufferString(m, "Human", "AI")
	require.NoError(t, err)
	return s
}

func newBudgeted(t *testing.T, list []schema.Memory, n int, bopts []combined.BudgetOption, opts ...combined.Option) *combined.Memory {
	t.Helper()
	return newCombined(t, list, append([]combined.Option{combined.WithTokenBudget(n, bopts...)}, opts...)...)
}

// trimLog collects what WithTrimHook receives.
type trimLog struct {
	mu    sync.Mutex
	trims []combined.Trim
}

func (l *trimLog) hook(_ context.Context, tr combined.Trim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trims = append(l.trims, tr)
}

func (l *trimLog) last(t *testing.T) combined.Trim {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.NotEmpty(t, l.trims, "the trim hook was not called")
	return l.trims[len(l.trims)-1]
}

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

func TestBudgetOptionsRejected(t *testing.T) {
	two := func() []schema.Memory { return []schema.Memory{bufferKey("a"), bufferKey("b")} }
	tests := []struct {
		name string
		opts []combined.Option
		want string
	}{
		{"zero budget", []combined.Option{combined.WithTokenBudget(0)}, "WithTokenBudget(0)"},
		{"negative budget", []combined.Option{combined.WithTokenBudget(-5)}, "WithTokenBudget(-5)"},
		{"nil budget option", []combined.Option{combined.WithTokenBudget(10, nil)}, "budget option 1 of 1 is nil"},
		{"too few priorities", []combined.Option{combined.WithTokenBudget(10, combined.WithPriorities(1))}, "WithPriorities: 1 priorities for 2 children"},
		{"too many priorities", []combined.Option{combined.WithTokenBudget(10, combined.WithPriorities(1, 2, 3))}, "WithPriorities: 3 priorities for 2 children"},
		{"nil counter", []combined.Option{combined.WithTokenBudget(10, combined.WithTokenCounter(nil))}, "WithTokenCounter(nil)"},
		{"nil hook", []combined.Option{combined.WithTokenBudget(10, combined.WithTrimHook(nil))}, "WithTrimHook(nil)"},
		{"nil observer", []combined.Option{combined.WithObserver(nil)}, "WithObserver(nil)"},
		{"no layer names", []combined.Option{combined.WithLayerNames()}, "WithLayerNames(): no names"},
		{"too few layer names", []combined.Option{combined.WithLayerNames("a")}, "1 names for 2 children"},
		{"empty layer name", []combined.Option{combined.WithLayerNames("a", "")}, "name 2 of 2 is empty"},
		{"duplicate layer names", []combined.Option{combined.WithLayerNames("x", "x")}, `names 1 and 2 are both "x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := combined.New(two(), tc.opts...)
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, combined.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestBudgetStringAndVariables(t *testing.T) {
	ctx := context.Background()
	m := newBudgeted(t, []schema.Memory{bufferKey("a"), bufferKey("b")}, 50, nil)
	assert.Equal(t, []string{"a", "b"}, m.MemoryVariables(ctx), "MemoryVariables does not change with a budget")
	assert.Contains(t, m.String(), "token_budget=50")
}

// ---------------------------------------------------------------------------
// A budget that fits changes nothing.
// ---------------------------------------------------------------------------

func TestBudgetLargeEnoughLoadsWhatTheChildrenLoad(t *testing.T) {
	for _, messages := range []bool{false, true} {
		t.Run(fmt.Sprintf("messages=%t", messages), func(t *testing.T) {
			ctx := context.Background()
			list := func() []schema.Memory {
				sum, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithMaxMessages(4), memories.WithBatchSize(2),
					memories.WithMemoryKey("summary"), memories.WithReturnMessages(messages))
				require.NoError(t, err)
				tw, err := memories.NewTokenWindow(60, memories.WithMemoryKey("tw"), memories.WithReturnMessages(messages))
				require.NoError(t, err)
				return []schema.Memory{
					newRecent(t, 3, memories.WithMemoryKey("recent"), memories.WithReturnMessages(messages)),
					mustBuffer(memories.WithMemoryKey("full"), memories.WithReturnMessages(messages)),
					tw, sum,
					memory.NewConversationBuffer(memory.WithMemoryKey("lc"), memory.WithReturnMessages(messages)),
				}
			}
			plain := newCombined(t, list())
			var log trimLog
			budgeted := newBudgeted(t, list(), 100000, []combined.BudgetOption{combined.WithTrimHook(log.hook)})
			for _, m := range []*combined.Memory{plain, budgeted} {
				require.NoError(t, m.AddMessage(ctx, llms.SystemChatMessage{Content: "Be brief."}))
				for i := range 6 {
					in, out := turn(fmt.Sprintf("Question %d?", i), fmt.Sprintf("Answer %d:\n- first\n- second", i))
					require.NoError(t, m.SaveContext(ctx, in, out))
				}
			}
			want, err := plain.LoadMemoryVariables(ctx, map[string]any{"input": "x"})
			require.NoError(t, err)
			got, err := budgeted.LoadMemoryVariables(ctx, map[string]any{"input": "x"})
			require.NoError(t, err)
			assert.Equal(t, want, got)
			tr := log.last(t)
			assert.Empty(t, tr.Dropped)
			assert.Equal(t, 100000, tr.Budget)
			assert.Equal(t, totalSize(t, cl100k(t), got), tr.Tokens)
			if !messages {
				assert.True(t, strings.HasPrefix(got["summary"].(string), memories.SummaryPrefix), "the summary memory summarized")
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Priorities
// ---------------------------------------------------------------------------

// fill saves n turns whose answers span two lines.
func fill(t *testing.T, ctx context.Context, m schema.Memory, n int) {
	t.Helper()
	for i := range n {
		in, out := turn(fmt.Sprintf("Turn %d question", i), fmt.Sprintf("Turn %d answer\nwith a second line", i))
		require.NoError(t, m.SaveContext(ctx, in, out))
	}
}

func TestBudgetPriorities(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	// The size of one child's full rendering, to set budgets around it.
	probe := bufferKey("p")
	fill(t, ctx, probe, 4)
	full := sizeOf(t, c, loadKey(t, ctx, probe, "p"))

	tests := []struct {
		name       string
		priorities []int
		budget     int
		// intact children keep everything; empty ones keep nothing;
		// the partial one keeps some.
		intact, empty []string
		partial       string
	}{
		{"default: the last child is trimmed first", nil, full + full/2, []string{"a"}, nil, "b"},
		{"default: three children", nil, full + full/2, []string{"a"}, []string{"c"}, "b"},
		{"reversed priorities", []int{1, 2}, full + full/2, []string{"b"}, nil, "a"},
		{"middle child highest", []int{1, 3, 2}, full + full/2, []string{"b"}, []string{"a"}, "c"},
		{"equal priorities: the later child first", []int{5, 5}, full + full/2, []string{"a"}, nil, "b"},
		{"budget below one child", nil, full / 2, nil, []string{"b"}, "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys := []string{"a", "b"}
			if strings.Contains(tc.name, "three") || len(tc.priorities) == 3 {
				keys = []string{"a", "b", "c"}
			}
			var list []schema.Memory
			for _, k := range keys {
				list = append(list, bufferKey(k))
			}
			var log trimLog
			bopts := []combined.BudgetOption{combined.WithTrimHook(log.hook)}
			if tc.priorities != nil {
				bopts = append(bopts, combined.WithPriorities(tc.priorities...))
			}
			m := newBudgeted(t, list, tc.budget, bopts)
			fill(t, ctx, m, 4)
			vars, err := m.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			require.Len(t, vars, len(keys))
			assert.LessOrEqual(t, totalSize(t, c, vars), tc.budget)
			fullText := loadKey(t, ctx, list[0], keys[0]).(string)
			for _, k := range tc.intact {
				assert.Equal(t, fullText, vars[k], "child %s keeps everything", k)
			}
			for _, k := range tc.empty {
				assert.Equal(t, "", vars[k], "child %s is trimmed to nothing", k)
			}
			p := vars[tc.partial].(string)
			assert.NotEmpty(t, p, "child %s keeps something", tc.partial)
			assert.NotEqual(t, fullText, p, "child %s is trimmed", tc.partial)
			assert.True(t, strings.HasSuffix(fullText, p), "child %s keeps its newest messages", tc.partial)
			// Only the partial and empty children lost items.
			for _, d := range log.last(t).Dropped {
				assert.Contains(t, append([]string{tc.partial}, tc.empty...), keys[d.Child])
				assert.Equal(t, observe.ReasonBudget, d.Item.Reason)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Whole items, and the order inside a child
// ---------------------------------------------------------------------------

func TestBudgetWindowDropsOldestFirstSystemLast(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	st := store.NewInMemory()
	buf := mustBuffer(memories.WithStore(st))
	var log trimLog
	m := newBudgeted(t, []schema.Memory{buf}, 1, []combined.BudgetOption{combined.WithTrimHook(log.hook)})
	sys := llms.SystemChatMessage{Content: "You are a careful assistant."}
	require.NoError(t, m.AddMessage(ctx, sys))
	msgs := []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Plan my day"},
		llms.AIChatMessage{Content: "1. Code\n2. Walk\n3. Read"},
		llms.HumanChatMessage{Content: "And tomorrow?"},
		llms.AIChatMessage{Content: "Rest."},
	}
	for _, msg := range msgs {
		require.NoError(t, m.AddMessage(ctx, msg))
	}
	all := append([]llms.ChatMessage{sys}, msgs...)
	parts := make([]string, len(all))
	for i, msg := range all {
		parts[i] = line(t, msg)
	}
	full := strings.Join(parts, "\n")
	// Budgets from the full size down to 1: the kept text is always whole
	// messages, the system message goes last, the oldest others first.
	for budget := sizeOf(t, c, full); budget >= 1; budget-- {
		mem := newBudgeted(t, []schema.Memory{buf}, budget, nil)
		got := loadKey(t, ctx, mem, "history").(string)
		require.LessOrEqual(t, c.CountTokens(got), budget)
		require.Truef(t, joinOf(got, parts), "budget %d: %q is not whole messages", budget, got)
		// The kept non-system messages are the newest ones.
		kept := strings.TrimPrefix(strings.TrimPrefix(got, parts[0]), "\n")
		if kept != "" {
			require.Truef(t, strings.HasSuffix(full, kept), "budget %d: %q is not the newest messages", budget, kept)
		}
		// The system message is left out only when it does not fit
		// with what is kept; the next older message too.
		if got != "" && !strings.HasPrefix(got, parts[0]) {
			require.Greaterf(t, c.CountTokens(parts[0]+"\n"+got), budget, "budget %d: the system message fits but was left out: %q", budget, got)
		}
		n := 0 // how many of the newest messages are kept
		for k := len(parts) - 1; k >= 1; k-- {
			if kept == strings.Join(parts[len(parts)-k:], "\n") {
				n = k
				break
			}
		}
		if n < len(parts)-1 {
			with := strings.Join(parts[len(parts)-n-1:], "\n") // the next older message too
			if strings.HasPrefix(got, parts[0]) {
				with = parts[0] + "\n" + with
			}
			require.Greaterf(t, c.CountTokens(with), budget, "budget %d: the next older message fits but was left out: %q", budget, got)
		}
	}
	// Budget 1 drops everything, oldest first, the system message last.
	_, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	recs, err := st.All(ctx, memstackZero)
	require.NoError(t, err)
	var ids []string
	for _, d := range log.last(t).Dropped {
		ids = append(ids, d.Item.ID)
		assert.Equal(t, "message", d.Item.Kind)
		assert.Positive(t, d.Item.Tokens)
	}
	want := []string{fmt.Sprint(recs[1].Seq), fmt.Sprint(recs[2].Seq), fmt.Sprint(recs[3].Seq), fmt.Sprint(recs[4].Seq), fmt.Sprint(recs[0].Seq)}
	assert.Equal(t, want, ids)
}

func TestBudgetToolCallStaysWithItsResults(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	r := newRecent(t, 10, memories.WithReturnMessages(true))
	call := llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: `{"city":"Paris"}`}}}}
	result := llms.ToolChatMessage{ID: "c1", Content: "Sunny, 21 degrees, light wind from the west"}
	msgs := []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Weather in Paris?"}, call, result,
		llms.AIChatMessage{Content: "Sunny."},
	}
	for _, msg := range msgs {
		require.NoError(t, r.AddMessage(ctx, msg))
	}
	for budget := 1; budget < 80; budget++ {
		m := newBudgeted(t, []schema.Memory{r}, budget, nil)
		got := loadKey(t, ctx, m, "history").([]llms.ChatMessage)
		require.LessOrEqual(t, sizeOf(t, c, got), budget)
		require.True(t, isSubsequence(got, msgs))
		hasCall, hasResult := false, false
		for _, g := range got {
			hasCall = hasCall || assert.ObjectsAreEqual(call, g)
			hasResult = hasResult || assert.ObjectsAreEqual(result, g)
		}
		require.Equalf(t, hasCall, hasResult, "budget %d: a tool call and its result are kept or dropped together: %v", budget, got)
	}
}

func TestBudgetSummaryDropsRawThenSummaryThenSystem(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	st := store.NewInMemory()
	sum, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(st), memories.WithMaxMessages(2), memories.WithBatchSize(2))
	require.NoError(t, err)
	require.NoError(t, sum.AddMessage(ctx, llms.SystemChatMessage{Content: "Be brief."}))
	fill(t, ctx, sum, 4)
	full := loadKey(t, ctx, sum, "history").(string)
	require.True(t, strings.HasPrefix(full, memories.SummaryPrefix))
	summaryLine := memories.SummaryPrefix + storedSummary(t, ctx, st)
	recs, err := st.All(ctx, memstackZero)
	require.NoError(t, err)
	through := storedThrough(t, ctx, st, memstackZero)
	var sysLine string
	var raw []string
	for _, r := range recs {
		if r.Message.GetType() == llms.ChatMessageTypeSystem {
			sysLine = line(t, r.Message)
		} else if r.Seq > through {
			raw = append(raw, line(t, r.Message))
		}
	}
	require.Len(t, raw, 2)
	parts := append([]string{summaryLine, sysLine}, raw...)
	require.True(t, joinOf(full, parts))

	for budget := sizeOf(t, c, full); budget >= 1; budget-- {
		m := newBudgeted(t, []schema.Memory{sum}, budget, nil)
		got := loadKey(t, ctx, m, "history").(string)
		require.LessOrEqual(t, c.CountTokens(got), budget)
		require.Truef(t, joinOf(got, parts), "budget %d: %q", budget, got)
		has := []bool{strings.Contains(got, summaryLine), strings.Contains(got, sysLine),
			strings.Contains(got, raw[0]), strings.Contains(got, raw[1])}
		with := func(i int) string { // got with part i added in its place
			var out []string
			for j, p := range parts {
				if has[j] || j == i {
					out = append(out, p)
				}
			}
			return strings.Join(out, "\n")
		}
		// Raw messages stay the newest: the older only with the newer.
		if has[2] {
			require.True(t, has[3], "budget %d: an older raw message without the newer one: %q", budget, got)
		}
		// Whatever is left out does not fit with what is kept (the older
		// raw message only counts once the newer is kept).
		for i, name := range []string{"the summary", "the system message", "the older raw message", "the newest raw message"} {
			if has[i] || (i == 2 && !has[3]) {
				continue
			}
			require.Greaterf(t, c.CountTokens(with(i)), budget, "budget %d: %s fits but was left out: %q", budget, name, got)
		}
	}
}

func storedSummary(t *testing.T, ctx context.Context, st store.Store) string {
	t.Helper()
	v := storedSummaryState(t, ctx, st, memstackZero)
	require.NotEmpty(t, v.Summary)
	return v.Summary
}

func TestBudgetForeignChildren(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	// A langchaingo buffer in messages mode is trimmed message by message;
	// a user memory's string whole.
	lc := memory.NewConversationBuffer(memory.WithMemoryKey("lc"), memory.WithReturnMessages(true))
	user := newUserMemory("user")
	for i := range 3 {
		in, out := turn(fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
		require.NoError(t, lc.SaveContext(ctx, in, out))
		require.NoError(t, user.SaveContext(ctx, in, out))
	}
	userFull := loadKey(t, ctx, user, "user").(string)
	lcFull := loadKey(t, ctx, lc, "lc").([]llms.ChatMessage)
	userSize := c.CountTokens(userFull)

	var log trimLog
	// lc first (highest), user last: the user string goes first, whole.
	m := newBudgeted(t, []schema.Memory{lc, user}, sizeOf(t, c, lcFull)+userSize-1, []combined.BudgetOption{combined.WithTrimHook(log.hook)})
	vars, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "", vars["user"])
	assert.Equal(t, lcFull, vars["lc"])
	require.Len(t, log.last(t).Dropped, 1)
	assert.Equal(t, observe.Item{Kind: "variable", ID: "user", Tokens: userSize, Reason: observe.ReasonBudget}, log.last(t).Dropped[0].Item)

	// user first: lc loses its oldest messages, whole.
	m = newBudgeted(t, []schema.Memory{user, lc}, userSize+5, []combined.BudgetOption{combined.WithTrimHook(log.hook)})
	vars, err = m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, userFull, vars["user"])
	got := vars["lc"].([]llms.ChatMessage)
	require.NotEmpty(t, got)
	assert.Less(t, len(got), len(lcFull))
	assert.Equal(t, lcFull[len(lcFull)-len(got):], got, "the newest messages are kept")
	assert.LessOrEqual(t, totalSize(t, c, vars), userSize+5)
	for i, d := range log.last(t).Dropped {
		assert.Equal(t, fmt.Sprint(i+1), d.Item.ID, "messages are dropped oldest first")
	}
}

func TestBudgetOverriddenKeyIsNotCounted(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	a := mustBuffer() // "history", overridden by b
	b, err := memories.NewRecentN(2)
	require.NoError(t, err)
	var log trimLog
	sink, reports := collect()
	m := newBudgeted(t, []schema.Memory{a, b}, 30, []combined.BudgetOption{combined.WithTrimHook(log.hook)}, combined.WithObserver(sink))
	fill(t, ctx, m, 5)
	*reports = nil
	vars, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	want := loadKey(t, ctx, b, "history").(string)
	require.LessOrEqual(t, c.CountTokens(want), 30, "the test needs b to fit alone")
	assert.Equal(t, want, vars["history"])
	assert.Empty(t, log.last(t).Dropped, "a's variable is overridden, so its size does not count")
	rs := byLayer(*reports)
	require.Contains(t, rs, "1:Buffer")
	assert.Empty(t, rs["1:Buffer"].Injected)
	require.Len(t, rs["1:Buffer"].Dropped, 10)
	assert.Equal(t, observe.ReasonOverridden, rs["1:Buffer"].Dropped[0].Reason)
}

// badItemizer breaks the Itemizer contract in the ways New cannot check.
type badItemizer struct {
	*userMemory
	items combined.Items
}

func (b badItemizer) LoadItems(context.Context, map[string]any) (combined.Items, error) {
	return b.items, nil
}

func TestBudgetItemizerContractViolations(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		items combined.Items
		want  string
	}{
		{"empty key", combined.Items{Render: func([]bool) (any, error) { return "", nil }}, "empty key"},
		{"no render", combined.Items{Key: "user"}, "no Render"},
		{"render fails", combined.Items{Key: "user", List: []combined.Item{{Text: "x"}}, Render: func([]bool) (any, error) { return nil, fmt.Errorf("boom") }}, "boom"},
		{"render panics", combined.Items{Key: "user", List: []combined.Item{{Text: "x"}}, Render: func([]bool) (any, error) { panic("bad") }}, "panic: bad"},
		{"not empty with nothing kept", combined.Items{Key: "user", List: []combined.Item{{Text: "x"}}, Render: func([]bool) (any, error) {
			return "a header that is always there", nil
		}}, "with every item dropped"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newBudgeted(t, []schema.Memory{badItemizer{newUserMemory("user"), tc.items}}, 2, nil)
			_, err := m.LoadMemoryVariables(ctx, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "child 1")
		})
	}
}

func TestBudgetCustomCounter(t *testing.T) {
	ctx := context.Background()
	words := tokens.CounterFunc(func(s string) int { return len(strings.Fields(s)) })
	b := mustBuffer()
	m := newBudgeted(t, []schema.Memory{b}, 7, []combined.BudgetOption{combined.WithTokenCounter(words)})
	for _, msg := range []string{"one two three", "four five", "six seven eight"} {
		require.NoError(t, m.AddMessage(ctx, llms.HumanChatMessage{Content: msg}))
	}
	// "Human: six seven eight" is 4 words, "Human: four five" 3: both fit in 7.
	assert.Equal(t, "Human: four five\nHuman: six seven eight", loadKey(t, ctx, m, "history"))
}

func TestBudgetLoadFailureFailsTheLoad(t *testing.T) {
	ctx := context.Background()
	u := newUserMemory("user")
	u.loadErr = fmt.Errorf("backend down")
	m := newBudgeted(t, []schema.Memory{bufferKey("a"), u}, 10, nil)
	_, err := m.LoadMemoryVariables(ctx, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "child 2")
	assert.Contains(t, err.Error(), "backend down")

	r := newRecent(t, 2, memories.WithRequireIdentity())
	m = newBudgeted(t, []schema.Memory{r}, 10, nil)
	_, err = m.LoadMemoryVariables(ctx, nil)
	require.Error(t, err, "an Itemizer's LoadItems error fails the load")
}

// ---------------------------------------------------------------------------
// Property: random stacks never exceed the budget, keep whole items, and
// trim in priority order.
// ---------------------------------------------------------------------------

type stackChild struct {
	mem      schema.Memory
	key      string
	kind     string // recent, tokens, buffer, summary, lcstring, lcmessages, user
	messages bool
	st       store.Store
}

func randomStack(t *testing.T, rng *rand.Rand) []stackChild {
	n := 1 + rng.IntN(4)
	out := make([]stackChild, n)
	for i := range out {
		key := fmt.Sprintf("k%d", i)
		messages := rng.IntN(2) == 0
		st := store.NewInMemory()
		opts := []memories.Option{memories.WithMemoryKey(key), memories.WithReturnMessages(messages), memories.WithStore(st)}
		c := stackChild{key: key, messages: messages, st: st}
		switch rng.IntN(7) {
		case 0:
			c.kind, c.mem = "recent", newRecent(t, 2+rng.IntN(8), optsAs[memories.RecentNOption](opts)...)
		case 1:
			tw, err := memories.NewTokenWindow(20+rng.IntN(200), optsAs[memories.TokenWindowOption](opts)...)
			require.NoError(t, err)
			c.kind, c.mem = "tokens", tw
		case 2:
			c.kind, c.mem = "buffer", mustBuffer(optsAs[memories.BufferOption](opts)...)
		case 3:
			s, err := memories.NewSummary(summarizer.NewExtractive(), append(optsAs[memories.SummaryOption](opts), memories.WithMaxMessages(4), memories.WithBatchSize(2))...)
			require.NoError(t, err)
			c.kind, c.mem = "summary", s
		case 4:
			c.kind, c.mem, c.messages = "lcstring", memory.NewConversationBuffer(memory.WithMemoryKey(key)), false
		case 5:
			c.kind, c.mem, c.messages = "lcmessages", memory.NewConversationBuffer(memory.WithMemoryKey(key), memory.WithReturnMessages(true)), true
		default:
			c.kind, c.mem, c.messages = "user", newUserMemory(key), false
		}
		out[i] = c
	}
	return out
}

var phrases = []string{
	"hello", "What did we settle on?", "We agreed to ship on Friday.", "1. Code\n2. Walk\n3. Read",
	"My name is Ada and I live in Lyon.", "ok", "Let me check.\n\nDone: the invoice is paid.",
	"The quick brown fox jumps over the lazy dog. " + strings.Repeat("More words here. ", 5),
}

func TestBudgetPropertyRandomStacks(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	rng := rand.New(rand.NewPCG(7, 11))
	iterations := 60
	if testing.Short() {
		iterations = 15
	}
	for it := range iterations {
		stack := randomStack(t, rng)
		list := make([]schema.Memory, len(stack))
		for i, sc := range stack {
			list[i] = sc.mem
		}
		var prios []int
		if rng.IntN(2) == 0 {
			prios = make([]int, len(stack))
			for i := range prios {
				prios[i] = rng.IntN(3)
			}
		}
		budget := 1 + rng.IntN(400)
		var log trimLog
		bopts := []combined.BudgetOption{combined.WithTrimHook(log.hook)}
		if prios != nil {
			bopts = append(bopts, combined.WithPriorities(prios...))
		}
		m := newBudgeted(t, list, budget, bopts)

		// The conversation: every message the memstack children hold.
		var sent []llms.ChatMessage
		takers := false
		for _, sc := range stack {
			_, ok := sc.mem.(combined.MessageAdder)
			takers = takers || ok
		}
		if takers && rng.IntN(2) == 0 {
			sys := llms.SystemChatMessage{Content: "You are helpful.\nAnswer briefly."}
			require.NoError(t, m.AddMessage(ctx, sys))
			sent = append(sent, sys)
		}
		for range 1 + rng.IntN(8) {
			h, a := phrases[rng.IntN(len(phrases))], phrases[rng.IntN(len(phrases))]
			in, out := turn(h, a)
			require.NoError(t, m.SaveContext(ctx, in, out))
			sent = append(sent, llms.HumanChatMessage{Content: h}, llms.AIChatMessage{Content: a})
		}

		vars, err := m.LoadMemoryVariables(ctx, map[string]any{"input": "q"})
		require.NoError(t, err)
		desc := fmt.Sprintf("iteration %d: budget %d, priorities %v, stack %v", it, budget, prios, kinds(stack))
		require.ElementsMatch(t, m.MemoryVariables(ctx), keysOf(vars), desc)
		total := totalSize(t, c, vars)
		require.LessOrEqual(t, total, budget, desc)
		tr := log.last(t)
		require.Equal(t, total, tr.Tokens, desc)

		dropped := map[int]bool{}
		for _, d := range tr.Dropped {
			dropped[d.Child] = true
			require.Equal(t, observe.ReasonBudget, d.Item.Reason)
			require.Equal(t, stack[d.Child].key, d.Key)
		}
		// Trim order: lowest priority first, the later child first among
		// equals. After the last child that lost anything, every child is
		// whole; a child that lost something lost what did not fit in the
		// room left (what the take-back could not restore).
		order := make([]int, len(stack))
		for i := range order {
			order[i] = i
		}
		prio := func(i int) int {
			if prios != nil {
				return prios[i]
			}
			return len(stack) - i
		}
		slices.SortStableFunc(order, func(x, y int) int {
			if prio(x) != prio(y) {
				return prio(x) - prio(y)
			}
			return y - x
		})
		lastTrimmed := -1
		for pos, ci := range order {
			if dropped[ci] {
				lastTrimmed = pos
			}
		}
		for pos, ci := range order {
			sc := stack[ci]
			got := vars[sc.key]
			whole := loadKey(t, ctx, sc.mem, sc.key)
			switch {
			case dropped[ci]:
				lost := 0
				for _, d := range tr.Dropped {
					if d.Child == ci {
						lost += d.Item.Tokens + 2 // and the merges at its edges
					}
				}
				require.Greaterf(t, lost, budget-total, "%s: child %d (%s) lost items that fit in the room left", desc, ci, sc.kind)
			case pos > lastTrimmed:
				require.Equalf(t, whole, got, "%s: child %d (%s) is trimmed after the last trimmed child", desc, ci, sc.kind)
			}
			checkWhole(t, ctx, desc, sc, got, whole, sent)
		}
	}
}

func kinds(stack []stackChild) []string {
	out := make([]string, len(stack))
	for i, sc := range stack {
		out[i] = sc.kind
		if sc.messages {
			out[i] += "/messages"
		}
	}
	return out
}

func keysOf(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkWhole asserts that a budgeted value holds whole items of the
// child's full value only: whole messages, the summary line whole, a
// foreign string whole or empty.
func checkWhole(t *testing.T, ctx context.Context, desc string, sc stackChild, got, whole any, sent []llms.ChatMessage) {
	t.Helper()
	switch sc.kind {
	case "lcstring", "user":
		if got != "" {
			require.Equal(t, whole, got, desc)
		}
		return
	}
	if sc.messages {
		all := whole.([]llms.ChatMessage)
		require.Truef(t, isSubsequence(got.([]llms.ChatMessage), all), "%s: %v is not whole messages of %v", desc, got, all)
		return
	}
	var parts []string
	if sc.kind == "summary" {
		if s, err := sc.st.GetState(ctx, memstackZero, memories.SummaryStateName); err == nil && s.Exists() {
			parts = append(parts, memories.SummaryPrefix+storedSummaryOf(t, s))
		}
		// Summary shows system messages first.
		for _, m := range sent {
			if m.GetType() == llms.ChatMessageTypeSystem {
				parts = append(parts, line(t, m))
			}
		}
	}
	for _, m := range sent {
		if sc.kind == "summary" && m.GetType() == llms.ChatMessageTypeSystem {
			continue
		}
		parts = append(parts, line(t, m))
	}
	s := got.(string)
	require.Truef(t, joinOf(s, parts), "%s: child %s: %q is not whole messages", desc, sc.kind, s)
}

// storedSummaryState reads the summary state a Summary keeps for id.
func storedSummaryState(t *testing.T, ctx context.Context, st store.Store, id memstack.Identity) (v struct {
	Summary string `json:"summary"`
	Through int64  `json:"through"`
}) {
	t.Helper()
	s, err := st.GetState(ctx, id, memories.SummaryStateName)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(s.Value, &v))
	return v
}

// storedThrough returns the Seq the stored summary of id covers through.
func storedThrough(t *testing.T, ctx context.Context, st store.Store, id memstack.Identity) int64 {
	t.Helper()
	through := storedSummaryState(t, ctx, st, id).Through
	require.Positive(t, through)
	return through
}

func storedSummaryOf(t *testing.T, s store.State) string {
	var v struct {
		Summary string `json:"summary"`
	}
	require.NoError(t, json.Unmarshal(s.Value, &v))
	return v.Summary
}

func TestBudgetExactCountCorrectsAnOptimisticEstimate(t *testing.T) {
	ctx := context.Background()
	// A counter for which joining lines costs more than the per-item
	// estimate (each item plus one for its line break) assumes: every line
	// break costs 10. Only the exact count of the rendered variable can
	// keep the budget.
	costly := tokens.CounterFunc(func(s string) int {
		return len(strings.Fields(s)) + 10*strings.Count(s, "\n")
	})
	b := mustBuffer()
	for i := range 6 {
		require.NoError(t, b.AddMessage(ctx, llms.HumanChatMessage{Content: fmt.Sprintf("message %d", i)}))
	}
	for budget := 1; budget <= 80; budget++ {
		var log trimLog
		m := newBudgeted(t, []schema.Memory{b}, budget, []combined.BudgetOption{combined.WithTokenCounter(costly), combined.WithTrimHook(log.hook)})
		got := loadKey(t, ctx, m, "history").(string)
		require.LessOrEqualf(t, costly.CountTokens(got), budget, "budget %d: %q", budget, got)
		assert.Equal(t, costly.CountTokens(got), log.last(t).Tokens)
		// The fewest drops: one more message would not fit.
		lines := 0
		if got != "" {
			lines = strings.Count(got, "\n") + 1
		}
		if lines < 6 {
			next := 3*(lines+1) + 10*lines
			assert.Greaterf(t, next, budget, "budget %d keeps %d messages; %d would fit", budget, lines, lines+1)
		}
	}
}
