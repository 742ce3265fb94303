package memories

import (
	"context"
	"fmt"
	"math"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/internal/stackmemo"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

// window is the shared machinery of RecentN and TokenWindow: pin system
// messages, group tool calls with their results, pick the newest groups
// that fit — reading only the newest messages (store.Messages.Tail), never
// the whole conversation — and, under a retention the user asked for
// (WithRetention), remove what the retention lets go.

// trimSlack is how many non-system messages may pile up beyond a
// retention before a save removes them: removing in batches keeps the
// number of store writes per exchange low.
const trimSlack = 16

// recMessage is a record's message: the message func of the conv helpers
// for records.
func recMessage(r store.Record) llms.ChatMessage { return r.Message }

// split separates the pinned system messages from the others (both in
// their original order).
func split(recs []store.Record) (system, rest []store.Record) {
	return conv.SplitSystem(recs, recMessage)
}

// newestFit returns the index in rest (the non-system messages) where the
// window starts: the longest run of whole tool groups (conv.GroupStarts)
// at the end of rest whose cost stays within budget; a group is kept or
// dropped whole. cost returns the cost of one message.
func newestFit(rest []store.Record, budget int, cost func(store.Record) int) (start, lastGroup int) {
	// groupStart[i] is the index of the first message of i's group.
	groupStart := conv.GroupStarts(rest, recMessage)
	if len(rest) > 0 {
		lastGroup = groupStart[len(rest)-1]
	}
	start, used := len(rest), 0
	for start > 0 {
		g := groupStart[start-1]
		c, fits := 0, true
		for _, r := range rest[g:start] {
			// Costs are not negative; compared with the room left as they
			// are summed, they never wrap around however large they are.
			n := cost(r)
			if n > budget-used-c {
				fits = false
				break
			}
			c += n
		}
		if !fits {
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
	// outside holds the non-system messages read before the window (for
	// reports): those a load read, not every older message stored.
	outside []store.Record
	// start is the index in the non-system messages read where the
	// window starts; groupStart is where the first group read that is
	// surely whole starts (the first message that is not a tool result).
	start, groupStart int
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
	start, _ := newestFit(rest, budget(system), cost)
	g := 0
	for g < len(rest) && conv.IsToolResult(rest[g].Message) {
		g++
	}
	return windowed{system: system, window: rest[start:], outside: rest[:start], start: start, groupStart: g}
}

// firstRead is how many non-system messages a window's first read asks
// for beyond what it can show at most.
const firstRead = 8

// loadWindow reads the pinned system messages and the newest non-system
// messages of id — k of them first, twice as many each time more are
// needed — and returns the window pick chooses. More are needed while the
// window reaches back to the oldest message read (older ones might fit
// too) or the oldest messages read are tool results whose call was not
// read; never when fewer than asked for came back (nothing older is
// stored). So the window is the one pick would choose from every stored
// message, read at a cost of O(the window) — plus, when the window's
// oldest messages are a run of tool results, the rest of that run back to
// the message it starts with (a call, or none: results without a call),
// which deciding the window needs.
func loadWindow(ctx context.Context, s store.Store, id memstack.Identity, k int, pick func([]store.Record) windowed) (windowed, error) {
	for {
		recs, err := stackmemo.Tail(ctx, s, id, k, 0) // shared with a sibling layer's identical read
		if err != nil {
			return windowed{}, fmt.Errorf("memstack: loading history: %w", err)
		}
		w := pick(recs)
		read := len(w.outside) + len(w.window)
		if read < k || (w.start > 0 && w.start >= w.groupStart) || k >= math.MaxInt/2 {
			return w, nil
		}
		k *= 2
	}
}

// retain removes, under a retention of keep messages, the non-system
// messages of id older than its newest keep ones, and never one with a
// Seq after limit (a Summary passes the Seq its summary covers, a window
// math.MaxInt64). The cut moves back to the start of an exchange (a
// human message), so no unit a save stored is split — an answer is never
// kept without its question, a tool call never removed while a result of
// it is kept, and the append key a store keeps with a unit's first message
// (store.WithAppendKey) stays as long as any of the unit does; in a
// conversation without human messages, to the start of a group (a message
// that is not a tool result). It removes once more than slack messages
// beyond keep are stored, and is housekeeping: the exchange is already
// stored and a load never depends on it, so a failure is left for the
// next save to retry.
func retain(ctx context.Context, s store.Store, id memstack.Identity, keep, slack int, limit int64) {
	st, err := s.Stat(ctx, id)
	if err != nil || st.Count <= keep+slack {
		return
	}
	through := limit
	if keep > 0 {
		recs, err := s.Tail(ctx, id, keep+1+max(slack, retainLookBack), 0)
		if err != nil {
			return
		}
		_, rest := split(recs)
		if len(rest) <= keep+slack {
			return // the rest are system messages
		}
		human := conv.HasExchangeStart(rest, recMessage)
		starts := func(r store.Record) bool {
			if human {
				return conv.OpensExchange(r.Message)
			}
			return !conv.IsToolResult(r.Message)
		}
		c := len(rest) - keep - 1 // the newest message to remove
		for c >= 0 && (!starts(rest[c+1]) || rest[c].Seq > limit) {
			c--
		}
		switch {
		case c >= 0:
			through = rest[c].Seq
		case limit < rest[0].Seq:
			// Everything limit lets go is older than what was read, and
			// limit ends an exchange (a Summary's batch).
		default:
			return
		}
	}
	_, _ = s.RemovePrefix(ctx, id, through)
}

// retainLookBack is how many messages before the cut retain reads to
// move the cut back to a group boundary.
const retainLookBack = 32

func loadAll(ctx context.Context, s store.Store, id memstack.Identity) ([]store.Record, error) {
	recs, err := s.All(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("memstack: loading history: %w", err)
	}
	return recs, nil
}
