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
//     every failure, each naming its child.
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
}

var (
	_ schema.Memory = (*Memory)(nil)
	_ MessageAdder  = (*Memory)(nil)
	_ fmt.Stringer  = (*Memory)(nil)
)

// Option configures New.
type Option func(*options)

type options struct{ strict bool }

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
	if len(list) == 0 {
		return nil, fmt.Errorf("%w: the list of memories is empty", ErrInvalid)
	}
	m := &Memory{children: make([]schema.Memory, len(list))}
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

// each runs f for every child (or for the children where pick is true)
// concurrently and joins the failures, each naming its child.
func (m *Memory) each(f func(i int, c schema.Memory) error) error {
	errs := make([]error, len(m.children))
	var wg sync.WaitGroup
	for i, c := range m.children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("%s: panic: %v", m.name(i), r)
				}
			}()
			if err := f(i, c); err != nil {
				errs[i] = fmt.Errorf("%s: %w", m.name(i), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// SaveContext gives the turn to every child, concurrently. It returns the
// joined failures; children that succeeded keep the turn.
func (m *Memory) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	return m.each(func(_ int, c schema.Memory) error { return c.SaveContext(ctx, inputs, outputs) })
}

// LoadMemoryVariables loads every child concurrently and merges the results
// in list order; on a key collision the later child's value wins.
func (m *Memory) LoadMemoryVariables(ctx context.Context, inputs map[string]any) (map[string]any, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	results := make([]map[string]any, len(m.children))
	err := m.each(func(i int, c schema.Memory) error {
		v, err := c.LoadMemoryVariables(ctx, inputs)
		results[i] = v
		return err
	})
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
	return m.each(func(_ int, c schema.Memory) error {
		if a, ok := c.(MessageAdder); ok {
			return a.AddMessage(ctx, msg)
		}
		return nil
	})
}

// Clear clears every child, concurrently, and returns the joined failures.
func (m *Memory) Clear(ctx context.Context) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	return m.each(func(_ int, c schema.Memory) error { return c.Clear(ctx) })
}

// String describes the combined memory and, indented below it, each child
// (its String method if it has one, else its Go type).
func (m *Memory) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CombinedMemory(%d children, variables=%q)", len(m.children), m.vars)
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
