package combined

import (
	"fmt"
	"reflect"

	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/observe"
)

// WithObserver reports every load, save, add and clear of every child to
// sink, one observe.Report per child per call (see the package
// documentation). Observation is off unless this option is given. A nil
// sink is an error.
func WithObserver(sink observe.Sink) Option {
	return func(o *options) {
		if sink == nil {
			o.errs = append(o.errs, fmt.Errorf("%w: WithObserver(nil): the sink must not be nil", ErrInvalid))
			return
		}
		o.sink = sink
	}
}

// WithLayerNames names the children in reports and in Trim, in list order:
// one non-empty, distinct name per child, for example
// WithLayerNames("recent", "facts", "recall"). The default name of a child
// is its position and Go type, "<position>:<type>" ("1:RecentN").
func WithLayerNames(names ...string) Option {
	return func(o *options) {
		o.names = append([]string{}, names...)
		if len(names) == 0 {
			o.errs = append(o.errs, fmt.Errorf("%w: WithLayerNames(): no names given", ErrInvalid))
		}
	}
}

// layerNames checks the names given with WithLayerNames against the
// children, or makes the default names.
func layerNames(children []schema.Memory, names []string) ([]string, error) {
	if names == nil {
		out := make([]string, len(children))
		for i, c := range children {
			out[i] = fmt.Sprintf("%d:%s", i+1, typeName(c))
		}
		return out, nil
	}
	if len(names) != len(children) {
		return nil, fmt.Errorf("%w: WithLayerNames: %d names for %d children (give one per child)", ErrInvalid, len(names), len(children))
	}
	seen := make(map[string]int, len(names))
	for i, n := range names {
		if n == "" {
			return nil, fmt.Errorf("%w: WithLayerNames: name %d of %d is empty", ErrInvalid, i+1, len(names))
		}
		if j, dup := seen[n]; dup {
			return nil, fmt.Errorf("%w: WithLayerNames: names %d and %d are both %q", ErrInvalid, j+1, i+1, n)
		}
		seen[n] = i
	}
	return names, nil
}

// typeName is the name of c's type without package or pointer ("RecentN").
func typeName(c schema.Memory) string {
	t := reflect.TypeOf(c)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n := t.Name(); n != "" {
		return n
	}
	return fmt.Sprintf("%T", c)
}
