package memories_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
)

type callerKey struct{}

// TestFacts_SynchronousSaveIsBoundedByItsOwnWork: with several callers
// saving turns of one identity at once, a synchronous save extracts its
// own turn and at most the few that arrived while it waited — never every
// other caller's turns in a loop (issue 10, item 4).
func TestFacts_SynchronousSaveIsBoundedByItsOwnWork(t *testing.T) {
	const callers, turns = 4, 25
	var calls [callers]atomic.Int64
	ext := extract.ExtractorFunc(func(ctx context.Context, _ []llms.ChatMessage) ([]extract.Candidate, error) {
		if c, ok := ctx.Value(callerKey{}).(int); ok {
			calls[c].Add(1)
		}
		time.Sleep(2 * time.Millisecond)
		return nil, nil
	})
	m, err := memories.NewFacts(ext)
	require.NoError(t, err)
	var worst atomic.Int64
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.WithValue(context.Background(), callerKey{}, c)
			for i := range turns {
				before := calls[c].Load()
				require.NoError(t, m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("caller %d turn %d", c, i)}, map[string]any{"output": "ok"}))
				if n := calls[c].Load() - before; n > worst.Load() {
					worst.Store(n)
				}
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, worst.Load(), int64(callers), "the most extractions one save ran")
	total := int64(0)
	for c := range callers {
		total += calls[c].Load()
	}
	assert.Equal(t, int64(callers*turns), total, "every turn extracted once")
}
