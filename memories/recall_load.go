package memories

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/memories/internal/recallindex"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store/storekit"
	"github.com/tmc/langchaingo/llms"
)

// LoadMemoryVariables returns the stored units most relevant to the
// current input (see Recall).
func (m *Recall) LoadMemoryVariables(ctx context.Context, inputs map[string]any) (map[string]any, error) {
	sel, err := m.selectExchanges(ctx, inputs, false)
	if err != nil {
		return nil, err
	}
	vars, err := m.variablesOf(sel.exs, sel.order, sel.view)
	if err != nil {
		return nil, err
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		m.record(rec, sel.exs, sel.order, sel.scores, sel.dropped, sel.view)
	}
	return vars, nil
}

// LoadItems implements layer.Itemizer: the units a Recall offers a
// token budget (see Recall, "Under a token budget": more than
// LoadMemoryVariables shows, so the budget's room is filled), one item per
// unit (kind "turn" or "exchange", ID its first Seq), in conversation order,
// with Priority = the unit's score, or its share of a neighbouring
// hit's, so that a budget drops the least relevant first. It records on
// the context's Recorder only the units its own threshold, rank and
// recent-window rules left out.
func (m *Recall) LoadItems(ctx context.Context, inputs map[string]any) (layer.Items, error) {
	sel, err := m.selectExchanges(ctx, inputs, true)
	if err != nil {
		return layer.Items{}, err
	}
	items := make([]layer.Item, len(sel.order))
	for n, i := range sel.order {
		text, err := adapter.Render(sel.exs[i].Msgs(), m.cfg.humanPrefix, m.cfg.aiPrefix)
		if err != nil {
			return layer.Items{}, err
		}
		items[n] = layer.Item{
			Text:     text,
			Kind:     m.unit.String(),
			ID:       strconv.FormatInt(sel.exs[i].Seq(), 10),
			Score:    sel.scores[i],
			Priority: sel.priority[i],
			Time:     sel.exs[i].At(),
		}
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		rec.Dropped(sel.dropped...)
	}
	return layer.Items{
		Key:  m.cfg.memoryKey,
		List: items,
		Render: func(keep []bool) (any, error) {
			order := make([]int, 0, len(sel.order))
			for n, i := range sel.order {
				if n < len(keep) && keep[n] {
					order = append(order, i)
				}
			}
			vars, err := m.variablesOf(sel.exs, order, sel.view)
			if err != nil {
				return nil, err
			}
			return vars[m.cfg.memoryKey], nil
		},
	}, nil
}

// recallSelection is what a load shows: exs[i] for i in order (ascending),
// the hits' scores, and the candidates left out.
type recallSelection struct {
	exs      []recallindex.Unit
	order    []int
	scores   map[int]float64
	priority map[int]float64 // of every shown exchange (budgeted loads)
	dropped  []observe.Item
	view     recallindex.View // a scoped load's conversations (src nil otherwise)
}

// selectExchanges runs a load's search and selection (see
// LoadMemoryVariables); budgeted selects what LoadItems offers a budget.
func (m *Recall) selectExchanges(ctx context.Context, inputs map[string]any, budgeted bool) (recallSelection, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return recallSelection{}, err
	}
	query := ""
	if len(inputs) > 0 {
		if query, err = adapter.InputValue(inputs, m.cfg.inputKey); err != nil {
			return recallSelection{}, err
		}
	}
	if strings.TrimSpace(query) == "" {
		return recallSelection{}, nil
	}
	k, neighbours := m.k, m.neighbours
	partners := !budgeted && m.unit == RecallTurns && !m.neighboursSet
	if partners {
		neighbours = 0 // each hit brings its partner instead (below)
	}
	if budgeted {
		k = m.budgetK
		if m.share > 0 {
			neighbours = max(m.neighbours, 1)
		}
	}
	// The units on either side of a hit the selection below may show:
	// its neighbours, or its partner.
	q := recallindex.Query{Text: query, Exclude: m.exclude, Reach: max(neighbours, 1)}
	var date queryDate
	dated := false
	if m.queryDates {
		var rest string
		if date, rest, dated = parseQueryDate(query); dated {
			q.Text = rest
			day := date.asDay()
			q.Date = &day
		}
	}
	q.Want = 2 * k // beyond the recent units
	view, err := m.eng.Load(ctx, id, q)
	if err != nil {
		return recallSelection{}, err
	}
	exs, hits := view.Units, view.Hits
	if len(exs) == 0 {
		return recallSelection{}, nil
	}
	if dated {
		hits = m.dateBoost(hits, view.Top, view.Dated, date)
	}
	excluded, same := view.Recent, view.SameRun
	scores := make(map[int]float64)
	var dropped []observe.Item
	var droppedAt []int // dropped[n] is exs[droppedAt[n]]
	// texts holds the hits' texts (key): a hit with the text of a better
	// one (the same words said again) is left out, ReasonDuplicate.
	texts := make(map[string]struct{})
	for _, h := range hits {
		i := int(h.Seq) // the engine's views index their units
		if _, dup := scores[i]; dup {
			continue
		}
		item := observe.Item{Kind: m.unit.String(), ID: strconv.FormatInt(exs[i].Seq(), 10), Score: h.Score, Time: exs[i].At(), Conversation: m.conversationHash(view, i)}
		switch {
		case excluded(i):
			item.Reason = observe.ReasonShownElsewhere
		case h.Score < m.threshold:
			item.Reason = observe.ReasonThreshold
		case len(scores) >= k:
			item.Reason = observe.ReasonRank
		default:
			// Only a candidate that would be kept is compared by text.
			key := exs[i].Key()
			if _, dup := texts[key]; !dup {
				scores[i] = h.Score
				texts[key] = struct{}{}
				continue
			}
			item.Reason = observe.ReasonDuplicate
		}
		dropped = append(dropped, item)
		droppedAt = append(droppedAt, i)
	}
	// priority holds every shown exchange: a hit's score, or a
	// neighbour's share of the best hit next to it.
	priority := make(map[int]float64, len(scores)*(1+2*neighbours))
	for i, sc := range scores {
		for j := max(i-neighbours, 0); j <= min(i+neighbours, len(exs)-1); j++ {
			if excluded(j) || !same(i, j) {
				continue
			}
			p := sc
			if j != i {
				p = neighbourShare(sc, m.share, abs(j-i))
			}
			if own, hit := scores[j]; hit {
				p = max(p, own)
			}
			if old, ok := priority[j]; !ok || p > old {
				priority[j] = p
			}
		}
	}
	if partners {
		for i, sc := range scores {
			if j := m.partner(exs, i); j >= 0 && !excluded(j) && same(i, j) {
				if _, ok := priority[j]; !ok {
					priority[j] = neighbourShare(sc, m.share, 1)
				}
			}
		}
	}
	order := make([]int, 0, len(priority))
	for i := range priority {
		order = append(order, i)
	}
	slices.Sort(order)
	// A candidate left out as a hit but shown next to one is not dropped.
	kept := dropped[:0]
	for n, it := range dropped {
		if _, shown := priority[droppedAt[n]]; !shown {
			kept = append(kept, it)
		}
	}
	return recallSelection{exs: exs, order: order, scores: scores, priority: priority, dropped: kept, view: view}, nil
}

// dateBoost adds RecallDayBoost (or RecallMonthBoost) times best, the
// index's best answer (its score range's top when there is none), to every unit
// dated (indexes of units saved on date), hit or not, and returns the
// hits re-ranked.
func (m *Recall) dateBoost(hits []retrieval.Hit, best float64, dated []int, date queryDate) []retrieval.Hit {
	top := m.idx.Range().Max
	if best > 0 {
		top = best
	}
	boost := RecallDayBoost * top
	if date.day == 0 {
		boost = RecallMonthBoost * top
	}
	at := make(map[int64]int, len(hits))
	for n, h := range hits {
		if _, dup := at[h.Seq]; !dup {
			at[h.Seq] = n
		}
	}
	out := slices.Clone(hits)
	for _, i := range dated {
		if n, ok := at[int64(i)]; ok {
			out[n].Score += boost
		} else {
			out = append(out, retrieval.Hit{Seq: int64(i), Score: boost})
		}
	}
	slices.SortStableFunc(out, func(a, b retrieval.Hit) int { return cmp.Compare(b.Score, a.Score) })
	return out
}

// conversationHash names, in reports, the conversation of unit i of a
// view that spans conversations: its hash; "" otherwise.
func (m *Recall) conversationHash(v recallindex.View, i int) string {
	if id, many := v.Conversation(i); many {
		return m.HashIdentity(id)
	}
	return ""
}

// partner returns the turn shown with turn i when an unbudgeted load
// finds it: for a human turn the AI turn answering it, for an AI turn the
// turn it answers (a human turn, or the tool call whose results it
// reads); -1 when there is none.
func (m *Recall) partner(exs []recallindex.Unit, i int) int {
	isHuman := func(j int) bool { return exs[j].Msgs()[0].GetType() == llms.ChatMessageTypeHuman }
	switch {
	case isHuman(i) && i+1 < len(exs) && !isHuman(i+1):
		return i + 1
	case !isHuman(i) && i > 0:
		return i - 1
	}
	return -1
}

// neighbourShare is the priority of an exchange at distance d from a hit
// scoring score: share^d of it (for a negative score, a cosine
// similarity, the same distance below it).
func neighbourShare(score, share float64, d int) float64 {
	f := math.Pow(share, float64(d))
	if score >= 0 {
		return score * f
	}
	return score * (2 - f)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// variablesOf renders the exchanges exs[i] for i in order (ascending); v
// tells, for a scoped load, which conversation each is of.
func (m *Recall) variablesOf(exs []recallindex.Unit, order []int, v recallindex.View) (map[string]any, error) {
	if m.cfg.returnMessages {
		// Copies: a caller may change what it gets (a tool call's
		// arguments) without changing the next load.
		msgs := []llms.ChatMessage{}
		for _, i := range order {
			for _, msg := range exs[i].Msgs() {
				msgs = append(msgs, storekit.CloneMessage(msg))
			}
		}
		return map[string]any{m.cfg.memoryKey: msgs}, nil
	}
	var b strings.Builder
	day := "" // the date shown last
	for start := 0; start < len(order); {
		end := start + 1
		for end < len(order) && order[end] == order[end-1]+1 && v.SameRun(order[end], order[end-1]) {
			end++
		}
		if b.Len() > 0 {
			b.WriteString(RecallSeparator)
		}
		// The run, split where the date changes; each part after its date
		// unless the part before (in this run or the run before) showed
		// it already.
		for p := start; p < end; {
			q := p + 1
			d := m.dateOf(exs[order[p]])
			for q < end && m.dateOf(exs[order[q]]) == d {
				q++
			}
			if v.Elsewhere(order[p]) {
				// A run of another conversation says so, with its date.
				d = strings.TrimPrefix(d+", "+RecallOtherConversation, ", ")
			}
			if d != "" && d != day {
				if p > start {
					b.WriteByte('\n')
				}
				b.WriteString("[" + d + "]\n")
				day = d
			} else if p > start {
				b.WriteByte('\n')
			}
			var part []llms.ChatMessage
			for _, i := range order[p:q] {
				part = append(part, exs[i].Msgs()...)
			}
			s, err := adapter.Render(part, m.cfg.humanPrefix, m.cfg.aiPrefix)
			if err != nil {
				return nil, err
			}
			b.WriteString(s)
			p = q
		}
		start = end
	}
	return map[string]any{m.cfg.memoryKey: b.String()}, nil
}

// dateOf returns the date a run shows for x ("" for none: dates are off,
// or x was stored without a time).
func (m *Recall) dateOf(x recallindex.Unit) string {
	if !m.dates || x.At().IsZero() {
		return ""
	}
	return x.At().Format(RecallDateLayout)
}
