package proof_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/memory"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// TestAsHistory_WindowBuffersOnTwoReplicas: two replicas, each with its
// own client of the store, run langchaingo's ConversationWindowBuffer(2)
// over store.AsHistory on one conversation and save 100 turns each at
// once. Every save returns nil, so no acknowledged turn may be lost out of
// order — a replica's turn stays stored while an older turn of the same
// replica is — and a state value in the same namespace survives every
// trim (issue 17, item 2).
func TestAsHistory_WindowBuffersOnTwoReplicas(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			open := b.space(t)
			clients := []store.Store{open("layer"), open("layer")}
			id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "window"}
			ctx := context.Background()
			st, err := clients[0].GetState(ctx, id, "summary")
			require.NoError(t, err)
			_, err = clients[0].PutState(ctx, id, "summary", []byte("kept"), st.Version)
			require.NoError(t, err)

			const turns = 100
			var wg sync.WaitGroup
			for r, name := range []string{"A", "B"} {
				mem := memory.NewConversationWindowBuffer(2, memory.WithChatHistory(store.AsHistory(clients[r], id)))
				wg.Go(func() {
					for i := range turns {
						in := map[string]any{"input": fmt.Sprintf("%s %d", name, i)}
						out := map[string]any{"output": fmt.Sprintf("reply to %s %d", name, i)}
						if !assert.NoError(t, mem.SaveContext(ctx, in, out), "replica %s turn %d", name, i) {
							return
						}
					}
				})
			}
			wg.Wait()

			st, err = clients[1].GetState(ctx, id, "summary")
			require.NoError(t, err)
			assert.Equal(t, "kept", string(st.Value), "the state in the namespace survives every trim")
			all, err := clients[1].All(ctx, id)
			require.NoError(t, err)
			stored := map[string][]int{}
			for _, r := range all {
				c := r.Message.GetContent()
				if strings.HasPrefix(c, "reply") {
					continue
				}
				name, num, _ := strings.Cut(c, " ")
				n, err := strconv.Atoi(num)
				require.NoError(t, err, "message %q", c)
				stored[name] = append(stored[name], n)
			}
			for _, name := range []string{"A", "B"} {
				got := stored[name]
				if len(got) == 0 {
					continue
				}
				for i, n := range got {
					assert.Equal(t, got[0]+i, n, "replica %s: its turns from %d on are all stored, in order: %v", name, got[0], got)
				}
				assert.Equal(t, turns-1, got[len(got)-1], "replica %s's last turn is stored (nothing newer came from it): %v", name, got)
			}
			assert.NotEmpty(t, stored, "the window keeps the newest turns")
		})
	}
}
