package combined_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
)

// A full transcript and a window of the last three messages, behind one
// memory: every message reaches both, and a prompt can use either view.
func ExampleNew() {
	ctx := context.Background()

	full, err := memories.NewBuffer(memories.WithMemoryKey("chat_history"))
	if err != nil {
		fmt.Println(err)
		return
	}
	recent, err := memories.NewRecentN(3, memories.WithMemoryKey("recent"))
	if err != nil {
		fmt.Println(err)
		return
	}
	mem, err := combined.New([]schema.Memory{full, recent})
	if err != nil {
		fmt.Println(err)
		return
	}

	for _, msg := range []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Hello"},
		llms.AIChatMessage{Content: "Hi!"},
		llms.HumanChatMessage{Content: "Give me a plan."},
		llms.AIChatMessage{Content: "1. Code\n2. Walk\n3. Read"},
		llms.HumanChatMessage{Content: "Thanks"},
	} {
		if err := mem.AddMessage(ctx, msg); err != nil {
			fmt.Println(err)
			return
		}
	}

	fmt.Println("Memory keys:", mem.MemoryVariables(ctx))

	vars, err := mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("Merged variables:")
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Printf("[%s]\n%v\n", k, vars[k])
	}

	fmt.Println("Combined String():")
	fmt.Println(mem)
	// Output:
	// Memory keys: [chat_history recent]
	// Merged variables:
	// [chat_history]
	// Human: Hello
	// AI: Hi!
	// Human: Give me a plan.
	// AI: 1. Code
	// 2. Walk
	// 3. Read
	// Human: Thanks
	// [recent]
	// Human: Give me a plan.
	// AI: 1. Code
	// 2. Walk
	// 3. Read
	// Human: Thanks
	// Combined String():
	// CombinedMemory(2 children, variables=["chat_history" "recent"])
	//   Buffer(memory_key="chat_history", mode=string, store=*store.InMemory)
	//   RecentN(n=3, memory_key="recent", mode=string, store=*store.InMemory)
}

// With WithStrictKeys, two children that load the same variable are
// rejected when the memory is built, instead of the later one silently
// winning at load time.
func ExampleWithStrictKeys() {
	full, err := memories.NewBuffer() // loads "history"
	if err != nil {
		fmt.Println(err)
		return
	}
	recent, err := memories.NewRecentN(3) // also loads "history"
	if err != nil {
		fmt.Println(err)
		return
	}

	_, err = combined.New([]schema.Memory{full, recent}, combined.WithStrictKeys())
	fmt.Println(err)

	// Without the option the collision is allowed; RecentN, listed last, wins.
	mem, err := combined.New([]schema.Memory{full, recent})
	fmt.Println(mem.MemoryVariables(context.Background()), err)
	// Output:
	// combined: invalid argument: child 1 (*memories.Buffer) and child 2 (*memories.RecentN) both load the key "history"
	// [history] <nil>
}
