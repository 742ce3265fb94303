package proof_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/sqlitestore"
)

type searchCounter struct {
	readCounter
	searches atomic.Int64
}

func (s *searchCounter) SearchRecall(ctx context.Context, in store.RecallScope, q indexkit.Query) ([]store.RecallHit, error) {
	if len(q.Terms) > 0 {
		s.searches.Add(1)
	}
	return s.readCounter.SearchRecall(ctx, in, q)
}

// TestReviewS30_ConvScopeStoreIndexRandom: a conversation-scoped Recall
// over SQLite's own index shows what the same Recall shows over the
// in-process index, on random conversations with repeated words (ties),
// repeated texts, pinned system messages between turns, tool calls,
// messages appended one by one (AddMessage: an exchange split over
// appends and days), and every option the view depends on.
func TestReviewS30_ConvScopeStoreIndexRandom(t *testing.T) {
	words := []string{"invoice", "launch", "budget", "alpha", "beta", "gamma", "delta", "rocket", "paris", "tokyo", "meeting", "deadline"}
	for seed := range 3 {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 77))
			ctx := context.Background()
			lite, err := sqlitestore.Open(openCtx(t), filepath.Join(t.TempDir(), "r.db"), sqlitestore.WithRecallIndex())
			require.NoError(t, err)
			t.Cleanup(func() { _ = lite.Close() })
			mem := store.NewInMemory()
			db := &searchCounter{readCounter: readCounter{Store: lite, RecallSearcher: lite, RangeReader: lite}}
			id := memstack.Identity{User: "ana", Conversation: "c"}
			other := memstack.Identity{User: "ana", Conversation: "other"}
			text := func() string {
				n := 1 + rng.IntN(4)
				s := ""
				for range n {
					s += words[rng.IntN(len(words))] + " "
				}
				return s + "please"
			}
			start := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
			at := start
			for i := range 90 {
				at = at.Add(time.Duration(10+rng.IntN(90)) * time.Minute)
				var batches [][]llms.ChatMessage
				switch r := rng.IntN(10); {
				case r == 0:
					batches = [][]llms.ChatMessage{{llms.SystemChatMessage{Content: "be brief " + text()}}}
				case r == 1:
					batches = [][]llms.ChatMessage{{llms.HumanChatMessage{Content: text()},
						llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: fmt.Sprint("call", i), Type: "function", FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{"q":"x"}`}}}},
						llms.ToolChatMessage{ID: fmt.Sprint("call", i), Content: text()},
						llms.AIChatMessage{Content: text()}}}
				case r == 2:
					// one by one: the answer another day
					batches = [][]llms.ChatMessage{{llms.HumanChatMessage{Content: text()}}, {llms.AIChatMessage{Content: text()}}}
				case r == 3:
					batches = [][]llms.ChatMessage{{llms.HumanChatMessage{Content: "invoice launch please"}, llms.AIChatMessage{Content: "noted"}}}
				case r == 4:
					batches = [][]llms.ChatMessage{{llms.AIChatMessage{Content: text()}}}
				default:
					batches = [][]llms.ChatMessage{{llms.HumanChatMessage{Content: text()}, llms.AIChatMessage{Content: text()}}}
				}
				for bi, b := range batches {
					actx := memstack.WithTime(ctx, at.Add(time.Duration(bi)*5*time.Hour))
					for _, st := range []store.Store{mem, lite} {
						require.NoError(t, st.Append(actx, id, b...))
						require.NoError(t, st.Append(actx, other, llms.HumanChatMessage{Content: text()}, llms.AIChatMessage{Content: text()}))
					}
				}
			}
			here := memstack.WithIdentity(ctx, id)
			queries := []string{"invoice launch", "alpha beta gamma", "tokyo deadline meeting", "What did we say on 2 March 2026 about the rocket",
				"What did we say on 3 March 2026", "paris"}
			n, nonEmpty := 0, 0
			for _, unit := range []memories.RecallUnit{memories.RecallTurns, memories.RecallExchanges} {
				for _, nb := range []int{-1, 0, 1, 3} {
					for _, excl := range []int{0, 3, 6} {
						for _, k := range []int{2, 5} {
							for _, budget := range []int{0, 400} {
								for _, msgsMode := range []bool{false, true} {
									opts := []memories.RecallOption{memories.WithRecallUnit(unit), memories.WithRecallScope(memories.RecallScopeConversation),
										memories.WithK(k), memories.WithExcludeRecent(excl), memories.WithReturnMessages(msgsMode)}
									if nb >= 0 {
										opts = append(opts, memories.WithNeighbours(nb))
									}
									load := func(st store.Store, input string) map[string]any {
										recall, err := memories.NewRecall(append(opts, memories.WithStore(st))...)
										require.NoError(t, err)
										var m schema.Memory = recall
										if budget > 0 {
											recent, err := memories.NewRecentN(3, memories.WithStore(st))
											require.NoError(t, err)
											m, err = combined.New([]schema.Memory{recent, recall}, combined.WithTokenBudget(budget))
											require.NoError(t, err)
										}
										vars, err := m.LoadMemoryVariables(here, map[string]any{"input": input})
										require.NoError(t, err)
										return vars
									}
									for _, q := range queries {
										want, got := load(mem, q), load(db, q)
										n++
										if v, _ := want[memories.RecallMemoryKey].(string); v != "" {
											nonEmpty++
										} else if v, _ := want[memories.RecallMemoryKey].([]llms.ChatMessage); len(v) > 0 {
											nonEmpty++
										}
										require.Equal(t, want, got, "%s nb=%d excl=%d k=%d budget=%d msgs=%t: %q", unit, nb, excl, k, budget, msgsMode, q)
									}
								}
							}
						}
					}
				}
			}
			t.Logf("%d loads compared, %d showing something", n, nonEmpty)
			require.Greater(t, nonEmpty, n/2)
			require.Greater(t, db.searches.Load(), int64(n/2))
		})
	}
}
