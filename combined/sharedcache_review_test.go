package combined_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/tokens"
)

// TestReview3_SharedCountCacheConcurrent: many stacks with the default
// counter, loaded at once (run with -race), trim exactly as the same
// stacks with a counter of their own (own caches), with texts over
// more than 4 KiB and more texts than the cache holds.
func TestReview3_SharedCountCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	cl, err := tokens.CL100K()
	require.NoError(t, err)
	line := func(s, i int) string {
		n := 5 + (s*7+i)%40
		if i%17 == 0 {
			n = 1200 // > 4 KiB
		}
		return fmt.Sprintf("stack %d line %d %s", s%5, i, strings.Repeat(fmt.Sprintf("w%dx ", i%9), n))
	}
	mk := func(s int, bopts ...combined.BudgetOption) *combined.Memory {
		buf := memory.NewConversationBuffer(memory.WithMemoryKey("lc"))
		for i := range 300 {
			require.NoError(t, buf.SaveContext(ctx, map[string]any{"input": line(s, i)}, map[string]any{"output": line(s+1, i+1)}))
		}
		return newBudgeted(t, []schema.Memory{buf}, 3000+s*37, bopts)
	}
	const stacks = 24
	shared, own := make([]*combined.Memory, stacks), make([]*combined.Memory, stacks)
	for s := range stacks {
		shared[s], own[s] = mk(s), mk(s, combined.WithTokenCounter(cl))
	}
	want := make([]any, stacks)
	for s := range stacks {
		v, err := own[s].LoadMemoryVariables(ctx, map[string]any{"input": "x"})
		require.NoError(t, err)
		want[s] = v["lc"]
	}
	var wg sync.WaitGroup
	for round := range 3 {
		for s := range stacks {
			wg.Go(func() {
				v, err := shared[s].LoadMemoryVariables(ctx, map[string]any{"input": "x"})
				if assert.NoError(t, err) {
					assert.Equal(t, want[s], v["lc"], "stack %d round %d", s, round)
				}
			})
		}
	}
	wg.Wait()
}
