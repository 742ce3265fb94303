package storetest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storetest"
)

// inMemoryOpener returns an Opener over store.InMemory. An InMemory's data
// lives in the value, so "reopening" a namespace returns the same value: the
// Opener keeps a map from namespace to store.
func inMemoryOpener() storetest.Opener {
	var mu sync.Mutex
	stores := map[string]*store.InMemory{}
	return func(_ testing.TB, ns string) (store.Store, error) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := stores[ns]
		if !ok {
			s = store.NewInMemory()
			stores[ns] = s
		}
		return s, nil
	}
}

func TestInMemoryConformance(t *testing.T) {
	storetest.Run(t, inMemoryOpener())
}

func BenchmarkInMemory(b *testing.B) {
	storetest.Bench(b, inMemoryOpener())
}

func TestMeasure(t *testing.T) {
	ctx := context.Background()
	s := store.NewInMemory()
	res, err := storetest.Measure(ctx, s, 4, 25)
	require.NoError(t, err)
	assert.Equal(t, 100, res.Saves)
	assert.Positive(t, res.Duration)
	assert.InDelta(t, float64(res.Saves)/res.Duration.Seconds(), res.SavesPerSec, 1e-6*res.SavesPerSec)
	assert.Positive(t, res.LoadP50)
	assert.GreaterOrEqual(t, res.LoadP99, res.LoadP50)
	assert.Contains(t, res.String(), "100 saves")

	for _, bad := range [][2]int{{0, 1}, {1, 0}, {-1, 5}} {
		_, err := storetest.Measure(ctx, s, bad[0], bad[1])
		assert.ErrorIs(t, err, store.ErrInvalidArgument, "Measure(%d, %d)", bad[0], bad[1])
	}
	_, err = storetest.Measure(ctx, nil, 1, 1)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = storetest.Measure(cancelled, s, 2, 2)
	assert.ErrorIs(t, err, context.Canceled, "Measure stops at the first error")
}

// MeasureWith times any workload as Measure times a store: it checks what
// Last reads (a workload that loses a message fails), forgets each
// conversation once after the run, and needs Append and Last.
func TestMeasureWith(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	held := map[int]int{}
	forgot := map[int]int{}
	w := storetest.Workload{
		Append: func(_ context.Context, c int, msgs ...llms.ChatMessage) error {
			mu.Lock()
			defer mu.Unlock()
			held[c] += len(msgs)
			return nil
		},
		Last: func(_ context.Context, c, n int) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return min(held[c], n), nil
		},
		Forget: func(_ context.Context, c int) error {
			mu.Lock()
			defer mu.Unlock()
			forgot[c]++
			return nil
		},
	}
	res, err := storetest.MeasureWith(ctx, w, 3, 7)
	require.NoError(t, err)
	assert.Equal(t, 21, res.Saves)
	assert.Equal(t, map[int]int{0: 1, 1: 1, 2: 1}, forgot)

	lossy := w
	lossy.Last = func(ctx context.Context, c, n int) (int, error) {
		got, err := w.Last(ctx, c, n)
		return max(got-1, 0), err
	}
	_, err = storetest.MeasureWith(ctx, lossy, 2, 3)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Last(10) returned")

	_, err = storetest.MeasureWith(ctx, storetest.Workload{Append: w.Append}, 1, 1)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
}
