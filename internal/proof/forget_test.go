package proof_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// TestForget_UserForgetLeavesNoFacts: a user with 300 conversations asks
// to be forgotten while a per-user Facts extraction of one of them is in
// flight. Whatever the extraction does after — commit, conflict, retry —
// nothing of the user is left, the facts identity included, and the
// user's next conversation sees no fact (issue 17, item 1).
func TestForget_UserForgetLeavesNoFacts(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.space(t)("facts")
			users, ok := st.(store.Users)
			require.True(t, ok)
			for attempt := range 3 {
				tenant := fmt.Sprintf("acme%d", attempt)
				ana := memstack.Identity{Tenant: tenant, User: "ana"}
				ctx := context.Background()
				for i := range 300 {
					id := ana
					id.Conversation = fmt.Sprintf("c%03d", i)
					require.NoError(t, st.Append(ctx, id, llms.HumanChatMessage{Content: "hello"}, llms.AIChatMessage{Content: "hi"}))
				}
				started, release := make(chan struct{}, 1), make(chan struct{})
				ext := extract.ExtractorFunc(func(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
					select {
					case started <- struct{}{}:
						<-release // the first extraction waits until the forget has begun
					default:
					}
					return []extract.Candidate{{Subject: "user", Attribute: "secret", Value: "the card 4111"}}, nil
				})
				facts, err := memories.NewFacts(ext, memories.WithStore(st), memories.WithFactsPerUser(true), memories.WithBackground(true))
				require.NoError(t, err)
				last := ana
				last.Conversation = "zzz" // removed last of the conversations
				require.NoError(t, facts.SaveContext(memstack.WithIdentity(ctx, last), map[string]any{"input": "my card is 4111"}, map[string]any{"output": "noted"}))
				<-started
				done := make(chan error, 1)
				go func() {
					_, err := users.ForgetScope(ctx, store.UserScope(tenant, "ana"))
					done <- err
				}()
				time.Sleep(time.Duration(attempt) * 5 * time.Millisecond)
				close(release)
				require.NoError(t, <-done)
				require.NoError(t, facts.Flush(ctx))
				require.NoError(t, facts.Close())

				left, err := users.Identities(ctx, store.UserScope(tenant, "ana"))
				require.NoError(t, err)
				assert.Empty(t, left, "attempt %d: nothing of the user is left", attempt)
				again, err := memories.NewFacts(extract.ExtractorFunc(func(context.Context, []llms.ChatMessage) ([]extract.Candidate, error) { return nil, nil }),
					memories.WithStore(st), memories.WithFactsPerUser(true))
				require.NoError(t, err)
				next := ana
				next.Conversation = "new"
				vars, err := again.LoadMemoryVariables(memstack.WithIdentity(ctx, next), nil)
				require.NoError(t, err)
				assert.NotContains(t, vars["facts"], "4111", "attempt %d: the user's next conversation sees no fact", attempt)
			}
		})
	}
}

// TestForget_OthersForgetsDoNotStarveSummaries: while other users are
// forgotten every 20 ms, a new conversation's Summary, whose model takes
// 60 ms, still commits its folds and keeps its raw history near its limit
// (issue 17, item 5: it committed none, and its raw history grew to 60
// messages).
func TestForget_OthersForgetsDoNotStarveSummaries(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			st := b.space(t)("summary")
			ctx := context.Background()
			slow := summarizerFunc(func(ctx context.Context, prev string, msgs []llms.ChatMessage) (string, error) {
				select {
				case <-time.After(60 * time.Millisecond):
				case <-ctx.Done():
					return "", ctx.Err()
				}
				return fmt.Sprintf("%s +%d", prev, len(msgs)), nil
			})
			sum, err := memories.NewSummary(slow, memories.WithStore(st), memories.WithMaxMessages(6), memories.WithBatchSize(2),
				memories.WithRetryBackoff(0, 0))
			require.NoError(t, err)
			t.Cleanup(func() { _ = sum.Close() })
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					other := memstack.Identity{Tenant: "acme", User: fmt.Sprintf("leaver%d", i), Conversation: "c"}
					assert.NoError(t, st.Forget(ctx, other))
				}
			})
			id := memstack.Identity{Tenant: "acme", User: "keeper", Conversation: "c"}
			for i := range 12 {
				_ = sum.SaveContext(memstack.WithIdentity(ctx, id), map[string]any{"input": fmt.Sprintf("q%d", i)}, map[string]any{"output": fmt.Sprintf("a%d", i)})
			}
			close(stop)
			wg.Wait()
			stats := sum.Stats()
			assert.GreaterOrEqual(t, stats.MessagesFolded, int64(12), "folds commit while other users are forgotten: %+v", stats)
			vars, err := sum.LoadMemoryVariables(memstack.WithIdentity(ctx, id), nil)
			require.NoError(t, err)
			assert.Contains(t, vars["history"], memories.SummaryPrefix)
		})
	}
}
