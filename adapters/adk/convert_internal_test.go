package adk

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"
)

func event(author string, role genai.Role, parts ...*genai.Part) *session.Event {
	return &session.Event{ID: "e", Author: author, LLMResponse: model.LLMResponse{Content: &genai.Content{Role: string(role), Parts: parts}}}
}

func TestEventMessages(t *testing.T) {
	call := &genai.Part{FunctionCall: &genai.FunctionCall{ID: "c1", Name: "lookup", Args: map[string]any{"q": "x"}}}
	tests := []struct {
		name string
		ev   *session.Event
		want []llms.ChatMessage
	}{
		{"user text", event("user", genai.RoleUser, genai.NewPartFromText("hi"), genai.NewPartFromText("there")),
			[]llms.ChatMessage{llms.HumanChatMessage{Content: "hi\nthere"}}},
		{"user role, other author", event("ui", genai.RoleUser, genai.NewPartFromText("hi")),
			[]llms.ChatMessage{llms.HumanChatMessage{Content: "hi"}}},
		{"model text", event("agent", genai.RoleModel, genai.NewPartFromText("hello")),
			[]llms.ChatMessage{llms.AIChatMessage{Content: "hello"}}},
		{"thought left out", event("agent", genai.RoleModel, &genai.Part{Text: "thinking…", Thought: true}, genai.NewPartFromText("answer")),
			[]llms.ChatMessage{llms.AIChatMessage{Content: "answer"}}},
		{"binary left out", event("user", genai.RoleUser, genai.NewPartFromBytes([]byte{1, 2}, "image/png")), nil},
		{"text and call", event("agent", genai.RoleModel, genai.NewPartFromText("let me look"), call),
			[]llms.ChatMessage{llms.AIChatMessage{Content: "let me look", ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function",
				FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{"q":"x"}`}}}}}},
		{"two responses, one without ID", event("agent", genai.RoleUser,
			&genai.Part{FunctionResponse: &genai.FunctionResponse{ID: "c1", Name: "lookup", Response: map[string]any{"a": 1}}},
			&genai.Part{FunctionResponse: &genai.FunctionResponse{Name: "clock", Response: map[string]any{"t": "noon"}}}),
			[]llms.ChatMessage{llms.ToolChatMessage{ID: "c1", Content: `{"a":1}`}, llms.ToolChatMessage{ID: "clock", Content: `{"t":"noon"}`}}},
		{"a skipped tool's call and result", event("agent", genai.RoleModel, genai.NewPartFromText("checking memory"),
			&genai.Part{FunctionCall: &genai.FunctionCall{ID: "m1", Name: "load_memory", Args: map[string]any{"query": "x"}}}),
			[]llms.ChatMessage{llms.AIChatMessage{Content: "checking memory"}}},
		{"a skipped tool's result alone", event("agent", genai.RoleUser,
			&genai.Part{FunctionResponse: &genai.FunctionResponse{ID: "m1", Name: "load_memory", Response: map[string]any{"memories": []any{"old"}}}}), nil},
		{"partial", &session.Event{ID: "e", LLMResponse: model.LLMResponse{Partial: true, Content: genai.NewContentFromText("x", genai.RoleUser)}}, nil},
		{"no content", &session.Event{ID: "e"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := eventMessages(tc.ev, map[string]bool{"load_memory": true})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, _, err := eventMessages(event("user", genai.RoleUser, genai.NewPartFromText("caf\xe9")), nil)
	assert.ErrorContains(t, err, "part 0 is not valid UTF-8")
}

func TestUnitContent(t *testing.T) {
	callMsg := llms.AIChatMessage{ToolCalls: []llms.ToolCall{
		{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{"q":"x"}`}},
		{ID: "c2", Type: "function", FunctionCall: &llms.FunctionCall{Name: "clock", Arguments: `not json`}},
	}}
	c := unitContent([]llms.ChatMessage{callMsg, llms.ToolChatMessage{ID: "c1", Content: `{"a":1}`}})
	assert.Equal(t, "model", c.Role)
	require.Len(t, c.Parts, 5)
	assert.Equal(t, "lookup", c.Parts[0].FunctionCall.Name)
	assert.Equal(t, map[string]any{"q": "x"}, c.Parts[0].FunctionCall.Args)
	assert.Equal(t, map[string]any{"arguments": "not json"}, c.Parts[1].FunctionCall.Args, "arguments that are not JSON are kept as text")
	assert.Equal(t, "lookup", c.Parts[2].FunctionResponse.Name, "a result is named after its call")
	assert.Equal(t, map[string]any{"a": float64(1)}, c.Parts[2].FunctionResponse.Response)
	assert.Equal(t, `lookup({"q":"x"}) returned {"a":1}`, c.Parts[3].Text)
	assert.Equal(t, `clock(not json) was called`, c.Parts[4].Text, "a call without its result says so")

	h := unitContent([]llms.ChatMessage{llms.HumanChatMessage{Content: "hi"}})
	assert.Equal(t, "user", h.Role)
	assert.Equal(t, "hi", h.Parts[0].Text)

	orphan := unitContent([]llms.ChatMessage{llms.ToolChatMessage{ID: "c9", Content: "plain"}})
	assert.Equal(t, map[string]any{"output": "plain"}, orphan.Parts[0].FunctionResponse.Response)
	assert.Equal(t, "c9", orphan.Parts[0].FunctionResponse.Name)
}
