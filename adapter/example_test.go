package adapter_test

import (
	"fmt"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/adapter"
)

func ExampleTurn() {
	// An agent executor's maps: the output carries intermediate steps too.
	inputs := map[string]any{"input": "What is 6*7?"}
	outputs := map[string]any{"output": "42", "intermediateSteps": []any{"calculator"}}

	human, ai, err := adapter.Turn(inputs, outputs, "", "")
	fmt.Printf("%q %q %v\n", human, ai, err)

	// Two candidate answers and no output key: the error names the keys and
	// the option to use, never the values.
	_, _, err = adapter.Turn(inputs, map[string]any{"text": "private", "draft": "private"}, "", "")
	fmt.Println(err)
	// Output:
	// "What is 6*7?" "42" <nil>
	// invalid input values: output values have 2 keys ("draft", "text") and no output key is set; choose one with WithOutputKey
}

func ExampleMessageContents() {
	msgs := []llms.ChatMessage{
		llms.SystemChatMessage{Content: "Be brief."},
		llms.HumanChatMessage{Content: "Weather in Paris?"},
		llms.AIChatMessage{ToolCalls: []llms.ToolCall{{
			ID: "call_1", Type: "function",
			FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: `{"city":"Paris"}`},
		}}},
		llms.ToolChatMessage{ID: "call_1", Content: "21C, sunny"},
	}
	mcs, err := adapter.MessageContents(msgs)
	if err != nil {
		panic(err)
	}
	for _, mc := range mcs {
		for _, p := range mc.Parts {
			switch p := p.(type) {
			case llms.TextContent:
				fmt.Printf("%s: text %q\n", mc.Role, p.Text)
			case llms.ToolCall:
				fmt.Printf("%s: call %s %s(%s)\n", mc.Role, p.ID, p.FunctionCall.Name, p.FunctionCall.Arguments)
			case llms.ToolCallResponse:
				fmt.Printf("%s: result for %s: %q\n", mc.Role, p.ToolCallID, p.Content)
			}
		}
	}
	// Output:
	// system: text "Be brief."
	// human: text "Weather in Paris?"
	// ai: call call_1 weather({"city":"Paris"})
	// tool: result for call_1: "21C, sunny"
}
