package retrieval_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/memstack/memstack/retrieval"
	"github.com/tmc/langchaingo/embeddings"
)

func ExampleTokenize() {
	fmt.Println(retrieval.Tokenize("What did we settle on? We settled on PostgreSQL 16."))
	// Output: [settl settl postgresql 16]
}

func ExampleNewBM25() {
	ctx := context.Background()
	idx, _ := retrieval.NewBM25()
	_ = idx.Add(ctx, "alice", []retrieval.Doc{
		{Seq: 1, Through: 2, Text: "Which database?\nWe settled on PostgreSQL."},
		{Seq: 3, Through: 4, Text: "What is the budget?\nThe budget is 40k."},
	})
	hits, _ := idx.Search(ctx, "alice", "what did we settle on for the database?", 3)
	for _, h := range hits {
		fmt.Printf("exchange %d: %.2f\n", h.Seq, h.Score)
	}
	hits, _ = idx.Search(ctx, "bob", "database", 3)
	fmt.Println("bob's hits:", len(hits))
	// Output:
	// exchange 1: 0.45
	// bob's hits: 0
}

// vocabulary is the toy embedding model of the examples: one dimension per
// word.
var vocabulary = []string{"databas", "postgresql", "budget", "40k", "offsit", "lisbon"}

// toyEmbedder is a langchaingo embedder (embeddings.NewEmbedder over a
// client function) that counts vocabulary words.
func toyEmbedder() embeddings.Embedder {
	e, _ := embeddings.NewEmbedder(embeddings.EmbedderClientFunc(
		func(_ context.Context, texts []string) ([][]float32, error) {
			out := make([][]float32, len(texts))
			for i, t := range texts {
				v := make([]float32, len(vocabulary)+1)
				v[len(vocabulary)] = 0.1 // never the zero vector
				for _, tok := range retrieval.Tokenize(t) {
					if j := slices.Index(vocabulary, tok); j >= 0 {
						v[j]++
					}
				}
				out[i] = v
			}
			return out, nil
		}))
	return e
}

func ExampleNewVector() {
	ctx := context.Background()
	store, _ := retrieval.NewChromem(nil, "recall", nil) // in memory; chromem.NewPersistentDB for disk
	idx, _ := retrieval.NewVector(toyEmbedder(), store, retrieval.WithEmbedderName("toy"))
	_ = idx.Add(ctx, "alice", []retrieval.Doc{
		{Seq: 1, Through: 2, Text: "Which database? PostgreSQL."},
		{Seq: 3, Through: 4, Text: "Budget? 40k."},
	})
	hits, _ := idx.Search(ctx, "alice", "the budget", 1)
	fmt.Printf("exchange %d, cosine %.2f\n", hits[0].Seq, hits[0].Score)
	fmt.Println(idx.Spaces())
	// Output:
	// exchange 3, cosine 0.71
	// ["toy" (dimension 7)]
}

func ExampleNewHybrid() {
	ctx := context.Background()
	store, _ := retrieval.NewChromem(nil, "recall", nil)
	vec, _ := retrieval.NewVector(toyEmbedder(), store, retrieval.WithEmbedderName("toy"))
	lex, _ := retrieval.NewBM25()
	idx, _ := retrieval.NewHybrid(lex, vec)
	_ = idx.Add(ctx, "alice", []retrieval.Doc{
		{Seq: 1, Through: 2, Text: "Which database? PostgreSQL."},
		{Seq: 3, Through: 4, Text: "Budget? 40k."},
		{Seq: 5, Through: 6, Text: "The offsite is in Lisbon."},
	})
	// Each part ranks 3 first (a tie, newer first) and 1 second; only the
	// vector part finds 5 at all.
	hits, _ := idx.Search(ctx, "alice", "database budget", 3)
	var parts []string
	for _, h := range hits {
		parts = append(parts, fmt.Sprintf("%d:%.3f", h.Seq, h.Score))
	}
	fmt.Println(strings.Join(parts, " "))
	// Output: 3:1.000 1:0.984 5:0.484
}
