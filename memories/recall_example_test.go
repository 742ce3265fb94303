package memories_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/schema"
)

var exampleTurns = [][2]string{
	{"Which database should we use?", "We settled on PostgreSQL."},
	{"What is the budget?", "The budget is 40k euros."},
	{"Where is the offsite?", "Lisbon, in June."},
	{"Which logo colour?", "Blue."},
}

// exampleSave saves exampleTurns into mems, a day apart from 8 May 2023
// on (memstack.WithTime dates each turn, as an import would).
func exampleSave(ctx context.Context, mems ...schema.Memory) {
	day := time.Date(2023, time.May, 8, 10, 0, 0, 0, time.UTC)
	for i, t := range exampleTurns {
		at := memstack.WithTime(ctx, day.AddDate(0, 0, i))
		for _, m := range mems {
			_ = m.SaveContext(at, map[string]any{"input": t[0]}, map[string]any{"output": t[1]})
		}
	}
}

func ExampleNewRecall() {
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "u42"})
	mem, _ := memories.NewRecall(memories.WithK(1)) // lexical (BM25): no model needed
	exampleSave(ctx, mem)

	// A week later: the current input is the query.
	vars, _ := mem.LoadMemoryVariables(ctx, map[string]any{"input": "What did we settle on for the database?"})
	fmt.Println(vars["relevant_history"])
	// Output:
	// [8 May 2023]
	// Human: Which database should we use?
	// AI: We settled on PostgreSQL.
}

// A question that names a date finds what was said that day, even with no
// word in common.
func ExampleRecall_datedQuestion() {
	ctx := context.Background()
	mem, _ := memories.NewRecall(memories.WithK(1))
	exampleSave(ctx, mem)
	vars, _ := mem.LoadMemoryVariables(ctx, map[string]any{"input": "What came up on 10 May 2023?"})
	fmt.Println(vars["relevant_history"])
	// Output:
	// [10 May 2023]
	// Human: Where is the offsite?
	// AI: Lisbon, in June.
}

func ExampleWithExcludeRecent() {
	ctx := context.Background()
	// RecentN shows the last 2 messages; Recall leaves out what RecentN
	// shows and brings back the older exchanges that matter.
	recent, _ := memories.NewRecentN(2)
	recall, _ := memories.NewRecall(memories.WithExcludeRecent(2))
	exampleSave(ctx, recent, recall)

	inputs := map[string]any{"input": "Remind me of the budget and the logo."}
	r, _ := recent.LoadMemoryVariables(ctx, inputs)
	old, _ := recall.LoadMemoryVariables(ctx, inputs)
	fmt.Printf("recent:\n%s\nrecalled:\n%s\n", r["history"], old["relevant_history"])
	// Output:
	// recent:
	// Human: Which logo colour?
	// AI: Blue.
	// recalled:
	// [9 May 2023]
	// Human: What is the budget?
	// AI: The budget is 40k euros.
	// [10 May 2023]
	// Human: Where is the offsite?
	// AI: Lisbon, in June.
}

// exampleEmbedder is a toy embedding model: one dimension per word of a
// small vocabulary, through langchaingo's embeddings.NewEmbedder. Use a
// real one (OpenAI, Ollama...) in production.
func exampleEmbedder() embeddings.Embedder {
	vocabulary := []string{"databas", "postgresql", "budget", "money", "40k", "offsit", "lisbon", "logo", "blue"}
	e, _ := embeddings.NewEmbedder(embeddings.EmbedderClientFunc(
		func(_ context.Context, texts []string) ([][]float32, error) {
			out := make([][]float32, len(texts))
			for i, t := range texts {
				v := make([]float32, len(vocabulary)+1)
				v[len(vocabulary)] = 0.1
				for _, tok := range retrieval.Tokenize(t) {
					if j := slices.Index(vocabulary, tok); j >= 0 {
						v[j]++
					}
					if tok == "money" { // the toy model knows money is budget
						v[2]++
					}
				}
				out[i] = v
			}
			return out, nil
		}))
	return e
}

func ExampleWithVector() {
	ctx := context.Background()
	// nil: the embedded, in-memory chromem-go store. Pass
	// retrieval.NewChromem(chromem.NewPersistentDB(dir, false), ...) or any
	// langchaingo vector store to keep vectors across restarts.
	mem, err := memories.NewRecall(
		memories.WithVector(exampleEmbedder(), nil, retrieval.WithEmbedderName("toy-v1")),
		memories.WithK(1),
		memories.WithThreshold(0.5), // cosine similarity
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	exampleSave(ctx, mem)
	vars, _ := mem.LoadMemoryVariables(ctx, map[string]any{"input": "How much money do we have?"})
	fmt.Println(vars["relevant_history"])
	vars, _ = mem.LoadMemoryVariables(ctx, map[string]any{"input": "Any holidays planned?"})
	fmt.Printf("%q\n", vars["relevant_history"])
	// Output:
	// [9 May 2023]
	// Human: What is the budget?
	// AI: The budget is 40k euros.
	// ""
}

// Search gives a Recall's answer as data: each unit with its
// conversation, time and score, best first — for a caller that shows the
// past itself.
func ExampleRecall_Search() {
	mem, _ := memories.NewRecall(memories.WithK(1))
	user := memstack.Identity{Tenant: "acme", User: "u42", Conversation: "may"}
	exampleSave(memstack.WithIdentity(context.Background(), user), mem)

	user.Conversation = "june" // a new conversation of the same user
	matches, _ := mem.Search(memstack.WithIdentity(context.Background(), user), "Where is the offsite?")
	for _, m := range matches[:1] {
		fmt.Printf("%s %s hit=%t: %s\n", m.Conversation.Conversation, m.Time.Format(time.DateOnly), m.Hit, m.Messages[0].GetContent())
	}
	// Output:
	// may 2023-05-10 hit=true: Where is the offsite?
}
