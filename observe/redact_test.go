package observe_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
)

var errModelDown = errors.New("model down")

type failingSummarizer struct{}

func (failingSummarizer) Summarize(context.Context, string, []llms.ChatMessage) (string, error) {
	return "", errModelDown
}

// TestReportsCarryNoIdentityInErrors: the errors in observe Reports and in
// a Summary's events name the identity by its hash, never by its key
// (issue 10, item 7); errors.Is still finds the cause.
func TestReportsCarryNoIdentityInErrors(t *testing.T) {
	alice := memstack.Identity{Tenant: "acme", User: "alice@example.com", Conversation: "c1"}
	ctx := memstack.WithIdentity(context.Background(), alice)
	var events []memories.SummaryEvent
	sum, err := memories.NewSummary(failingSummarizer{}, memories.WithMaxMessages(2), memories.WithBatchSize(2),
		memories.WithSummaryHook(func(ev memories.SummaryEvent) { events = append(events, ev) }))
	require.NoError(t, err)
	var reports []observe.Report
	mem, err := combined.New([]schema.Memory{sum}, combined.WithObserver(observe.SinkFunc(func(_ context.Context, r observe.Report) {
		reports = append(reports, r)
	})))
	require.NoError(t, err)
	var saveErr error
	for i := 0; i < 3; i++ {
		if err := mem.SaveContext(ctx, map[string]any{"input": fmt.Sprint("q", i)}, map[string]any{"output": "a"}); err != nil {
			saveErr = err
		}
	}
	require.Error(t, saveErr, "synchronous mode returns the summarizer's failure")
	require.NotEmpty(t, events)
	for _, ev := range events {
		require.Error(t, ev.Err)
		assert.NotContains(t, ev.Err.Error(), "alice")
		assert.Contains(t, ev.Err.Error(), "identity "+alice.Hash()[:12])
		assert.ErrorIs(t, ev.Err, errModelDown)
	}
	var failed int
	for _, r := range reports {
		if r.Err != nil {
			failed++
			assert.NotContains(t, r.Err.Error(), "alice")
			assert.ErrorIs(t, r.Err, errModelDown)
		}
	}
	assert.Positive(t, failed, "the failing saves are reported")
	assert.Nil(t, observe.Redact(nil, alice))
	plain := errors.New("no identity here")
	assert.Equal(t, plain, observe.Redact(plain, alice), "an error that does not name the identity is returned as is")
}

// TestKeyedIdentityHash: with memories.WithHashKey, reports and events name
// the identity by its keyed hash, which a dictionary of user ids hashed
// with Identity.Hash cannot match (issue 10, item 7).
func TestKeyedIdentityHash(t *testing.T) {
	alice := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	secret := []byte("app secret")
	assert.NotEqual(t, alice.Hash(), alice.KeyedHash(secret))
	assert.NotEqual(t, alice.KeyedHash([]byte("another")), alice.KeyedHash(secret))
	assert.Equal(t, alice.KeyedHash(secret), alice.KeyedHash(secret), "stable")
	assert.Len(t, alice.KeyedHash(secret), 16)

	ctx := memstack.WithIdentity(context.Background(), alice)
	var events []memories.SummaryEvent
	sum, err := memories.NewSummary(failingSummarizer{}, memories.WithMaxMessages(2), memories.WithBatchSize(2),
		memories.WithHashKey(secret), memories.WithSummaryHook(func(ev memories.SummaryEvent) { events = append(events, ev) }))
	require.NoError(t, err)
	var reports []observe.Report
	mem, err := combined.New([]schema.Memory{sum}, combined.WithObserver(observe.SinkFunc(func(_ context.Context, r observe.Report) {
		reports = append(reports, r)
	})))
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		_ = mem.SaveContext(ctx, map[string]any{"input": fmt.Sprint("q", i)}, map[string]any{"output": "a"})
	}
	require.NotEmpty(t, reports)
	for _, r := range reports {
		assert.Equal(t, alice.KeyedHash(secret), r.IdentityHash)
		if r.Err != nil {
			assert.Contains(t, r.Err.Error(), "identity "+alice.KeyedHash(secret)[:12])
			assert.NotContains(t, r.Err.Error(), alice.Hash()[:12])
		}
	}
	require.NotEmpty(t, events)
	for _, ev := range events {
		assert.Equal(t, alice.KeyedHash(secret), ev.IdentityHash)
	}
	_, err = memories.NewSummary(failingSummarizer{}, memories.WithHashKey(nil))
	require.ErrorIs(t, err, memories.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithHashKey")
}
