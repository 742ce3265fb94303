package memories

import (
	"context"
	"fmt"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

// window is the shared machinery of RecentN and TokenWindow: pin system
// messages, group tool calls with their results, pick the newest groups that
// fit, and trim the store of what can never be shown again.

// trimSlack is how many non-system messages may pile up outside the window
// before a save trims them from the store: trimming in batches keeps the
// number of store writes per turn low while the stored data stays O(window).
const trimSlack = 16

// split separates the pinned system messages from the others (both in
// their original order).
func split(recs []store.Record) (system, rest []store.Record) {
	rest = make([]store.Record, 0, len(recs))
	for _, r := range recs {
		if r.Message.GetType() == llms.ChatMessageTypeSystem {
			system = append(system, r)
		} else {
			rest = append(rest, r)
		}
	}
	return system, rest
}

// callsTools reports whether msg is an AI message that asks for tool or
// function calls, whose results follow it.
func callsTools(msg llms.ChatMessage) bool {
	switch m := msg.(type) {
	case llms.AIChatMessage:
		return len(m.ToolCalls) > 0 || m.FunctionCall != nil
	case *llms.AIChatMessage:
		return m != nil && (len(m.ToolCalls) > 0 || m.FunctionCall != nil)
	}
	return false
}

func isToolResult(msg llms.ChatMessage) bool {
	t := msg.GetType()
	return t == llms.ChatMessageTypeTool || t == llms.ChatMessageTypeFunction
}

// newestFit returns the index in rest where the window starts: the longest
// run of whole groups at the end of rest whose cost stays within budget. A
// group is an AI message that calls tools together with the tool results
// that follow it, or any other single message; a group is kept or dropped
// whole. cost returns the cost of one message.
func newestFit(rest []store.Record, budget int, cost func(store.Record) int) (start, lastGroup int) {
	// groupStart[i] is the index of the first message of i's group.
	groupStart := make([]int, len(rest))
	open := -1 // start of the tool-call group that results may still join
	for i, r := range rest {
		switch {
		case callsTools(r.Message):
			open = i
			groupStart[i] = i
		case isToolResult(r.Message) && open >= 0:
			groupStart[i] = open
		default: // any other message, or a result with no call before it
			open = -1
			groupStart[i] = i
		}
	}
	if len(rest) > 0 {
		lastGroup = groupStart[len(rest)-1]
	}
	start, used := len(rest), 0
	for start > 0 {
		g := groupStart[start-1]
		c := 0
		for _, r := range rest[g:start] {
			c += cost(r)
		}
		if used+c > budget {
			break
		}
		used += c
		start = g
	}
	return start, lastGroup
}

// windowed is the result of choosing a window.
type windowed struct {
	system []store.Record // pinned, in order
	window []store.Record // the newest groups that fit, in order
	// dropped counts the non-system messages before the window that may
	// be removed from the store, and lastDropped is the Seq of the newest
	// of them (0 if none).
	dropped     int
	lastDropped int64
	// outside holds the non-system messages before the window (for
	// reports).
	outside []store.Record
}

func (w windowed) messages() []llms.ChatMessage {
	out := make([]llms.ChatMessage, 0, len(w.system)+len(w.window))
	for _, r := range w.system {
		out = append(out, r.Message)
	}
	for _, r := range w.window {
		out = append(out, r.Message)
	}
	return out
}

func choose(recs []store.Record, budget func(system []store.Record) int, cost func(store.Record) int) windowed {
	system, rest := split(recs)
	start, lastGroup := newestFit(rest, budget(system), cost)
	w := windowed{system: system, window: rest[start:], dropped: start, outside: rest[:start]}
	// The newest group, if it is a tool call, may still be joined by more
	// results: even when it does not fit now it must stay in the store, or
	// a later result would be left without its call. Only what precedes it
	// counts as dropped (removable).
	if start > lastGroup && lastGroup < len(rest) && callsTools(rest[lastGroup].Message) {
		w.dropped = lastGroup
	}
	if w.dropped > 0 {
		w.lastDropped = rest[w.dropped-1].Seq
	}
	return w
}

// trim removes from the store the non-system messages that precede the
// window, once more than trimSlack (or the window's own size) have piled up.
// Trimming is housekeeping: the turn is already stored, and what a load
// shows never depends on it, so a failure is left for the next save to
// retry rather than reported as a failed save.
func trim(ctx context.Context, s store.Store, id memstack.Identity, w windowed) {
	if w.dropped <= max(trimSlack, len(w.window)) {
		return
	}
	_, _ = s.RemovePrefix(ctx, id, w.lastDropped)
}

func loadAll(ctx context.Context, s store.Store, id memstack.Identity) ([]store.Record, error) {
	recs, err := s.All(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("memstack: loading history: %w", err)
	}
	return recs, nil
}
