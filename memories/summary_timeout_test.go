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

// deafSummarizer ignores its context: it answers after delay whatever
// happens, as a model client without context support would.
type deafSummarizer struct{ delay time.Duration }

func (d deafSummarizer) Summarize(context.Context, string, []llms.ChatMessage) (string, error) {
	time.Sleep(d.delay)
	return "late summary", nil
}

// A summarizer that ignores its context is abandoned at the timeout (its
// late answer discarded), so Flush and Close return on time and nothing
// is folded from the abandoned call (issue 10, item 3).
func TestSummary_TimeoutAbandonsASummarizerThatIgnoresItsContext(t *testing.T) {
	ctx := context.Background()
	m, err := memories.NewSummary(deafSummarizer{delay: 3 * time.Second},
		memories.WithMaxMessages(4), memories.WithBatchSize(2),
		memories.WithBackground(true),
		memories.WithSummaryTimeout(50*time.Millisecond),
		memories.WithRetryBackoff(time.Hour, time.Hour))
	require.NoError(t, err)
	for i := range 4 {
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("question %d", i)}, map[string]any{"output": "answer"}))
	}
	start := time.Now()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, m.Flush(fctx))
	assert.Less(t, time.Since(start), time.Second, "Flush waits for the timeout, not for the deaf call")
	start = time.Now()
	require.NoError(t, m.Close())
	assert.Less(t, time.Since(start), time.Second, "Close too")
	assert.Zero(t, m.Stats().MessagesFolded, "the abandoned call's answer is discarded")
	assert.GreaterOrEqual(t, m.Stats().Failures, int64(1))
}

// panickySummarizer panics on every call.
type panickySummarizer struct{}

func (panickySummarizer) Summarize(context.Context, string, []llms.ChatMessage) (string, error) {
	panic("model client bug")
}

// A summarizer that panics in background mode does not take the process
// down: the panic is a failure, reported, and the messages stay raw
// (issue 10, item 3).
func TestSummary_PanickingSummarizerIsAFailure(t *testing.T) {
	ctx := context.Background()
	for _, background := range []bool{true, false} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			events := make(chan memories.SummaryEvent, 16)
			m, err := memories.NewSummary(panickySummarizer{},
				memories.WithMaxMessages(4), memories.WithBatchSize(2),
				memories.WithBackground(background),
				memories.WithRetryBackoff(time.Hour, time.Hour),
				memories.WithSummaryHook(func(ev memories.SummaryEvent) { events <- ev }))
			require.NoError(t, err)
			defer m.Close()
			for i := range 4 {
				err := m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("question %d", i)}, map[string]any{"output": "answer"})
				if err != nil {
					// Synchronous mode says why summarizing failed; the turn is stored.
					require.False(t, background, "background saves do not fail: %v", err)
					assert.Contains(t, err.Error(), "turn stored; summarization failed")
					assert.Contains(t, err.Error(), "panicked")
				}
			}
			require.NoError(t, m.Flush(ctx))
			ev := <-events
			require.Error(t, ev.Err)
			assert.Contains(t, ev.Err.Error(), "panicked")
			assert.Contains(t, ev.Err.Error(), "model client bug")
			vars, err := m.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			assert.Contains(t, vars["history"], "question 0", "nothing lost")
		})
	}
}
