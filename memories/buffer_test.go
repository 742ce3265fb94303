package memories_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
)

func TestBuffer_FullTranscriptAfterManyTurns(t *testing.T) {
	ctx := ctIDCtx(memstack.Identity{Tenant: "t", User: "u"})
	b := mustBuffer()
	msgsMode := mustBuffer(memories.WithReturnMessages(true))
	lc := memory.NewConversationBuffer()

	want := []llms.ChatMessage{llms.SystemChatMessage{Content: "Be brief."}}
	require.NoError(t, b.AddMessage(ctx, want[0]))
	require.NoError(t, msgsMode.AddMessage(ctx, want[0]))
	require.NoError(t, lc.ChatHistory.AddMessage(ctx, want[0]))
	for i := range 300 {
		in := map[string]any{"input": fmt.Sprintf("question number %d", i)}
		out := map[string]any{"text": fmt.Sprintf("answer number %d", i)}
		require.NoError(t, b.SaveContext(ctx, in, out))
		require.NoError(t, msgsMode.SaveContext(ctx, in, out))
		require.NoError(t, lc.SaveContext(ctx, in, out))
		want = append(want, llms.HumanChatMessage{Content: in["input"].(string)}, llms.AIChatMessage{Content: out["text"].(string)})
		if i%37 == 0 { // load now and then, so that rendering is incremental
			assert.Equal(t, ctRender(t, want, "Human", "AI"), ctLoadString(t, b, ctx))
		}
	}
	got := ctLoadString(t, b, ctx)
	assert.Equal(t, ctRender(t, want, "Human", "AI"), got)
	lcVars, err := lc.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, lcVars["history"], got, "same transcript as langchaingo's ConversationBuffer")
	assert.Equal(t, want, ctLoadMessages(t, msgsMode, ctx))
}

// TestBuffer_IncrementalRenderingFollowsTheStore drives a shared store
// through every kind of change and checks after each step that the Buffer's
// (cached, incremental) rendering is exactly llms.GetBufferString of what the
// store holds.
func TestBuffer_IncrementalRenderingFollowsTheStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []memories.BufferOption
	}{
		{"default cache", nil},
		{"cache off", []memories.BufferOption{memories.WithCacheSize(0)}},
		{"cache of one identity", []memories.BufferOption{memories.WithCacheSize(1)}},
		{"custom prefixes", []memories.BufferOption{memories.WithHumanPrefix("U"), memories.WithAIPrefix("B")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hp, ap := "Human", "AI"
			if tc.name == "custom prefixes" {
				hp, ap = "U", "B"
			}
			bg := context.Background()
			st := store.NewInMemory()
			id := memstack.Identity{Tenant: "t", User: "u", Conversation: "main"}
			other := memstack.Identity{Tenant: "t", User: "u", Conversation: "other"}
			ctx, otherCtx := ctIDCtx(id), ctIDCtx(other)
			b1 := mustBuffer(append([]memories.BufferOption{memories.WithStore(st)}, tc.opts...)...)
			b2 := mustBuffer(append([]memories.BufferOption{memories.WithStore(st)}, tc.opts...)...)

			step := 0
			check := func(what string) {
				t.Helper()
				step++
				want := ctRender(t, ctStored(t, st, id), hp, ap)
				assert.Equal(t, want, ctLoadString(t, b1, ctx), "step %d (%s): b1", step, what)
				assert.Equal(t, want, ctLoadString(t, b2, ctx), "step %d (%s): b2", step, what)
				// Touch another identity between loads, so that a one-entry
				// cache is evicted and refilled.
				assert.Equal(t, ctRender(t, ctStored(t, st, other), hp, ap), ctLoadString(t, b1, otherCtx))
			}
			seqs := func() []int64 {
				recs, err := st.All(bg, id)
				require.NoError(t, err)
				out := make([]int64, len(recs))
				for i, r := range recs {
					out[i] = r.Seq
				}
				return out
			}

			check("empty")
			for i := range 3 {
				ctSaveTurn(t, b1, ctx, fmt.Sprintf("old q%d", i), fmt.Sprintf("old a%d", i))
				check("append")
			}
			ctSaveTurn(t, b1, otherCtx, "other q", "other a")
			check("append to another identity")

			before := ctLoadString(t, b1, ctx)
			require.NoError(t, b1.Clear(ctx))
			check("clear")
			for i := range 3 {
				ctSaveTurn(t, b1, ctx, fmt.Sprintf("new q%d", i), fmt.Sprintf("new a%d", i))
			}
			check("re-add the same number of messages after Clear")
			after := ctLoadString(t, b1, ctx)
			assert.NotEqual(t, before, after)
			assert.Contains(t, after, "new q0")
			assert.NotContains(t, after, "old q")

			// Clear through the other Buffer (b1's cache is not told) and
			// re-add as many messages again.
			require.NoError(t, b2.Clear(ctx))
			for i := range 3 {
				ctSaveTurn(t, b2, ctx, fmt.Sprintf("b2 q%d", i), fmt.Sprintf("b2 a%d", i))
			}
			check("cleared and refilled through another Buffer")
			assert.NotContains(t, ctLoadString(t, b1, ctx), "new q")

			require.NoError(t, b2.AddMessage(ctx, llms.SystemChatMessage{Content: "system from b2"}))
			ctSaveTurn(t, b2, ctx, "b2 more", "b2 more answer")
			check("another Buffer appends")
			ctSaveTurn(t, b1, ctx, "b1 again", "b1 again answer")
			check("b1 appends after b2")

			// Remove a prefix directly on the shared store.
			s := seqs()
			n, err := st.RemovePrefix(bg, id, s[3])
			require.NoError(t, err)
			require.Equal(t, 4, n)
			check("RemovePrefix on the store")

			// Remove as many as are then appended: the count is unchanged.
			s = seqs()
			n, err = st.RemovePrefix(bg, id, s[1])
			require.NoError(t, err)
			require.Equal(t, 2, n)
			require.NoError(t, st.Append(bg, id, llms.HumanChatMessage{Content: "same count q"}, llms.AIChatMessage{Content: "same count a"}))
			check("RemovePrefix then append as many")

			// Put a system message first (it survives RemovePrefix, so the
			// first Seq does not change), then remove and append more than
			// was removed.
			require.NoError(t, st.Clear(bg, id))
			require.NoError(t, st.Append(bg, id, llms.SystemChatMessage{Content: "pinned"}))
			for i := range 3 {
				require.NoError(t, st.Append(bg, id, llms.HumanChatMessage{Content: fmt.Sprintf("p%d", i)}, llms.AIChatMessage{Content: fmt.Sprintf("r%d", i)}))
			}
			check("store cleared and refilled directly")
			s = seqs()
			_, err = st.RemovePrefix(bg, id, s[2])
			require.NoError(t, err)
			for i := range 3 {
				require.NoError(t, st.Append(bg, id, llms.HumanChatMessage{Content: fmt.Sprintf("x%d", i)}, llms.AIChatMessage{Content: fmt.Sprintf("y%d", i)}))
			}
			check("RemovePrefix behind a pinned system message, then more appends")

			// The whole store cleared directly, same count re-added.
			n0 := len(seqs())
			require.NoError(t, st.Clear(bg, id))
			for i := 0; i < n0; i++ {
				require.NoError(t, st.Append(bg, id, llms.HumanChatMessage{Content: fmt.Sprintf("fresh %d", i)}))
			}
			check("store cleared directly, same count re-added")
			assert.NotContains(t, ctLoadString(t, b1, ctx), "pinned")
		})
	}
}

func TestBuffer_RendersEveryMessageTypeLikeGetBufferString(t *testing.T) {
	msgs := []llms.ChatMessage{
		llms.SystemChatMessage{Content: "You are a helpful assistant."},
		llms.HumanChatMessage{Content: "Add 2 and 3, then look up Paris."},
		llms.AIChatMessage{Content: "", FunctionCall: &llms.FunctionCall{Name: "add", Arguments: `{"a":2,"b":3}`}},
		llms.FunctionChatMessage{Name: "add", Content: "5"},
		llms.AIChatMessage{Content: "calling", ToolCalls: []llms.ToolCall{
			{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{"q":"Paris"}`}},
			{ID: "c2", Type: "function", FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{"q":"France"}`}},
		}},
		llms.ToolChatMessage{ID: "c1", Content: "capital of France"},
		llms.ToolChatMessage{ID: "c2", Content: "a country"},
		llms.GenericChatMessage{Role: "critic", Name: "reviewer", Content: "looks fine"},
		llms.AIChatMessage{Content: "5; Paris is the capital of France.\nSecond line."},
		llms.HumanChatMessage{Content: "unicode ✓ and \"quotes\""},
	}
	for _, tc := range []struct{ name, hp, ap string }{
		{"default prefixes", "Human", "AI"},
		{"custom prefixes", "Customer", "Agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			b := mustBuffer(memories.WithHumanPrefix(tc.hp), memories.WithAIPrefix(tc.ap))
			for i, m := range msgs {
				require.NoError(t, b.AddMessage(ctx, m))
				assert.Equal(t, ctRender(t, msgs[:i+1], tc.hp, tc.ap), ctLoadString(t, b, ctx), "after %d messages", i+1)
			}
			got := ctLoadString(t, b, ctx)
			fc, err := json.Marshal(msgs[2].(llms.AIChatMessage).FunctionCall)
			require.NoError(t, err)
			assert.Contains(t, got, tc.ap+": "+" "+string(fc), "a function call is rendered as JSON")
			assert.Contains(t, got, "system: You are a helpful assistant.")
			assert.Contains(t, got, "tool: capital of France")
			assert.Contains(t, got, "function: 5")
			assert.Contains(t, got, "critic: looks fine")
		})
	}
}

func TestBuffer_HistoryChangedBehindItsBack(t *testing.T) {
	id := memstack.Identity{User: "u"}
	ctx := ctIDCtx(id)
	h := memory.NewChatMessageHistory()
	st, err := store.FromHistory(h, id)
	require.NoError(t, err)
	b := mustBuffer(memories.WithStore(st))
	ctSaveTurn(t, b, ctx, "q1", "a1")
	assert.Equal(t, "Human: q1\nAI: a1", ctLoadString(t, b, ctx))

	// Another writer adds to the langchaingo history directly.
	require.NoError(t, h.AddUserMessage(ctx, "written elsewhere"))
	assert.Equal(t, "Human: q1\nAI: a1\nHuman: written elsewhere", ctLoadString(t, b, ctx))

	require.NoError(t, h.SetMessages(ctx, []llms.ChatMessage{llms.AIChatMessage{Content: "replaced"}}))
	assert.Equal(t, "AI: replaced", ctLoadString(t, b, ctx))

	ctSaveTurn(t, b, ctx, "q2", "a2")
	msgs, err := h.Messages(ctx)
	require.NoError(t, err)
	assert.Equal(t, ctRender(t, msgs, "Human", "AI"), ctLoadString(t, b, ctx))
	assert.Equal(t, "AI: replaced\nHuman: q2\nAI: a2", ctLoadString(t, b, ctx))
}

func TestBuffer_ManyIdentitiesWithSmallCache(t *testing.T) {
	b := mustBuffer(memories.WithCacheSize(2))
	want := map[int][]llms.ChatMessage{}
	for round := range 5 {
		for u := range 7 {
			ctx := ctIDCtx(memstack.Identity{User: fmt.Sprintf("user-%d", u)})
			h, a := fmt.Sprintf("u%d r%d", u, round), fmt.Sprintf("ok %d %d", u, round)
			ctSaveTurn(t, b, ctx, h, a)
			want[u] = append(want[u], llms.HumanChatMessage{Content: h}, llms.AIChatMessage{Content: a})
			assert.Equal(t, ctRender(t, want[u], "Human", "AI"), ctLoadString(t, b, ctx))
		}
	}
}
