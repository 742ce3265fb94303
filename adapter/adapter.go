// Package adapter is the one place in memstack that knows langchaingo's
// conventions: which entry of a chain's input and output maps is the user's
// message and which is the model's answer, how messages render into the
// history string of a prompt, and how they become role-separated
// llms.MessageContent for a chat model.
//
// Memories call the adapter and never look inside langchaingo's maps
// themselves, so every memory type selects keys, validates and renders in
// exactly the same way — and in the same way as langchaingo's own memories,
// so a prompt written for langchaingo keeps working:
//
//   - Key selection follows langchaingo's memory.GetInputValue: a configured
//     key must be present; with no key configured the map must hold exactly
//     one entry. One documented extension: on the output side, with no output
//     key configured, the agent executor's "intermediateSteps" entry (added
//     by agents.WithReturnIntermediateSteps) is ignored, because it is never
//     the model's answer.
//   - Rendering is byte-for-byte llms.GetBufferString.
//
// Unlike langchaingo, errors name the offending key and never include the
// map's values (which may be large or private), both maps of a turn are
// validated before anything is written, and text that is not valid UTF-8 is
// rejected up front (every persistent store would reject it, and a
// tokenizer or chat model would mangle it), so a turn is accepted or
// refused the same way whatever store a memory uses. Every validation error wraps
// langchaingo's memory.ErrInvalidInputValues, so code that checks for it
// with errors.Is keeps working.
package adapter

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
)

// Defaults shared by every memory type; they are langchaingo's.
const (
	DefaultMemoryKey   = "history"
	DefaultHumanPrefix = "Human"
	DefaultAIPrefix    = "AI"
	// IntermediateStepsKey is the output entry the agent executor adds when
	// it returns intermediate steps.
	IntermediateStepsKey = "intermediateSteps"
)

// ErrInvalidValues is wrapped by every error about a chain's input or output
// map or a message. It is langchaingo's memory.ErrInvalidInputValues.
var ErrInvalidValues = memory.ErrInvalidInputValues

// Turn validates one chain call's maps and returns the user's message and
// the model's answer. Both maps are checked before Turn returns, so a memory
// that writes only after Turn succeeds stores a turn whole or not at all.
func Turn(inputs, outputs map[string]any, inputKey, outputKey string) (human, ai string, err error) {
	human, err = InputValue(inputs, inputKey)
	if err != nil {
		return "", "", err
	}
	ai, err = OutputValue(outputs, outputKey)
	if err != nil {
		return "", "", err
	}
	return human, ai, nil
}

// InputValue returns the user's message from a chain's input map: the entry
// named key, or with key empty the only entry.
func InputValue(values map[string]any, key string) (string, error) {
	return pick("input", values, key, "WithInputKey", nil)
}

// OutputValue returns the model's answer from a chain's output map: the
// entry named key, or with key empty the only entry other than
// IntermediateStepsKey.
func OutputValue(values map[string]any, key string) (string, error) {
	return pick("output", values, key, "WithOutputKey", func(k string) bool { return k == IntermediateStepsKey })
}

func pick(side string, values map[string]any, key, option string, ignore func(string) bool) (string, error) {
	if len(values) == 0 {
		return "", fmt.Errorf("%w: %s values are empty", ErrInvalidValues, side)
	}
	if key != "" {
		v, ok := values[key]
		if !ok {
			return "", fmt.Errorf("%w: %s values have no key %q (keys present: %s)", ErrInvalidValues, side, key, keyList(values))
		}
		return asString(side, key, v)
	}
	candidates := values
	if ignore != nil && len(values) > 1 {
		candidates = make(map[string]any, len(values))
		for k, v := range values {
			if !ignore(k) {
				candidates[k] = v
			}
		}
	}
	if len(candidates) > 1 {
		return "", fmt.Errorf("%w: %s values have %d keys (%s) and no %s key is set; choose one with %s",
			ErrInvalidValues, side, len(candidates), keyList(candidates), side, option)
	}
	for k, v := range candidates {
		return asString(side, k, v)
	}
	// Only ignored keys: report the first as the one that is not a string.
	for k, v := range values {
		return asString(side, k, v)
	}
	return "", fmt.Errorf("%w: %s values are empty", ErrInvalidValues, side)
}

func asString(side, key string, v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %s key %q: value of type %T is not a string", ErrInvalidValues, side, key, v)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: %s key %q: value is not valid UTF-8", ErrInvalidValues, side, key)
	}
	return s, nil
}

func keyList(values map[string]any) string {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// Normalize validates msg (see ValidateMessage) and returns it in the form
// memstack stores: a pointer to one of langchaingo's message structs
// (*llms.AIChatMessage, ...) becomes the struct value, which is the form
// llms.GetBufferString and chat models expect (GetBufferString appends an
// AI message's function call only for the value form).
func Normalize(msg llms.ChatMessage) (llms.ChatMessage, error) {
	if err := ValidateMessage(msg); err != nil {
		return nil, err
	}
	switch m := msg.(type) {
	case *llms.AIChatMessage:
		return *m, nil
	case *llms.HumanChatMessage:
		return *m, nil
	case *llms.SystemChatMessage:
		return *m, nil
	case *llms.GenericChatMessage:
		return *m, nil
	case *llms.FunctionChatMessage:
		return *m, nil
	case *llms.ToolChatMessage:
		return *m, nil
	}
	return msg, nil
}

// ValidateMessage reports whether msg can be stored and rendered: it must be
// non-nil (a nil pointer inside the interface counts as nil), of one of
// langchaingo's message types, and a generic message must be an
// llms.GenericChatMessage (rendering needs its Role).
func ValidateMessage(msg llms.ChatMessage) error {
	if msg == nil {
		return fmt.Errorf("%w: message is nil", ErrInvalidValues)
	}
	if v := reflect.ValueOf(msg); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Errorf("%w: message is a nil %T", ErrInvalidValues, msg)
	}
	if field := invalidUTF8Field(msg); field != "" {
		return fmt.Errorf("%w: %s message %s is not valid UTF-8", ErrInvalidValues, msg.GetType(), field)
	}
	switch t := msg.GetType(); t {
	case llms.ChatMessageTypeHuman, llms.ChatMessageTypeAI, llms.ChatMessageTypeSystem,
		llms.ChatMessageTypeFunction, llms.ChatMessageTypeTool:
	case llms.ChatMessageTypeGeneric:
		switch msg.(type) {
		case llms.GenericChatMessage, *llms.GenericChatMessage:
		default:
			return fmt.Errorf("%w: generic message of Go type %T: only llms.GenericChatMessage is supported", ErrInvalidValues, msg)
		}
	default:
		return fmt.Errorf("%w: message type %q (Go type %T) is not a langchaingo message type", ErrInvalidValues, t, msg)
	}
	return nil
}

// invalidUTF8Field names the first text field of msg that is not valid
// UTF-8 (every string field of langchaingo's message types: content, role,
// name, tool call IDs, function names and arguments...), or returns "".
func invalidUTF8Field(msg llms.ChatMessage) string {
	type field struct{ name, value string }
	fields := []field{{"content", msg.GetContent()}}
	if m, ok := msg.(*llms.AIChatMessage); ok {
		msg = *m
	}
	switch m := msg.(type) {
	case llms.GenericChatMessage:
		fields = append(fields, field{"role", m.Role}, field{"name", m.Name})
	case *llms.GenericChatMessage:
		fields = append(fields, field{"role", m.Role}, field{"name", m.Name})
	case llms.FunctionChatMessage:
		fields = append(fields, field{"name", m.Name})
	case *llms.FunctionChatMessage:
		fields = append(fields, field{"name", m.Name})
	case llms.ToolChatMessage:
		fields = append(fields, field{"tool call id", m.ID})
	case *llms.ToolChatMessage:
		fields = append(fields, field{"tool call id", m.ID})
	case llms.AIChatMessage:
		fields = append(fields, field{"reasoning content", m.ReasoningContent})
		if fc := m.FunctionCall; fc != nil {
			fields = append(fields, field{"function call name", fc.Name}, field{"function call arguments", fc.Arguments})
		}
		for i, c := range m.ToolCalls {
			n := fmt.Sprintf("tool call %d ", i+1)
			fields = append(fields, field{n + "id", c.ID}, field{n + "type", c.Type})
			if fc := c.FunctionCall; fc != nil {
				fields = append(fields, field{n + "function name", fc.Name}, field{n + "function arguments", fc.Arguments})
			}
		}
	}
	for _, f := range fields {
		if !utf8.ValidString(f.value) {
			return f.name
		}
	}
	return ""
}

// RenderLine renders one message exactly as llms.GetBufferString renders it
// inside a history: "<prefix>: <content>", with an AI message's function
// call appended as JSON. Joining the lines of a conversation with "\n" gives
// llms.GetBufferString of the conversation.
func RenderLine(msg llms.ChatMessage, humanPrefix, aiPrefix string) (string, error) {
	s, err := llms.GetBufferString([]llms.ChatMessage{msg}, humanPrefix, aiPrefix)
	if err != nil {
		return "", fmt.Errorf("memstack: rendering %s message: %w", msg.GetType(), err)
	}
	return s, nil
}

// Render renders messages as llms.GetBufferString does.
func Render(msgs []llms.ChatMessage, humanPrefix, aiPrefix string) (string, error) {
	s, err := llms.GetBufferString(msgs, humanPrefix, aiPrefix)
	if err != nil {
		return "", fmt.Errorf("memstack: rendering history: %w", err)
	}
	return s, nil
}

// MessageContents turns messages into role-separated llms.MessageContent for
// calling a chat model's GenerateContent directly. (An LLMChain flattens its
// whole prompt into one human message; this keeps real roles.)
//
// Mapping: human, system and generic messages become text parts under their
// own role; an AI message becomes its text (if any) followed by one
// llms.ToolCall part per tool call (a legacy function call becomes a tool
// call of type "function"); a tool message becomes an llms.ToolCallResponse
// with its ToolCallID; a function message becomes an llms.ToolCallResponse
// with its Name. The result shares no memory with msgs.
func MessageContents(msgs []llms.ChatMessage) ([]llms.MessageContent, error) {
	out := make([]llms.MessageContent, 0, len(msgs))
	for i, m := range msgs {
		m, err := Normalize(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i+1, err)
		}
		mc := llms.MessageContent{Role: m.GetType()}
		switch v := m.(type) {
		case llms.AIChatMessage:
			if v.Content != "" {
				mc.Parts = append(mc.Parts, llms.TextPart(v.Content))
			}
			for _, tc := range v.ToolCalls {
				if tc.FunctionCall != nil {
					fc := *tc.FunctionCall
					tc.FunctionCall = &fc
				}
				mc.Parts = append(mc.Parts, tc)
			}
			if v.FunctionCall != nil {
				fc := *v.FunctionCall
				mc.Parts = append(mc.Parts, llms.ToolCall{Type: "function", FunctionCall: &fc})
			}
			if len(mc.Parts) == 0 {
				mc.Parts = append(mc.Parts, llms.TextPart(""))
			}
		case llms.ToolChatMessage:
			mc.Parts = []llms.ContentPart{llms.ToolCallResponse{ToolCallID: v.ID, Content: v.Content}}
		case llms.FunctionChatMessage:
			mc.Parts = []llms.ContentPart{llms.ToolCallResponse{Name: v.Name, Content: v.Content}}
		default:
			mc.Parts = []llms.ContentPart{llms.TextPart(m.GetContent())}
		}
		out = append(out, mc)
	}
	return out, nil
}
