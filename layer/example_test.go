package layer_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/layer"
)

// notes is a memory of your own: fixed notes, each with an importance,
// shown one per line under the key "notes".
type notes struct {
	text       []string
	importance []float64
}

func (n notes) GetMemoryKey(context.Context) string                               { return "notes" }
func (n notes) MemoryVariables(context.Context) []string                          { return []string{"notes"} }
func (n notes) Clear(context.Context) error                                       { return nil }
func (n notes) SaveContext(context.Context, map[string]any, map[string]any) error { return nil }

func (n notes) LoadMemoryVariables(context.Context, map[string]any) (map[string]any, error) {
	return map[string]any{"notes": strings.Join(n.text, "\n")}, nil
}

// LoadItems offers every note as an item that a budget keeps or drops
// whole, the least important dropped first. Rendering every item gives
// what LoadMemoryVariables loads.
func (n notes) LoadItems(context.Context, map[string]any) (layer.Items, error) {
	list := make([]layer.Item, len(n.text))
	for i, t := range n.text {
		list[i] = layer.Item{Text: t, Kind: "note", ID: fmt.Sprint(i + 1), Priority: n.importance[i]}
	}
	return layer.Items{Key: "notes", List: list, Render: func(keep []bool) (any, error) {
		var kept []string
		for i, k := range keep {
			if k {
				kept = append(kept, n.text[i])
			}
		}
		return strings.Join(kept, "\n"), nil
	}}, nil
}

var _ layer.Itemizer = notes{}

// A memory of your own implements layer.Itemizer, and a combined memory's
// token budget trims it note by note, the least important first, instead
// of keeping or dropping its whole variable.
func ExampleItemizer() {
	var mem schema.Memory = notes{
		text: []string{
			"The user's name is Ada.",
			"The user once mentioned liking tea, and also coffee, and sometimes cocoa in winter.",
			"The user is allergic to peanuts.",
		},
		importance: []float64{2, 0, 3},
	}
	stack, err := combined.New([]schema.Memory{mem},
		combined.WithTokenBudget(20, combined.WithTrimHook(func(_ context.Context, t combined.Trim) {
			for _, d := range t.Dropped {
				fmt.Printf("dropped %s %s (%d tokens)\n", d.Item.Kind, d.Item.ID, d.Item.Tokens)
			}
		})))
	if err != nil {
		fmt.Println(err)
		return
	}
	vars, err := stack.LoadMemoryVariables(context.Background(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(vars["notes"])
	// Output:
	// dropped note 2 (17 tokens)
	// The user's name is Ada.
	// The user is allergic to peanuts.
}
