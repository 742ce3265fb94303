package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
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

// A Store in the application's own database: the application opens it
// (WAL mode and a busy timeout in the DSN), keeps its own tables in it,
// and goes on using it after the Store is closed.
func ExampleNew() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "memstack")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	s, err := sqlitestore.New(db, sqlitestore.WithNamespace("buffer"))
	if err != nil {
		fmt.Println(err)
		return
	}
	id := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	_ = s.Append(ctx, id, llms.HumanChatMessage{Content: "Hi"}, llms.AIChatMessage{Content: "Hello!"})
	st, _ := s.Stat(ctx, id)
	fmt.Println("messages:", st.Count)
	_ = s.Close() // db stays open

	var n int
	_ = db.QueryRowContext(ctx, `SELECT count(*) FROM memstack_messages`).Scan(&n)
	fmt.Println("rows in the application's database:", n)
	// Output:
	// messages: 2
	// rows in the application's database: 2
}

// Everything a user holds, in every namespace of the file, for an access
// request; then forgotten.
func ExampleStore_ForgetScope() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "memstack")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "memory.db")
	buffer, _ := sqlitestore.Open(ctx, path, sqlitestore.WithNamespace("buffer"))
	defer buffer.Close()
	facts, _ := sqlitestore.Open(ctx, path, sqlitestore.WithNamespace("facts"))
	defer facts.Close()
	for _, c := range []string{"c1", "c2"} {
		id := memstack.Identity{Tenant: "acme", User: "alice", Conversation: c}
		_ = buffer.Append(ctx, id, llms.HumanChatMessage{Content: "Hi from " + c})
		_ = facts.Append(ctx, id, llms.HumanChatMessage{Content: "a fact from " + c})
	}

	alice := store.UserScope("acme", "alice")
	ex, _ := buffer.Export(ctx, alice)
	for _, ie := range ex.Identities {
		for _, ne := range ie.Namespaces {
			fmt.Println(ie.Identity.Conversation, ne.Namespace, len(ne.Messages))
		}
	}
	n, _ := buffer.ForgetScope(ctx, alice)
	ids, _ := facts.Identities(ctx, alice)
	fmt.Println("forgotten:", n, "left:", len(ids))
	// Output:
	// c1 buffer 1
	// c1 facts 1
	// c2 buffer 1
	// c2 facts 1
	// forgotten: 2 left: 0
}
