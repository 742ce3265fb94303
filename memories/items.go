package memories

import (
	"context"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
)

// Loading as items (layer.Itemizer): under a combined.WithTokenBudget a
// combined memory loads every memory of this package with LoadItems, so
// that the budget can drop whole messages, never half of one (a message
// may span several lines of the rendered history). For Buffer, RecentN,
// TokenWindow and Summary each item is one message (Kind "message", ID its
// Seq, Time the time it was saved; Text its rendered line or lines), or a
// Summary's summary line (Kind "summary", ID the Seq of the newest message
// it covers, no Time); an AI message that calls tools and the tool results
// that follow it share a Group, and the priorities are layer's transcript
// scheme (layer.PriorityMessage, PrioritySummary, PrioritySystem). Each
// LoadItems documents its drop order. Rendering every item gives exactly
// what LoadMemoryVariables loads.

var (
	_ layer.Itemizer = (*Buffer)(nil)
	_ layer.Itemizer = (*RecentN)(nil)
	_ layer.Itemizer = (*TokenWindow)(nil)
	_ layer.Itemizer = (*Summary)(nil)
)

// entry is one item of a loaded variable and how it renders.
type entry struct {
	item layer.Item       // Text is the string-mode rendering
	msg  llms.ChatMessage // the messages-mode value
}

// messageEntries makes an entry of each record, in order, grouping tool
// calls with their results.
func (b *base) messageEntries(recs []store.Record) ([]entry, error) {
	starts := conv.GroupStarts(recs, recMessage)
	out := make([]entry, len(recs))
	for i, r := range recs {
		line, err := adapter.RenderLine(r.Message, b.cfg.humanPrefix, b.cfg.aiPrefix)
		if err != nil {
			return nil, err
		}
		it := layer.Item{Text: line, Kind: kindMessage, ID: seqID(r.Seq), Time: r.Time, Priority: layer.PriorityMessage, Group: starts[i] + 1}
		if r.Message.GetType() == llms.ChatMessageTypeSystem {
			it.Priority = layer.PrioritySystem
		}
		out[i] = entry{item: it, msg: r.Message}
	}
	return out, nil
}

// items returns the entries as the memory's variable.
func (b *base) items(entries []entry) layer.Items {
	list := make([]layer.Item, len(entries))
	for i := range entries {
		list[i] = entries[i].item
	}
	returnMessages := b.cfg.returnMessages
	return layer.Items{Key: b.cfg.memoryKey, List: list, Render: func(keep []bool) (any, error) {
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
func (b *base) windowItems(w windowed) (layer.Items, error) {
	recs := make([]store.Record, 0, len(w.system)+len(w.window))
	recs = append(recs, w.system...)
	recs = append(recs, w.window...)
	entries, err := b.messageEntries(recs)
	if err != nil {
		return layer.Items{}, err
	}
	return b.items(entries), nil
}

// LoadItems loads the whole transcript as items, one per message (see
// layer.Itemizer). A budget drops the oldest messages first and system
// messages last. Unlike LoadMemoryVariables it renders every message on
// every call: the incremental rendering cannot be cut into messages. The
// inputs are not used.
func (b *Buffer) LoadItems(ctx context.Context, _ map[string]any) (layer.Items, error) {
	id, err := b.begin(ctx)
	if err != nil {
		return layer.Items{}, err
	}
	recs, err := loadAll(ctx, b.cfg.store, id)
	if err != nil {
		return layer.Items{}, err
	}
	entries, err := b.messageEntries(recs)
	if err != nil {
		return layer.Items{}, err
	}
	return b.items(entries), nil
}

// LoadItems loads the pinned system messages and the window as items, one
// per message (see layer.Itemizer): a budget drops the window's oldest
// messages first and the system messages last. The messages before the
// window are reported as dropped with observe.ReasonWindow. The inputs are
// not used.
func (m *RecentN) LoadItems(ctx context.Context, _ map[string]any) (layer.Items, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return layer.Items{}, err
	}
	w, err := m.load(ctx, id)
	if err != nil {
		return layer.Items{}, err
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		recordOutside(rec, nil, w.outside)
	}
	return m.windowItems(w)
}

// LoadItems loads the pinned system messages and the window as items, one
// per message (see layer.Itemizer): a budget drops the window's oldest
// messages first and the system messages last. The messages before the
// window are reported as dropped with observe.ReasonWindow. The inputs are
// not used.
func (m *TokenWindow) LoadItems(ctx context.Context, _ map[string]any) (layer.Items, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return layer.Items{}, err
	}
	w, err := m.load(ctx, id)
	if err != nil {
		return layer.Items{}, err
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		recordOutside(rec, m.cost(id), w.outside)
	}
	return m.windowItems(w)
}

// LoadItems loads the summary line (one item), the system messages and the
// unsummarized messages as items (see layer.Itemizer): a budget drops the
// oldest unsummarized messages first, then the summary line, then the
// system messages. It never calls the summarizer. The inputs are not used.
func (m *Summary) LoadItems(ctx context.Context, _ map[string]any) (layer.Items, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return layer.Items{}, err
	}
	st, system, rest, err := m.eng.Unsummarized(ctx, id)
	if err != nil {
		return layer.Items{}, err
	}
	ordered := make([]store.Record, 0, len(system)+len(rest))
	ordered = append(ordered, system...)
	ordered = append(ordered, rest...)
	entries, err := m.messageEntries(ordered)
	if err != nil {
		return layer.Items{}, err
	}
	if st.Summary != "" {
		text := SummaryPrefix + st.Summary
		summary := entry{
			item: layer.Item{Text: text, Kind: kindSummary, ID: seqID(st.Through), Priority: layer.PrioritySummary},
			msg:  llms.SystemChatMessage{Content: text},
		}
		entries = append([]entry{summary}, entries...)
	}
	earlier, err := m.eng.Earlier(ctx, id)
	if err != nil {
		return layer.Items{}, err
	}
	entries = append(earlierEntries(earlier), entries...)
	return m.items(entries), nil
}
