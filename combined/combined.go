// Package combined stacks memories: a Memory is a schema.Memory made of
// schema.Memory values — memstack's, langchaingo's or your own — much as
// io.MultiWriter is an io.Writer made of writers. It gives an agent several
// views of one conversation at once (the full transcript and a short window;
// a summary, facts and recent turns) behind the one memory a langchaingo
// chain or agent takes.
//
// Behaviour, child by child:
//
//   - MemoryVariables: the union of the children's variables, in list order,
//     without duplicates.
//   - SaveContext: every child stores the turn. Children run concurrently and
//     one child's failure does not stop the others; the error returned joins
//     every failure, each naming its child. Every child gets the same save
//     key (see "One store for a whole stack").
//   - LoadMemoryVariables: children load concurrently; the results merge in
//     list order, a later child's key overriding an earlier one's (or, with
//     WithStrictKeys, New rejects key collisions). Any child's failure fails
//     the load, naming the child.
//   - AddMessage: given to every child that takes single messages
//     (memstack's memories do; langchaingo's do not, because schema.Memory
//     has no such method). If no child takes single messages the call
//     fails, so a message is never silently dropped.
//   - Clear: clears every child, like SaveContext.
//   - GetMemoryKey: the first child's key.
//
// # The layer contract
//
// A child is any schema.Memory. Beyond that interface a Memory asks
// nothing of it, and uses what it offers:
//
//   - [MessageAdder]: it takes AddMessage.
//   - [layer.Itemizer]: under a token budget it loads as items the budget
//     keeps or drops whole, in the child's own drop order.
//   - [layer.StoreUser]: it reports the stores it keeps messages in, so
//     New can check the layers that share one.
//
// Package [layer] holds that contract — the types, what an implementation
// promises, how a budget uses items and how New uses StoreUses — so that
// memories implement it without importing this package; each memory
// documents its own items and drop order. The names Itemizer, Items,
// Item, StoreUse and StoreUser are kept here as aliases of layer's.
//
// # One store for a whole stack
//
// Children may share one store — one store value given to every layer
// with memories.WithStore — and that is the natural configuration: the
// store keeps one transcript per conversation, which every layer reads
// (package store, "One transcript"). SaveContext and AddMessage give every
// child the same save key (memstack.WithSaveKey: the caller's, else a
// fresh random one), so the children that share a store store the turn
// there once and no layer shows it twice; children on different stores
// each keep their copy. Children on one store also share their store
// calls within one call of the Memory: a save's turn is appended by the
// first child to store it while the others wait for it (one transaction,
// not one per child), and a load's identical tail reads (a RecentN's
// window and a Recall's recent turns) are one read. Without memstack.WithTime each child dates the
// turn as it would alone (now, or a Facts memory's WithClock), and on a
// shared store the child that stores it first dates it: give the save a
// time with memstack.WithTime where the date must not depend on that. A save retried with the caller's save key stores
// nothing twice either.
//
// New checks a stack whose children report their stores (layer.StoreUser:
// every memory of package memories does) and share a store, and refuses
// it with an error naming the children and the store when a child's
// retention (memories.WithRetention) would remove messages another child
// on the store reads, or when two children would keep their derived data
// under the same state name there (two Summary layers on one store).
// Stores are compared as values: two stores opened separately over the
// same data (two sqlitestore.Open of one file and namespace) are not
// recognised as one.
//
// # One token budget across layers
//
// WithTokenBudget(n) makes every load fit the merged variables in n tokens
// in total (counted with a tokens.Counter, cl100k_base by default). Each
// child has a priority (WithPriorities; by default list order, the first
// child highest). When the variables do not fit, items are dropped from the
// lowest-priority child first — all of its items, in its own drop order,
// before anything of the next child — until they fit; among equal
// priorities the later child is trimmed first. Then every dropped item that
// fits in the room left is taken back, the most important first (the last
// dropped): an item too large for the room is passed over, with the items
// of the same child and drop priority dropped before it (so a window stays
// its newest messages), and the next ones are tried — one oversized
// message does not empty every layer after it. Items are dropped whole,
// never half a message, and what was dropped is reported (WithTrimHook, and
// observe Reports with observe.ReasonBudget). MemoryVariables never
// changes: a variable trimmed to nothing is loaded empty.
//
// What an item is depends on the child:
//
//   - A child that implements layer.Itemizer (every memory of package
//     memories does) is loaded with LoadItems and says itself what its
//     items are and in which order they go (layer.Item.Priority, Group);
//     each memory documents its drop order on its LoadItems. This is the
//     only way to trim a rendered string safely: a message may span
//     several lines, so trimming a string by lines could split it. See
//     package layer for the contract an Itemizer keeps.
//   - Any other child (langchaingo's memories, your own) is loaded with
//     LoadMemoryVariables. A []llms.ChatMessage value is trimmed message by
//     message in layer's transcript order (oldest first, system messages
//     last, an AI message that calls tools with its results); any other
//     value is kept or dropped whole (a dropped value loads as "").
//
// Counting: the total is the sum over the merged variables of each one's
// tokens — a string as is, a []llms.ChatMessage as llms.GetBufferString
// renders it with the default prefixes, another value as fmt.Sprint renders
// it. The budget plans with per-item counts (cached), then counts the
// rendered variables exactly and drops more if needed, so the total never
// exceeds n by the counter's measure; when the plan was pessimistic it
// takes back the last items dropped while they still fit. A later child's
// variable that overrides an earlier child's is the only one counted.
//
// Cost: a budgeted load renders its Itemizer children item by item (a
// child's LoadItems may cost more than its LoadMemoryVariables, as its
// documentation says: a Buffer's incremental rendering does not apply) and
// counts what it returns — about n tokens — once more, exactly.
//
// # Observability
//
// WithObserver(sink) reports every call of every child to sink as one
// observe.Report per child per operation: the layer's name (WithLayerNames;
// by default "<position>:<type>", such as "1:RecentN"), the identity's hash
// (observe.IdentityHash: the context's identity or the child's default),
// the items the child injected and dropped with the reason and score, its
// tokens, the call's duration and the model calls it made. Children record
// these through the observe.Recorder in their context; with a budget, the
// combined memory records the items it kept and dropped. Reports are sent
// after the call, in list order, on the caller's goroutine. Without an
// observer no Recorder is made and nothing is recorded: the calls cost what
// they cost before.
package combined

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/observe"
)

// ErrInvalid is wrapped by errors about New's arguments.
var ErrInvalid = errors.New("combined: invalid argument")

// ErrNoMessageTaker is returned by AddMessage when no child takes single
// messages.
var ErrNoMessageTaker = errors.New("combined: no child takes single messages")

// MessageAdder is implemented by memories that take single messages of any
// role (every memory in package memories does).
type MessageAdder interface {
	AddMessage(ctx context.Context, msg llms.ChatMessage) error
}

// Memory is a schema.Memory made of other memories. It is safe for
// concurrent use if its children are.
type Memory struct {
	children []schema.Memory
	vars     []string
	layers   []string     // layer names, one per child
	sink     observe.Sink // nil: not observed
	budget   *budget      // nil: no budget
	shared   bool         // two children use one store (checkShared): they share store calls (package stackmemo)
}

var (
	_ schema.Memory = (*Memory)(nil)
	_ MessageAdder  = (*Memory)(nil)
	_ fmt.Stringer  = (*Memory)(nil)
)

// Option configures New.
type Option func(*options)

type options struct {
	strict bool
	budget *budgetConfig
	sink   observe.Sink
	names  []string
	errs   []error
}

// WithStrictKeys makes New reject children whose variables collide, with an
// error naming both children and the key, instead of letting the later
// child's value win at load time.
func WithStrictKeys() Option { return func(o *options) { o.strict = true } }

// New returns a Memory over list, in order. An empty list, a nil child and
// (with WithStrictKeys) two children loading the same key are errors.
func New(list []schema.Memory, opts ...Option) (*Memory, error) {
	var o options
	for i, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: option %d of %d is nil", ErrInvalid, i+1, len(opts))
		}
		opt(&o)
	}
	if err := errors.Join(o.errs...); err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: the list of memories is empty", ErrInvalid)
	}
	m := &Memory{children: make([]schema.Memory, len(list)), sink: o.sink}
	owner := map[string]int{}
	for i, c := range list {
		if isNil(c) {
			return nil, fmt.Errorf("%w: child %d of %d is nil", ErrInvalid, i+1, len(list))
		}
		m.children[i] = c
		for _, v := range c.MemoryVariables(context.Background()) {
			if j, dup := owner[v]; dup {
				if o.strict {
					return nil, fmt.Errorf("%w: %s and %s both load the key %q", ErrInvalid, m.name(j), m.name(i), v)
				}
				continue
			}
			owner[v] = i
			m.vars = append(m.vars, v)
		}
	}
	layers, err := layerNames(m.children, o.names)
	if err != nil {
		return nil, err
	}
	m.layers = layers
	if err := m.checkShared(); err != nil {
		return nil, err
	}
	if o.budget != nil {
		b, err := newBudget(o.budget, len(m.children))
		if err != nil {
			return nil, err
		}
		m.budget = b
	}
	return m, nil
}

// isNil reports whether c is nil or a nil pointer (map, func...) in an
// interface, which would panic on first use.
func isNil(c schema.Memory) bool {
	if c == nil {
		return true
	}
	switch v := reflect.ValueOf(c); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// name identifies child i in errors: its position and Go type.
func (m *Memory) name(i int) string {
	return fmt.Sprintf("child %d (%T)", i+1, m.children[i])
}

// Children returns the memories m is made of, in order (a new slice).
func (m *Memory) Children() []schema.Memory {
	return append([]schema.Memory(nil), m.children...)
}

// GetMemoryKey returns the first child's memory key.
func (m *Memory) GetMemoryKey(ctx context.Context) string {
	return m.children[0].GetMemoryKey(ctx)
}

// MemoryVariables returns the union of the children's variables, in list
// order, without duplicates.
func (m *Memory) MemoryVariables(context.Context) []string {
	return append([]string(nil), m.vars...)
}

// each runs f for every child (but those skip says to skip)
// concurrently and joins the failures, each naming its child. With reports
// (one per child; nil when not observed) each child runs with its own
// observe.Recorder for op in its context, and its finished Report is
// stored in reports.
func (m *Memory) each(ctx context.Context, op string, skip func(schema.Memory) bool, reports []observe.Report,
	f func(ctx context.Context, i int, c schema.Memory) error) error {
	errs := make([]error, len(m.children))
	var wg sync.WaitGroup
	for i, c := range m.children {
		if skip != nil && skip(c) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx := ctx
			var rec *observe.Recorder
			var raw error
			if reports != nil {
				rec = observe.StartRecorder(op, m.layers[i], observe.IdentityHash(ctx, c))
				cctx = observe.WithRecorder(ctx, rec)
			}
			defer func() {
				if r := recover(); r != nil {
					raw = fmt.Errorf("panic: %v", r)
					errs[i] = fmt.Errorf("%s: %w", m.name(i), raw)
				}
				if rec != nil {
					reports[i] = rec.FinishNow(observe.RedactFor(ctx, c, raw))
				}
			}()
			if raw = f(cctx, i, c); raw != nil {
				errs[i] = fmt.Errorf("%s: %w", m.name(i), raw)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// newReports returns the slots for one call's reports, or nil when m is
// not observed.
func (m *Memory) newReports() []observe.Report {
	if m.sink == nil {
		return nil
	}
	return make([]observe.Report, len(m.children))
}

// emit sends the reports of the children that ran, in list order.
func (m *Memory) emit(ctx context.Context, reports []observe.Report) {
	for i := range reports {
		if reports[i].Op != "" {
			m.sink.Observe(ctx, reports[i])
		}
	}
}

// SaveContext gives the turn to every child, concurrently. It returns the
// joined failures; children that succeeded keep the turn.
func (m *Memory) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	ctx, done := m.saveContext(ctx)
	defer done()
	reports := m.newReports()
	err := m.each(ctx, observe.OpSave, nil, reports, func(ctx context.Context, _ int, c schema.Memory) error {
		return c.SaveContext(ctx, inputs, outputs)
	})
	m.emit(ctx, reports)
	return err
}

// LoadMemoryVariables loads every child concurrently and merges the results
// in list order; on a key collision the later child's value wins. With
// WithTokenBudget the merged variables are then trimmed to the budget (see
// the package documentation).
func (m *Memory) LoadMemoryVariables(ctx context.Context, inputs map[string]any) (map[string]any, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	// Children reading the same tail of one store read it once (package
	// stackmemo).
	ctx, done := m.loadContext(ctx)
	defer done()
	if m.budget != nil {
		return m.loadBudgeted(ctx, inputs)
	}
	reports := m.newReports()
	results := make([]map[string]any, len(m.children))
	err := m.each(ctx, observe.OpLoad, nil, reports, func(ctx context.Context, i int, c schema.Memory) error {
		v, err := c.LoadMemoryVariables(ctx, inputs)
		results[i] = v
		return err
	})
	m.emit(ctx, reports)
	if err != nil {
		return nil, err
	}
	merged := make(map[string]any, len(m.vars))
	for _, r := range results {
		for k, v := range r {
			merged[k] = v
		}
	}
	return merged, nil
}

// loadBudgeted loads every child — an Itemizer as items — and trims the
// result to the budget.
func (m *Memory) loadBudgeted(ctx context.Context, inputs map[string]any) (map[string]any, error) {
	reports := m.newReports()
	res := make([]loaded, len(m.children))
	err := m.each(ctx, observe.OpLoad, nil, reports, func(ctx context.Context, i int, c schema.Memory) error {
		if it, ok := c.(Itemizer); ok {
			items, err := it.LoadItems(ctx, inputs)
			if err != nil {
				return err
			}
			res[i].items = &items
			return nil
		}
		v, err := c.LoadMemoryVariables(ctx, inputs)
		if v == nil {
			v = map[string]any{}
		}
		res[i].vars = v
		return err
	})
	if err != nil {
		m.emit(ctx, reports)
		return nil, err
	}
	merged, err := m.trim(ctx, res, reports)
	m.emit(ctx, reports)
	if err != nil {
		return nil, err
	}
	return merged, nil
}

// AddMessage gives msg to every child that implements MessageAdder,
// concurrently, and returns the joined failures. Children that do not take
// single messages (langchaingo's memories) are skipped; if there is no child
// that does, it returns ErrNoMessageTaker.
func (m *Memory) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	takers := 0
	for _, c := range m.children {
		if _, ok := c.(MessageAdder); ok {
			takers++
		}
	}
	if takers == 0 {
		return ErrNoMessageTaker
	}
	ctx, done := m.saveContext(ctx)
	defer done()
	reports := m.newReports()
	err := m.each(ctx, observe.OpAdd, notTaker, reports, func(ctx context.Context, _ int, c schema.Memory) error {
		return c.(MessageAdder).AddMessage(ctx, msg)
	})
	m.emit(ctx, reports)
	return err
}

func notTaker(c schema.Memory) bool {
	_, ok := c.(MessageAdder)
	return !ok
}

// Clear clears every child, concurrently, and returns the joined failures.
func (m *Memory) Clear(ctx context.Context) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	reports := m.newReports()
	err := m.each(ctx, observe.OpClear, nil, reports, func(ctx context.Context, _ int, c schema.Memory) error {
		return c.Clear(ctx)
	})
	m.emit(ctx, reports)
	return err
}

// String describes the combined memory and, indented below it, each child
// (its String method if it has one, else its Go type).
func (m *Memory) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CombinedMemory(%d children, variables=%q", len(m.children), m.vars)
	if m.budget != nil {
		fmt.Fprintf(&b, ", token_budget=%d", m.budget.n)
	}
	b.WriteString(")")
	for _, c := range m.children {
		s := fmt.Sprintf("%T", c)
		if st, ok := c.(fmt.Stringer); ok {
			s = st.String()
		}
		for _, line := range strings.Split(s, "\n") {
			b.WriteString("\n  ")
			b.WriteString(line)
		}
	}
	return b.String()
}

func ctxErr(ctx context.Context) error {
	if ctx == nil {
		return errors.New("combined: nil context")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("combined: %w", err)
	}
	return nil
}
