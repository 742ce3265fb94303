package combined_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/observe"
)

// datedItemizer loads fixed items, each with a stored time, rendered one
// per line.
type datedItemizer struct {
	*userMemory
	list []combined.Item
}

func (d datedItemizer) LoadItems(context.Context, map[string]any) (combined.Items, error) {
	return combined.Items{Key: d.vars[0], List: d.list, Render: func(keep []bool) (any, error) {
		var lines []string
		for i, k := range keep {
			if k {
				lines = append(lines, d.list[i].Text)
			}
		}
		return strings.Join(lines, "\n"), nil
	}}, nil
}

var (
	tmT1 = time.Date(2023, 5, 8, 10, 0, 0, 0, time.UTC)
	tmT2 = time.Date(2023, 5, 9, 11, 0, 0, 0, time.FixedZone("", 2*3600))
	tmT3 = time.Date(2023, 5, 10, 12, 0, 0, 0, time.UTC)
)

func datedChild(key string) datedItemizer {
	return datedItemizer{userMemory: newUserMemory(key), list: []combined.Item{
		{Text: "alpha one", Kind: "message", ID: "1", Time: tmT1},
		{Text: "beta two", Kind: "message", ID: "2", Time: tmT2},
		{Text: "gamma three", Kind: "fact", ID: "k", Score: 0.5, Time: tmT3},
	}}
}

// The budget copies each item's Time into every observe.Item it reports:
// the kept ones, the dropped ones, those of an overridden variable, and
// the trim hook's.
func TestBudgetReportsCarryItemTimes(t *testing.T) {
	ctx := context.Background()
	c := cl100k(t)
	fits := c.CountTokens("beta two\ngamma three") // the first item must go
	alpha := observe.Item{Kind: "message", ID: "1", Tokens: c.CountTokens("alpha one"), Time: tmT1}
	beta := observe.Item{Kind: "message", ID: "2", Tokens: c.CountTokens("beta two"), Time: tmT2}
	gamma := observe.Item{Kind: "fact", ID: "k", Score: 0.5, Tokens: c.CountTokens("gamma three"), Time: tmT3}
	droppedAlpha := alpha
	droppedAlpha.Reason = observe.ReasonBudget

	t.Run("observed", func(t *testing.T) {
		sink, reports := collect()
		log := &trimLog{}
		m := newBudgeted(t, []schema.Memory{datedChild("user")}, fits,
			[]combined.BudgetOption{combined.WithTrimHook(log.hook)}, combined.WithObserver(sink))
		vars, err := m.LoadMemoryVariables(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, "beta two\ngamma three", vars["user"])
		require.Len(t, *reports, 1)
		r := (*reports)[0]
		assert.Equal(t, []observe.Item{beta, gamma}, r.Injected)
		assert.Equal(t, []observe.Item{droppedAlpha}, r.Dropped)
		dropped := log.last(t).Dropped
		require.Len(t, dropped, 1)
		assert.Equal(t, droppedAlpha, dropped[0].Item, "the trim hook's item has the time too")
	})

	t.Run("observed from outside", func(t *testing.T) {
		// A combined memory wrapped as one layer records on the wrapper's
		// Recorder.
		sink, reports := collect()
		m := observe.Wrap(newBudgeted(t, []schema.Memory{datedChild("user")}, fits, nil), "outer", sink)
		_, err := m.LoadMemoryVariables(ctx, nil)
		require.NoError(t, err)
		require.Len(t, *reports, 1)
		assert.Equal(t, []observe.Item{beta, gamma}, (*reports)[0].Injected)
		assert.Equal(t, []observe.Item{droppedAlpha}, (*reports)[0].Dropped)
	})

	t.Run("overridden", func(t *testing.T) {
		sink, reports := collect()
		m := newBudgeted(t, []schema.Memory{datedChild("user"), newUserMemory("user")}, 100, nil,
			combined.WithObserver(sink), combined.WithLayerNames("dated", "user"))
		_, err := m.LoadMemoryVariables(ctx, nil)
		require.NoError(t, err)
		r := byLayer(*reports)["dated"]
		assert.Empty(t, r.Injected)
		var want []observe.Item
		for _, it := range []observe.Item{alpha, beta, gamma} {
			it.Tokens, it.Reason = 0, observe.ReasonOverridden
			want = append(want, it)
		}
		assert.Equal(t, want, r.Dropped)
	})
}
