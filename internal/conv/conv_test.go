package conv

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/tmc/langchaingo/llms"
)

var (
	human  = llms.HumanChatMessage{Content: "hi"}
	ai     = llms.AIChatMessage{Content: "hello"}
	system = llms.SystemChatMessage{Content: "be brief"}
	call   = llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "1", Type: "function"}}}
	callP  = &llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "2", Type: "function"}}}
	fnCall = llms.AIChatMessage{FunctionCall: &llms.FunctionCall{Name: "f"}}
	fnCalP = &llms.AIChatMessage{FunctionCall: &llms.FunctionCall{Name: "f"}}
	tool   = llms.ToolChatMessage{ID: "1", Content: "42"}
	fn     = llms.FunctionChatMessage{Name: "f", Content: "42"}
	aiP    = &llms.AIChatMessage{Content: "plain"}
	nilAI  = (*llms.AIChatMessage)(nil)
)

func TestCallsTools(t *testing.T) {
	tests := []struct {
		name string
		msg  llms.ChatMessage
		want bool
	}{
		{"tool calls value", call, true},
		{"tool calls pointer", callP, true},
		{"function call value", fnCall, true},
		{"function call pointer", fnCalP, true},
		{"plain AI value", ai, false},
		{"plain AI pointer", aiP, false},
		{"nil AI pointer", nilAI, false},
		{"nil message", nil, false},
		{"human", human, false},
		{"tool result", tool, false},
		{"generic AI role", llms.ChatMessage(llms.GenericChatMessage{Role: "ai"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, CallsTools(tt.msg))
		})
	}
}

func TestPredicates(t *testing.T) {
	tests := []struct {
		name                               string
		msg                                llms.ChatMessage
		result, system, opensEx, opensTurn bool
	}{
		{"human", human, false, false, true, true},
		{"AI", ai, false, false, false, true},
		{"AI pointer", aiP, false, false, false, true},
		{"tool call", call, false, false, false, true},
		{"system", system, false, true, false, false},
		{"tool result", tool, true, false, false, false},
		{"function result", fn, true, false, false, false},
		{"nil", nil, false, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.result, IsToolResult(tt.msg), "IsToolResult")
			assert.Equal(t, tt.system, IsSystem(tt.msg), "IsSystem")
			assert.Equal(t, tt.opensEx, OpensExchange(tt.msg), "OpensExchange")
			assert.Equal(t, tt.opensTurn, OpensTurn(tt.msg), "OpensTurn")
		})
	}
}

func TestGroupStarts(t *testing.T) {
	tests := []struct {
		name string
		msgs []llms.ChatMessage
		want []int
	}{
		{"empty", nil, []int{}},
		{"singles", []llms.ChatMessage{human, ai, human}, []int{0, 1, 2}},
		{"call and results", []llms.ChatMessage{human, call, tool, tool, ai}, []int{0, 1, 1, 1, 4}},
		{"pointer call", []llms.ChatMessage{callP, tool, human}, []int{0, 0, 2}},
		{"function call", []llms.ChatMessage{fnCall, fn, fnCalP, fn}, []int{0, 0, 2, 2}},
		{"system between call and results", []llms.ChatMessage{call, system, tool, system, fn}, []int{0, 1, 0, 3, 0}},
		{"result with no call", []llms.ChatMessage{tool, human, tool}, []int{0, 1, 2}},
		{"result after a system message only", []llms.ChatMessage{system, tool}, []int{0, 1}},
		{"other message ends the group", []llms.ChatMessage{call, tool, ai, tool}, []int{0, 0, 2, 3}},
		{"human ends the group", []llms.ChatMessage{call, human, tool}, []int{0, 1, 2}},
		{"next call opens a new group", []llms.ChatMessage{call, tool, callP, tool}, []int{0, 0, 2, 2}},
		{"nil does not end the group", []llms.ChatMessage{call, nil, tool}, []int{0, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, GroupStarts(tt.msgs, Self))
		})
	}
}

// rec stands for a stored record: the helpers are generic in it.
type rec struct {
	seq int
	msg llms.ChatMessage
}

func recMsg(r rec) llms.ChatMessage { return r.msg }

func recs(msgs ...llms.ChatMessage) []rec {
	out := make([]rec, len(msgs))
	for i, m := range msgs {
		out[i] = rec{seq: i + 1, msg: m}
	}
	return out
}

func TestGroupStartsGeneric(t *testing.T) {
	assert.Equal(t, []int{0, 1, 1, 3}, GroupStarts(recs(human, call, tool, ai), recMsg))
}

func TestSplitSystem(t *testing.T) {
	tests := []struct {
		name         string
		in           []rec
		system, rest []rec
	}{
		{"empty", nil, nil, []rec{}},
		{"no system", recs(human, ai), nil, recs(human, ai)},
		{"only system", recs(system, system), recs(system, system), []rec{}},
		{"mixed, order kept", recs(system, human, system, ai),
			[]rec{{1, system}, {3, system}}, []rec{{2, human}, {4, ai}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			system, rest := SplitSystem(tt.in, recMsg)
			assert.Equal(t, tt.system, system)
			assert.Equal(t, tt.rest, rest)
			assert.NotNil(t, rest)
		})
	}
}

func TestUnits(t *testing.T) {
	tests := []struct {
		name      string
		msgs      []llms.ChatMessage
		exchanges [][]int // seqs
		turns     [][]int
	}{
		{"empty", nil, nil, nil},
		{"one human", []llms.ChatMessage{human}, [][]int{{1}}, [][]int{{1}}},
		{"human then answer", []llms.ChatMessage{human, ai, human, ai},
			[][]int{{1, 2}, {3, 4}}, [][]int{{1}, {2}, {3}, {4}}},
		{"first unit starts anywhere", []llms.ChatMessage{tool, ai, human},
			[][]int{{1, 2}, {3}}, [][]int{{1}, {2}, {3}}},
		{"tool group stays in its turn", []llms.ChatMessage{human, call, system, tool, ai},
			[][]int{{1, 2, 3, 4, 5}}, [][]int{{1}, {2, 3, 4}, {5}}},
		{"pointer AI opens a turn", []llms.ChatMessage{human, callP, fn, aiP},
			[][]int{{1, 2, 3, 4}}, [][]int{{1}, {2, 3}, {4}}},
		{"system only", []llms.ChatMessage{system, system}, [][]int{{1, 2}}, [][]int{{1, 2}}},
	}
	seqs := func(units [][]rec) [][]int {
		var out [][]int
		for _, u := range units {
			var s []int
			for _, r := range u {
				s = append(s, r.seq)
			}
			out = append(out, s)
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := recs(tt.msgs...)
			assert.Equal(t, tt.exchanges, seqs(Exchanges(in, recMsg)), "Exchanges")
			assert.Equal(t, tt.exchanges, seqs(Units(in, recMsg, OpensExchange)), "Units(OpensExchange)")
			assert.Equal(t, tt.turns, seqs(Units(in, recMsg, OpensTurn)), "Units(OpensTurn)")
		})
	}
}

func TestHasExchangeStart(t *testing.T) {
	tests := []struct {
		name string
		msgs []llms.ChatMessage
		want bool
	}{
		{"empty", nil, false},
		{"no human", []llms.ChatMessage{system, call, tool, ai}, false},
		{"a human", []llms.ChatMessage{ai, human}, true},
		{"nil", []llms.ChatMessage{nil}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, HasExchangeStart(tt.msgs, Self))
		})
	}
}
