package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
)

// sleepyMemory is a user's schema.Memory whose every save and load takes d
// (a remote call, say): the child of the CombinedMemory benchmark.
type sleepyMemory struct {
	key string
	d   time.Duration
}

var _ schema.Memory = sleepyMemory{}

func (s sleepyMemory) wait(ctx context.Context) error {
	t := time.NewTimer(s.d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s sleepyMemory) GetMemoryKey(context.Context) string      { return s.key }
func (s sleepyMemory) MemoryVariables(context.Context) []string { return []string{s.key} }
func (s sleepyMemory) Clear(context.Context) error              { return nil }

func (s sleepyMemory) LoadMemoryVariables(ctx context.Context, _ map[string]any) (map[string]any, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return map[string]any{s.key: "remembered by " + s.key}, nil
}

func (s sleepyMemory) SaveContext(ctx context.Context, _, _ map[string]any) error {
	return s.wait(ctx)
}

// sequential calls its children one after another: what a combiner that
// does not run children concurrently would cost.
type sequential []schema.Memory

var _ schema.Memory = sequential{}

func (q sequential) GetMemoryKey(ctx context.Context) string { return q[0].GetMemoryKey(ctx) }

func (q sequential) MemoryVariables(ctx context.Context) []string {
	var out []string
	for _, c := range q {
		out = append(out, c.MemoryVariables(ctx)...)
	}
	return out
}

func (q sequential) Clear(ctx context.Context) error {
	for _, c := range q {
		if err := c.Clear(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (q sequential) LoadMemoryVariables(ctx context.Context, in map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for _, c := range q {
		v, err := c.LoadMemoryVariables(ctx, in)
		if err != nil {
			return nil, err
		}
		for k, x := range v {
			out[k] = x
		}
	}
	return out, nil
}

func (q sequential) SaveContext(ctx context.Context, in, out map[string]any) error {
	for _, c := range q {
		if err := c.SaveContext(ctx, in, out); err != nil {
			return err
		}
	}
	return nil
}

// fanoutRow is the save and load latency of one memory.
type fanoutRow struct {
	memory           string
	ops              int
	saveP50, saveP99 time.Duration
	loadP50, loadP99 time.Duration
}

// Names of the CombinedMemory rows, as the table shows them.
const (
	fanOne        = "one child alone"
	fanCombined   = "combined.New of three children"
	fanSequential = "the three children called one after another"
)

// measureFanout saves and loads ops times, timing each call.
func measureFanout(ctx context.Context, name string, m schema.Memory, ops, wantVars int) (fanoutRow, error) {
	saves := make([]time.Duration, 0, ops)
	loads := make([]time.Duration, 0, ops)
	for i := range ops {
		t := opTurns[i%len(opTurns)]
		start := time.Now()
		if err := m.SaveContext(ctx, t.in, t.out); err != nil {
			return fanoutRow{}, fmt.Errorf("%s: SaveContext: %w", name, err)
		}
		mid := time.Now()
		v, err := m.LoadMemoryVariables(ctx, t.in)
		if err != nil {
			return fanoutRow{}, fmt.Errorf("%s: LoadMemoryVariables: %w", name, err)
		}
		end := time.Now()
		if len(v) != wantVars {
			return fanoutRow{}, fmt.Errorf("%s: loaded %d variables, want %d", name, len(v), wantVars)
		}
		saves = append(saves, mid.Sub(start))
		loads = append(loads, end.Sub(mid))
	}
	slices.Sort(saves)
	slices.Sort(loads)
	return fanoutRow{
		memory: name, ops: ops,
		saveP50: percentile(saves, 0.50), saveP99: percentile(saves, 0.99),
		loadP50: percentile(loads, 0.50), loadP99: percentile(loads, 0.99),
	}, nil
}

// runFanout measures one sleepy child, a CombinedMemory of three and the
// three called one after another.
func runFanout(ctx context.Context, cfg config, progress io.Writer) ([]fanoutRow, error) {
	children := []schema.Memory{
		sleepyMemory{key: "a", d: cfg.childLatency},
		sleepyMemory{key: "b", d: cfg.childLatency},
		sleepyMemory{key: "c", d: cfg.childLatency},
	}
	comb, err := combined.New(children)
	if err != nil {
		return nil, err
	}
	cases := []struct {
		name string
		mem  schema.Memory
		vars int
	}{
		{fanOne, children[0], 1},
		{fanCombined, comb, 3},
		{fanSequential, sequential(children), 3},
	}
	var rows []fanoutRow
	for _, c := range cases {
		r, err := measureFanout(ctx, c.name, c.mem, cfg.fanoutOps, c.vars)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "combined: %-48s save p50 %s p99 %s, load p50 %s p99 %s\n",
			r.memory, fmtDur(r.saveP50), fmtDur(r.saveP99), fmtDur(r.loadP50), fmtDur(r.loadP99))
		rows = append(rows, r)
	}
	return rows, nil
}
