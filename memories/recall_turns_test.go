package memories_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
)

// TestRecall_TurnUnits: by default a Recall's unit is a turn — a human
// message, or an AI message with the tool results that answer its calls —
// and an unbudgeted load shows each turn it finds with its partner.
func TestRecall_TurnUnits(t *testing.T) {
	ctx := context.Background()
	st := store.NewInMemory()
	m, err := memories.NewRecall(memories.WithStore(st), memories.WithK(1), memories.WithContextWeight(0), memories.WithRecallDates(false))
	require.NoError(t, err)
	call := llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: `{"city":"Porto"}`}}}}
	for _, msg := range []llms.ChatMessage{
		llms.SystemChatMessage{Content: "You are terse."},
		llms.HumanChatMessage{Content: "Is it raining in Porto?"},
		call,
		llms.ToolChatMessage{ID: "c1", Content: "drizzle, 14 degrees"},
		llms.AIChatMessage{Content: "A light drizzle."},
		llms.HumanChatMessage{Content: "Book the cabin for Friday."},
		llms.AIChatMessage{Content: "Booked: the cabin, Friday."},
	} {
		require.NoError(t, m.AddMessage(ctx, msg))
	}
	recs, err := st.All(ctx, memstack.Identity{})
	require.NoError(t, err)
	seq := func(i int) string { return fmt.Sprint(recs[i].Seq) }

	load := func(q string) (string, observe.Report) {
		rec := observe.NewRecorder(observe.OpLoad, "recall", "x")
		got := rcAsk(t, m, observe.WithRecorder(ctx, rec), q)
		return got, rec.Finish(0, nil)
	}

	// A hit on a human turn brings the AI turn that answers it.
	got, r := load("cabin Friday book")
	assert.Equal(t, "Human: Book the cabin for Friday.\nAI: Booked: the cabin, Friday.", got)
	require.NotEmpty(t, r.Injected)
	for _, it := range r.Injected {
		assert.Equal(t, "turn", it.Kind)
	}

	// The tool call and its result are one turn, never split; a hit on it
	// brings the human turn it answers.
	got, _ = load("drizzle degrees")
	assert.Equal(t, "Human: Is it raining in Porto?\nAI: \ntool: drizzle, 14 degrees", got)

	// A hit on an AI turn brings the turn it answers: here the tool call
	// whose result it reads.
	got, r = load("light drizzle")
	assert.Equal(t, "AI: \ntool: drizzle, 14 degrees\nAI: A light drizzle.", got)
	ids := map[string]bool{}
	for _, it := range r.Injected {
		ids[it.ID] = true
	}
	assert.True(t, ids[seq(4)], "the AI answer is a turn of its own (Seq %s): %v", seq(4), r.Injected)

	// Exchange units keep the old shape: the human message and all after it.
	ex, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(1), memories.WithContextWeight(0), memories.WithRecallDates(false))
	require.NoError(t, err)
	assert.Equal(t, "Human: Is it raining in Porto?\nAI: \ntool: drizzle, 14 degrees\nAI: A light drizzle.", rcAsk(t, ex, ctx, "light drizzle"))

	_, err = memories.NewRecall(memories.WithRecallUnit(memories.RecallUnit(7)))
	require.ErrorIs(t, err, memories.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithRecallUnit(7)")
}

// TestRecall_IncrementalContextEqualsRebuild: saving turn by turn gives
// every indexed turn the words of the turns after it (retrieval's
// AddContext), so a Recall that indexed incrementally ranks exactly as one
// that rebuilds its index from the store after a restart.
func TestRecall_IncrementalContextEqualsRebuild(t *testing.T) {
	ctx := context.Background()
	st := store.NewInMemory()
	live, err := memories.NewRecall(memories.WithStore(st), memories.WithK(8), memories.WithRecallDates(false))
	require.NoError(t, err)
	for i := 0; i < 40; i++ {
		in, out := rbTurn(i)
		if i%7 == 3 {
			// An AddMessage-built turn, and a turn with an empty answer.
			require.NoError(t, live.AddMessage(ctx, llms.HumanChatMessage{Content: in}))
			require.NoError(t, live.AddMessage(ctx, llms.AIChatMessage{Content: out}))
			continue
		}
		if i%11 == 5 {
			out = ""
		}
		require.NoError(t, live.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}))
	}
	restarted, err := memories.NewRecall(memories.WithStore(st), memories.WithK(8), memories.WithRecallDates(false))
	require.NoError(t, err)
	hits := func(m *memories.Recall, q string) []observe.Item {
		rec := observe.NewRecorder(observe.OpLoad, "recall", "x")
		rcAsk(t, m, observe.WithRecorder(ctx, rec), q)
		r := rec.Finish(0, nil)
		return append(r.Injected, r.Dropped...)
	}
	for i := 0; i < 40; i += 3 {
		q, _ := rbTurn(i)
		a, b := hits(live, q), hits(restarted, q)
		require.Equal(t, len(b), len(a), q)
		for j := range a {
			assert.Equal(t, b[j].ID, a[j].ID, "%s: item %d", q, j)
			assert.InDelta(t, b[j].Score, a[j].Score, 1e-9, "%s: item %d", q, j)
		}
	}
}

// TestRecall_DuplicateHits: the same words said again are shown once —
// the best-ranked copy (BM25 ties: the newest) — and the others are
// reported as duplicates.
func TestRecall_DuplicateHits(t *testing.T) {
	ctx := context.Background()
	m, err := memories.NewRecall(memories.WithK(3), memories.WithContextWeight(0), memories.WithRecallDates(false), memories.WithNeighbours(0))
	require.NoError(t, err)
	for _, tt := range [][2]string{
		{"The wifi password is lighthouse.", "Noted."},
		{"Lunch?", "Pasta."},
		{"the wifi  password is LIGHTHOUSE.", "Noted again."},
		{"What about the wifi router?", "It is in the attic."},
	} {
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": tt[0]}, map[string]any{"output": tt[1]}))
	}
	rec := observe.NewRecorder(observe.OpLoad, "recall", "x")
	got := rcAsk(t, m, observe.WithRecorder(ctx, rec), "wifi password")
	assert.Equal(t, 1, strings.Count(strings.ToLower(got), "password is lighthouse"), got)
	assert.Contains(t, got, "wifi router", "the third hit takes the place the copy would have had")
	r := rec.Finish(0, nil)
	var dups int
	for _, it := range r.Dropped {
		if it.Reason == observe.ReasonDuplicate {
			dups++
		}
	}
	assert.Equal(t, 1, dups, "%v", r.Dropped)
}
