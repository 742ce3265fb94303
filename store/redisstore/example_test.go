package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
)

// redisAddr returns the address of a throwaway Redis server for the
// examples; in your code, it is your server's host:port.
func redisAddr() string {
	addr, err := testsvc.RedisAddr()
	if err != nil {
		panic(err)
	}
	return addr
}

// A RecentN memory keeping its window in Redis, shared by every replica of
// the agent that opens the same server.
func ExampleOpen() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := redisstore.Open(ctx, redisAddr(),
		redisstore.WithKeyPrefix("example-open"),
		redisstore.WithNamespace("recent"),
		redisstore.WithTTL(24*time.Hour)) // forget idle conversations after a day
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()

	mem, _ := memories.NewRecentN(4, memories.WithStore(s))
	ctx = memstack.WithIdentity(ctx, memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c7"})
	_ = mem.Clear(ctx) // a fresh conversation for the example
	_ = mem.AddMessage(ctx, llms.SystemChatMessage{Content: "You are terse."})
	_ = mem.SaveContext(ctx, map[string]any{"input": "Ship date?"}, map[string]any{"output": "The 14th."})

	vars, _ := mem.LoadMemoryVariables(ctx, nil)
	fmt.Println(vars["history"])
	// Output:
	// system: You are terse.
	// Human: Ship date?
	// AI: The 14th.
}

// Layers of one agent keep their data in namespaces of one prefix; Forget
// removes a user from all of them at once.
func ExampleStore_Forget() {
	ctx := context.Background()
	addr := redisAddr()
	recent, err := redisstore.Open(ctx, addr, redisstore.WithKeyPrefix("example-forget"), redisstore.WithNamespace("recent"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer recent.Close()
	facts, err := redisstore.Open(ctx, addr, redisstore.WithKeyPrefix("example-forget"), redisstore.WithNamespace("facts"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer facts.Close()

	user := memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c7"}
	_ = recent.Append(ctx, user, llms.HumanChatMessage{Content: "I'm vegetarian."})
	// A new value expects the version GetState reports for the absent one.
	diet, _ := facts.GetState(ctx, user, "diet")
	_, _ = facts.PutState(ctx, user, "diet", []byte("vegetarian"), diet.Version)
	before, _ := facts.GetState(ctx, user, "diet")

	_ = recent.Forget(ctx, user) // the user asked to be forgotten

	msgs, _ := recent.All(ctx, user)
	diet, _ = facts.GetState(ctx, user, "diet")
	fmt.Println(before.Exists(), len(msgs), diet.Exists())
	// A commit that read before Forget conflicts: it cannot store again
	// what was forgotten.
	_, err = facts.PutState(ctx, user, "diet", []byte("vegetarian"), before.Version)
	fmt.Println(errors.Is(err, store.ErrConflict))
	// Output:
	// true 0 false
	// true
}

// A "forget me" request: every conversation of one user, in every
// namespace of the prefix, listed, exported and then forgotten; other
// users keep theirs.
func ExampleStore_ForgetScope() {
	ctx := context.Background()
	addr := redisAddr()
	recent, err := redisstore.Open(ctx, addr, redisstore.WithKeyPrefix("example-forget-scope"), redisstore.WithNamespace("recent"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer recent.Close()
	facts, err := redisstore.Open(ctx, addr, redisstore.WithKeyPrefix("example-forget-scope"), redisstore.WithNamespace("facts"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer facts.Close()
	for _, id := range []memstack.Identity{
		{Tenant: "acme", User: "u42", Conversation: "c1"},
		{Tenant: "acme", User: "u42", Conversation: "c2"},
		{Tenant: "acme", User: "u7", Conversation: "c1"},
	} {
		_ = recent.Append(ctx, id, llms.HumanChatMessage{Content: "hello from " + id.User})
		_ = facts.Append(ctx, id, llms.HumanChatMessage{Content: id.User + " likes tea"})
	}

	user := store.UserScope("acme", "u42")
	ids, _ := recent.Identities(ctx, user)
	fmt.Println(ids)
	export, _ := recent.Export(ctx, user)
	fmt.Println(len(export.Identities), len(export.Identities[0].Namespaces)) // export.WriteJSON(w) for the user
	n, _ := recent.ForgetScope(ctx, user)
	fmt.Println("forgot", n)
	ids, _ = facts.Identities(ctx, store.TenantScope("acme"))
	fmt.Println(ids)
	_, _ = recent.ForgetScope(ctx, store.TenantScope("acme")) // clean up the example
	// Output:
	// [acme:u42:c1 acme:u42:c2]
	// 2 2
	// forgot 2
	// [acme:u7:c1]
}
