package memories_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFacts_PatternsOnHugeMessageAreBounded (issue 17, item 9): two saves
// of a 10 MB message through Facts with the pattern extractor took about
// 20 s (minutes under -race); the extractor reads each message up to
// extract.DefaultMaxScanBytes, so they take milliseconds, and the facts
// the message states at its start are found.
func TestFacts_PatternsOnHugeMessageAreBounded(t *testing.T) {
	p, err := extract.NewPatterns()
	require.NoError(t, err)
	var mu sync.Mutex
	var evs []memories.FactsEvent
	m, err := memories.NewFacts(p, memories.WithStore(store.NewInMemory()), memories.WithFactsHook(func(ev memories.FactsEvent) {
		mu.Lock()
		defer mu.Unlock()
		evs = append(evs, ev)
	}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })

	const unit = "The weather was fine and the meeting ran long. Nothing else happened today! "
	huge := "My name is Ana. " + strings.Repeat(unit, (10<<20)/len(unit))
	ctx := context.Background()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		for range 2 {
			if err := m.SaveContext(ctx, map[string]any{"input": huge}, map[string]any{"output": "Noted."}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("two saves of a 10 MB message did not return within 3 s")
	}
	t.Logf("two saves of a 10 MB message: %v", time.Since(start))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, evs, 2)
	for _, ev := range evs {
		assert.NoError(t, ev.Err)
	}
	facts, err := m.Current(ctx)
	require.NoError(t, err)
	require.Len(t, facts, 1)
	assert.Equal(t, "user name", facts[0].Key)
	assert.Equal(t, "Ana", facts[0].Value)
}
