package memories_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
)

// TestConcurrentCloseWaitsForTheWork: a second Close called while the
// first is stopping the background work returns only once the work has
// stopped, for Facts and Summary alike.
func TestConcurrentCloseWaitsForTheWork(t *testing.T) {
	var stopped atomic.Bool
	started := make(chan struct{}, 1)
	// slow answers only when cancelled, and takes a while to wind down.
	slow := func(ctx context.Context) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		time.Sleep(150 * time.Millisecond)
		stopped.Store(true)
		return ctx.Err()
	}
	ext := extract.ExtractorFunc(func(ctx context.Context, _ []llms.ChatMessage) ([]extract.Candidate, error) {
		return nil, slow(ctx)
	})
	facts, err := memories.NewFacts(ext, memories.WithBackground(true))
	require.NoError(t, err)
	sum, err := memories.NewSummary(smSummarizerFunc(func(ctx context.Context, _ string, _ []llms.ChatMessage) (string, error) {
		return "", slow(ctx)
	}), memories.WithBackground(true), memories.WithMaxMessages(2), memories.WithBatchSize(2))
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		mem  interface {
			SaveContext(context.Context, map[string]any, map[string]any) error
		}
		close func() error
	}{
		{"facts", facts, facts.Close},
		{"summary", sum, sum.Close},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stopped.Store(false)
			ctx := context.Background()
			for i := 0; i < 3; i++ {
				require.NoError(t, tc.mem.SaveContext(ctx, map[string]any{"input": "My name is Ana."}, map[string]any{"output": "Hi Ana."}))
			}
			select {
			case <-started:
			case <-time.After(5 * time.Second):
				t.Fatal("the background work never started")
			}
			first := make(chan error, 1)
			go func() { first <- tc.close() }()
			// Wait until the first Close has begun: the memory refuses saves.
			require.Eventually(t, func() bool {
				err := tc.mem.SaveContext(ctx, map[string]any{"input": "x"}, map[string]any{"output": "y"})
				return errors.Is(err, memories.ErrClosed)
			}, 5*time.Second, time.Millisecond)
			require.NoError(t, tc.close())
			assert.True(t, stopped.Load(), "the second Close returned before the work stopped")
			require.NoError(t, <-first)
		})
	}
}

// TestFacts_TimeoutAbandonsAnExtractorThatIgnoresItsContext: an extractor
// that ignores its deadline is abandoned, so Flush and Close return on
// time and its late facts are not recorded (issue 10, item 3).
func TestFacts_TimeoutAbandonsAnExtractorThatIgnoresItsContext(t *testing.T) {
	ctx := context.Background()
	deaf := extract.ExtractorFunc(func(context.Context, []llms.ChatMessage) ([]extract.Candidate, error) {
		time.Sleep(3 * time.Second)
		return []extract.Candidate{{Subject: "user", Attribute: "name", Value: "Late"}}, nil
	})
	m, err := memories.NewFacts(deaf, memories.WithBackground(true), memories.WithExtractTimeout(50*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "My name is Ana."}, map[string]any{"output": "Hi."}))
	start := time.Now()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, m.Flush(fctx))
	require.NoError(t, m.Close())
	assert.Less(t, time.Since(start), time.Second, "Flush and Close wait for the timeout, not for the deaf call")
	vars, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.NotContains(t, vars["facts"], "Late", "the abandoned call's answer is discarded")
	assert.GreaterOrEqual(t, m.Stats().Failures, int64(1))
}
