package observe

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
)

// ErrNilMemory is returned by every call of a memory that Wrap was given
// nil.
var ErrNilMemory = errors.New("observe: Wrap was given a nil memory")

// Wrap returns mem with every LoadMemoryVariables, SaveContext, Clear and
// AddMessage call reported to sink as layer: the observer for a single
// memory outside a combined.Memory (inside one, use combined.WithObserver,
// which also keeps the token budget's item-level trimming; a wrapped memory
// is trimmed by combined's budget as a whole variable or message by
// message).
//
// The result has an AddMessage method exactly when mem has one (with the
// signature of memories' AddMessage), a String method describing mem,
// ResolveIdentity (IdentityResolver) and Unwrap returning mem (to reach
// Flush, Close, Stats...). The identity
// reported is IdentityHash(ctx, mem). A nil sink returns mem itself
// unchanged; an empty layer is named after mem's Go type. A nil mem gives a
// memory whose calls return ErrNilMemory rather than panicking.
func Wrap(mem schema.Memory, layer string, sink Sink) schema.Memory {
	if sink == nil && !isNilMemory(mem) {
		return mem
	}
	if layer == "" {
		layer = fmt.Sprintf("%T", mem)
	}
	w := &wrapped{mem: mem, layer: layer, sink: sink}
	if isNilMemory(mem) {
		w.mem = nil
		return w
	}
	if a, ok := mem.(messageAdder); ok {
		return &wrappedAdder{wrapped: w, adder: a}
	}
	return w
}

type messageAdder interface {
	AddMessage(ctx context.Context, msg llms.ChatMessage) error
}

func isNilMemory(m schema.Memory) bool {
	if m == nil {
		return true
	}
	switch v := reflect.ValueOf(m); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// wrapped is Wrap's memory for a memory without AddMessage.
type wrapped struct {
	mem   schema.Memory
	layer string
	sink  Sink
}

// wrappedAdder is Wrap's memory for a memory with AddMessage.
type wrappedAdder struct {
	*wrapped
	adder messageAdder
}

// observed runs f with a Recorder for op in its context and reports the
// result; without a sink or a context it just runs f.
func (w *wrapped) observed(ctx context.Context, op string, f func(ctx context.Context) error) error {
	if w.sink == nil || ctx == nil {
		return f(ctx)
	}
	rec := StartRecorder(op, w.layer, IdentityHash(ctx, w.mem))
	var err error
	defer func() {
		if p := recover(); p != nil {
			w.sink.Observe(ctx, rec.FinishNow(fmt.Errorf("observe: %s panicked: %v", w.layer, p)))
			panic(p)
		}
		w.sink.Observe(ctx, rec.FinishNow(RedactFor(ctx, w.mem, err)))
	}()
	err = f(WithRecorder(ctx, rec))
	return err
}

// GetMemoryKey returns the wrapped memory's key.
func (w *wrapped) GetMemoryKey(ctx context.Context) string {
	if w.mem == nil {
		return ""
	}
	return w.mem.GetMemoryKey(ctx)
}

// MemoryVariables returns the wrapped memory's variables.
func (w *wrapped) MemoryVariables(ctx context.Context) []string {
	if w.mem == nil {
		return nil
	}
	return w.mem.MemoryVariables(ctx)
}

// LoadMemoryVariables loads from the wrapped memory and reports an OpLoad.
func (w *wrapped) LoadMemoryVariables(ctx context.Context, inputs map[string]any) (map[string]any, error) {
	if w.mem == nil {
		return nil, ErrNilMemory
	}
	var out map[string]any
	err := w.observed(ctx, OpLoad, func(ctx context.Context) error {
		var err error
		out, err = w.mem.LoadMemoryVariables(ctx, inputs)
		return err
	})
	return out, err
}

// SaveContext saves to the wrapped memory and reports an OpSave.
func (w *wrapped) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
	if w.mem == nil {
		return ErrNilMemory
	}
	return w.observed(ctx, OpSave, func(ctx context.Context) error { return w.mem.SaveContext(ctx, inputs, outputs) })
}

// Clear clears the wrapped memory and reports an OpClear.
func (w *wrapped) Clear(ctx context.Context) error {
	if w.mem == nil {
		return ErrNilMemory
	}
	return w.observed(ctx, OpClear, w.mem.Clear)
}

// ResolveIdentity returns the identity the wrapped memory resolves for
// ctx (see IdentityResolver), or the identity in ctx (the zero Identity if
// none) when it does not resolve identities itself.
func (w *wrapped) ResolveIdentity(ctx context.Context) (memstack.Identity, error) {
	if r, ok := w.mem.(IdentityResolver); ok {
		return r.ResolveIdentity(ctx)
	}
	id, _ := memstack.IdentityFrom(ctx)
	return id, nil
}

// Unwrap returns the wrapped memory.
func (w *wrapped) Unwrap() schema.Memory { return w.mem }

// String describes the wrapped memory and the layer name.
func (w *wrapped) String() string {
	var s string
	switch m := w.mem.(type) {
	case nil:
		s = "<nil>"
	case fmt.Stringer:
		s = m.String()
	default:
		s = fmt.Sprintf("%T", m)
	}
	return fmt.Sprintf("Observed(layer=%q, %s)", w.layer, s)
}

// AddMessage gives msg to the wrapped memory and reports an OpAdd.
func (w *wrappedAdder) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
	return w.observed(ctx, OpAdd, func(ctx context.Context) error { return w.adder.AddMessage(ctx, msg) })
}

var (
	_ schema.Memory    = (*wrapped)(nil)
	_ IdentityResolver = (*wrapped)(nil)
	_ messageAdder     = (*wrappedAdder)(nil)
	_ fmt.Stringer     = (*wrapped)(nil)
)
