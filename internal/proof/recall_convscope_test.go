package proof_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/internal/benchcorpus"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// readCounter passes every call to a store that searches its own index
// and reads ranges, counting the messages its whole reads return (All,
// Messages-like reads of a conversation) and those its tails return.
type readCounter struct {
	store.Store
	store.RecallSearcher
	store.RangeReader
	whole, tail atomic.Int64
}

func (r *readCounter) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	recs, err := r.Store.All(ctx, id)
	r.whole.Add(int64(len(recs)))
	return recs, err
}

func (r *readCounter) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	recs, err := r.Store.Tail(ctx, id, n, after)
	if after == 0 {
		r.tail.Add(int64(len(recs)))
	} else {
		r.whole.Add(int64(len(recs))) // a read from a Seq on: the history
	}
	return recs, err
}

// TestRecall_StoreIndexConversationScopeReadsWhatItShows: a
// conversation-scoped Recall over a store that searches its own index
// shows what the same Recall shows over the in-process index — for turns
// and exchanges, 0 to 4 neighbours (more than a user-scoped load's view
// holds), a recent window left out, a date in the question, and under a
// token budget — and a load of a long conversation reads its tail and the
// stretches around its hits, not the conversation (but for a question
// naming a date: see readOthers).
func TestRecall_StoreIndexConversationScopeReadsWhatItShows(t *testing.T) {
	ctx := context.Background()
	for _, be := range indexedBackends() {
		t.Run(be.name, func(t *testing.T) {
			raw := be.open(t, "convscope"+randomHex(4))
			db := &readCounter{Store: raw, RecallSearcher: raw.(store.RecallSearcher), RangeReader: raw.(store.RangeReader)}
			mem := store.NewInMemory()
			id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "long"}
			other := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "other"}
			start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
			const turns = 600
			for i := range turns {
				at := memstack.WithTime(ctx, start.Add(time.Duration(i)*17*time.Minute))
				msgs := []llms.ChatMessage{llms.HumanChatMessage{Content: benchcorpus.Human(i)}}
				if i%9 == 4 {
					msgs = append(msgs,
						llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: fmt.Sprint("call", i), Type: "function", FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{"q":"invoice"}`}}}},
						llms.ToolChatMessage{ID: fmt.Sprint("call", i), Content: benchcorpus.AI(i + 5000)})
				}
				msgs = append(msgs, llms.AIChatMessage{Content: benchcorpus.AI(i)})
				for _, st := range []store.Store{mem, raw} {
					require.NoError(t, st.Append(at, id, msgs...))
					// Another conversation of the user, which a
					// conversation's Recall never shows.
					require.NoError(t, st.Append(at, other, llms.HumanChatMessage{Content: benchcorpus.Human(i + 1)}, llms.AIChatMessage{Content: benchcorpus.AI(i + 1)}))
				}
			}
			here := memstack.WithIdentity(ctx, id)
			for _, unit := range []memories.RecallUnit{memories.RecallTurns, memories.RecallExchanges} {
				for n := range 5 {
					for _, budget := range []int{0, 700} {
						opts := []memories.RecallOption{memories.WithRecallUnit(unit), memories.WithRecallScope(memories.RecallScopeConversation),
							memories.WithNeighbours(n), memories.WithK(5), memories.WithExcludeRecent(6)}
						load := func(st store.Store, input string) map[string]any {
							recall, err := memories.NewRecall(append(opts, memories.WithStore(st))...)
							require.NoError(t, err)
							recent, err := memories.NewRecentN(6, memories.WithStore(st))
							require.NoError(t, err)
							var copts []combined.Option
							if budget > 0 {
								copts = append(copts, combined.WithTokenBudget(budget))
							}
							stack, err := combined.New([]schema.Memory{recent, recall}, copts...)
							require.NoError(t, err)
							vars, err := stack.LoadMemoryVariables(here, map[string]any{"input": input})
							require.NoError(t, err)
							return vars
						}
						for q := range 6 {
							input := benchcorpus.Human(7 + 97*q)
							if q == 5 {
								input = "What did we say on 2 March 2026 about " + benchcorpus.Human(30)
							}
							db.whole.Store(0)
							db.tail.Store(0)
							want, got := load(mem, input), load(db, input)
							require.NotEmpty(t, want[memories.RecallMemoryKey], "%s, %d neighbours, budget %d: %q", unit, n, budget, input)
							assert.Equal(t, want, got, "%s, %d neighbours, budget %d: %q", unit, n, budget, input)
							// A load reads its recent window's tail and the hits'
							// stretches: a few dozen messages of the 1,300 or so.
							// (A unit brought by a date has no stretch known: its
							// conversation is read whole, as in a user's scope.)
							if q < 5 {
								assert.Zero(t, db.whole.Load(), "%s, %d neighbours, budget %d: whole reads", unit, n, budget)
							}
							assert.Less(t, db.tail.Load(), int64(60), "%s, %d neighbours, budget %d: tail reads", unit, n, budget)
						}
					}
				}
			}
		})
	}
}
