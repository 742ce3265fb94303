package store_test

import (
	"context"
	"fmt"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

func ExampleNewInMemory() {
	ctx := context.Background()
	s := store.NewInMemory()
	alice := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob := memstack.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}

	_ = s.Append(ctx, alice, llms.SystemChatMessage{Content: "Be brief."})
	_ = s.Append(ctx, alice,
		llms.HumanChatMessage{Content: "Hi"},
		llms.AIChatMessage{Content: "Hello!"})
	_ = s.Append(ctx, bob, llms.HumanChatMessage{Content: "Yo"})

	all, _ := s.All(ctx, alice)
	for _, r := range all {
		fmt.Printf("%d %s: %s\n", r.Seq, r.Message.GetType(), r.Message.GetContent())
	}

	// RemovePrefix drops old turns but keeps the system prompt.
	n, _ := s.RemovePrefix(ctx, alice, 2)
	st, _ := s.Stat(ctx, alice)
	fmt.Printf("removed %d, now %d messages (Seq %d..%d)\n", n, st.Count, st.FirstSeq, st.LastSeq)

	st, _ = s.Stat(ctx, bob)
	fmt.Println("bob has", st.Count)
	// Output:
	// 1 system: Be brief.
	// 2 human: Hi
	// 3 ai: Hello!
	// removed 1, now 2 messages (Seq 1..3)
	// bob has 1
}

func ExampleFromHistory() {
	ctx := context.Background()
	h := memory.NewChatMessageHistory() // any langchaingo schema.ChatMessageHistory
	id := memstack.Identity{User: "alice"}
	s, err := store.FromHistory(h, id)
	if err != nil {
		panic(err)
	}

	_ = s.Append(ctx, id, llms.HumanChatMessage{Content: "Hi"}, llms.AIChatMessage{Content: "Hello!"})
	last, _ := s.Last(ctx, id, 1)
	fmt.Println(last[0].Seq, last[0].Message.GetContent())

	msgs, _ := h.Messages(ctx)
	fmt.Println("history holds", len(msgs), "messages")

	err = s.Append(ctx, memstack.Identity{User: "bob"}, llms.HumanChatMessage{Content: "Yo"})
	fmt.Println(err != nil)
	// Output:
	// 2 Hello!
	// history holds 2 messages
	// true
}
