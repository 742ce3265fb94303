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
	light := func() memories.Option {
		return memories.WithIndex(retrieval.NewBM25(retrieval.WithTokenizer(lightTokenize), retrieval.WithNeighbourWeights(w, w/2)))
	}
	lightAlone := func() memories.Option {
		return memories.WithIndex(retrieval.NewBM25(retrieval.WithTokenizer(lightTokenize)))
	}
	row := func(name string, opts ...func() memories.Option) system {
		return system{name, groupAblation, func() (schema.Memory, error) {
			o := make([]memories.Option, len(opts))
			for i, f := range opts {
				o[i] = f()
			}
			return stack(budget, o...)()
		}}
	}
	exchanges := func() memories.Option { return memories.WithRecallUnit(memories.RecallExchanges) }
	noContext := func() memories.Option { return memories.WithContextWeight(0) }
	noShare := func() memories.Option { return memories.WithNeighbourShare(0) }
	k3 := func() memories.Option { return memories.WithK(3) }
	noQueryDates := func() memories.Option { return memories.WithQueryDates(false) }
	noDates := func() memories.Option { return memories.WithRecallDates(false) }
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
