package memories_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// hangingSummarizer never answers: it blocks until its context is done.
type hangingSummarizer struct {
	mu    sync.Mutex
	calls int
}

func (h *hangingSummarizer) Summarize(ctx context.Context, _ string, _ []llms.ChatMessage) (string, error) {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	<-ctx.Done()
	return "", ctx.Err()
}

var _ summarizer.Summarizer = (*hangingSummarizer)(nil)

// A summarizer that never answers is abandoned after the timeout, counted
// as a failure and reported, the messages stay raw, and Flush returns — in
// background mode no caller's deadline would ever end the call.
func TestSummary_TimeoutBoundsAHangingSummarizer(t *testing.T) {
	ctx := context.Background()
	h := &hangingSummarizer{}
	events := make(chan memories.SummaryEvent, 16)
	m, err := memories.NewSummary(h,
		memories.WithMaxMessages(4), memories.WithBatchSize(2),
		memories.WithBackground(true),
		memories.WithSummaryTimeout(50*time.Millisecond),
		memories.WithRetryBackoff(0, 0),
		memories.WithSummaryHook(func(ev memories.SummaryEvent) { events <- ev }))
	require.NoError(t, err)
	defer m.Close()
	for i := range 4 {
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("question %d", i)}, map[string]any{"output": "answer"}))
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, m.Flush(fctx), "Flush returns once the hanging call is abandoned")
	ev := <-events
	require.Error(t, ev.Err)
	assert.True(t, errors.Is(ev.Err, memories.ErrSummaryTimeout), "reported as a timeout: %v", ev.Err)
	st := m.Stats()
	assert.GreaterOrEqual(t, st.Failures, int64(1))
	assert.Zero(t, st.MessagesFolded)
	vars, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Contains(t, vars["history"], "question 0", "nothing folded, nothing lost")
	assert.Contains(t, vars["history"], "question 3")
}

func TestSummary_TimeoutOption(t *testing.T) {
	_, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithSummaryTimeout(-time.Second))
	require.ErrorIs(t, err, memories.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithSummaryTimeout")
}
