package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
)

// Open a store with a pool of its own and use it directly. (This example
// needs a PostgreSQL server, so it is compiled but not run by go test; the
// package's tests run the same calls against a real server.)
func ExampleOpen() {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, "postgres://postgres:secret@127.0.0.1:5432/postgres?pool_max_conns=16",
		pgstore.WithTablePrefix("chat_"))
	if err != nil {
		log.Fatal(err) // names the address when the server is unreachable
	}
	defer s.Close()

	alice := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	_ = s.Append(ctx, alice,
		llms.HumanChatMessage{Content: "Hi"},
		llms.AIChatMessage{Content: "Hello!"})
	last, _ := s.Last(ctx, alice, 1)
	fmt.Println(last[0].Message.GetContent())
}

// Share one application pool between memory layers: each layer gets its
// own namespace in the same tables, and Forget reaches all of them.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres:secret@127.0.0.1:5432/postgres")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	transcript, err := pgstore.New(ctx, pool, pgstore.WithNamespace("transcript"))
	if err != nil {
		log.Fatal(err)
	}
	window, err := pgstore.New(ctx, pool, pgstore.WithNamespace("window"))
	if err != nil {
		log.Fatal(err)
	}
	full, err := memories.NewBuffer(memories.WithStore(transcript))
	if err != nil {
		log.Fatal(err)
	}
	recent, err := memories.NewRecentN(10, memories.WithStore(window))
	if err != nil {
		log.Fatal(err)
	}
	_, _ = full, recent

	// One conversation forgotten: every namespace, one transaction.
	_ = transcript.Forget(ctx, memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"})
}

// Answer a user's access request and then their request to be forgotten:
// every conversation of the user, in every namespace under the table
// prefix, whichever Store of those tables is asked.
func ExampleStore_ForgetScope() {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, "postgres://postgres:secret@127.0.0.1:5432/postgres")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	alice := store.UserScope("acme", "alice")
	export, err := s.Export(ctx, alice)
	if err != nil {
		log.Fatal(err)
	}
	if err := export.WriteJSON(os.Stdout); err != nil {
		log.Fatal(err)
	}
	n, err := s.ForgetScope(ctx, alice)
	if err != nil {
		log.Fatal(err) // some conversations may be forgotten: call it again
	}
	fmt.Println(n, "conversations forgotten")
}
