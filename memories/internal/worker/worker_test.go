package worker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegistry_KeepsIdleValuesUpToItsBound(t *testing.T) {
	tests := []struct {
		name    string
		idle    int
		release []string // released in this order, each acquired once
		kept    []string
		evicted []string
	}{
		{"none kept", 0, []string{"a", "b"}, nil, []string{"a", "b"}},
		{"one kept, the last released", 1, []string{"a", "b", "c"}, []string{"c"}, []string{"a", "b"}},
		{"all kept under the bound", 5, []string{"a", "b"}, []string{"a", "b"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var evicted []string
			r := NewRegistry[string, int](tt.idle, nil, func(k string, _ *int) { evicted = append(evicted, k) })
			for _, k := range tt.release {
				*r.Acquire(k) = len(k)
				r.Release(k)
			}
			assert.Equal(t, tt.evicted, evicted)
			assert.Equal(t, len(tt.kept), r.Len())
			for _, k := range tt.kept {
				assert.Equal(t, len(k), *r.Acquire(k), "an idle value is kept as it was")
			}
		})
	}
}

func TestRegistry_NeverEvictsAValueInUse(t *testing.T) {
	var evicted []string
	r := NewRegistry[string, int](0, nil, func(k string, _ *int) { evicted = append(evicted, k) })
	a := r.Acquire("a")
	r.Hold("a")
	for _, k := range []string{"b", "c"} {
		r.Acquire(k)
		r.Release(k)
	}
	assert.Equal(t, []string{"b", "c"}, evicted)
	assert.Same(t, a, r.Acquire("a"), "a is still held")
	r.Release("a")
	r.Release("a")
	assert.Equal(t, 1, r.Len(), "one use of a is left")
	r.Release("a")
	assert.Zero(t, r.Len())
	assert.Equal(t, []string{"b", "c", "a"}, evicted)
	r.Release("a") // releasing an unknown key does nothing
	assert.Zero(t, r.Len())
}

func TestRegistry_ReacquiredIdleValueIsNotEvicted(t *testing.T) {
	r := NewRegistry[string, int](1, nil, nil)
	*r.Acquire("a") = 7
	r.Release("a")
	a := r.Acquire("a") // in use again: out of the idle list
	*r.Acquire("b") = 1
	r.Release("b")
	r.Acquire("c")
	r.Release("c") // evicts b, the idle one beyond the bound, never a
	assert.Equal(t, 7, *a)
	assert.Equal(t, 2, r.Len())
}

// gate is a Run that blocks each pass until released, counting passes and
// the most passes of one key at a time.
type gate struct {
	mu      sync.Mutex
	running map[string]int
	peak    int
	passes  atomic.Int64
	started chan string
	release chan struct{}
}

func newGate() *gate {
	return &gate{running: map[string]int{}, started: make(chan string, 64), release: make(chan struct{})}
}

func (g *gate) run(ctx context.Context, k string, _ bool) error {
	g.mu.Lock()
	g.running[k]++
	g.peak = max(g.peak, g.running[k])
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running[k]--
		g.mu.Unlock()
	}()
	g.passes.Add(1)
	g.started <- k
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestPool_NowRunsOnePassPerKeyAtATime(t *testing.T) {
	for _, queue := range []bool{false, true} {
		t.Run(map[bool]string{false: "skip", true: "queue"}[queue], func(t *testing.T) {
			g := newGate()
			p := New(Config[string]{Run: g.run, Queue: queue})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); _ = p.Now(context.Background(), "a") }()
			require.Equal(t, "a", <-g.started)
			second := make(chan error, 1)
			go func() { second <- p.Now(context.Background(), "a") }()
			if !queue {
				assert.NoError(t, <-second, "a Now that finds its key busy returns at once")
			}
			// Another key is not held up.
			wg.Add(1)
			go func() { defer wg.Done(); _ = p.Now(context.Background(), "b") }()
			require.Equal(t, "b", <-g.started)
			close(g.release)
			wg.Wait()
			if queue {
				assert.NoError(t, <-second)
				assert.Equal(t, int64(3), g.passes.Load(), "the queued call makes its own pass after the running one")
			} else {
				assert.Equal(t, int64(2), g.passes.Load())
			}
			assert.Equal(t, 1, g.peak)
			assert.Zero(t, p.Len(), "nothing is kept once the work is done")
		})
	}
}

func TestPool_NowReturnsRunsError(t *testing.T) {
	boom := errors.New("boom")
	p := New(Config[string]{Run: func(context.Context, string, bool) error { return boom }})
	assert.ErrorIs(t, p.Now(context.Background(), "a"), boom)
}

func TestPool_WaitSkipsNowAndEndsWorkers(t *testing.T) {
	var passes atomic.Int64
	var waiting atomic.Bool
	waiting.Store(true)
	p := New(Config[string]{
		Run:  func(context.Context, string, bool) error { passes.Add(1); return nil },
		Wait: func(string) bool { return waiting.Load() },
	})
	require.NoError(t, p.Now(context.Background(), "a"))
	p.Kick(context.Background(), "a")
	require.NoError(t, p.Flush(context.Background()))
	assert.Zero(t, passes.Load(), "no pass while the key waits")
	waiting.Store(false)
	require.NoError(t, p.Now(context.Background(), "a"))
	assert.Equal(t, int64(1), passes.Load())
}

func TestPool_KickCoalescesWorkIntoOneWorker(t *testing.T) {
	g := newGate()
	p := New(Config[string]{Run: g.run})
	p.Kick(context.Background(), "a")
	require.Equal(t, "a", <-g.started)
	for range 5 {
		p.Kick(context.Background(), "a") // marks work pending; the running worker takes it
	}
	g.release <- struct{}{}
	require.Equal(t, "a", <-g.started, "one more pass for the work that arrived")
	g.release <- struct{}{}
	require.NoError(t, p.Flush(context.Background()))
	assert.Equal(t, int64(2), g.passes.Load())
	assert.Equal(t, 1, g.peak)
	assert.Zero(t, p.Len())
}

func TestPool_KickDetachesFromTheCallersCancellation(t *testing.T) {
	done := make(chan error, 1)
	p := New(Config[string]{Run: func(ctx context.Context, _ string, bg bool) error {
		assert.True(t, bg)
		done <- ctx.Err()
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Kick(ctx, "a")
	assert.NoError(t, <-done)
}

func TestPool_ExclusiveCancelsTheRunningPassAndRunsAlone(t *testing.T) {
	g := newGate()
	p := New(Config[string]{Run: g.run})
	ended := make(chan error, 1)
	go func() { ended <- p.Now(context.Background(), "a") }()
	<-g.started
	ran := false
	err := p.Exclusive(context.Background(), "a", func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		ran = g.running["a"] == 0
		return nil
	})
	require.NoError(t, err)
	assert.True(t, ran, "f ran with no pass of its key running")
	assert.ErrorIs(t, <-ended, context.Canceled, "the running pass was cancelled")
}

func TestPool_ExclusiveEndsOnItsContext(t *testing.T) {
	p := New(Config[string]{Run: func(context.Context, string, bool) error { return nil }})
	release := make(chan struct{})
	held := make(chan struct{})
	go func() {
		_ = p.Exclusive(context.Background(), "a", func() error { close(held); <-release; return nil })
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := p.Exclusive(ctx, "a", func() error { t.Error("f ran while another Exclusive held the key"); return nil })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
}

func TestPool_FlushWaitsAndEndsOnItsContext(t *testing.T) {
	g := newGate()
	p := New(Config[string]{Run: g.run})
	p.Kick(context.Background(), "a")
	<-g.started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, p.Flush(ctx), context.DeadlineExceeded)
	close(g.release)
	assert.NoError(t, p.Flush(context.Background()))
}

func TestPool_CloseCancelsWaitsAndRefusesWork(t *testing.T) {
	g := newGate()
	p := New(Config[string]{Run: g.run})
	p.Kick(context.Background(), "a")
	<-g.started
	var wg sync.WaitGroup
	for range 3 { // concurrent Closes all return once the work stopped
		wg.Add(1)
		go func() { defer wg.Done(); p.Close() }()
	}
	wg.Wait()
	g.mu.Lock()
	assert.Zero(t, g.running["a"], "Close returned after the pass stopped")
	g.mu.Unlock()
	assert.True(t, p.Closed())
	assert.NoError(t, p.Now(context.Background(), "a"))
	p.Kick(context.Background(), "a")
	assert.Equal(t, int64(1), g.passes.Load(), "no pass after Close")
	assert.ErrorIs(t, p.Flush(context.Background()), ErrClosed)
	assert.ErrorIs(t, p.Exclusive(context.Background(), "a", func() error { return nil }), ErrClosed)
	assert.Zero(t, p.Len())
}

func TestPool_ExclusiveCancelsACancelable(t *testing.T) {
	p := New(Config[string]{Run: func(context.Context, string, bool) error { return nil }})
	started := make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		ended <- p.Cancelable(context.Background(), "a", func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	<-started
	require.NoError(t, p.Exclusive(context.Background(), "a", func() error { return nil }))
	assert.ErrorIs(t, <-ended, context.Canceled, "the later Exclusive cancelled it")
}
