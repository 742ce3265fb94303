package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/sqlitestore"
)

func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "memstack")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "memory.db")

	s, err := sqlitestore.Open(ctx, path, sqlitestore.WithNamespace("buffer"))
	if err != nil {
		fmt.Println(err)
		return
	}
	id := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	_ = s.Append(ctx, id, llms.HumanChatMessage{Content: "Hi"}, llms.AIChatMessage{Content: "Hello!"})
	_ = s.Close()

	// Another process, or a restart: the conversation is still there.
	s, _ = sqlitestore.Open(ctx, path, sqlitestore.WithNamespace("buffer"))
	defer s.Close()
	recs, _ := s.All(ctx, id)
	for _, r := range recs {
		fmt.Printf("%s: %s\n", r.Message.GetType(), r.Message.GetContent())
	}
	// Output:
	// human: Hi
	// ai: Hello!
}
