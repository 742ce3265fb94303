package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/store"
)

func testMessageTypesRoundTrip(t *testing.T, e *env) {
	s := e.store()
	msgs := []llms.ChatMessage{
		llms.SystemChatMessage{Content: "You are terse."},
		llms.HumanChatMessage{Content: "What is 6*7? Look it up."},
		llms.AIChatMessage{
			Content:      "Let me check.",
			FunctionCall: &llms.FunctionCall{Name: "legacy_calc", Arguments: `{"e":"6*7"}`},
			ToolCalls: []llms.ToolCall{
				{ID: "call_1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "calc", Arguments: `{"e":"6*7"}`}},
				{ID: "call_2", Type: "function", FunctionCall: &llms.FunctionCall{Name: "search", Arguments: `{"q":"42"}`}},
				{ID: "call_3", Type: "function"},
			},
			ReasoningContent: "The user wants arithmetic.",
		},
		llms.ToolChatMessage{ID: "call_1", Content: "42"},
		llms.FunctionChatMessage{Name: "legacy_calc", Content: `{"result":42}`},
		llms.GenericChatMessage{Role: "critic", Name: "reviewer-1", Content: "Looks right."},
		llms.AIChatMessage{Content: "42."},
		llms.AIChatMessage{Content: "empty calls", ToolCalls: []llms.ToolCall{}},
		llms.AIChatMessage{FunctionCall: &llms.FunctionCall{}},
		llms.HumanChatMessage{},
		llms.GenericChatMessage{},
		llms.ToolChatMessage{},
		llms.FunctionChatMessage{},
	}
	mustAppend(t, s, alice, msgs...)
	rs := mustAll(t, s, alice)
	assert.Equal(t, msgs, messagesOf(rs))
	last, err := s.Last(e.ctx, alice, 4)
	require.NoError(t, err)
	assert.Equal(t, msgs[len(msgs)-4:], messagesOf(last))

	// A pointer to a message is stored as the message it points to.
	p := &llms.AIChatMessage{Content: "via pointer", ToolCalls: []llms.ToolCall{{ID: "x", Type: "function"}}}
	mustAppend(t, s, bob, p)
	assert.Equal(t, []llms.ChatMessage{*p}, messagesOf(mustAll(t, s, bob)))
}

func testTextRoundTrip(t *testing.T, e *env) {
	s := e.store()
	texts := []string{
		"",
		"a\x00b",
		"\x00",
		"\x00\x00trailing\x00",
		"controls \x01\x02\x1f\x7f \t\r\n",
		"\u2028\u2029",
		`quotes " ' `,
		`back\slash \u0000 \n`,
		"'; DROP TABLE messages; --",
		"<script>&amp;</script>",
		"ünïcödé 中文 🙂 e\u0301",
		"\ufeffBOM",
		"\U0010FFFF",
		"  leading and trailing spaces  ",
	}
	for i, text := range texts {
		mustAppend(t, s, alice,
			llms.HumanChatMessage{Content: text},
			llms.AIChatMessage{Content: text, ReasoningContent: text, ToolCalls: []llms.ToolCall{{ID: text, Type: text,
				FunctionCall: &llms.FunctionCall{Name: text, Arguments: text}}}},
			llms.GenericChatMessage{Content: text, Role: text, Name: text},
			llms.ToolChatMessage{Content: text, ID: text},
		)
		rs, err := s.Last(e.ctx, alice, 4)
		require.NoError(t, err)
		want := []llms.ChatMessage{
			llms.HumanChatMessage{Content: text},
			llms.AIChatMessage{Content: text, ReasoningContent: text, ToolCalls: []llms.ToolCall{{ID: text, Type: text,
				FunctionCall: &llms.FunctionCall{Name: text, Arguments: text}}}},
			llms.GenericChatMessage{Content: text, Role: text, Name: text},
			llms.ToolChatMessage{Content: text, ID: text},
		}
		assert.Equal(t, want, messagesOf(rs), "text %d (%q)", i, text)
	}
	assert.Len(t, mustAll(t, s, alice), 4*len(texts))
}

func testOneMegabyte(t *testing.T, e *env) {
	s := e.store()
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "line %d: ünïcödé 中文 🙂 \x00 \"q\" \\ \n", i)
	}
	big := b.String()
	mustAppend(t, s, alice, human("before"))
	mustAppend(t, s, alice, human(big), llms.AIChatMessage{Content: big, ToolCalls: []llms.ToolCall{{ID: "c", Type: "function",
		FunctionCall: &llms.FunctionCall{Name: "f", Arguments: big}}}})
	mustAppend(t, s, alice, human("after"))

	rs := mustAll(t, s, alice)
	require.Len(t, rs, 4)
	requireSameString(t, big, rs[1].Message.GetContent(), "the 1 MB human message read by All")
	requireSameString(t, big, rs[2].Message.GetContent(), "the 1 MB AI message read by All")
	aiMsg, ok := rs[2].Message.(llms.AIChatMessage)
	require.True(t, ok, "AI message comes back as llms.AIChatMessage, got %T", rs[2].Message)
	require.Len(t, aiMsg.ToolCalls, 1)
	require.NotNil(t, aiMsg.ToolCalls[0].FunctionCall)
	requireSameString(t, big, aiMsg.ToolCalls[0].FunctionCall.Arguments, "the 1 MB tool call arguments")

	last, err := s.Last(e.ctx, alice, 3)
	require.NoError(t, err)
	require.Len(t, last, 3)
	requireSameString(t, big, last[0].Message.GetContent(), "the 1 MB message read by Last")
	assert.Equal(t, "after", last[2].Message.GetContent())
}

func testCopies(t *testing.T, e *env) {
	s := e.store()
	m := llms.AIChatMessage{Content: "a", FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"},
		ToolCalls: []llms.ToolCall{{ID: "1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "g", Arguments: "{}"}}}}
	want := llms.AIChatMessage{Content: "a", FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"},
		ToolCalls: []llms.ToolCall{{ID: "1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "g", Arguments: "{}"}}}}
	mustAppend(t, s, alice, m)
	// Change the appended value.
	m.FunctionCall.Name = "changed"
	m.ToolCalls[0].ID = "changed"
	m.ToolCalls[0].FunctionCall.Arguments = "changed"

	rs := mustAll(t, s, alice)
	require.Len(t, rs, 1)
	assert.Equal(t, want, rs[0].Message, "changing the appended message changes nothing stored")

	// Change the returned values.
	got := rs[0].Message.(llms.AIChatMessage)
	got.FunctionCall.Name = "changed"
	got.ToolCalls[0].FunctionCall.Name = "changed"
	got.ToolCalls[0].Type = "changed"
	rs[0] = store.Record{}
	last, err := s.Last(e.ctx, alice, 1)
	require.NoError(t, err)
	require.Len(t, last, 1)
	assert.Equal(t, want, last[0].Message, "changing a returned message changes nothing stored")
	assert.Equal(t, want, mustAll(t, s, alice)[0].Message)
}
