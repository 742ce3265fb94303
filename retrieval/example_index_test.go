package retrieval_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
)

// keywordIndex is an index of your own: it scores a doc by the share of
// the query's keywords it contains, after mapping each word to its
// canonical term, so that a team's jargon ("cash", "money") finds what
// was said in other words ("budget"). It follows the retrieval.Index
// contract: scopes kept apart, Add idempotent per Seq, k < 1 an error,
// a blank query no hits, ctx honoured, safe for concurrent use.
type keywordIndex struct {
	synonyms map[string]string // word -> canonical term

	mu     sync.Mutex
	scopes map[string]map[int64]map[string]bool // scope -> Seq -> terms
}

func newKeywordIndex(synonyms map[string]string) *keywordIndex {
	return &keywordIndex{synonyms: synonyms, scopes: map[string]map[int64]map[string]bool{}}
}

// terms returns the canonical terms of text: retrieval.Tokenize's stems
// (stop words left out), each mapped through the synonyms.
func (x *keywordIndex) terms(text string) map[string]bool {
	out := map[string]bool{}
	for _, tok := range retrieval.Tokenize(text) {
		if canon, ok := x.synonyms[tok]; ok {
			tok = canon
		}
		out[tok] = true
	}
	return out
}

func (x *keywordIndex) Add(ctx context.Context, scope string, docs []retrieval.Doc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.scopes[scope] == nil {
		x.scopes[scope] = map[int64]map[string]bool{}
	}
	for _, d := range docs {
		x.scopes[scope][d.Seq] = x.terms(d.Text) // replaces a doc with the same Seq; Context is ignored
	}
	return nil
}

func (x *keywordIndex) Search(ctx context.Context, scope, query string, k int) ([]retrieval.Hit, error) {
	if k < 1 {
		return nil, fmt.Errorf("%w: k=%d", retrieval.ErrInvalidArgument, k)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	want := x.terms(query)
	if len(want) == 0 {
		return nil, nil // a blank query matches nothing
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	var hits []retrieval.Hit
	for seq, have := range x.scopes[scope] {
		found := 0
		for t := range want {
			if have[t] {
				found++
			}
		}
		if found > 0 {
			hits = append(hits, retrieval.Hit{Seq: seq, Score: float64(found) / float64(len(want))})
		}
	}
	sort.Slice(hits, func(i, j int) bool { // best first; a tie goes to the newer doc
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return hits[i].Seq > hits[j].Seq
	})
	return hits[:min(k, len(hits))], nil
}

func (x *keywordIndex) Delete(ctx context.Context, scope string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.scopes, scope)
	return nil
}

// Range: a score is the share of the query's terms a doc holds.
func (x *keywordIndex) Range() retrieval.Range { return retrieval.Range{Min: 0, Max: 1} }

var _ retrieval.Index = (*keywordIndex)(nil)

// An index of your own implements retrieval.Index; memories.WithIndex
// plugs it into a Recall, which feeds it the conversation's exchanges and
// asks it for the ones that match the current input. Here the index knows
// that "cash" and "money" mean the budget, which no word of the question
// shares with the answer.
func ExampleIndex() {
	idx := newKeywordIndex(map[string]string{"cash": "budget", "money": "budget"})
	mem, err := memories.NewRecall(memories.WithIndex(idx), memories.WithK(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "u42"})
	day := time.Date(2023, time.May, 8, 10, 0, 0, 0, time.UTC)
	for i, turn := range [][2]string{
		{"Which database should we use?", "We settled on PostgreSQL."},
		{"What is the budget?", "The budget is 40k euros."},
		{"Where is the offsite?", "Lisbon, in June."},
	} {
		at := memstack.WithTime(ctx, day.AddDate(0, 0, i)) // each turn a day apart
		if err := mem.SaveContext(at, map[string]any{"input": turn[0]}, map[string]any{"output": turn[1]}); err != nil {
			fmt.Println(err)
			return
		}
	}
	vars, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": "How much cash do we have?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(vars["relevant_history"])
	// The index keeps each identity's exchanges apart.
	other := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "u7"})
	vars, _ = mem.LoadMemoryVariables(other, map[string]any{"input": "How much cash do we have?"})
	fmt.Printf("u7: %q\n", vars["relevant_history"])
	// Output:
	// [9 May 2023]
	// Human: What is the budget?
	// AI: The budget is 40k euros.
	// u7: ""
}
