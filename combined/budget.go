package combined

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/internal/textkey"
	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/tokens"
)

// Trim is what the token budget did in one load; WithTrimHook receives it.
type Trim struct {
	// Budget is the budget in tokens.
	Budget int
	// Tokens is the size of the merged variables after trimming
	// (at most Budget).
	Tokens int
	// Dropped lists every item dropped to fit, in the order dropped.
	Dropped []Dropped
}

// Dropped is one item the budget dropped.
type Dropped struct {
	// Child is the child's position in the list (0-based) and Layer its
	// name (see WithLayerNames).
	Child int
	Layer string
	// Key is the variable the item belonged to.
	Key string
	// Item names the item; its Reason is observe.ReasonBudget and its
	// Tokens the item's own size.
	Item observe.Item
}

// BudgetOption configures WithTokenBudget.
type BudgetOption func(*budgetConfig)

type budgetConfig struct {
	n          int
	priorities []int
	counter    tokens.Counter
	hook       func(context.Context, Trim)
	errs       []error
}

func (b *budgetConfig) bad(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
}

// WithTokenBudget makes every load fit the merged variables in n tokens in
// total. When they do not fit, whole items are dropped — never part of a
// message — from the lowest-priority child first (see WithPriorities),
// until they fit; then every dropped item that fits in the room left is
// taken back, the most important first, so one oversized item does not
// empty the layers after it: an item too large to show leaves the room to
// the less important items of its own layer and of the layers after it.
// (The items its variable dropped before it with the same drop priority
// stay dropped: a window never shows an older message without the newer
// ones it dropped.) MemoryVariables does not change, and a variable
// trimmed to nothing is loaded empty ("" or an empty []llms.ChatMessage).
// See the package documentation for how each kind of child is trimmed and
// counted, and package layer for the items a child offers. n < 1 is an
// error.
func WithTokenBudget(n int, opts ...BudgetOption) Option {
	return func(o *options) {
		b := &budgetConfig{n: n}
		if n < 1 {
			b.bad("WithTokenBudget(%d): the budget must be at least 1 token", n)
		}
		for i, opt := range opts {
			if opt == nil {
				b.bad("WithTokenBudget: budget option %d of %d is nil", i+1, len(opts))
				continue
			}
			opt(b)
		}
		o.errs = append(o.errs, b.errs...)
		o.budget = b
	}
}

// WithPriorities sets each child's priority, in list order (one per child;
// a different count is an error). A child with a lower priority is trimmed
// before one with a higher priority; among equal priorities the later
// child is trimmed first. The default is list order: the first child has
// the highest priority.
func WithPriorities(p ...int) BudgetOption {
	return func(b *budgetConfig) {
		b.priorities = append([]int{}, p...)
	}
}

// WithTokenCounter sets how the budget counts tokens (default: offline
// cl100k_base, tokens.CL100K). A nil counter is an error.
//
// The budget counts through tokens.Count: a count that breaks the
// tokens.Counter contract — negative, or a panic — fails the load with an
// error wrapping tokens.ErrBadCount that names the child, the variable and
// the counter's type. It is never taken for a size: a load never returns
// more than the budget by the counter's measure, and never crashes. A
// count too large to fit (up to math.MaxInt) is valid: the item is
// dropped.
func WithTokenCounter(c tokens.Counter) BudgetOption {
	return func(b *budgetConfig) {
		if c == nil {
			b.bad("WithTokenCounter(nil): the counter must not be nil")
			return
		}
		b.counter = c
	}
}

// WithTrimHook sets a function called after every budgeted load that
// succeeded, with what the budget dropped (possibly nothing) and the final
// size. It runs on the caller's goroutine before LoadMemoryVariables
// returns, so it must be quick; it may be called concurrently by
// concurrent loads. A nil hook is an error.
func WithTrimHook(hook func(ctx context.Context, t Trim)) BudgetOption {
	return func(b *budgetConfig) {
		if hook == nil {
			b.bad("WithTrimHook(nil): the hook must not be nil")
			return
		}
		b.hook = hook
	}
}

// budget is a combined memory's configured budget.
type budget struct {
	n          int
	priorities []int // one per child; higher is kept longer
	counter    tokens.Counter
	hook       func(context.Context, Trim)
	counts     *textkey.Counts // token counts of item texts, by their keys (the cache holds no text)
}

// tokenCacheSize is how many item texts a budget keeps token counts for.
// The cache is keyed by the texts' keys (package textkey), not the texts:
// an entry costs the same for a long text as for a short one, and the
// cache keeps no text alive.
const tokenCacheSize = 8192

func newBudget(cfg *budgetConfig, children int) (*budget, error) {
	b := &budget{n: cfg.n, counter: cfg.counter, hook: cfg.hook}
	if cfg.priorities != nil {
		if len(cfg.priorities) != children {
			return nil, fmt.Errorf("%w: WithPriorities: %d priorities for %d children (give one per child)", ErrInvalid, len(cfg.priorities), children)
		}
		b.priorities = cfg.priorities
	} else {
		b.priorities = make([]int, children)
		for i := range b.priorities {
			b.priorities[i] = children - i
		}
	}
	if b.counter == nil {
		c, err := tokens.CL100K()
		if err != nil {
			return nil, fmt.Errorf("combined: WithTokenBudget: %w", err)
		}
		b.counter, b.counts = c, defaultCounts()
		return b, nil
	}
	b.counts = textkey.NewCounts(tokenCacheSize)
	return b, nil
}

// defaultCounts is the token-count cache of every budget that counts with
// the default counter (cl100k): a text's count depends on nothing else,
// so the stacks of a process — one per user or per conversation, say —
// share one cache, whose size is bounded for the process
// (tokenCacheSize entries of a few dozen bytes), not per stack,
// and a text one stack counted is not counted again by another. A budget
// with a counter of its own (WithTokenCounter) keeps a cache of its own.
var defaultCounts = sync.OnceValue(func() *textkey.Counts {
	return textkey.NewCounts(tokenCacheSize)
})

// maxCount caps every count the budget uses: a counter may answer up to
// math.MaxInt for "too big", and the sums of capped counts (at most a few
// million items of a load) cannot wrap around.
const maxCount = 1 << 40

// satAdd adds two non-negative sizes, stopping at math.MaxInt.
func satAdd(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// count returns the tokens of an item's text, cached (see tokens.Count
// for its errors, which are never cached).
func (b *budget) count(text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	k := textkey.Of(text)
	if n, ok := b.counts.Get(k); ok {
		return n, nil
	}
	n, err := b.countNow(text)
	if err != nil {
		return 0, err
	}
	b.counts.Add(k, n)
	return n, nil
}

// parallelCountBytes is how many bytes of texts not counted before make
// countAll count on more than one goroutine: below it, starting them
// costs more than it saves.
const parallelCountBytes = 4096

// countAll returns the tokens of each of texts (count's). The texts not
// counted before are counted on up to GOMAXPROCS goroutines (at most
// four) when they are many: a recall layer offers a budget a few thousand
// tokens of turns a load has not seen, and their counting is most of its
// time. The first bad count is the error.
func (b *budget) countAll(texts []string) ([]int, error) {
	out := make([]int, len(texts))
	var todo []int
	size := 0
	for i, t := range texts {
		if t == "" {
			continue
		}
		if n, ok := b.counts.Get(textkey.Of(t)); ok {
			out[i] = n
			continue
		}
		todo = append(todo, i)
		size += len(t)
	}
	workers := min(runtime.GOMAXPROCS(0), 4, len(todo))
	if size < parallelCountBytes || workers < 2 {
		for _, i := range todo {
			n, err := b.count(texts[i])
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	}
	errs := make([]error, len(todo))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				j := int(next.Add(1)) - 1
				if j >= len(todo) {
					return
				}
				out[todo[j]], errs[j] = b.count(texts[todo[j]])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// countNow counts text through tokens.Count, capped at maxCount.
func (b *budget) countNow(text string) (int, error) {
	n, err := tokens.Count(b.counter, text)
	if err != nil {
		return 0, err
	}
	return min(n, maxCount), nil
}

// size returns the exact tokens of a loaded value: a string as is, a
// []llms.ChatMessage as llms.GetBufferString renders it with the default
// prefixes, anything else as fmt.Sprint renders it. A bad count is an
// error (tokens.ErrBadCount).
func (b *budget) size(v any) (int, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case string:
		if x == "" {
			return 0, nil
		}
		return b.countNow(x)
	case []llms.ChatMessage:
		if len(x) == 0 {
			return 0, nil
		}
		if s, err := llms.GetBufferString(x, "Human", "AI"); err == nil {
			return b.countNow(s)
		}
		n := 0
		for _, m := range x {
			if m != nil {
				c, err := b.countNow(m.GetContent())
				if err != nil {
					return 0, err
				}
				n = satAdd(n, c+1)
			}
		}
		return n, nil
	default:
		return b.countNow(fmt.Sprint(x))
	}
}

// loaded is one child's result in a budgeted load.
type loaded struct {
	items  *Items         // an Itemizer's items
	vars   map[string]any // any other child's variables
	report observe.Report // when observed
}

// variable is one variable of one child, as the budget sees it.
type variable struct {
	child   int
	key     string
	items   []Item
	counts  []int // the tokens of each item's text (winners only)
	render  func(keep []bool) (any, error)
	keep    []bool
	whole   bool // a foreign value kept or dropped whole
	itemize bool // from an Itemizer
	winner  bool // its value is the one merged under key
	value   any
	size    int
}

// unit is what the budget keeps or drops: the items of one group.
type unit struct {
	v       int   // index of the variable
	members []int // item indices
	cost    int   // estimated tokens
	prio    float64
	first   int
}

// trim fits the children's loaded variables into the budget and returns
// the merged variables. reports, when not nil, are completed with what was
// injected and dropped.
func (m *Memory) trim(ctx context.Context, res []loaded, reports []observe.Report) (map[string]any, error) {
	b := m.budget
	vars, err := m.variables(res)
	if err != nil {
		return nil, err
	}
	owner := map[string]int{}
	for i := range vars {
		owner[vars[i].key] = i
	}
	for i := range vars {
		vars[i].winner = owner[vars[i].key] == i
	}

	// The units of each child in its drop order, the children in trim
	// order (lowest priority first; ties: the later child first).
	perChild := make([][]unit, len(m.children))
	total := 0
	for vi := range vars {
		v := &vars[vi]
		if !v.winner {
			continue
		}
		us, err := m.units(vi, v)
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			total = satAdd(total, u.cost)
		}
		perChild[v.child] = append(perChild[v.child], us...)
	}
	order := make([]int, len(m.children))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(x, y int) bool {
		px, py := b.priorities[order[x]], b.priorities[order[y]]
		if px != py {
			return px < py
		}
		return order[x] > order[y]
	})
	var seq []unit
	for _, c := range order {
		us := perChild[c]
		sort.SliceStable(us, func(x, y int) bool {
			if us[x].prio != us[y].prio {
				return us[x].prio < us[y].prio
			}
			if us[x].v != us[y].v {
				return us[x].v < us[y].v
			}
			return us[x].first < us[y].first
		})
		seq = append(seq, us...)
	}

	// Plan with the estimates, then correct with exact counts: drop more
	// while over the budget, take back while it still fits.
	k := 0
	for total > b.n && k < len(seq) {
		total -= seq[k].cost
		k++
	}
	for vi := range vars {
		v := &vars[vi]
		if !v.winner {
			continue
		}
		v.keep = make([]bool, len(v.items))
		for i := range v.keep {
			v.keep[i] = true
		}
	}
	for _, u := range seq[:k] {
		for _, i := range u.members {
			vars[u.v].keep[i] = false
		}
	}
	exact := 0
	for vi := range vars {
		if vars[vi].winner {
			if err := m.renderVar(&vars[vi]); err != nil {
				return nil, err
			}
			exact = satAdd(exact, vars[vi].size)
		}
	}
	// setUnits keeps or drops units and returns the change of the exact
	// total, re-rendering each affected variable once.
	setUnits := func(us []unit, keep bool) (int, error) {
		touched := make(map[int]bool, 1)
		for _, u := range us {
			for _, i := range u.members {
				vars[u.v].keep[i] = keep
			}
			touched[u.v] = true
		}
		d := 0
		for vi := range touched {
			before := vars[vi].size
			if err := m.renderVar(&vars[vi]); err != nil {
				return 0, err
			}
			d += vars[vi].size - before
		}
		return d, nil
	}
	// Over the budget: drop, at once, the next units whose estimates
	// cover the excess (at least one), and count again.
	for exact > b.n && k < len(seq) {
		j, covered := k, 0
		for j < len(seq) && (j == k || covered < exact-b.n) {
			covered = satAdd(covered, seq[j].cost)
			j++
		}
		d, err := setUnits(seq[k:j], false)
		if err != nil {
			return nil, err
		}
		exact += d
		k = j
	}
	if exact > b.n {
		for vi := range vars {
			if v := &vars[vi]; v.winner && v.size > 0 {
				return nil, fmt.Errorf("combined: token budget: %s renders %d tokens under %q with every item dropped (an Itemizer must render an empty value then)", m.name(v.child), v.size, v.key)
			}
		}
	}
	// Within the budget: take back every dropped unit that fits, the
	// last dropped (the most important) first. The estimates are
	// pessimistic when line breaks merge with the text around them, so
	// the room is known only by rendering. A unit that does not fit is
	// passed over, and so are the units dropped before it from the same
	// variable with the same priority (a window never shows an older
	// message without the newer ones it dropped). A unit whose text alone,
	// less a token per item for merges at its edges, exceeds the room left
	// cannot fit: it is passed over without rendering; at most maxTakeBack
	// units are rendered.
	type class struct {
		v    int
		prio float64
	}
	blocked := map[class]bool{}
	back := make([]bool, k) // seq[i] was taken back
	for i, tries := k-1, 0; i >= 0 && tries < maxTakeBack && exact < b.n; i-- {
		u := seq[i]
		cl := class{u.v, u.prio}
		if blocked[cl] {
			continue
		}
		if u.cost-2*len(u.members) > b.n-exact {
			blocked[cl] = true
			continue
		}
		tries++
		v := &vars[u.v]
		prevValue, prevSize := v.value, v.size
		d, err := setUnits(seq[i:i+1], true)
		if err != nil {
			return nil, err
		}
		if exact+d > b.n {
			for _, j := range u.members {
				v.keep[j] = false
			}
			v.value, v.size = prevValue, prevSize
			blocked[cl] = true
			continue
		}
		exact += d
		back[i] = true
	}
	drop := make([]unit, 0, k)
	for i, u := range seq[:k] {
		if !back[i] {
			drop = append(drop, u)
		}
	}

	merged := make(map[string]any, len(m.vars))
	for vi := range vars {
		if v := &vars[vi]; v.winner {
			merged[v.key] = v.value
		}
	}
	if reports != nil {
		m.completeReports(vars, drop, reports)
	} else if rec := observe.FromContext(ctx); rec.Enabled() {
		// m is itself a layer observed from outside (nested in an observed
		// combined memory, or wrapped): record what the budget kept and
		// dropped on that layer's Recorder.
		m.record(rec, vars, drop, exact)
	}
	if b.hook != nil {
		var dropped []Dropped
		for _, u := range drop {
			v := &vars[u.v]
			for _, i := range u.members {
				dropped = append(dropped, Dropped{Child: v.child, Layer: m.layers[v.child], Key: v.key, Item: v.droppedItem(i)})
			}
		}
		b.hook(ctx, Trim{Budget: b.n, Tokens: exact, Dropped: dropped})
	}
	return merged, nil
}

// droppedItem is the report of item i of v, which the budget dropped.
func (v *variable) droppedItem(i int) observe.Item {
	o := observed(v.items[i], observe.ReasonBudget)
	o.Tokens = v.counts[i]
	return o
}

// injectedItem is the report of item i of v, which the budget kept.
func (v *variable) injectedItem(i int) observe.Item {
	o := observed(v.items[i], "")
	o.Tokens = v.counts[i]
	return o
}

// observed names it in a report, with reason (empty for an injected item)
// and without tokens.
func observed(it Item, reason string) observe.Item {
	return observe.Item{Kind: it.Kind, ID: it.ID, Score: it.Score, Reason: reason, Time: it.Time}
}

// maxTakeBack bounds how many dropped units a load renders to try to take
// them back into the room left.
const maxTakeBack = 64

// variables lists every child's variables, in list order (a foreign
// child's in key order).
func (m *Memory) variables(res []loaded) ([]variable, error) {
	var vars []variable
	for ci := range res {
		r := &res[ci]
		if r.items != nil {
			if r.items.Key == "" {
				return nil, fmt.Errorf("%s: LoadItems returned an empty key", m.name(ci))
			}
			if r.items.Render == nil {
				return nil, fmt.Errorf("%s: LoadItems returned no Render function", m.name(ci))
			}
			vars = append(vars, variable{child: ci, key: r.items.Key, items: r.items.List, render: r.items.Render, itemize: true})
			continue
		}
		keys := make([]string, 0, len(r.vars))
		for k := range r.vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			vars = append(vars, foreign(ci, k, r.vars[k]))
		}
		// The merged map takes foreign values from res; trimmed ones
		// replace them.
	}
	return vars, nil
}

// foreign makes a variable of a child that is not an Itemizer: a
// []llms.ChatMessage is trimmed message by message (tool calls with their
// results, system messages last), anything else whole.
func foreign(child int, key string, val any) variable {
	if msgs, ok := val.([]llms.ChatMessage); ok {
		items := messageItems(msgs)
		return variable{child: child, key: key, items: items, render: func(keep []bool) (any, error) {
			out := make([]llms.ChatMessage, 0, len(msgs))
			for i, k := range keep {
				if k {
					out = append(out, msgs[i])
				}
			}
			return out, nil
		}}
	}
	text, ok := val.(string)
	if !ok && val != nil {
		text = fmt.Sprint(val)
	}
	return variable{child: child, key: key, whole: true,
		items: []Item{{Text: text, Kind: "variable", ID: key}},
		render: func(keep []bool) (any, error) {
			if keep[0] {
				return val, nil
			}
			return "", nil
		}}
}

// messageItems makes items of a foreign child's messages: each message
// one item (Kind "message", ID its 1-based position), an AI message that
// calls tools grouped with the results that follow it (a tool group,
// conv.GroupStarts), system messages dropped last: the drop order of
// layer's transcript scheme (layer.PriorityMessage, layer.PrioritySystem).
func messageItems(msgs []llms.ChatMessage) []Item {
	items := make([]Item, len(msgs))
	starts := conv.GroupStarts(msgs, conv.Self)
	group := 0
	for i, msg := range msgs {
		it := Item{Kind: "message", ID: fmt.Sprint(i + 1), Priority: layer.PriorityMessage}
		if msg == nil {
			items[i] = it
			continue
		}
		if s, err := llms.GetBufferString([]llms.ChatMessage{msg}, "Human", "AI"); err == nil {
			it.Text = s
		} else {
			it.Text = msg.GetContent()
		}
		switch {
		case starts[i] != i: // a result that joins its call
			it.Group = items[starts[i]].Group
		case conv.CallsTools(msg):
			group++
			it.Group = group
		case conv.IsSystem(msg):
			// Dropped last, and no end to an open tool group: results
			// after it still go with their call.
			it.Priority = layer.PrioritySystem
		}
		items[i] = it
	}
	return items
}

// units counts the tokens of v's items (into v.counts) and groups them
// into units with their estimated cost. A bad count is an error naming
// the child and the variable.
func (m *Memory) units(vi int, v *variable) ([]unit, error) {
	texts := make([]string, len(v.items))
	for i, it := range v.items {
		texts[i] = it.Text
	}
	var err error
	if v.counts, err = m.budget.countAll(texts); err != nil {
		return nil, fmt.Errorf("combined: token budget: %s: counting the tokens of %q: %w", m.name(v.child), v.key, err)
	}
	if v.whole {
		return []unit{{v: vi, members: []int{0}, cost: v.counts[0], prio: 0}}, nil
	}
	out := make([]unit, 0, len(v.items))
	byGroup := map[int]int{}
	for i, it := range v.items {
		cost := v.counts[i] + 1 // and the line break
		if it.Group != 0 {
			if u, ok := byGroup[it.Group]; ok {
				out[u].members = append(out[u].members, i)
				out[u].cost = satAdd(out[u].cost, cost)
				out[u].prio = min(out[u].prio, it.Priority)
				continue
			}
			byGroup[it.Group] = len(out)
		}
		out = append(out, unit{v: vi, members: []int{i}, cost: cost, prio: it.Priority, first: i})
	}
	return out, nil
}

// renderVar renders v with its keep flags and counts it exactly.
func (m *Memory) renderVar(v *variable) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: rendering %q: panic: %v", m.name(v.child), v.key, r)
		}
	}()
	val, err := v.render(v.keep)
	if err != nil {
		return fmt.Errorf("%s: rendering %q: %w", m.name(v.child), v.key, err)
	}
	size, err := m.budget.size(val)
	if err != nil {
		return fmt.Errorf("combined: token budget: %s: counting the tokens of %q: %w", m.name(v.child), v.key, err)
	}
	v.value, v.size = val, size
	return nil
}

// record notes on rec the items of m's Itemizer children that the budget
// kept, every item it dropped, and the merged variables' tokens.
func (m *Memory) record(rec *observe.Recorder, vars []variable, drop []unit, exact int) {
	for vi := range vars {
		v := &vars[vi]
		if !v.winner || !v.itemize {
			continue
		}
		for i := range v.items {
			if v.keep[i] {
				rec.Injected(v.injectedItem(i))
			}
		}
	}
	for _, u := range drop {
		for _, i := range u.members {
			rec.Dropped(vars[u.v].droppedItem(i))
		}
	}
	rec.Tokens(exact)
}

// completeReports adds to each child's report what the budget kept and
// dropped, and the child's tokens.
func (m *Memory) completeReports(vars []variable, drop []unit, reports []observe.Report) {
	tokens := make([]int, len(reports))
	moved := make([]bool, len(vars)) // dropped items reported by the child itself
	for vi := range vars {
		v := &vars[vi]
		r := &reports[v.child]
		if !v.winner {
			for _, it := range v.items {
				r.Dropped = append(r.Dropped, observed(it, observe.ReasonOverridden))
			}
			continue
		}
		tokens[v.child] += v.size
		if !v.itemize && len(r.Injected) > 0 {
			// The child recorded what it injected itself; if its variable
			// was dropped whole, all of that was dropped.
			if v.whole && !v.keep[0] {
				for _, it := range r.Injected {
					it.Reason = observe.ReasonBudget
					r.Dropped = append(r.Dropped, it)
				}
				r.Injected = nil
				moved[vi] = true
			}
			continue
		}
		for i := range v.items {
			if v.keep[i] {
				r.Injected = append(r.Injected, v.injectedItem(i))
			}
		}
	}
	for _, u := range drop {
		v := &vars[u.v]
		r := &reports[v.child]
		if moved[u.v] {
			continue // reported item by item above
		}
		for _, i := range u.members {
			r.Dropped = append(r.Dropped, v.droppedItem(i))
		}
	}
	for i := range reports {
		if reports[i].Op != "" {
			reports[i].Tokens = tokens[i]
		}
	}
}
