package main

import (
	"strings"

	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
)

// ablations are the Ablation table's rows: the default stack with one of
// Recall's defaults undone at a time, and with all of them undone (the
// Recall memstack had before they were measured), at budget tokens.
func ablations(budget int) []system {
	// The default index with the former stemmer: the same neighbour
	// weights (memories.DefaultRecallContextWeight and half of it).
	w := memories.DefaultRecallContextWeight
	lightIndex := func(opts ...retrieval.BM25Option) (memories.RecallOption, error) {
		idx, err := retrieval.NewBM25(append([]retrieval.BM25Option{retrieval.WithTokenizer(lightTokenize)}, opts...)...)
		if err != nil {
			return nil, err
		}
		return memories.WithIndex(idx), nil
	}
	light := func() (memories.RecallOption, error) { return lightIndex(retrieval.WithNeighbourWeights(w, w/2)) }
	lightAlone := func() (memories.RecallOption, error) { return lightIndex() }
	row := func(name string, opts ...func() (memories.RecallOption, error)) system {
		return system{name, groupAblation, func() (schema.Memory, error) {
			o := make([]memories.RecallOption, len(opts))
			for i, f := range opts {
				var err error
				if o[i], err = f(); err != nil {
					return nil, err
				}
			}
			return stack(budget, o...)()
		}}
	}
	// one is an option that cannot fail.
	one := func(o memories.RecallOption) func() (memories.RecallOption, error) {
		return func() (memories.RecallOption, error) { return o, nil }
	}
	exchanges := one(memories.WithRecallUnit(memories.RecallExchanges))
	noContext := one(memories.WithContextWeight(0))
	noShare := one(memories.WithNeighbourShare(0))
	k3 := one(memories.WithK(3))
	noQueryDates := one(memories.WithQueryDates(false))
	noDates := one(memories.WithRecallDates(false))
	return []system{
		row("− turns: exchange units (WithRecallUnit(RecallExchanges))", exchanges),
		row("− neighbours' words in each unit's score (WithContextWeight(0))", noContext),
		row("− neighbours offered to the budget (WithNeighbourShare(0))", noShare),
		row("− filling the budget: at most 3 hits (WithK(3))", k3),
		row("− dates in the question (WithQueryDates(false))", noQueryDates),
		row("− dates shown (WithRecallDates(false)): their token cost", noDates),
		row("− Snowball: the former hand-written stemmer", light),
		row("all of the above undone (memstack's Recall before)", exchanges, noShare, k3, noQueryDates, lightAlone),
	}
}

// lightTokenize is retrieval.Tokenize as it was before the Snowball
// stemmer, with its hand-written light stemmer: kept here only to measure
// what the stemmer changed.
var lightTokenize = retrieval.TokenizeWith(lightStem)

// lightStem is the former retrieval.Stem.
func lightStem(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		w = w[:n-3] + "y"
	case n > 4 && strings.HasSuffix(w, "sses"):
		w = w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") &&
		!strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:n-1]
	}
	n = len(w)
	switch {
	case n >= 7 && strings.HasSuffix(w, "ing"):
		w = w[:n-3]
	case n >= 6 && strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed"):
		w = w[:n-2]
	case n == 5 && strings.HasSuffix(w, "ed") && !strings.HasSuffix(w, "eed"):
		w = w[:n-1]
	}
	if n = len(w); n >= 5 && strings.HasSuffix(w, "e") {
		w = w[:n-1]
	}
	return w
}
