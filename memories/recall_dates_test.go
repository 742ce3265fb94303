package memories_test

import (
	"context"
	"strings"
	"testing"
	"time"

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
	"github.com/memstack/memstack/tokens"
)

// rdSave saves turns, turn i at days[i] (a zero time: now).
func rdSave(t *testing.T, m schema.Memory, turns [][2]string, days []time.Time) {
	t.Helper()
	for i, tt := range turns {
		ctx := context.Background()
		if !days[i].IsZero() {
			ctx = memstack.WithTime(ctx, days[i])
		}
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": tt[0]}, map[string]any{"output": tt[1]}))
	}
}

var rdTurns = [][2]string{
	{"We booked the cabin by the lake.", "Lovely, the lake cabin it is."},
	{"The cabin has a sauna.", "A sauna at the cabin, great."},
	{"Any plans for the weekend?", "Painting the fence."},
	{"The cabin key is under the mat.", "Noted: the cabin key."},
}

func TestRecall_ShowsTheDateOfEachRun(t *testing.T) {
	may8 := time.Date(2023, time.May, 8, 13, 56, 0, 0, time.UTC)
	days := []time.Time{may8, may8.Add(time.Minute), may8.AddDate(0, 0, 1), may8.AddDate(0, 0, 3)}
	line := func(i int) string { return "Human: " + rdTurns[i][0] + "\nAI: " + rdTurns[i][1] }

	t.Run("runs, days and separators", func(t *testing.T) {
		m, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(3), memories.WithContextWeight(0))
		require.NoError(t, err)
		rdSave(t, m, rdTurns, days)
		got := rcAsk(t, m, context.Background(), "cabin")
		// Exchanges 0 and 1 are one run on 8 May; 3 is a run of its own on
		// 11 May.
		assert.Equal(t, "[8 May 2023]\n"+line(0)+"\n"+line(1)+"\n\n[11 May 2023]\n"+line(3), got)
	})
	t.Run("a run that crosses into another day shows the new date", func(t *testing.T) {
		m, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(1), memories.WithNeighbours(1), memories.WithContextWeight(0))
		require.NoError(t, err)
		rdSave(t, m, rdTurns, days)
		got := rcAsk(t, m, context.Background(), "sauna")
		assert.Equal(t, "[8 May 2023]\n"+line(0)+"\n"+line(1)+"\n[9 May 2023]\n"+line(2), got)
	})
	t.Run("the date in the stored time's own zone", func(t *testing.T) {
		m, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(1), memories.WithContextWeight(0))
		require.NoError(t, err)
		late := time.Date(2023, time.May, 8, 23, 30, 0, 0, time.FixedZone("UTC-5", -5*3600)) // 9 May in UTC
		rdSave(t, m, rdTurns[:1], []time.Time{late})
		assert.True(t, strings.HasPrefix(rcAsk(t, m, context.Background(), "lake"), "[8 May 2023]\n"))
	})
	t.Run("undated exchanges show no date", func(t *testing.T) {
		st, err := store.FromHistory(memory.NewChatMessageHistory(), memstack.Identity{}) // a langchaingo history keeps no times
		require.NoError(t, err)
		m, err := memories.NewRecall(memories.WithStore(st), memories.WithK(1), memories.WithContextWeight(0))
		require.NoError(t, err)
		rdSave(t, m, rdTurns[:1], days[:1])
		assert.Equal(t, line(0), rcAsk(t, m, context.Background(), "lake"))
	})
	t.Run("WithRecallDates(false)", func(t *testing.T) {
		m, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(1), memories.WithContextWeight(0), memories.WithRecallDates(false))
		require.NoError(t, err)
		rdSave(t, m, rdTurns, days)
		assert.Equal(t, line(1), rcAsk(t, m, context.Background(), "sauna"))
	})
	t.Run("messages mode returns the messages unchanged", func(t *testing.T) {
		m, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(1), memories.WithContextWeight(0), memories.WithReturnMessages(true))
		require.NoError(t, err)
		rdSave(t, m, rdTurns, days)
		vars, err := m.LoadMemoryVariables(context.Background(), map[string]any{"input": "sauna"})
		require.NoError(t, err)
		assert.Equal(t, []llms.ChatMessage{
			llms.HumanChatMessage{Content: rdTurns[1][0]}, llms.AIChatMessage{Content: rdTurns[1][1]},
		}, vars["relevant_history"])
	})
	t.Run("reports and items carry the exchange's time", func(t *testing.T) {
		m, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(1), memories.WithContextWeight(0))
		require.NoError(t, err)
		rdSave(t, m, rdTurns, days)
		rec := observe.NewRecorder(observe.OpLoad, "recall", "x")
		rcAsk(t, m, observe.WithRecorder(context.Background(), rec), "sauna")
		r := rec.Finish(0, nil)
		require.Len(t, r.Injected, 1)
		assert.True(t, r.Injected[0].Time.Equal(days[1]), "injected at %v", r.Injected[0].Time)
		items, err := m.LoadItems(context.Background(), map[string]any{"input": "sauna"})
		require.NoError(t, err)
		require.NotEmpty(t, items.List)
		for _, it := range items.List {
			assert.False(t, it.Time.IsZero(), "item %s", it.ID)
		}
	})
}

func TestRecall_DatedQuestions(t *testing.T) {
	base := time.Date(2023, time.June, 1, 10, 0, 0, 0, time.UTC)
	turns := [][2]string{
		{"The cabin key is under the mat.", "Noted."},
		{"I adopted a puppy today!", "Congratulations!"},
		{"We repainted the cabin.", "Nice colour."},
		{"The cabin sauna is fixed.", "Great."},
	}
	days := []time.Time{base, base.AddDate(0, 0, 2), base.AddDate(0, 1, 0), base.AddDate(0, 1, 5)}
	newRecall := func(opts ...memories.RecallOption) *memories.Recall {
		m, err := memories.NewRecall(append([]memories.RecallOption{memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(1), memories.WithContextWeight(0)}, opts...)...)
		require.NoError(t, err)
		rdSave(t, m, turns, days)
		return m
	}
	ctx := context.Background()

	t.Run("a day finds that day's exchange with no word in common", func(t *testing.T) {
		got := rcAsk(t, newRecall(), ctx, "What happened on 3 June 2023?")
		assert.Contains(t, got, "puppy")
		assert.True(t, strings.HasPrefix(got, "[3 June 2023]\n"), got)
	})
	t.Run("the day outranks a better lexical match on another day", func(t *testing.T) {
		got := rcAsk(t, newRecall(), ctx, "What did we do to the cabin on July 1, 2023?")
		assert.Contains(t, got, "repainted", "1 July's cabin exchange, not 1 June's or 6 July's")
	})
	t.Run("a month favours that month", func(t *testing.T) {
		got := rcAsk(t, newRecall(), ctx, "What was said about the cabin in July 2023?")
		assert.NotContains(t, got, "key", "June's cabin exchange loses to July's")
	})
	t.Run("the date's words are not searched", func(t *testing.T) {
		// "June" is a word of no exchange, but "2023"... neither: without
		// the date there is nothing left to search, and only the day counts.
		got := rcAsk(t, newRecall(), ctx, "6 July 2023")
		assert.Contains(t, got, "sauna")
	})
	t.Run("WithQueryDates(false) searches the words only", func(t *testing.T) {
		got := rcAsk(t, newRecall(memories.WithQueryDates(false)), ctx, "What happened on 3 June 2023?")
		assert.NotContains(t, got, "puppy")
	})
}

func TestRecall_ContextWeight(t *testing.T) {
	// The answer ("Two engineers...") shares no word with the question;
	// the exchange before it does.
	turns := [][2]string{
		{"Weather looks fine.", "Sunny."},
		{"What about hiring for the platform team?", "Still open."},
		{"Any update?", "Two engineers start Monday."},
		{"Lunch?", "Pasta."},
	}
	days := make([]time.Time, len(turns))
	for _, ctxWeight := range []float64{-1, 0} {
		opts := []memories.RecallOption{memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(3), memories.WithNeighbourShare(0), memories.WithRecallDates(false)}
		if ctxWeight >= 0 {
			opts = append(opts, memories.WithContextWeight(ctxWeight))
		}
		m, err := memories.NewRecall(opts...)
		require.NoError(t, err)
		rdSave(t, m, turns, days)
		items, err := m.LoadItems(context.Background(), map[string]any{"input": "hiring platform team"})
		require.NoError(t, err)
		var found []string
		for _, it := range items.List {
			found = append(found, it.Text)
		}
		joined := strings.Join(found, "\n")
		if ctxWeight < 0 {
			assert.Contains(t, joined, "Two engineers", "by default the exchange after a match is indexed with its words")
		} else {
			assert.NotContains(t, joined, "Two engineers", "WithContextWeight(0) indexes each exchange alone")
		}
	}
	for _, w := range []float64{-0.1, 1.5} {
		_, err := memories.NewRecall(memories.WithContextWeight(w))
		require.ErrorIs(t, err, memories.ErrInvalidOption)
		assert.Contains(t, err.Error(), "WithContextWeight")
	}
	for _, x := range []float64{-0.1, 1} {
		_, err := memories.NewRecall(memories.WithNeighbourShare(x))
		require.ErrorIs(t, err, memories.ErrInvalidOption)
		assert.Contains(t, err.Error(), "WithNeighbourShare")
	}
}

// TestRecall_FillsTheBudget: the README's stack, RecentN(6) + a default
// Recall under a budget, uses the room the window leaves — more than the
// three exchanges an unbudgeted Recall shows — and never exceeds it.
func TestRecall_FillsTheBudget(t *testing.T) {
	ctx := context.Background()
	counter, err := tokens.CL100K()
	require.NoError(t, err)
	recent, err := memories.NewRecentN(6)
	require.NoError(t, err)
	recall, err := memories.NewRecall()
	require.NoError(t, err)
	totals := map[int]int{}
	for _, budget := range []int{300, 1000, 3000} {
		mem, err := combined.New([]schema.Memory{recent, recall}, combined.WithTokenBudget(budget))
		require.NoError(t, err)
		if budget == 300 {
			for i := 0; i < 200; i++ {
				in, out := rbTurn(i)
				require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}))
			}
		}
		q, _ := rbTurn(7)
		vars, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": q})
		require.NoError(t, err)
		total := 0
		for _, v := range vars {
			total += counter.CountTokens(v.(string))
		}
		assert.LessOrEqual(t, total, budget)
		totals[budget] = total
		if budget <= 1000 {
			assert.Greater(t, total, budget*9/10, "budget %d: the room is used", budget)
		} else {
			// Up to DefaultRecallBudgetK hits and their neighbours.
			assert.Greater(t, total, totals[1000], "budget %d: a larger budget shows more", budget)
		}
		unbudgeted, err := recall.LoadMemoryVariables(ctx, map[string]any{"input": q})
		require.NoError(t, err)
		small := 2 * memories.DefaultRecallK
		assert.LessOrEqual(t, rdMessages(unbudgeted["relevant_history"].(string)), small, "unbudgeted: k turns and their partners")
		if budget >= 1000 {
			assert.Greater(t, rdMessages(vars["relevant_history"].(string)), small, "budget %d: more than k turns and their partners", budget)
		}
	}
}

// rdMessages counts the rendered messages of a Recall's string.
func rdMessages(s string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "Human: ") || strings.HasPrefix(line, "AI: ") {
			n++
		}
	}
	return n
}

// Dated questions find their units through a day index kept as turns
// are saved: a turn cleared or forgotten since is never shown for its
// day, and turns saved on that day afterwards are, in a conversation and
// across a user's conversations.
func TestRecall_DatedQuestionsAfterClearAndForget(t *testing.T) {
	day := time.Date(2023, time.June, 3, 10, 0, 0, 0, time.UTC)
	at := memstack.WithTime(context.Background(), day)
	save := func(m *memories.Recall, id memstack.Identity, in, out string) {
		t.Helper()
		ctx := memstack.WithIdentity(at, id)
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}))
	}
	ana := func(conv string) memstack.Identity {
		return memstack.Identity{Tenant: "acme", User: "ana", Conversation: conv}
	}
	t.Run("a conversation cleared, then saved to on the same day", func(t *testing.T) {
		s := store.NewInMemory()
		m, err := memories.NewRecall(memories.WithStore(s), memories.WithRecallUnit(memories.RecallExchanges),
			memories.WithRecallScope(memories.RecallScopeConversation))
		require.NoError(t, err)
		save(m, ana("c"), "I adopted a puppy today!", "Congratulations!")
		require.Contains(t, rcAsk(t, m, ctIDCtx(ana("c")), "What happened on 3 June 2023?"), "puppy")
		require.NoError(t, m.Clear(ctIDCtx(ana("c"))))
		save(m, ana("c"), "We repainted the fence.", "Nice colour.")
		got := rcAsk(t, m, ctIDCtx(ana("c")), "What happened on 3 June 2023?")
		assert.Contains(t, got, "fence")
		assert.NotContains(t, got, "puppy", "the cleared turn")
	})
	t.Run("a user's conversation forgotten", func(t *testing.T) {
		s := store.NewInMemory()
		m, err := memories.NewRecall(memories.WithStore(s), memories.WithRecallUnit(memories.RecallExchanges), memories.WithK(3))
		require.NoError(t, err)
		save(m, ana("old"), "I adopted a puppy today!", "Congratulations!")
		save(m, ana("other"), "We repainted the fence.", "Nice colour.")
		require.Contains(t, rcAsk(t, m, ctIDCtx(ana("new")), "What happened on 3 June 2023?"), "puppy")
		require.NoError(t, s.Forget(context.Background(), ana("old")))
		got := rcAsk(t, m, ctIDCtx(ana("new")), "What happened on 3 June 2023?")
		assert.Contains(t, got, "fence")
		assert.NotContains(t, got, "puppy", "the forgotten conversation's turn")
	})
}
