package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/sqlitestore"
)

// BenchmarkConversationSize measures Stat (which every memory calls on
// every load) and a one-turn Append on a conversation that already holds
// 1k and 100k messages, with another 10k messages of other identities in
// the file. Run it with
//
//	go test -run '^$' -bench ConversationSize -benchtime 2000x ./store/sqlitestore/
//
// Append grows the conversation by two messages per iteration.
func BenchmarkConversationSize(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{1_000, 100_000} {
		s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "size.db"))
		if err != nil {
			b.Fatal(err)
		}
		id := memstack.Identity{Tenant: "bench", User: "big", Conversation: "c"}
		fill := func(id memstack.Identity, n int) {
			batch := make([]llms.ChatMessage, 0, 1000)
			for i := range n {
				batch = append(batch, llms.HumanChatMessage{Content: fmt.Sprintf("message %d: what did we decide about the launch date and the budget?", i)})
				if len(batch) == cap(batch) || i == n-1 {
					if err := s.Append(ctx, id, batch...); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
		}
		fill(id, size)
		for u := range 10 {
			fill(memstack.Identity{Tenant: "bench", User: fmt.Sprint("other", u)}, 1000)
		}
		b.Run(fmt.Sprintf("Stat/messages=%d", size), func(b *testing.B) {
			for b.Loop() {
				st, err := s.Stat(ctx, id)
				if err != nil {
					b.Fatal(err)
				}
				if st.Count < size {
					b.Fatalf("Stat = %+v, want at least %d messages", st, size)
				}
			}
		})
		b.Run(fmt.Sprintf("Append/messages=%d", size), func(b *testing.B) {
			for b.Loop() {
				if err := s.Append(ctx, id,
					llms.HumanChatMessage{Content: "what did we decide about the launch date and the budget?"},
					llms.AIChatMessage{Content: "launch on the 14th, budget capped at 20k, review on Friday."}); err != nil {
					b.Fatal(err)
				}
			}
		})
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
