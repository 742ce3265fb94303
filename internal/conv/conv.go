// Package conv holds the helpers that cut a conversation into its parts,
// and is the one glossary of the words memstack uses for them. Every
// package that groups messages (memories, combined) uses these helpers,
// so the words mean the same everywhere:
//
//   - message: one llms.ChatMessage as stored (a store.Record wraps one
//     with its Seq and Time).
//   - tool group: an AI message that calls tools (ToolCalls or
//     FunctionCall, an llms.AIChatMessage value or pointer: CallsTools)
//     together with the tool and function results that follow it
//     (IsToolResult); any other message is a group of one. A system
//     message between a call and its results is a group of its own and
//     does not end the open tool group: results after it still join
//     their call. A result with no call before it is a group of one.
//     A group is kept or dropped whole (GroupStarts).
//   - turn: one speaker's contribution: a human message, or an AI message
//     with the tool groups and messages that follow it up to the next
//     human or AI message (OpensTurn). Recall's default unit
//     (RecallTurns).
//   - exchange: a human message and everything after it up to the next
//     human message (OpensExchange, Exchanges): what one SaveContext
//     stores, the unit Facts extracts from, Recall's RecallExchanges
//     unit, and where Summary's batches end.
//   - identity scope: the memstack.Identity (tenant, user, conversation)
//     every call is keyed by; a scope is one conversation, one user's
//     conversations, or a tenant.
//
// The helpers are generic in the element type (a message, a stored
// record, …): they take a func that returns an element's message.
package conv

import "github.com/tmc/langchaingo/llms"

// CallsTools reports whether msg is an AI message (value or pointer) that
// asks for tool or function calls, whose results follow it.
func CallsTools(msg llms.ChatMessage) bool {
	switch m := msg.(type) {
	case llms.AIChatMessage:
		return len(m.ToolCalls) > 0 || m.FunctionCall != nil
	case *llms.AIChatMessage:
		return m != nil && (len(m.ToolCalls) > 0 || m.FunctionCall != nil)
	}
	return false
}

// IsToolResult reports whether msg is a tool or function result.
func IsToolResult(msg llms.ChatMessage) bool {
	if msg == nil {
		return false
	}
	t := msg.GetType()
	return t == llms.ChatMessageTypeTool || t == llms.ChatMessageTypeFunction
}

// IsSystem reports whether msg is a system message.
func IsSystem(msg llms.ChatMessage) bool {
	return msg != nil && msg.GetType() == llms.ChatMessageTypeSystem
}

// OpensExchange reports whether msg opens an exchange: a human message.
func OpensExchange(msg llms.ChatMessage) bool {
	return msg != nil && msg.GetType() == llms.ChatMessageTypeHuman
}

// OpensTurn reports whether msg opens a turn: a human or an AI message.
func OpensTurn(msg llms.ChatMessage) bool {
	if msg == nil {
		return false
	}
	t := msg.GetType()
	return t == llms.ChatMessageTypeHuman || t == llms.ChatMessageTypeAI
}

// GroupStarts returns, for each element of xs, the index of the first
// element of its tool group (see the package doc). A nil message is, like
// a system message, a group of its own that does not end an open group.
func GroupStarts[T any](xs []T, msg func(T) llms.ChatMessage) []int {
	starts := make([]int, len(xs))
	open := -1 // start of the tool group that results may still join
	for i, x := range xs {
		m := msg(x)
		switch {
		case CallsTools(m):
			open, starts[i] = i, i
		case IsToolResult(m) && open >= 0:
			starts[i] = open
		case m == nil || IsSystem(m):
			starts[i] = i
		default: // any other message, or a result with no call before it
			open, starts[i] = -1, i
		}
	}
	return starts
}

// SplitSystem separates the system messages of xs from the others, both
// in their original order. system is nil when there is none; rest is
// never nil.
func SplitSystem[T any](xs []T, msg func(T) llms.ChatMessage) (system, rest []T) {
	rest = make([]T, 0, len(xs))
	for _, x := range xs {
		if IsSystem(msg(x)) {
			system = append(system, x)
		} else {
			rest = append(rest, x)
		}
	}
	return system, rest
}

// Units cuts xs before every element after the first whose message opens
// reports true for (OpensTurn, OpensExchange): the first unit may start
// anywhere. The units share xs's backing array. Empty xs has no units.
func Units[T any](xs []T, msg func(T) llms.ChatMessage, opens func(llms.ChatMessage) bool) [][]T {
	if len(xs) == 0 {
		return nil
	}
	var out [][]T
	start := 0
	for i := 1; i < len(xs); i++ {
		if opens(msg(xs[i])) {
			out = append(out, xs[start:i])
			start = i
		}
	}
	return append(out, xs[start:])
}

// Exchanges cuts xs into exchanges: each starts at a human message (the
// first may start anywhere). System messages stay where they are.
func Exchanges[T any](xs []T, msg func(T) llms.ChatMessage) [][]T {
	return Units(xs, msg, OpensExchange)
}

// HasExchangeStart reports whether any message of xs opens an exchange.
func HasExchangeStart[T any](xs []T, msg func(T) llms.ChatMessage) bool {
	for _, x := range xs {
		if OpensExchange(msg(x)) {
			return true
		}
	}
	return false
}

// Messages returns the messages of xs, in order.
func Messages[T any](xs []T, msg func(T) llms.ChatMessage) []llms.ChatMessage {
	out := make([]llms.ChatMessage, len(xs))
	for i, x := range xs {
		out[i] = msg(x)
	}
	return out
}

// Self is the message func for a slice of messages: it returns msg.
func Self(msg llms.ChatMessage) llms.ChatMessage { return msg }
