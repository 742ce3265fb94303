package memories_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tmc/langchaingo/schema"

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

// BenchmarkRecallSave is one SaveContext of a default Recall holding n
// messages (the history grows by b.N turns).
func BenchmarkRecallSave(b *testing.B) {
	for _, n := range []int{600, 10000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			rc, _ := rbFilled(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				in, out := rbTurn(n + i)
				if err := rc.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRecallBudgetedLoad is one load of the README's stack —
// RecentN(6) + Recall under WithTokenBudget(1000) — over n messages.
func BenchmarkRecallBudgetedLoad(b *testing.B) {
	for _, n := range []int{600, 10000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			_, mem := rbFilled(b, n)
			ctx := context.Background()
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

// BenchmarkRecallTurn is one unbudgeted turn of a default Recall holding n
// messages: SaveContext of the new turn, then LoadMemoryVariables with its
// input, as memstack-bench measures it.
func BenchmarkRecallTurn(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			rc, _ := rbFilled(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				in, out := rbTurn(n + i)
				if err := rc.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}); err != nil {
					b.Fatal(err)
				}
				if _, err := rc.LoadMemoryVariables(ctx, map[string]any{"input": in}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
