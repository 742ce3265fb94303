package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

type codecCustomMessage struct{}

func (codecCustomMessage) GetType() llms.ChatMessageType { return "custom" }
func (codecCustomMessage) GetContent() string            { return "x" }

func TestCodecRoundTrip(t *testing.T) {
	big := strings.Repeat("héllo wörld ✓ 🙂 \x00 ", 1<<16)
	cases := []struct {
		name string
		msg  llms.ChatMessage
	}{
		{"human", llms.HumanChatMessage{Content: "Hi <b>&</b>"}},
		{"human empty", llms.HumanChatMessage{}},
		{"system", llms.SystemChatMessage{Content: "Be brief."}},
		{"ai plain", llms.AIChatMessage{Content: "Hello!"}},
		{"ai full", aiWithCalls()},
		{"ai reasoning", llms.AIChatMessage{Content: "a", ReasoningContent: "because"}},
		{"ai empty tool calls", llms.AIChatMessage{Content: "a", ToolCalls: []llms.ToolCall{}}},
		{"ai tool call without function", llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "1", Type: "function"}}}},
		{"ai empty function call", llms.AIChatMessage{FunctionCall: &llms.FunctionCall{}}},
		{"generic", llms.GenericChatMessage{Content: "c", Role: "critic", Name: "bob"}},
		{"generic empty", llms.GenericChatMessage{}},
		{"function", llms.FunctionChatMessage{Content: `{"ok":true}`, Name: "lookup"}},
		{"tool", llms.ToolChatMessage{Content: "42", ID: "call_1"}},
		{"NUL and controls", llms.HumanChatMessage{Content: "a\x00b\x01\n\t\u2028\"\\"}},
		{"1 MB multibyte", llms.HumanChatMessage{Content: big}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := store.EncodeMessage(tc.msg)
			require.NoError(t, err)
			assert.NotContains(t, string(data), "\x00", "encoded value must hold no NUL byte")
			got, err := store.DecodeMessage(data)
			require.NoError(t, err)
			assert.Equal(t, tc.msg, got)
		})
	}
}

func TestCodecPointersDecodeAsValues(t *testing.T) {
	m := aiWithCalls()
	data, err := store.EncodeMessage(&m)
	require.NoError(t, err)
	got, err := store.DecodeMessage(data)
	require.NoError(t, err)
	assert.Equal(t, m, got)

	data, err = store.EncodeMessage(&llms.ToolChatMessage{ID: "x", Content: "y"})
	require.NoError(t, err)
	got, err = store.DecodeMessage(data)
	require.NoError(t, err)
	assert.Equal(t, llms.ToolChatMessage{ID: "x", Content: "y"}, got)
}

func TestCodecFormatIsStable(t *testing.T) {
	data, err := store.EncodeMessage(llms.ToolChatMessage{ID: "call_1", Content: "<42>"})
	require.NoError(t, err)
	assert.Equal(t, `{"v":1,"type":"tool","content":"<42>","id":"call_1"}`, string(data))

	data, err = store.EncodeMessage(llms.AIChatMessage{Content: "a", ToolCalls: []llms.ToolCall{{ID: "c", Type: "function",
		FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"}}}})
	require.NoError(t, err)
	assert.Equal(t, `{"v":1,"type":"ai","content":"a","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`, string(data))
}

func TestCodecRejectsBadMessages(t *testing.T) {
	var nilAI *llms.AIChatMessage
	cases := []struct {
		name string
		msg  llms.ChatMessage
		want string
	}{
		{"nil", nil, "nil message"},
		{"nil pointer", nilAI, "nil message"},
		{"unknown type", codecCustomMessage{}, "store_test.codecCustomMessage"},
		{"invalid UTF-8 content", llms.HumanChatMessage{Content: "a\xffb"}, "content is not valid UTF-8"},
		{"invalid UTF-8 tool args", llms.AIChatMessage{ToolCalls: []llms.ToolCall{{FunctionCall: &llms.FunctionCall{Arguments: "\xc0"}}}},
			"tool call 1 function arguments is not valid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.EncodeMessage(tc.msg)
			require.Error(t, err)
			assert.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "a\xffb")
		})
	}
}

func TestCodecRejectsCorruptValues(t *testing.T) {
	cases := []struct {
		name, data, want string
	}{
		{"empty", ``, "empty value"},
		{"garbage", `\x01garbage secret`, "invalid JSON"},
		{"truncated", `{"v":1,"type":"human","content":"sec`, "not a stored message"},
		{"array", `[1,2]`, "not a stored message"},
		{"null", `null`, "codec version 0"},
		{"wrong version", `{"v":2,"type":"human","content":"x"}`, "codec version 2"},
		{"unknown type", `{"v":1,"type":"robot","content":"x"}`, `unknown message type "robot"`},
		{"no content", `{"v":1,"type":"human"}`, "no content field"},
		{"field of another type", `{"v":1,"type":"human","content":"x","role":"r"}`, "has a role field"},
		{"generic without role", `{"v":1,"type":"generic","content":"x","name":"n"}`, "no role field"},
		{"tool without id", `{"v":1,"type":"tool","content":"x"}`, "no id field"},
		{"wrong field type", `{"v":1,"type":"human","content":7}`, "wrong JSON type"},
		{"tool call without id", `{"v":1,"type":"ai","content":"","tool_calls":[{"type":"function"}]}`, "tool call 1 lacks id"},
		{"function call without args", `{"v":1,"type":"ai","content":"","function_call":{"name":"f"}}`, "lacks name or arguments"},
		{"trailing data", `{"v":1,"type":"human","content":"x"} {}`, "invalid JSON"},
		{"whitespace only", " \n", "empty value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := store.DecodeMessage([]byte(tc.data))
			require.Error(t, err)
			assert.Nil(t, msg)
			assert.ErrorIs(t, err, store.ErrCorrupt)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "secret")
		})
	}
}

func TestCodecIgnoresUnknownKeys(t *testing.T) {
	got, err := store.DecodeMessage([]byte(`{"v":1,"type":"human","content":"x","added_later":[1]}`))
	require.NoError(t, err)
	assert.Equal(t, llms.HumanChatMessage{Content: "x"}, got)
}

func TestDecodeRecordNamesIdentityAndSeq(t *testing.T) {
	id := memstack.Identity{Tenant: "acme", User: "u:1", Conversation: "c"}
	_, err := store.DecodeRecord(id, 42, []byte("garbage"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, store.ErrCorrupt))
	assert.Contains(t, err.Error(), "Seq 42")
	assert.Contains(t, err.Error(), id.Key())

	data, err := store.EncodeMessage(llms.HumanChatMessage{Content: "hi"})
	require.NoError(t, err)
	rec, err := store.DecodeRecord(id, 7, data)
	require.NoError(t, err)
	assert.Equal(t, store.Record{Seq: 7, Message: llms.HumanChatMessage{Content: "hi"}}, rec)
}
