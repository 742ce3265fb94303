package memories

import (
	"context"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
)

// Loading as items (combined.Itemizer): under a combined.WithTokenBudget a
// combined memory loads Buffer, RecentN, TokenWindow and Summary with
// LoadItems, so that the budget can drop whole messages, never half of one
// (a message may span several lines of the rendered history). Each item is
// one message (Kind "message", ID its Seq, Time the time it was saved;
// Text its rendered line or lines), or a Summary's summary line (Kind
// "summary", ID the Seq of the newest message it covers, no Time). An AI message that calls tools and the tool results
// that follow it share a Group. Drop order (Priority): windows drop their
// oldest messages first and system messages last; Summary its oldest raw
// messages, then the summary, then system messages. Rendering every item
// gives exactly what LoadMemoryVariables loads.

var (
	_ combined.Itemizer = (*Buffer)(nil)
	_ combined.Itemizer = (*RecentN)(nil)
	_ combined.Itemizer = (*TokenWindow)(nil)
	_ combined.Itemizer = (*Summary)(nil)
)

// Drop priorities of the items memories load (lower is dropped first).
const (
	prioMessage = 0
	prioSummary = 1
	prioSystem  = 2
)

// entry is one item of a loaded variable and how it renders.
type entry struct {
	item combined.Item    // Text is the string-mode rendering
	msg  llms.ChatMessage // the messages-mode value
}

// messageEntries makes an entry of each record, in order, grouping tool
// calls with their results.
func (b *base) messageEntries(recs []store.Record) ([]entry, error) {
	starts := groupStarts(recs)
	out := make([]entry, len(recs))
	for i, r := range recs {
		line, err := adapter.RenderLine(r.Message, b.cfg.humanPrefix, b.cfg.aiPrefix)
		if err != nil {
			return nil, err
		}
		it := combined.Item{Text: line, Kind: kindMessage, ID: seqID(r.Seq), Time: r.Time, Priority: prioMessage, Group: starts[i] + 1}
		if r.Message.GetType() == llms.ChatMessageTypeSystem {
			it.Priority = prioSystem
		}
		out[i] = entry{item: it, msg: r.Message}
	}
	return out, nil
}

// items returns the entries as the memory's variable.
func (b *base) items(entries []entry) combined.Items {
	list := make([]combined.Item, len(entries))
	for i := range entries {
		list[i] = entries[i].item
	}
	returnMessages := b.cfg.returnMessages
	return combined.Items{Key: b.cfg.memoryKey, List: list, Render: func(keep []bool) (any, error) {
		if len(keep) != len(entries) {
			return nil, fmt.Errorf("memstack: rendering items: %d keep flags for %d items", len(keep), len(entries))
		}
		if returnMessages {
			out := make([]llms.ChatMessage, 0, len(entries))
			for i, k := range keep {
				if k {
					out = append(out, entries[i].msg)
				}
			}
			return out, nil
		}
		var sb strings.Builder
		first := true
		for i, k := range keep {
			if !k {
				continue
			}
			if !first {
				sb.WriteByte('\n')
			}
			sb.WriteString(entries[i].item.Text)
			first = false
		}
		return sb.String(), nil
	}}
}

// windowItems loads recs in the order a window shows them: system
// messages, then the window.
func (b *base) windowItems(w windowed) (combined.Items, error) {
	recs := make([]store.Record, 0, len(w.system)+len(w.window))
	recs = append(recs, w.system...)
	recs = append(recs, w.window...)
	entries, err := b.messageEntries(recs)
	if err != nil {
		return combined.Items{}, err
	}
	return b.items(entries), nil
}

// LoadItems loads the whole transcript as items, one per message (see
// combined.Itemizer). Unlike LoadMemoryVariables it renders every message
// on every call: the incremental rendering cannot be cut into messages.
// The inputs are not used.
func (b *Buffer) LoadItems(ctx context.Context, _ map[string]any) (combined.Items, error) {
	id, err := b.begin(ctx)
	if err != nil {
		return combined.Items{}, err
	}
	recs, err := loadAll(ctx, b.cfg.store, id)
	if err != nil {
		return combined.Items{}, err
	}
	entries, err := b.messageEntries(recs)
	if err != nil {
		return combined.Items{}, err
	}
	return b.items(entries), nil
}

// LoadItems loads the pinned system messages and the window as items, one
// per message (see combined.Itemizer); the messages before the window are
// reported as dropped with observe.ReasonWindow. The inputs are not used.
func (m *RecentN) LoadItems(ctx context.Context, _ map[string]any) (combined.Items, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return combined.Items{}, err
	}
	w, err := m.load(ctx, id)
	if err != nil {
		return combined.Items{}, err
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		recordOutside(rec, nil, w.outside)
	}
	return m.windowItems(w)
}

// LoadItems loads the pinned system messages and the window as items, one
// per message (see combined.Itemizer); the messages before the window are
// reported as dropped with observe.ReasonWindow. The inputs are not used.
func (m *TokenWindow) LoadItems(ctx context.Context, _ map[string]any) (combined.Items, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return combined.Items{}, err
	}
	w, err := m.load(ctx, id)
	if err != nil {
		return combined.Items{}, err
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		recordOutside(rec, m.cost(id), w.outside)
	}
	return m.windowItems(w)
}

// LoadItems loads the summary line (one item), the system messages and the
// unsummarized messages as items (see combined.Itemizer). It never calls
// the summarizer. The inputs are not used.
func (m *Summary) LoadItems(ctx context.Context, _ map[string]any) (combined.Items, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return combined.Items{}, err
	}
	st, system, rest, err := m.unsummarized(ctx, id)
	if err != nil {
		return combined.Items{}, err
	}
	ordered := make([]store.Record, 0, len(system)+len(rest))
	ordered = append(ordered, system...)
	ordered = append(ordered, rest...)
	entries, err := m.messageEntries(ordered)
	if err != nil {
		return combined.Items{}, err
	}
	if st.Summary != "" {
		text := SummaryPrefix + st.Summary
		summary := entry{
			item: combined.Item{Text: text, Kind: kindSummary, ID: seqID(st.Through), Priority: prioSummary},
			msg:  llms.SystemChatMessage{Content: text},
		}
		entries = append([]entry{summary}, entries...)
	}
	return m.items(entries), nil
}
