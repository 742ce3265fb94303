package replay_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/replay"
	"github.com/memstack/memstack/store"
)

// Import two past conversations of a user into a stack on one store, then
// ask in a new conversation: Recall finds the imported turn, dated.
func ExampleImport() {
	ctx := context.Background()
	history := `{"conversation":"c1","role":"user","content":"Which database should we use?","time":"2023-05-08T10:00:00Z"}
{"conversation":"c1","role":"assistant","content":"We settled on PostgreSQL.","time":"2023-05-08T10:00:05Z"}
{"conversation":"c2","role":"user","content":"Where is the offsite?","time":"2023-05-09T10:00:00Z"}
{"conversation":"c2","role":"assistant","content":"Lisbon, in June.","time":"2023-05-09T10:00:04Z"}
`
	convs, err := replay.Read(strings.NewReader(history))
	if err != nil {
		fmt.Println(err)
		return
	}
	s := store.NewInMemory()
	recent, _ := memories.NewRecentN(6, memories.WithStore(s))
	recall, _ := memories.NewRecall(memories.WithStore(s), memories.WithK(1))
	mem, _ := combined.New([]schema.Memory{recent, recall})

	user := memstack.Identity{Tenant: "acme", User: "u42"}
	stats, err := replay.Import(ctx, mem, user, convs)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", stats)
	again, _ := replay.Import(ctx, mem, user, convs) // stores nothing twice
	all, _ := s.All(ctx, memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c1"})
	fmt.Println(again.Exchanges, "exchanges again;", len(all), "messages stored in c1")

	user.Conversation = "new"
	vars, _ := mem.LoadMemoryVariables(memstack.WithIdentity(ctx, user), map[string]any{"input": "which database did we pick?"})
	fmt.Println(vars["relevant_history"])
	// Output:
	// {Conversations:2 Exchanges:2 Messages:4 Skipped:0 Present:0}
	// 2 exchanges again; 2 messages stored in c1
	// [8 May 2023, another conversation]
	// Human: Which database should we use?
	// AI: We settled on PostgreSQL.
}
