package kit

import (
	"reflect"

	"github.com/tmc/langchaingo/llms"
)

// IsNil reports whether msg is nil or a nil pointer inside the interface.
func IsNil(msg llms.ChatMessage) bool {
	if msg == nil {
		return true
	}
	v := reflect.ValueOf(msg)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// CloneMessage returns a copy of msg that shares no mutable memory with it:
// an AI message's tool calls and function call are copied, so neither the
// caller nor the store can change the other's message afterwards. Other
// langchaingo message types are plain values and are returned as they are;
// so are message types this package does not know.
func CloneMessage(msg llms.ChatMessage) llms.ChatMessage {
	switch m := msg.(type) {
	case llms.AIChatMessage:
		return cloneAI(m)
	case *llms.AIChatMessage:
		if m == nil {
			return msg
		}
		return cloneAI(*m)
	}
	return msg
}

func cloneAI(m llms.AIChatMessage) llms.AIChatMessage {
	if m.FunctionCall != nil {
		fc := *m.FunctionCall
		m.FunctionCall = &fc
	}
	if m.ToolCalls != nil {
		calls := make([]llms.ToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			if c.FunctionCall != nil {
				fc := *c.FunctionCall
				c.FunctionCall = &fc
			}
			calls[i] = c
		}
		m.ToolCalls = calls
	}
	return m
}
