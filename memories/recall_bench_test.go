package memories_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
)

// rbTurn returns the i-th turn of a varied conversation: a few hundred
// distinct words, so BM25's postings look like a real conversation's.
func rbTurn(i int) (string, string) {
	w := func(k int) string { return fmt.Sprintf("w%d", (i*7919+k*104729)%997) }
	return fmt.Sprintf("Did we talk about %s and %s with %s last %s?", w(1), w(2), w(3), w(4)),
		fmt.Sprintf("Yes, %s said %s is fine, %s can wait until %s.", w(5), w(6), w(7), w(8))
}

func rbFilled(b *testing.B, messages int) (*memories.Recall, schema.Memory) {
	b.Helper()
	ctx := context.Background()
	rn, err := memories.NewRecentN(6)
	if err != nil {
		b.Fatal(err)
	}
	rc, err := memories.NewRecall()
	if err != nil {
		b.Fatal(err)
	}
	mem, err := combined.New([]schema.Memory{rn, rc}, combined.WithTokenBudget(1000))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < messages/2; i++ {
		in, out := rbTurn(i)
		if err := rc.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}); err != nil {
			b.Fatal(err)
		}
	}
	return rc, mem
}

// rbSizes runs op b.N times per history size, on a Recall (and its
// budgeted stack) filled with n messages; op gets the iteration number.
func rbSizes(b *testing.B, sizes []int, op func(ctx context.Context, rc *memories.Recall, mem schema.Memory, n, i int) error) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			rc, mem := rbFilled(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := op(ctx, rc, mem, n, i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecallSave is one SaveContext of a default Recall holding n
// messages (the history grows by b.N turns).
func BenchmarkRecallSave(b *testing.B) {
	rbSizes(b, []int{600, 10000}, func(ctx context.Context, rc *memories.Recall, _ schema.Memory, n, i int) error {
		in, out := rbTurn(n + i)
		return rc.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out})
	})
}

// BenchmarkRecallBudgetedLoad is one load of the README's stack —
// RecentN(6) + Recall under WithTokenBudget(1000) — over n messages.
func BenchmarkRecallBudgetedLoad(b *testing.B) {
	rbSizes(b, []int{600, 10000}, func(ctx context.Context, _ *memories.Recall, mem schema.Memory, _, i int) error {
		q, _ := rbTurn(i * 31)
		_, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": q})
		return err
	})
}

// BenchmarkRecallTurn is one unbudgeted turn of a default Recall holding n
// messages: SaveContext of the new turn, then LoadMemoryVariables with its
// input, as memstack-bench measures it.
func BenchmarkRecallTurn(b *testing.B) {
	rbSizes(b, []int{100, 1000, 10000}, func(ctx context.Context, rc *memories.Recall, _ schema.Memory, n, i int) error {
		in, out := rbTurn(n + i)
		if err := rc.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}); err != nil {
			return err
		}
		_, err := rc.LoadMemoryVariables(ctx, map[string]any{"input": in})
		return err
	})
}

// BenchmarkRecallUserScope is one budgeted load of the README's stack in
// a new conversation of a user with c conversations of 100 messages each:
// a returning user.
func BenchmarkRecallUserScope(b *testing.B) {
	for _, c := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("conversations=%d", c), func(b *testing.B) {
			rn, err := memories.NewRecentN(6)
			if err != nil {
				b.Fatal(err)
			}
			rc, err := memories.NewRecall()
			if err != nil {
				b.Fatal(err)
			}
			mem, err := combined.New([]schema.Memory{rn, rc}, combined.WithTokenBudget(1000))
			if err != nil {
				b.Fatal(err)
			}
			for k := range c {
				ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: "u", Conversation: fmt.Sprintf("c%d", k)})
				for i := range 50 {
					in, out := rbTurn(k*50 + i)
					if err := rc.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}); err != nil {
						b.Fatal(err)
					}
				}
			}
			ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: "u", Conversation: "new"})
			// The first load indexes the user's conversations (a cold
			// process); the loop times warm loads.
			if _, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": "warm up"}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q, _ := rbTurn(i * 31)
				if _, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": q}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
