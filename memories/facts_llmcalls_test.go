package memories_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
)

// TestFacts_BackgroundLLMCallsAreReported: a background extraction's
// model calls (recorded the way extract.NewLLM records them) are counted
// in the identity's next observed call (issue 10, item 7).
func TestFacts_BackgroundLLMCallsAreReported(t *testing.T) {
	ctx := context.Background()
	ext := extract.ExtractorFunc(func(ctx context.Context, _ []llms.ChatMessage) ([]extract.Candidate, error) {
		observe.FromContext(ctx).LLMCall(1) // as extract.NewLLM does for each model call
		return nil, nil
	})
	facts, err := memories.NewFacts(ext, memories.WithBackground(true))
	require.NoError(t, err)
	defer facts.Close()
	var reports []observe.Report
	mem, err := combined.New([]schema.Memory{facts}, combined.WithObserver(observe.SinkFunc(func(_ context.Context, r observe.Report) {
		reports = append(reports, r)
	})))
	require.NoError(t, err)
	require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": "My name is Ana."}, map[string]any{"output": "Hi."}))
	require.NoError(t, facts.Flush(ctx))
	_, err = mem.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	total := 0
	for _, r := range reports {
		total += r.LLMCalls
	}
	assert.Equal(t, 1, total, "the background call is counted once, in the next report: %+v", reports)
	_, err = mem.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Zero(t, reports[len(reports)-1].LLMCalls, "and only once")
}

// In synchronous mode the save's own report counts the call.
func TestFacts_SynchronousLLMCallsAreReportedWithTheSave(t *testing.T) {
	ctx := context.Background()
	ext := extract.ExtractorFunc(func(ctx context.Context, _ []llms.ChatMessage) ([]extract.Candidate, error) {
		observe.FromContext(ctx).LLMCall(1)
		return nil, nil
	})
	facts, err := memories.NewFacts(ext)
	require.NoError(t, err)
	var reports []observe.Report
	mem, err := combined.New([]schema.Memory{facts}, combined.WithObserver(observe.SinkFunc(func(_ context.Context, r observe.Report) {
		reports = append(reports, r)
	})))
	require.NoError(t, err)
	require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": "My name is Ana."}, map[string]any{"output": "Hi."}))
	require.Len(t, reports, 1)
	assert.Equal(t, observe.OpSave, reports[0].Op)
	assert.Equal(t, 1, reports[0].LLMCalls)
}
