package memories

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/summarizer"
)

// Issue 17, item 8: a Summary (and a Facts memory, whose worker
// bookkeeping is a copy of Summary's) keeps per-identity bookkeeping for a
// bounded number of identities however many fail, and nothing after Close.

var errBKModelDown = errors.New("model down")

// bkFailingSummarizer fails every call.
type bkFailingSummarizer struct{}

func (bkFailingSummarizer) Summarize(context.Context, string, []llms.ChatMessage) (string, error) {
	return "", errBKModelDown
}

var _ summarizer.Summarizer = bkFailingSummarizer{}

// bkIdentities is how many identities the tests below fail for: more than
// any bound a memory keeps.
const bkIdentities = maxSummaryBackoffs + 8000

// summaryRetained is the number of identities a Summary keeps anything
// for.
func summaryRetained(m *Summary) int {
	return m.pool.Len() + m.eng.Backoffs()
}

func TestSummary_FailingModelKeepsBoundedBookkeeping(t *testing.T) {
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			m, err := NewSummary(bkFailingSummarizer{}, WithMaxMessages(1), WithBatchSize(1), WithBackground(background),
				WithRetryBackoff(time.Hour, time.Hour))
			require.NoError(t, err)
			for i := range bkIdentities {
				ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: fmt.Sprintf("user-%d", i)})
				err := m.SaveContext(ctx, map[string]any{"input": "hello"}, map[string]any{"output": "hi"})
				if !background {
					require.ErrorIs(t, err, errBKModelDown, "the one turn triggers a failing fold")
				} else {
					require.NoError(t, err)
				}
			}
			require.NoError(t, m.Flush(context.Background()))
			assert.Equal(t, int64(bkIdentities), m.Stats().Failures, "every identity's fold failed")
			assert.LessOrEqual(t, summaryRetained(m), maxSummaryBackoffs, "bookkeeping is bounded")

			// The backoff still holds for the identities it remembers.
			last := memstack.WithIdentity(context.Background(), memstack.Identity{User: fmt.Sprintf("user-%d", bkIdentities-1)})
			require.NoError(t, m.SaveContext(last, map[string]any{"input": "again"}, map[string]any{"output": "ok"}))
			require.NoError(t, m.Flush(context.Background()))
			assert.Equal(t, int64(bkIdentities), m.Stats().Calls, "a remembered identity waits for its backoff")

			require.NoError(t, m.Close())
			assert.Zero(t, summaryRetained(m), "nothing is kept after Close")
		})
	}
}

// Facts has no backoff; its per-identity entries go when their work is
// done, and what it keeps for reports (the background model calls not
// reported yet) is bounded and dropped at Close.
func TestFacts_FailingModelKeepsBoundedBookkeeping(t *testing.T) {
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%v", background), func(t *testing.T) {
			ext := extract.ExtractorFunc(func(ctx context.Context, _ []llms.ChatMessage) ([]extract.Candidate, error) {
				observe.FromContext(ctx).LLMCall(1) // as extract.NewLLM counts a model call
				return nil, errBKModelDown
			})
			m, err := NewFacts(ext, WithBackground(background))
			require.NoError(t, err)
			const n = 5000
			for i := range n {
				ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: fmt.Sprintf("user-%d", i)})
				require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "I live in Lisbon."}, map[string]any{"output": "Nice."}))
			}
			require.NoError(t, m.Flush(context.Background()))
			assert.Equal(t, int64(n), m.Stats().Failures)
			m.mu.Lock()
			ids, later := m.pool.Len(), len(m.laterLLM)
			m.mu.Unlock()
			assert.Zero(t, ids, "no entry is kept once an identity's work is done")
			assert.LessOrEqual(t, later, maxLaterLLM)

			require.NoError(t, m.Close())
			m.mu.Lock()
			ids, later = m.pool.Len(), len(m.laterLLM)
			m.mu.Unlock()
			assert.Zero(t, ids+later, "nothing is kept after Close")
		})
	}
}
