package proof_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// reviewSeed seeds TestReview3_ReachViewsAgree's corpus.
var reviewSeed = uint64(4)

// TestReview3_ReachViewsAgree: a user-scoped load over a store's index
// (ranged reads, each hit's stretch narrowed to the selection's Reach)
// shows what the same load shows reading whole conversations, for many
// option combinations, plain and under a token budget. (How many loads
// differ from the in-process index, whose ranking differs across
// conversations by design, is only logged.)
func TestReview3_ReachViewsAgree(t *testing.T) {
	ctx := context.Background()
	words := strings.Fields("lease invoice Lisbon offsite renew March budget hotel flight visa badge laptop contract payroll audit tax")
	rng := rand.New(rand.NewPCG(reviewSeed, 9))
	text := func(n int) string {
		var b []string
		for range n {
			b = append(b, words[rng.IntN(len(words))])
		}
		return strings.Join(b, " ")
	}
	for _, be := range indexedBackends() {
		t.Run(be.name, func(t *testing.T) {
			st := be.open(t, "reach"+randomHex(4))
			mem := store.NewInMemory()
			whole := wholeReads{st, st.(store.RecallSearcher), st.(store.Users)}
			user := func(c int) memstack.Identity {
				return memstack.Identity{Tenant: "acme", User: "ana", Conversation: fmt.Sprintf("c%d", c)}
			}
			day0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
			k := 0
			for c := range 5 {
				for i := range 24 {
					k++
					var msgs []llms.ChatMessage
					if i == 0 && c%2 == 1 {
						msgs = append(msgs, llms.SystemChatMessage{Content: "You help with paperwork."})
					}
					msgs = append(msgs, llms.HumanChatMessage{Content: text(3 + rng.IntN(4))})
					switch {
					case k%7 == 3:
						msgs = append(msgs,
							llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: fmt.Sprint("call", k), Type: "function", FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{"q":"x"}`}}}},
							llms.ToolChatMessage{ID: fmt.Sprint("call", k), Content: text(3)})
					case k%11 == 5:
						msgs = append(msgs, llms.SystemChatMessage{Content: "Be brief."})
					}
					if k%13 != 4 {
						msgs = append(msgs, llms.AIChatMessage{Content: text(2 + rng.IntN(5))})
					}
					actx := memstack.WithTime(ctx, day0.Add(time.Duration(c*24+i)*7*time.Hour))
					require.NoError(t, st.Append(actx, user(c), msgs...))
					require.NoError(t, mem.Append(actx, user(c), msgs...))
				}
			}
			all, err := st.All(ctx, user(2))
			require.NoError(t, err)
			_, err = st.RemovePrefix(ctx, user(2), all[17].Seq)
			require.NoError(t, err)
			_, err = mem.RemovePrefix(ctx, user(2), all[17].Seq)
			require.NoError(t, err)
			type variant struct {
				name string
				opts []memories.RecallOption
			}
			var variants []variant
			for _, unit := range []memories.RecallUnit{memories.RecallTurns, memories.RecallExchanges} {
				for _, n := range []int{-1, 0, 1, 2, 3} {
					for _, share := range []float64{-1, 0, 0.5} {
						for _, dates := range []bool{false, true} {
							opts := []memories.RecallOption{memories.WithRecallUnit(unit), memories.WithK(4 + rng.IntN(6)), memories.WithQueryDates(dates), memories.WithRecallDates(dates), memories.WithExcludeRecent(rng.IntN(3) * 4)}
							if n >= 0 {
								opts = append(opts, memories.WithNeighbours(n))
							}
							if share >= 0 {
								opts = append(opts, memories.WithNeighbourShare(share))
							}
							variants = append(variants, variant{fmt.Sprintf("%s n=%d share=%v dates=%t", unit, n, share, dates), opts})
						}
					}
				}
			}
			load := func(r *memories.Recall, budget int, here memstack.Identity, q string) string {
				c := memstack.WithIdentity(ctx, here)
				in := map[string]any{"input": q}
				if budget == 0 {
					vars, err := r.LoadMemoryVariables(c, in)
					require.NoError(t, err)
					return fmt.Sprint(vars[memories.RecallMemoryKey])
				}
				m, err := combined.New([]schema.Memory{r}, combined.WithTokenBudget(budget))
				require.NoError(t, err)
				vars, err := m.LoadMemoryVariables(c, in)
				require.NoError(t, err)
				return fmt.Sprint(vars[memories.RecallMemoryKey])
			}
			fails, inprocDiff, loads := 0, 0, 0
			defer func() { t.Logf("in-process differs from whole in %d of %d loads", inprocDiff, loads) }()
			for _, v := range variants {
				ranged, wholly, inproc := newUserRecall(t, st, v.opts...), newUserRecall(t, whole, v.opts...), newUserRecall(t, mem, v.opts...)
				for range 4 {
					q := text(2 + rng.IntN(3))
					if rng.IntN(3) == 0 {
						q += fmt.Sprintf(" on %d March 2026", 1+rng.IntN(20))
					}
					here := user(9)
					if rng.IntN(2) == 0 {
						here = user(rng.IntN(5))
					}
					for _, budget := range []int{0, 60, 200, 10000} {
						loads++
						want := load(wholly, budget, here, q)
						got := load(ranged, budget, here, q)
						mine := load(inproc, budget, here, q)
						if mine != want {
							inprocDiff++
						}
						if !assert.Equal(t, want, got, "ranged vs whole: %s, budget %d, in %s: %q", v.name, budget, here.Conversation, q) {
							if fails++; fails > 3 {
								t.FailNow()
							}
						}
					}
				}
			}
		})
	}
}
