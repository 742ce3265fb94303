package adapter_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"

	"github.com/memstack/memstack/adapter"
)

// secret is a value that must never appear in an error message.
const secret = "sk-SECRET-7f3a9c"

func requireInvalid(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, adapter.ErrInvalidValues)
	assert.ErrorIs(t, err, memory.ErrInvalidInputValues, "langchaingo callers check for this")
	assert.NotContains(t, err.Error(), secret, "errors must not show the map's values")
}

type pickCase struct {
	name   string
	values map[string]any
	key    string
	want   string
	// For errors: substrings the message must contain.
	errHas []string
}

func TestInputValue(t *testing.T) {
	cases := []pickCase{
		{name: "configured key present", values: map[string]any{"question": "q?", "context": secret}, key: "question", want: "q?"},
		{name: "configured key present, empty string", values: map[string]any{"input": ""}, key: "input", want: ""},
		{name: "single entry, no key", values: map[string]any{"whatever": "hello"}, want: "hello"},
		{name: "single entry, no key, unicode", values: map[string]any{"input": "héllo 世界\n"}, want: "héllo 世界\n"},
		{
			name: "configured key missing", values: map[string]any{"question": secret, "context": secret}, key: "input",
			errHas: []string{`"input"`, `"context", "question"`},
		},
		{
			name: "several entries, no key", values: map[string]any{"a": secret, "b": secret},
			errHas: []string{"WithInputKey", `"a", "b"`},
		},
		{
			name: "intermediateSteps is not ignored on the input side", values: map[string]any{"input": secret, "intermediateSteps": secret},
			errHas: []string{"WithInputKey"},
		},
		{name: "nil map", values: nil, errHas: []string{"input"}},
		{name: "nil map with key", values: nil, key: "input", errHas: []string{"input"}},
		{name: "empty map", values: map[string]any{}, errHas: []string{"input"}},
		{
			name: "non-string value under key", values: map[string]any{"input": []string{secret}}, key: "input",
			errHas: []string{`"input"`, "[]string"},
		},
		{
			name: "non-string single value", values: map[string]any{"n": struct{ Token string }{secret}},
			errHas: []string{`"n"`, "struct"},
		},
		{name: "nil value", values: map[string]any{"input": nil}, key: "input", errHas: []string{`"input"`, "<nil>"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := adapter.InputValue(tc.values, tc.key)
			lc, lcErr := memory.GetInputValue(tc.values, tc.key)
			if tc.errHas != nil {
				requireInvalid(t, err)
				for _, s := range tc.errHas {
					assert.Contains(t, err.Error(), s)
				}
				assert.Empty(t, got)
				assert.Error(t, lcErr, "langchaingo rejects this input too")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			require.NoError(t, lcErr)
			assert.Equal(t, lc, got, "same entry as langchaingo's memory.GetInputValue")
		})
	}
}

func TestOutputValue(t *testing.T) {
	steps := []any{map[string]any{"action": secret, "observation": secret}}
	cases := []pickCase{
		{name: "configured key present", values: map[string]any{"text": "answer", "other": secret}, key: "text", want: "answer"},
		{name: "single entry, no key", values: map[string]any{"text": "answer"}, want: "answer"},
		{name: "output with intermediateSteps, no key", values: map[string]any{"output": "x", "intermediateSteps": steps}, want: "x"},
		{name: "intermediateSteps with a string answer key", values: map[string]any{"answer": "y", adapter.IntermediateStepsKey: steps}, want: "y"},
		{
			name: "configured key missing", values: map[string]any{"text": secret, "intermediateSteps": steps}, key: "output",
			errHas: []string{`"output"`, `"intermediateSteps", "text"`},
		},
		{
			name: "several entries, no key", values: map[string]any{"output": secret, "text": secret},
			errHas: []string{"WithOutputKey", `"output", "text"`},
		},
		{
			name: "several entries besides intermediateSteps", values: map[string]any{"output": secret, "text": secret, "intermediateSteps": steps},
			errHas: []string{"WithOutputKey"},
		},
		{
			name: "only intermediateSteps", values: map[string]any{"intermediateSteps": steps},
			errHas: []string{`"intermediateSteps"`, "[]interface {}"},
		},
		{
			name: "configured key is intermediateSteps", values: map[string]any{"output": "x", "intermediateSteps": steps}, key: "intermediateSteps",
			errHas: []string{`"intermediateSteps"`, "[]interface {}"},
		},
		{name: "nil map", values: nil, errHas: []string{"output"}},
		{name: "empty map", values: map[string]any{}, key: "text", errHas: []string{"output"}},
		{
			name: "non-string value", values: map[string]any{"text": map[string]string{"k": secret}}, key: "text",
			errHas: []string{`"text"`, "map[string]string"},
		},
		{name: "integer value", values: map[string]any{"text": 7}, errHas: []string{`"text"`, "int"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := adapter.OutputValue(tc.values, tc.key)
			if tc.errHas != nil {
				requireInvalid(t, err)
				for _, s := range tc.errHas {
					assert.Contains(t, err.Error(), s)
				}
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)

			// langchaingo picks the same entry once the documented
			// extension (ignoring intermediateSteps) is taken out.
			withoutSteps := make(map[string]any, len(tc.values))
			for k, v := range tc.values {
				if k != adapter.IntermediateStepsKey || tc.key == adapter.IntermediateStepsKey {
					withoutSteps[k] = v
				}
			}
			lc, lcErr := memory.GetInputValue(withoutSteps, tc.key)
			require.NoError(t, lcErr)
			assert.Equal(t, lc, got)
		})
	}
}

func TestErrorsDoNotContainValuesEvenWhenKeysAreAbsent(t *testing.T) {
	values := map[string]any{"prompt": secret, "password": secret + "2", "n": 3}
	for _, key := range []string{"", "input", "output"} {
		_, err := adapter.InputValue(values, key)
		requireInvalid(t, err)
		_, err = adapter.OutputValue(values, key)
		requireInvalid(t, err)
	}
}

func TestTurn(t *testing.T) {
	cases := []struct {
		name              string
		in, out           map[string]any
		inKey, outKey     string
		wantHuman, wantAI string
		errHas            string
	}{
		{name: "single entries", in: map[string]any{"input": "hi"}, out: map[string]any{"text": "hello"}, wantHuman: "hi", wantAI: "hello"},
		{
			name: "configured keys", in: map[string]any{"question": "q", "context": secret}, out: map[string]any{"answer": "a", "sources": secret},
			inKey: "question", outKey: "answer", wantHuman: "q", wantAI: "a",
		},
		{
			name: "agent output with intermediate steps", in: map[string]any{"input": "q"},
			out:       map[string]any{"output": "done", "intermediateSteps": []any{secret}},
			wantHuman: "q", wantAI: "done",
		},
		{name: "bad input", in: map[string]any{"a": secret, "b": secret}, out: map[string]any{"text": "x"}, errHas: "WithInputKey"},
		{name: "bad output", in: map[string]any{"input": "fine"}, out: map[string]any{"a": secret, "b": secret}, errHas: "WithOutputKey"},
		{name: "missing output key", in: map[string]any{"input": "fine"}, out: map[string]any{"text": secret}, outKey: "answer", errHas: `"answer"`},
		{name: "nil output", in: map[string]any{"input": "fine"}, out: nil, errHas: "output"},
		{name: "nil input", in: nil, out: map[string]any{"text": "x"}, errHas: "input"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, a, err := adapter.Turn(tc.in, tc.out, tc.inKey, tc.outKey)
			if tc.errHas != "" {
				requireInvalid(t, err)
				assert.Contains(t, err.Error(), tc.errHas)
				assert.Empty(t, h, "nothing is returned from a half-valid turn")
				assert.Empty(t, a)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantHuman, h)
			assert.Equal(t, tc.wantAI, a)
		})
	}
}

// unknownMessage has a type langchaingo does not know.
type unknownMessage struct{}

func (unknownMessage) GetType() llms.ChatMessageType { return "robot" }
func (unknownMessage) GetContent() string            { return "beep" }

// myGeneric claims to be generic but is not an llms.GenericChatMessage, so
// it has no Role to render.
type myGeneric struct{ Role, Content string }

func (myGeneric) GetType() llms.ChatMessageType { return llms.ChatMessageTypeGeneric }
func (m myGeneric) GetContent() string          { return m.Content }

func TestValidateMessage(t *testing.T) {
	valid := []llms.ChatMessage{
		llms.HumanChatMessage{Content: "h"},
		llms.AIChatMessage{Content: "a"},
		aiWithCalls(),
		llms.SystemChatMessage{Content: "s"},
		llms.GenericChatMessage{Role: "narrator", Content: "g"},
		llms.FunctionChatMessage{Name: "f", Content: "out"},
		llms.ToolChatMessage{ID: "call_1", Content: "out"},
		llms.HumanChatMessage{},
	}
	for _, m := range valid {
		assert.NoError(t, adapter.ValidateMessage(m), "%T", m)
	}

	invalid := []struct {
		name   string
		msg    llms.ChatMessage
		errHas []string
	}{
		{"nil", nil, []string{"nil"}},
		{"unknown type", unknownMessage{}, []string{`"robot"`, "unknownMessage"}},
		{"custom generic", myGeneric{Role: "r", Content: "c"}, []string{"myGeneric", "llms.GenericChatMessage"}},
		{"pointer to custom generic", &myGeneric{Role: "r"}, []string{"llms.GenericChatMessage"}},
		{"typed nil pointer", (*llms.HumanChatMessage)(nil), []string{"nil"}},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = adapter.ValidateMessage(tc.msg) })
			requireInvalid(t, err)
			for _, s := range tc.errHas {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func aiWithCalls() llms.AIChatMessage {
	return llms.AIChatMessage{
		Content:      "let me look",
		FunctionCall: &llms.FunctionCall{Name: "legacy", Arguments: `{"x":1}`},
		ToolCalls: []llms.ToolCall{
			{ID: "call_1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "search", Arguments: `{"q":"go"}`}},
			{ID: "call_2", Type: "function", FunctionCall: &llms.FunctionCall{Name: "calc", Arguments: `{"e":"1+1"}`}},
		},
	}
}

func renderTable() []llms.ChatMessage {
	return []llms.ChatMessage{
		llms.SystemChatMessage{Content: "You are terse."},
		llms.HumanChatMessage{Content: "Hi"},
		llms.AIChatMessage{Content: "Hello!"},
		llms.AIChatMessage{Content: "calling", FunctionCall: &llms.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris <&>"}`}},
		llms.AIChatMessage{FunctionCall: &llms.FunctionCall{Name: "noargs"}},
		aiWithCalls(),
		llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c", Type: "function", FunctionCall: &llms.FunctionCall{Name: "t"}}}},
		llms.FunctionChatMessage{Name: "get_weather", Content: `{"temp":21}`},
		llms.ToolChatMessage{ID: "call_1", Content: "42"},
		llms.GenericChatMessage{Role: "narrator", Content: "Meanwhile...", Name: "n"},
		llms.GenericChatMessage{Content: "no role"},
		llms.HumanChatMessage{Content: "multi\nline\n"},
		llms.HumanChatMessage{Content: ""},
		llms.AIChatMessage{Content: "ünïcödé 💬"},
	}
}

func TestRenderMatchesGetBufferString(t *testing.T) {
	msgs := renderTable()
	for _, prefixes := range [][2]string{
		{adapter.DefaultHumanPrefix, adapter.DefaultAIPrefix},
		{"User", "Assistant"},
		{"", ""},
		{"Human: ", "AI:\n"},
	} {
		hp, ap := prefixes[0], prefixes[1]
		lines := make([]string, 0, len(msgs))
		for i, m := range msgs {
			want, err := llms.GetBufferString([]llms.ChatMessage{m}, hp, ap)
			require.NoError(t, err)
			got, err := adapter.RenderLine(m, hp, ap)
			require.NoError(t, err)
			assert.Equal(t, want, got, "message %d (%T) with prefixes %q/%q", i, m, hp, ap)
			lines = append(lines, got)
		}
		want, err := llms.GetBufferString(msgs, hp, ap)
		require.NoError(t, err)
		got, err := adapter.Render(msgs, hp, ap)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		assert.Equal(t, want, strings.Join(lines, "\n"), "joined lines equal the whole rendering")
	}

	// Spot checks that the table exercises what it claims to.
	line, err := adapter.RenderLine(msgs[3], "Human", "AI")
	require.NoError(t, err)
	assert.Equal(t, `AI: calling {"name":"get_weather","arguments":"{\"city\":\"Paris \u003c\u0026\u003e\"}"}`, line)
	line, err = adapter.RenderLine(msgs[9], "Human", "AI")
	require.NoError(t, err)
	assert.Equal(t, "narrator: Meanwhile...", line)

	empty, err := adapter.Render(nil, "Human", "AI")
	require.NoError(t, err)
	assert.Empty(t, empty)
}

func TestRenderRejectsUnknownTypes(t *testing.T) {
	for _, m := range []llms.ChatMessage{unknownMessage{}, myGeneric{Role: "r"}} {
		_, err := adapter.RenderLine(m, "Human", "AI")
		require.ErrorIs(t, err, llms.ErrUnexpectedChatMessageType, "%T", m)
		_, err = adapter.Render([]llms.ChatMessage{llms.HumanChatMessage{Content: "ok"}, m}, "Human", "AI")
		require.ErrorIs(t, err, llms.ErrUnexpectedChatMessageType, "%T", m)
	}
}

func TestMessageContents(t *testing.T) {
	cases := []struct {
		name string
		msg  llms.ChatMessage
		want llms.MessageContent
	}{
		{"human", llms.HumanChatMessage{Content: "h"}, llms.MessageContent{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextPart("h")}}},
		{"system", llms.SystemChatMessage{Content: "s"}, llms.MessageContent{Role: llms.ChatMessageTypeSystem, Parts: []llms.ContentPart{llms.TextPart("s")}}},
		{
			"generic", llms.GenericChatMessage{Role: "narrator", Content: "g"},
			llms.MessageContent{Role: llms.ChatMessageTypeGeneric, Parts: []llms.ContentPart{llms.TextPart("g")}},
		},
		{"ai text", llms.AIChatMessage{Content: "a"}, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{llms.TextPart("a")}}},
		{"ai empty", llms.AIChatMessage{}, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{llms.TextPart("")}}},
		{
			"ai with tool calls and text", aiWithCalls(),
			llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{
				llms.TextPart("let me look"),
				llms.ToolCall{ID: "call_1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "search", Arguments: `{"q":"go"}`}},
				llms.ToolCall{ID: "call_2", Type: "function", FunctionCall: &llms.FunctionCall{Name: "calc", Arguments: `{"e":"1+1"}`}},
				llms.ToolCall{Type: "function", FunctionCall: &llms.FunctionCall{Name: "legacy", Arguments: `{"x":1}`}},
			}},
		},
		{
			"ai with tool calls only",
			llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"}}}},
			llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{
				llms.ToolCall{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"}},
			}},
		},
		{
			"ai with legacy function call only",
			llms.AIChatMessage{FunctionCall: &llms.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
			llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{
				llms.ToolCall{Type: "function", FunctionCall: &llms.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}},
			}},
		},
		{
			"tool", llms.ToolChatMessage{ID: "call_1", Content: "42"},
			llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: "call_1", Content: "42"}}},
		},
		{
			"function", llms.FunctionChatMessage{Name: "get_weather", Content: "sunny"},
			llms.MessageContent{Role: llms.ChatMessageTypeFunction, Parts: []llms.ContentPart{llms.ToolCallResponse{Name: "get_weather", Content: "sunny"}}},
		},
	}
	all := make([]llms.ChatMessage, 0, len(cases))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := adapter.MessageContents([]llms.ChatMessage{tc.msg})
			require.NoError(t, err)
			require.Len(t, got, 1)
			assert.Equal(t, tc.want, got[0])
		})
		all = append(all, tc.msg)
	}

	// All at once: order and roles kept.
	got, err := adapter.MessageContents(all)
	require.NoError(t, err)
	require.Len(t, got, len(cases))
	for i, tc := range cases {
		assert.Equal(t, tc.want, got[i], "message %d", i)
	}

	empty, err := adapter.MessageContents(nil)
	require.NoError(t, err)
	assert.Empty(t, empty)
}

func TestMessageContentsRejectsInvalid(t *testing.T) {
	for _, bad := range []llms.ChatMessage{nil, unknownMessage{}, myGeneric{}} {
		got, err := adapter.MessageContents([]llms.ChatMessage{llms.HumanChatMessage{Content: "ok"}, bad})
		requireInvalid(t, err)
		assert.Contains(t, err.Error(), "message 2")
		assert.Nil(t, got)
	}
}

func TestMessageContentsSharesNoMemory(t *testing.T) {
	in := aiWithCalls()
	got, err := adapter.MessageContents([]llms.ChatMessage{in})
	require.NoError(t, err)
	want, err := adapter.MessageContents([]llms.ChatMessage{aiWithCalls()})
	require.NoError(t, err)
	require.Equal(t, want, got)

	// Mutating the input afterwards does not change the result.
	in.FunctionCall.Name = "changed"
	in.FunctionCall.Arguments = "changed"
	in.ToolCalls[0].ID = "changed"
	in.ToolCalls[0].FunctionCall.Name = "changed"
	in.ToolCalls[1].FunctionCall.Arguments = "changed"
	assert.Equal(t, want, got)

	// Mutating the result does not change the input.
	in = aiWithCalls()
	got, err = adapter.MessageContents([]llms.ChatMessage{in})
	require.NoError(t, err)
	for _, p := range got[0].Parts {
		if tc, ok := p.(llms.ToolCall); ok {
			tc.FunctionCall.Name = "mutated"
			tc.FunctionCall.Arguments = "mutated"
		}
	}
	assert.Equal(t, aiWithCalls(), in)
}

func TestErrInvalidValuesIsLangchaingos(t *testing.T) {
	assert.True(t, errors.Is(adapter.ErrInvalidValues, memory.ErrInvalidInputValues))
	assert.Equal(t, "history", adapter.DefaultMemoryKey)
	assert.Equal(t, "Human", adapter.DefaultHumanPrefix)
	assert.Equal(t, "AI", adapter.DefaultAIPrefix)
	// langchaingo's own defaults match.
	buf := memory.NewConversationBuffer()
	assert.Equal(t, buf.MemoryKey, adapter.DefaultMemoryKey)
	assert.Equal(t, buf.HumanPrefix, adapter.DefaultHumanPrefix)
	assert.Equal(t, buf.AIPrefix, adapter.DefaultAIPrefix)
}

// Text that is not valid UTF-8 is refused up front, naming the key (or the
// message type), whatever store a memory uses.
func TestInvalidUTF8IsRejected(t *testing.T) {
	bad := "caf\xe9"
	_, _, err := adapter.Turn(map[string]any{"input": bad}, map[string]any{"output": "ok"}, "", "")
	require.ErrorIs(t, err, adapter.ErrInvalidValues)
	assert.Contains(t, err.Error(), `input key "input"`)
	assert.Contains(t, err.Error(), "UTF-8")
	assert.NotContains(t, err.Error(), bad)
	_, _, err = adapter.Turn(map[string]any{"input": "ok"}, map[string]any{"text": bad}, "", "")
	require.ErrorIs(t, err, adapter.ErrInvalidValues)
	assert.Contains(t, err.Error(), `output key "text"`)
	_, err = adapter.Normalize(llms.SystemChatMessage{Content: bad})
	require.ErrorIs(t, err, adapter.ErrInvalidValues)
	assert.Contains(t, err.Error(), "system message")
	// NUL bytes are valid UTF-8 and accepted.
	h, _, err := adapter.Turn(map[string]any{"input": "a\x00b"}, map[string]any{"output": "ok"}, "", "")
	require.NoError(t, err)
	assert.Equal(t, "a\x00b", h)
}

func TestInvalidUTF8OutsideContentIsRejected(t *testing.T) {
	bad := "x\xff"
	for _, tc := range []struct {
		msg   llms.ChatMessage
		field string
	}{
		{llms.ToolChatMessage{ID: bad, Content: "ok"}, "tool call id"},
		{llms.GenericChatMessage{Role: bad, Content: "ok"}, "role"},
		{&llms.GenericChatMessage{Role: "r", Name: bad, Content: "ok"}, "name"},
		{llms.FunctionChatMessage{Name: bad, Content: "ok"}, "name"},
		{llms.AIChatMessage{Content: "ok", ReasoningContent: bad}, "reasoning content"},
		{llms.AIChatMessage{FunctionCall: &llms.FunctionCall{Name: "f", Arguments: bad}}, "function call arguments"},
		{&llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "1", Type: "function", FunctionCall: &llms.FunctionCall{Name: bad}}}}, "tool call 1 function name"},
	} {
		err := adapter.ValidateMessage(tc.msg)
		require.ErrorIs(t, err, adapter.ErrInvalidValues, "%T", tc.msg)
		assert.Contains(t, err.Error(), tc.field+" is not valid UTF-8")
	}
}
