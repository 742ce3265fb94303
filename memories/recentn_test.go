package memories_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

func TestNewRecentN_RejectsNonPositiveN(t *testing.T) {
	for _, n := range []int{0, -1, -100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m, err := memories.NewRecentN(n)
			assert.Nil(t, m)
			require.Error(t, err)
			assert.ErrorIs(t, err, memories.ErrInvalidOption)
			assert.Contains(t, err.Error(), "NewRecentN")
			assert.Contains(t, err.Error(), fmt.Sprintf("n=%d", n))
		})
	}
	m, err := memories.NewRecentN(1)
	require.NoError(t, err)
	assert.Contains(t, m.String(), "n=1")
}

// rnTurns returns the messages of turns [from, to) as SaveContext stores them.
func rnTurns(from, to int) []llms.ChatMessage {
	var out []llms.ChatMessage
	for i := from; i < to; i++ {
		out = append(out, llms.HumanChatMessage{Content: fmt.Sprintf("q%d", i)}, llms.AIChatMessage{Content: fmt.Sprintf("a%d", i)})
	}
	return out
}

func rnSave(t *testing.T, m ctMemory, ctx context.Context, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		ctSaveTurn(t, m, ctx, fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
	}
}

func lastN(msgs []llms.ChatMessage, n int) []llms.ChatMessage {
	return msgs[max(len(msgs)-n, 0):]
}

func TestRecentN_ShowsLastNMessages(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 14, 15, 100} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			ctx := context.Background()
			strMode, err := memories.NewRecentN(n)
			require.NoError(t, err)
			msgMode, err := memories.NewRecentN(n, memories.WithReturnMessages(true))
			require.NoError(t, err)
			var all []llms.ChatMessage
			for i := range 7 {
				rnSave(t, strMode, ctx, i, i+1)
				rnSave(t, msgMode, ctx, i, i+1)
				all = append(all, rnTurns(i, i+1)...)
				want := lastN(all, n)
				assert.Equal(t, ctRender(t, want, "Human", "AI"), ctLoadString(t, strMode, ctx), "after turn %d", i)
				assert.Equal(t, want, ctLoadMessages(t, msgMode, ctx), "after turn %d", i)
			}
			// An odd n can start the window with an AI message.
			if n%2 == 1 && n < len(all) {
				assert.Equal(t, llms.ChatMessageTypeAI, ctLoadMessages(t, msgMode, ctx)[0].GetType())
			}
		})
	}
}

func TestRecentN_SystemMessagesArePinned(t *testing.T) {
	sys := func(s string) llms.ChatMessage { return llms.SystemChatMessage{Content: s} }
	type step struct {
		system string // AddMessage a system message, or
		turns  int    // save this many turns
	}
	for _, tc := range []struct {
		name  string
		n     int
		steps []step
		want  []llms.ChatMessage
	}{
		{
			name:  "system prompt first, 30 turns, n=3",
			n:     3,
			steps: []step{{system: "You are terse."}, {turns: 30}},
			want:  append([]llms.ChatMessage{sys("You are terse.")}, lastN(rnTurns(0, 30), 3)...),
		},
		{
			name:  "system message in the middle",
			n:     3,
			steps: []step{{system: "first"}, {turns: 10}, {system: "second"}, {turns: 10}},
			want:  append([]llms.ChatMessage{sys("first"), sys("second")}, lastN(rnTurns(0, 20), 3)...),
		},
		{
			name:  "system message inside the window does not count toward n",
			n:     4,
			steps: []step{{turns: 5}, {system: "late"}, {turns: 1}},
			want:  append([]llms.ChatMessage{sys("late")}, lastN(rnTurns(0, 6), 4)...),
		},
		{
			name:  "system messages only",
			n:     1,
			steps: []step{{system: "one"}, {system: "two"}, {system: "three"}},
			want:  []llms.ChatMessage{sys("one"), sys("two"), sys("three")},
		},
		{
			name:  "more system messages than n",
			n:     1,
			steps: []step{{system: "one"}, {turns: 2}, {system: "two"}, {system: "three"}, {turns: 2}},
			want:  []llms.ChatMessage{sys("one"), sys("two"), sys("three"), llms.AIChatMessage{Content: "a3"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctIDCtx(memstack.Identity{User: "u"})
			st := store.NewInMemory()
			m, err := memories.NewRecentN(tc.n, memories.WithReturnMessages(true), memories.WithStore(st))
			require.NoError(t, err)
			s, err := memories.NewRecentN(tc.n, memories.WithStore(store.NewInMemory()))
			require.NoError(t, err)
			turn := 0
			for _, sp := range tc.steps {
				if sp.system != "" {
					require.NoError(t, m.AddMessage(ctx, sys(sp.system)))
					require.NoError(t, s.AddMessage(ctx, sys(sp.system)))
					continue
				}
				rnSave(t, m, ctx, turn, turn+sp.turns)
				rnSave(t, s, ctx, turn, turn+sp.turns)
				turn += sp.turns
			}
			assert.Equal(t, tc.want, ctLoadMessages(t, m, ctx))
			assert.Equal(t, ctRender(t, tc.want, "Human", "AI"), ctLoadString(t, s, ctx))
		})
	}
}

// rnToolCall is an AI message asking for the given tool calls.
func rnToolCall(content string, ids ...string) llms.AIChatMessage {
	m := llms.AIChatMessage{Content: content}
	for _, id := range ids {
		m.ToolCalls = append(m.ToolCalls, llms.ToolCall{ID: id, Type: "function",
			FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: fmt.Sprintf(`{"id":%q}`, id)}})
	}
	return m
}

func rnToolResult(id string) llms.ToolChatMessage {
	return llms.ToolChatMessage{ID: id, Content: "result of " + id}
}

// assertNoSplitGroup checks that every tool or function result in window
// follows, within the window and with only results in between, the AI
// message that called for it.
func assertNoSplitGroup(t *testing.T, window []llms.ChatMessage) {
	t.Helper()
	inGroup := false
	for i, m := range window {
		switch m.GetType() {
		case llms.ChatMessageTypeTool, llms.ChatMessageTypeFunction:
			assert.True(t, inGroup, "message %d (%v) is a tool result shown without its call: %v", i, m, window)
		case llms.ChatMessageTypeAI:
			ai, ok := m.(llms.AIChatMessage)
			inGroup = ok && (len(ai.ToolCalls) > 0 || ai.FunctionCall != nil)
		default:
			inGroup = false
		}
	}
}

func TestRecentN_ToolCallGroupsAreNeverSplit(t *testing.T) {
	h := func(s string) llms.ChatMessage { return llms.HumanChatMessage{Content: s} }
	a := func(s string) llms.ChatMessage { return llms.AIChatMessage{Content: s} }
	call := rnToolCall("", "c1", "c2")
	conv := []llms.ChatMessage{h("h1"), a("a1"), h("h2"), call, rnToolResult("c1"), rnToolResult("c2"), a("a2")}
	legacy := []llms.ChatMessage{
		h("h1"), a("a1"), h("add 2 and 3"),
		llms.AIChatMessage{FunctionCall: &llms.FunctionCall{Name: "add", Arguments: `{"a":2,"b":3}`}},
		llms.FunctionChatMessage{Name: "add", Content: "5"},
		a("5"),
	}
	endsInGroup := []llms.ChatMessage{h("h1"), a("a1"), h("h2"), call, rnToolResult("c1"), rnToolResult("c2")}
	for _, tc := range []struct {
		name string
		conv []llms.ChatMessage
		n    int
		want []llms.ChatMessage
	}{
		{"boundary inside the group: group dropped, window shorter than n", conv, 3, conv[6:]},
		{"boundary inside the group by one", conv, 2, conv[6:]},
		{"group fits exactly", conv, 4, conv[3:]},
		{"group fits with room to spare", conv, 5, conv[2:]},
		{"whole conversation", conv, 7, conv},
		{"legacy function call: boundary inside", legacy, 2, legacy[5:]},
		{"legacy function call: fits", legacy, 3, legacy[3:]},
		{"group is newest and does not fit: empty window", endsInGroup, 2, []llms.ChatMessage{}},
		{"group is newest and fits", endsInGroup, 3, endsInGroup[3:]},
		{"group is newest, room for one more", endsInGroup, 4, endsInGroup[2:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, err := memories.NewRecentN(tc.n, memories.WithReturnMessages(true))
			require.NoError(t, err)
			for _, msg := range tc.conv {
				require.NoError(t, m.AddMessage(ctx, msg))
				assertNoSplitGroup(t, ctLoadMessages(t, m, ctx))
			}
			got := ctLoadMessages(t, m, ctx)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), tc.n)
			assertNoSplitGroup(t, got)
		})
	}
}

// An agent adds the AI message that calls tools and then each tool result
// with its own AddMessage, and every AddMessage may trim the store. After a
// long conversation a group that has grown too big for the window must still
// be dropped whole, not have its call trimmed away and its later results
// shown on their own.
func TestRecentN_ToolCallGroupGrowingOneResultAtATime(t *testing.T) {
	// Saves trim in batches, so try every phase of the batch cycle.
	for history := range 25 {
		t.Run(fmt.Sprintf("%d earlier turns", history), func(t *testing.T) {
			ctx := context.Background()
			st := store.NewInMemory()
			m, err := memories.NewRecentN(3, memories.WithReturnMessages(true), memories.WithStore(st))
			require.NoError(t, err)
			rnSave(t, m, ctx, 0, history)

			ids := []string{"c1", "c2", "c3", "c4"}
			require.NoError(t, m.AddMessage(ctx, rnToolCall("", ids...)))
			for i, id := range ids {
				require.NoError(t, m.AddMessage(ctx, rnToolResult(id)))
				got := ctLoadMessages(t, m, ctx)
				assertNoSplitGroup(t, got)
				if i+2 > 3 { // call + results no longer fit in n=3
					assert.Empty(t, got, "after result %d the group is too big and must be dropped whole", i+1)
				}
			}
			require.NoError(t, m.AddMessage(ctx, llms.AIChatMessage{Content: "done"}))
			got := ctLoadMessages(t, m, ctx)
			assertNoSplitGroup(t, got)
			assert.Equal(t, []llms.ChatMessage{llms.AIChatMessage{Content: "done"}}, got)
		})
	}
}

func TestRecentN_RetentionTrimsItsStore(t *testing.T) {
	const n, turns = 5, 1000
	ctx := ctIDCtx(memstack.Identity{Tenant: "t", User: "u"})
	id, _ := memstack.IdentityFrom(ctx)
	st := store.NewInMemory()
	m, err := memories.NewRecentN(n, memories.WithStore(st), memories.WithRetention(memories.KeepLast(n)))
	require.NoError(t, err)
	systems := []llms.ChatMessage{llms.SystemChatMessage{Content: "prompt at start"}, llms.SystemChatMessage{Content: "prompt at turn 500"}}

	require.NoError(t, m.AddMessage(ctx, systems[0]))
	sysCount := 1
	maxStored := 0
	for i := range turns {
		if i == 500 {
			require.NoError(t, m.AddMessage(ctx, systems[1]))
			sysCount++
		}
		rnSave(t, m, ctx, i, i+1)
		stat, err := st.Stat(context.Background(), id)
		require.NoError(t, err)
		maxStored = max(maxStored, stat.Count)
		require.LessOrEqual(t, stat.Count, n+2*16+sysCount, "after turn %d", i)
	}
	t.Logf("at most %d messages stored at once", maxStored)

	stored := ctStored(t, st, id)
	assert.Equal(t, systems, stored[:2], "system messages are never trimmed")
	assert.LessOrEqual(t, len(stored), n+2*16+len(systems))
	want := append(append([]llms.ChatMessage{}, systems...), lastN(rnTurns(0, turns), n)...)
	assert.Equal(t, ctRender(t, want, "Human", "AI"), ctLoadString(t, m, ctx))
}
