package memories_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

// tmAdder is a memory with AddMessage, as every memory here has.
type tmAdder interface {
	schema.Memory
	AddMessage(ctx context.Context, msg llms.ChatMessage) error
}

// tmMemories builds one memory of each type over st.
func tmMemories(t *testing.T) map[string]func(st store.Store) tmAdder {
	t.Helper()
	return map[string]func(st store.Store) tmAdder{
		"Buffer": func(st store.Store) tmAdder { return mustBuffer(memories.WithStore(st)) },
		"RecentN": func(st store.Store) tmAdder {
			m, err := memories.NewRecentN(4, memories.WithStore(st))
			require.NoError(t, err)
			return m
		},
		"TokenWindow": func(st store.Store) tmAdder {
			m, err := memories.NewTokenWindow(500, memories.WithStore(st))
			require.NoError(t, err)
			return m
		},
		"Summary": func(st store.Store) tmAdder {
			m, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(st))
			require.NoError(t, err)
			return m
		},
		"Facts": func(st store.Store) tmAdder { return fcNew(t, fcPatterns(t), memories.WithStore(st)) },
		"Recall": func(st store.Store) tmAdder {
			m, err := memories.NewRecall(memories.WithStore(st))
			require.NoError(t, err)
			return m
		},
	}
}

// tmSave saves a turn of m with a Recorder and returns the report.
func tmSave(t *testing.T, ctx context.Context, m schema.Memory, human, ai string) observe.Report {
	t.Helper()
	rec := observe.StartRecorder(observe.OpSave, "layer", "")
	err := m.SaveContext(observe.WithRecorder(ctx, rec), map[string]any{"input": human}, map[string]any{"output": ai})
	return rec.FinishNow(err)
}

func TestTime_SavesDateTheirMessagesAndReportIt(t *testing.T) {
	said := time.Date(2023, 5, 8, 20, 15, 0, 0, time.FixedZone("PDT", -7*3600))
	for name, build := range tmMemories(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := store.NewInMemory()
			m := build(st)

			// A replayed turn is dated with the caller's time, and the
			// save reports it.
			rep := tmSave(t, memstack.WithTime(ctx, said), m, "I live in Porto.", "Nice.")
			require.NoError(t, rep.Err)
			assert.Equal(t, said, rep.At, "Report.At is the time the messages were dated with")

			// AddMessage too.
			later := said.Add(time.Minute)
			rec := observe.StartRecorder(observe.OpAdd, "layer", "")
			require.NoError(t, m.AddMessage(observe.WithRecorder(memstack.WithTime(ctx, later), rec), llms.SystemChatMessage{Content: "Be brief."}))
			assert.Equal(t, later, rec.FinishNow(nil).At)

			// Without a time: now.
			before := time.Now().Round(0)
			rep = tmSave(t, ctx, m, "What now?", "Now is now.")
			require.NoError(t, rep.Err)
			assert.False(t, rep.At.Before(before) || rep.At.After(time.Now()), "dated now, got %v", rep.At)

			recs, err := st.All(ctx, memstack.Identity{})
			require.NoError(t, err)
			require.Len(t, recs, 5)
			assert.Equal(t, said, recs[0].Time, "the turn's human message")
			assert.Equal(t, said, recs[1].Time, "the turn's AI message: one time per save")
			assert.Equal(t, later, recs[2].Time)
			assert.True(t, recs[3].Time.Equal(rep.At), "the stored time is the reported one")
			assert.True(t, recs[4].Time.Equal(rep.At))

			// A save that stores nothing reports no time.
			rec = observe.StartRecorder(observe.OpSave, "layer", "")
			err = m.SaveContext(observe.WithRecorder(memstack.WithTime(ctx, said), rec), map[string]any{}, map[string]any{"output": "x"})
			require.Error(t, err)
			assert.True(t, rec.FinishNow(err).At.IsZero())

			// A time no store can keep fails the save, storing nothing.
			err = m.SaveContext(memstack.WithTime(ctx, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)),
				map[string]any{"input": "x"}, map[string]any{"output": "y"})
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			after, err := st.All(ctx, memstack.Identity{})
			require.NoError(t, err)
			assert.Len(t, after, 5)
		})
	}
}

func TestTime_ReportedItemsCarryStoredTimes(t *testing.T) {
	t1 := time.Date(2023, 5, 8, 10, 0, 0, 0, time.UTC)
	t2 := time.Date(2023, 5, 9, 11, 0, 0, 0, time.FixedZone("", 2*3600))
	for name, opts := range map[string][]memories.BufferOption{
		"cached string":   nil,
		"uncached string": {memories.WithCacheSize(0)},
		"messages":        {memories.WithReturnMessages(true)},
	} {
		t.Run("Buffer/"+name, func(t *testing.T) {
			ctx := context.Background()
			b := mustBuffer(opts...)
			ctSaveTurn(t, b, memstack.WithTime(ctx, t1), "one", "two")
			assert.Equal(t, []time.Time{t1, t1}, tmTimes(recorded(t, ctx, b).Injected))
			ctSaveTurn(t, b, memstack.WithTime(ctx, t2), "three", "four")
			assert.Equal(t, []time.Time{t1, t1, t2, t2}, tmTimes(recorded(t, ctx, b).Injected), "incremental rendering")
			assert.Equal(t, []time.Time{t1, t1, t2, t2}, tmTimes(recorded(t, ctx, b).Injected), "a cache hit")
		})
	}

	t.Run("windows", func(t *testing.T) {
		ctx := context.Background()
		r, err := memories.NewRecentN(2)
		require.NoError(t, err)
		tw, err := memories.NewTokenWindow(8)
		require.NoError(t, err)
		for _, m := range []schema.Memory{r, tw} {
			ctSaveTurn(t, m, memstack.WithTime(ctx, t1), "a", "b")
			ctSaveTurn(t, m, memstack.WithTime(ctx, t2), "c", "d")
			rep := recorded(t, ctx, m)
			assert.Equal(t, []time.Time{t2, t2}, tmTimes(rep.Injected), "%T: the window", m)
			assert.Equal(t, []time.Time{t1, t1}, tmTimes(rep.Dropped), "%T: outside the window", m)
		}
	})

	t.Run("Summary", func(t *testing.T) {
		ctx := context.Background()
		s, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithMaxMessages(2), memories.WithBatchSize(2))
		require.NoError(t, err)
		ctSaveTurn(t, s, memstack.WithTime(ctx, t1), "Hello there, how are you today?", "Very well, thank you.")
		ctSaveTurn(t, s, memstack.WithTime(ctx, t2), "Fine", "Good")
		rep := recorded(t, ctx, s)
		require.Len(t, rep.Injected, 3)
		assert.Equal(t, "summary", rep.Injected[0].Kind)
		assert.Equal(t, []time.Time{{}, t2, t2}, tmTimes(rep.Injected), "a summary has no time; its raw messages do")
	})

	t.Run("LoadItems", func(t *testing.T) {
		ctx := context.Background()
		b := mustBuffer()
		ctSaveTurn(t, b, memstack.WithTime(ctx, t1), "one", "two")
		items, err := b.LoadItems(ctx, nil)
		require.NoError(t, err)
		require.Len(t, items.List, 2)
		for _, it := range items.List {
			assert.Equal(t, t1, it.Time, "combined.Item carries the message's time")
		}
	})

	t.Run("under a combined budget", func(t *testing.T) {
		ctx := context.Background()
		r, err := memories.NewRecentN(10, memories.WithMemoryKey("recent"))
		require.NoError(t, err)
		var reports []observe.Report
		fits := cl100kCounter(t).CountTokens("Human: q\nAI: a") // the second turn only
		m, err := combined.New([]schema.Memory{r}, combined.WithTokenBudget(fits),
			combined.WithObserver(observe.SinkFunc(func(_ context.Context, rep observe.Report) { reports = append(reports, rep) })))
		require.NoError(t, err)
		require.NoError(t, m.SaveContext(memstack.WithTime(ctx, t1), map[string]any{"input": "first question here"}, map[string]any{"output": "first answer"}))
		require.NoError(t, m.SaveContext(memstack.WithTime(ctx, t2), map[string]any{"input": "q"}, map[string]any{"output": "a"}))
		require.Len(t, reports, 2)
		assert.Equal(t, t1, reports[0].At)
		assert.Equal(t, t2, reports[1].At)
		reports = nil
		_, err = m.LoadMemoryVariables(ctx, nil)
		require.NoError(t, err)
		require.Len(t, reports, 1)
		assert.Equal(t, []time.Time{t2, t2}, tmTimes(reports[0].Injected))
		require.NotEmpty(t, reports[0].Dropped)
		for _, d := range reports[0].Dropped {
			assert.Equal(t, observe.ReasonBudget, d.Reason)
			assert.Equal(t, t1, d.Time, "a message the budget dropped keeps its time")
		}
	})
}

func tmTimes(items []observe.Item) []time.Time {
	out := make([]time.Time, len(items))
	for i, it := range items {
		out[i] = it.Time
	}
	return out
}

// A history replayed under WithTime dates its facts when they were said.
func TestTime_FactsAreValidFromTheirMessagesTime(t *testing.T) {
	clock := fcNewClock() // 2026-11-30: never a date of the replayed facts
	ctx := context.Background()
	st := store.NewInMemory()
	m := fcNew(t, fcPatterns(t), memories.WithClock(clock.Now), memories.WithStore(st))
	history := []struct {
		at          time.Time
		human, ai   string
		wantSince   string
		description string
	}{
		{time.Date(2023, 5, 8, 10, 0, 0, 0, time.UTC), "Hi, I'm Ana and I live in Lisbon.", "Nice to meet you.", "2023-05-08", "UTC"},
		// 20:00 in UTC−7 is already the next day in UTC: the line shows the
		// caller's date.
		{time.Date(2023, 6, 1, 20, 0, 0, 0, time.FixedZone("PDT", -7*3600)), "I moved to Porto last month.", "Porto it is.", "2023-06-01", "west of UTC"},
	}
	for _, h := range history {
		fcSave(t, m, memstack.WithTime(ctx, h.at), h.human, h.ai)
	}
	assert.Equal(t, ""+
		"- user location: Porto (since 2023-06-01)\n"+
		"- user name: Ana (since 2023-05-08)",
		fcLoad(t, m, ctx))

	hist, err := m.History(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"user name=Ana", "user location=Lisbon", "user location=Porto"}, fcKeys(hist))
	assert.True(t, hist[0].ValidFrom.Equal(history[0].at))
	assert.True(t, hist[1].ValidFrom.Equal(history[0].at))
	assert.True(t, hist[1].ValidTo.Equal(history[1].at), "Lisbon ended when Porto was said")
	assert.True(t, hist[2].ValidFrom.Equal(history[1].at))
	_, off := hist[2].ValidFrom.Zone()
	assert.Equal(t, -7*3600, off, "the caller's offset is kept")
	assert.True(t, hist[2].ValidTo.IsZero())

	// A turn said without a time is dated by the clock, in UTC.
	fcSave(t, m, ctx, "I work as a pilot.", "Sounds fun.")
	cur, err := m.Current(ctx)
	require.NoError(t, err)
	require.Equal(t, "user job=pilot", fcKeys(cur)[0])
	assert.Equal(t, clock.Now(), cur[0].ValidFrom)
	recs, err := st.All(ctx, memstack.Identity{})
	require.NoError(t, err)
	assert.Equal(t, clock.Now(), recs[len(recs)-1].Time, "Facts dates the messages it saves with its clock")

	// Observe items carry the facts' times; so do combined items.
	rep := recorded(t, ctx, m)
	// (Facts are kept as JSON: the offset survives, the zone's name not.)
	// Equal RFC 3339 strings are the same instant with the same offset.
	want := []time.Time{clock.Now(), history[1].at, history[0].at}
	require.Len(t, rep.Injected, len(want))
	for i, it := range rep.Injected {
		assert.Equal(t, want[i].Format(time.RFC3339Nano), it.Time.Format(time.RFC3339Nano), "fact %s", it.ID)
	}
	items, err := m.LoadItems(ctx, nil)
	require.NoError(t, err)
	require.Len(t, items.List, 3)
	assert.Equal(t, history[1].at.Format(time.RFC3339Nano), items.List[1].Time.Format(time.RFC3339Nano))
	assert.Equal(t, history[0].at, items.List[2].Time)
}

// A fact is valid from the newest of the messages it came from; messages
// without a time (a langchaingo history keeps none) date it with the clock.
func TestTime_FactsFromSeveralOrUndatedMessages(t *testing.T) {
	// The extractor states three facts about a turn of two messages: one
	// from the human message, one from both, one naming no source (all).
	ext := extract.ExtractorFunc(func(_ context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
		if len(msgs) != 2 {
			return nil, nil
		}
		return []extract.Candidate{
			{Subject: "user", Attribute: "first", Value: "x", Sources: []int{0}},
			{Subject: "user", Attribute: "both", Value: "y", Sources: []int{1, 0}},
			{Subject: "user", Attribute: "all", Value: "z"},
		}, nil
	})
	byKey := func(fs []memories.Fact) map[string]memories.Fact {
		out := map[string]memories.Fact{}
		for _, f := range fs {
			out[f.Key] = f
		}
		return out
	}

	t.Run("dated messages", func(t *testing.T) {
		ctx := context.Background()
		clock := fcNewClock()
		st := store.NewInMemory()
		m := fcNew(t, ext, memories.WithStore(st), memories.WithClock(clock.Now))
		t1 := time.Date(2023, 5, 8, 9, 0, 0, 0, time.UTC)
		t2 := t1.Add(3 * time.Hour)
		// The human message was stored by another writer at t1; the answer
		// is added at t2, and the turn is extracted then.
		require.NoError(t, st.Append(memstack.WithTime(ctx, t1), memstack.Identity{}, llms.HumanChatMessage{Content: "q"}))
		require.NoError(t, m.AddMessage(memstack.WithTime(ctx, t2), llms.AIChatMessage{Content: "a"}))
		facts := byKey(mustCurrent(t, m, ctx))
		require.Len(t, facts, 3)
		assert.Equal(t, t1, facts["user first"].ValidFrom, "from the human message")
		assert.Equal(t, t2, facts["user both"].ValidFrom, "the newest of its sources")
		assert.Equal(t, t2, facts["user all"].ValidFrom, "no sources: the whole turn")
	})

	t.Run("undated messages", func(t *testing.T) {
		ctx := context.Background()
		clock := fcNewClock()
		id := memstack.Identity{}
		h, err := store.FromHistory(memory.NewChatMessageHistory(), id)
		require.NoError(t, err)
		m := fcNew(t, ext, memories.WithStore(h), memories.WithClock(clock.Now))
		fcSave(t, m, memstack.WithTime(ctx, time.Date(2023, 5, 8, 9, 0, 0, 0, time.UTC)), "q", "a")
		recs, err := h.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, recs, 2)
		assert.True(t, recs[0].Time.IsZero(), "a langchaingo history keeps no time")
		for _, f := range mustCurrent(t, m, ctx) {
			assert.Equal(t, clock.Now(), f.ValidFrom, "%s: dated by the clock", f.Key)
			assert.Contains(t, f.Line(), "(since 2026-11-30)")
		}
	})

	t.Run("replayed out of order", func(t *testing.T) {
		// A value said before the current one still supersedes it (turns
		// are extracted in Seq order) but never ends it before it began.
		ctx := context.Background()
		m := fcNew(t, fcPatterns(t))
		late := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
		early := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
		fcSave(t, m, memstack.WithTime(ctx, late), "I live in Lisbon.", "ok")
		fcSave(t, m, memstack.WithTime(ctx, early), "I live in Porto.", "ok")
		hist, err := m.History(ctx)
		require.NoError(t, err)
		require.Len(t, hist, 2)
		assert.Equal(t, late, hist[0].ValidFrom)
		assert.Equal(t, late, hist[0].ValidTo, "ValidTo never precedes ValidFrom")
		assert.Equal(t, early, hist[1].ValidFrom)
		assert.True(t, hist[1].Current())
	})
}

func mustCurrent(t *testing.T, m *memories.Facts, ctx context.Context) []memories.Fact {
	t.Helper()
	fs, err := m.Current(ctx)
	require.NoError(t, err)
	return fs
}
