package memories

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/tokens"
	"github.com/tmc/langchaingo/llms"
)

// LoadMemoryVariables returns the current facts of the identity in ctx
// (see Facts for the format and the caps). The inputs are not used.
func (m *Facts) LoadMemoryVariables(ctx context.Context, _ map[string]any) (map[string]any, error) {
	shown, err := m.load(ctx, true)
	if err != nil {
		return nil, err
	}
	lines := make([]string, len(shown))
	for i, s := range shown {
		lines[i] = s.line
	}
	return map[string]any{m.cfg.memoryKey: m.render(lines)}, nil
}

// LoadItems implements layer.Itemizer: the facts LoadMemoryVariables
// would show, one item per fact (kind "fact", ID the key, Time its
// ValidFrom), the oldest with the lowest priority so that a budget drops
// it first. It records on the context's Recorder only the facts its own
// caps left out.
func (m *Facts) LoadItems(ctx context.Context, _ map[string]any) (layer.Items, error) {
	shown, err := m.load(ctx, false)
	if err != nil {
		return layer.Items{}, err
	}
	items := make([]layer.Item, len(shown))
	for i, s := range shown {
		items[i] = layer.Item{
			Text:     s.line,
			Kind:     "fact",
			ID:       s.fact.Key,
			Time:     s.fact.ValidFrom,
			Priority: float64(len(shown) - i), // the oldest (last) lowest
		}
	}
	return layer.Items{
		Key:  m.cfg.memoryKey,
		List: items,
		Render: func(keep []bool) (any, error) {
			lines := make([]string, 0, len(shown))
			for i, k := range keep {
				if k && i < len(shown) {
					lines = append(lines, shown[i].line)
				}
			}
			return m.render(lines), nil
		},
	}, nil
}

// Current returns the current facts of the identity in ctx, most recent
// first, without the load caps.
func (m *Facts) Current(ctx context.Context) ([]Fact, error) {
	all, err := m.History(ctx)
	if err != nil {
		return nil, err
	}
	return currentFacts(all), nil
}

// History returns every fact of the identity in ctx, current and
// superseded, in the order they were recorded (oldest first).
func (m *Facts) History(ctx context.Context) ([]Fact, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return nil, err
	}
	return m.facts(ctx, id)
}

// ---- loading ----

type shownFact struct {
	fact Fact
	line string
}

// load returns the facts a load shows and records the ones the caps leave
// out; with injected set it records the shown ones and their tokens too.
func (m *Facts) load(ctx context.Context, injected bool) ([]shownFact, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return nil, err
	}
	all, err := m.facts(ctx, id)
	if err != nil {
		return nil, err
	}
	m.reportLaterLLM(ctx, id)
	rec := observe.FromContext(ctx)
	cur := currentFacts(all)
	used := 0
	if m.cfg.returnMessages && len(cur) > 0 {
		n, err := tokens.Count(m.counter, FactsHeader)
		if err != nil {
			return nil, fmt.Errorf("memstack: Facts: counting the tokens of the header: %w", err)
		}
		used = min(n, 1<<40) + 1
	}
	shown := make([]shownFact, 0, min(len(cur), m.maxFacts))
	full := false
	for _, f := range cur {
		line := f.Line()
		n, err := tokens.Count(m.counter, line)
		if err != nil {
			return nil, fmt.Errorf("memstack: Facts: counting the tokens of fact %q: %w", f.Key, err)
		}
		n = min(n, 1<<40) + 1
		if full || len(shown) == m.maxFacts || used+n > m.maxTokens {
			full = true
			rec.Dropped(observe.Item{Kind: "fact", ID: f.Key, Tokens: n, Reason: observe.ReasonBudget, Time: f.ValidFrom})
			continue
		}
		used += n
		shown = append(shown, shownFact{fact: f, line: line})
		if injected {
			rec.Injected(observe.Item{Kind: "fact", ID: f.Key, Tokens: n, Time: f.ValidFrom})
		}
	}
	if injected && len(shown) > 0 {
		rec.Tokens(used)
	}
	return shown, nil
}

// render returns the variable's value for the given lines.
func (m *Facts) render(lines []string) any {
	text := strings.Join(lines, "\n")
	if !m.cfg.returnMessages {
		return text
	}
	if len(lines) == 0 {
		return []llms.ChatMessage{}
	}
	return []llms.ChatMessage{llms.SystemChatMessage{Content: FactsHeader + "\n" + text}}
}

// currentFacts returns the current facts, most recent first: by ValidFrom,
// and among facts recorded at the same time (one turn's) the last recorded
// first.
func currentFacts(all []Fact) []Fact {
	out := make([]Fact, 0, len(all))
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Current() {
			out = append(out, all[i])
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ValidFrom.After(out[j].ValidFrom) })
	return out
}
