package storetest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
