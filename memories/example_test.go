package memories_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/tokens"
	"github.com/tmc/langchaingo/llms"
)

func ExampleNewBuffer() {
	ctx := memstack.WithIdentity(context.Background(),
		memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c7"})
	mem, err := memories.NewBuffer()
	if err != nil {
		fmt.Println(err)
		return
	}

	_ = mem.SaveContext(ctx, map[string]any{"input": "Hi, I'm Ana."}, map[string]any{"text": "Hello Ana!"})
	_ = mem.SaveContext(ctx, map[string]any{"input": "What's my name?"}, map[string]any{"text": "Ana."})

	vars, err := mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(vars["history"])

	// Another conversation sees nothing of it.
	other := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "u43"})
	vars, _ = mem.LoadMemoryVariables(other, nil)
	fmt.Printf("%q\n", vars["history"])
	// Output:
	// Human: Hi, I'm Ana.
	// AI: Hello Ana!
	// Human: What's my name?
	// AI: Ana.
	// ""
}

func ExampleNewRecentN() {
	ctx := context.Background()
	mem, err := memories.NewRecentN(3)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = mem.AddMessage(ctx, llms.SystemChatMessage{Content: "You are terse."})
	for i := 1; i <= 4; i++ {
		_ = mem.SaveContext(ctx,
			map[string]any{"input": fmt.Sprintf("question %d", i)},
			map[string]any{"output": fmt.Sprintf("answer %d", i)})
	}

	vars, _ := mem.LoadMemoryVariables(ctx, nil)
	// The system message is pinned ahead of the last 3 messages.
	fmt.Println(vars["history"])
	// Output:
	// system: You are terse.
	// AI: answer 3
	// Human: question 4
	// AI: answer 4
}

func ExampleNewTokenWindow() {
	ctx := context.Background()
	// Count one token per word so that the output does not depend on a
	// tokenizer. A message costs its rendered line plus one.
	words := tokens.CounterFunc(func(s string) int { return len(strings.Fields(s)) })
	mem, err := memories.NewTokenWindow(13, memories.WithTokenCounter(words))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = mem.SaveContext(ctx, map[string]any{"input": "tell me a long story please"}, map[string]any{"output": "once upon a time"})
	_ = mem.SaveContext(ctx, map[string]any{"input": "shorter"}, map[string]any{"output": "the end"})

	vars, _ := mem.LoadMemoryVariables(ctx, nil)
	fmt.Println(vars["history"])
	// Output:
	// AI: once upon a time
	// Human: shorter
	// AI: the end
}

func ExampleBuffer_AddMessage() {
	ctx := context.Background()
	mem, err := memories.NewBuffer(memories.WithHumanPrefix("User"), memories.WithAIPrefix("Assistant"))
	if err != nil {
		fmt.Println(err)
		return
	}

	_ = mem.AddMessage(ctx, llms.SystemChatMessage{Content: "You can look up the weather."})
	_ = mem.AddMessage(ctx, llms.HumanChatMessage{Content: "Weather in Oslo?"})
	_ = mem.AddMessage(ctx, llms.AIChatMessage{Content: "Checking.", ToolCalls: []llms.ToolCall{{
		ID: "call_1", Type: "function",
		FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: `{"city":"Oslo"}`},
	}}})
	_ = mem.AddMessage(ctx, llms.ToolChatMessage{ID: "call_1", Content: "-3°C, snow"})
	_ = mem.AddMessage(ctx, llms.AIChatMessage{Content: "It is -3°C and snowing in Oslo."})

	vars, _ := mem.LoadMemoryVariables(ctx, nil)
	fmt.Println(vars["history"])

	// Only langchaingo's message types can be stored.
	err = mem.AddMessage(ctx, nil)
	fmt.Println(err != nil)
	// Output:
	// system: You can look up the weather.
	// User: Weather in Oslo?
	// Assistant: Checking.
	// tool: -3°C, snow
	// Assistant: It is -3°C and snowing in Oslo.
	// true
}
