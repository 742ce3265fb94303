//go:build unix

package memories_test

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/benchcorpus"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// corpusTurn is turn i of the benchmark corpus (internal/benchcorpus), the
// conversation memstack-bench replays: every turn shares the words of
// every other.
func corpusTurn(i int) (in, out map[string]any) {
	return map[string]any{"input": benchcorpus.Human(i)}, map[string]any{"output": benchcorpus.AI(i)}
}

// corpusRecall returns a default Recall over an in-memory store holding
// the first n messages of the corpus, built as memstack-bench builds it:
// n-2 messages stored, the last turn saved through the Recall (which
// indexes the history), and one load.
func corpusRecall(b *testing.B, n int) schema.Memory {
	b.Helper()
	ctx := context.Background()
	s := store.NewInMemory()
	msgs := make([]llms.ChatMessage, 0, n)
	for i := 0; i < n/2-1; i++ {
		msgs = append(msgs, llms.HumanChatMessage{Content: benchcorpus.Human(i)}, llms.AIChatMessage{Content: benchcorpus.AI(i)})
	}
	if len(msgs) > 0 {
		if err := s.Append(ctx, memstack.Identity{}, msgs...); err != nil {
			b.Fatal(err)
		}
	}
	m, err := memories.NewRecall(memories.WithStore(s))
	if err != nil {
		b.Fatal(err)
	}
	in, out := corpusTurn(n/2 - 1)
	if err := m.SaveContext(ctx, in, out); err != nil {
		b.Fatal(err)
	}
	if _, err := m.LoadMemoryVariables(ctx, map[string]any{}); err != nil {
		b.Fatal(err)
	}
	// Warm-up turns, untimed (memstack-bench's warmupTurns): a fresh
	// Recall's first load reads the conversation's units.
	for i := range 3 {
		in, out := corpusTurn(2_000_000 + i)
		if err := m.SaveContext(ctx, in, out); err != nil {
			b.Fatal(err)
		}
		if _, err := m.LoadMemoryVariables(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	if n >= 10_000 {
		runtime.GC()
	}
	return m
}

// BenchmarkRecallCorpusTurn is memstack-bench's "Recall (BM25)" turn (the
// issue's criterion: a turn at 100,000 messages costs at most 10× one at
// 1,000): on a conversation of n messages of the benchmark corpus,
// SaveContext of a new turn then LoadMemoryVariables with its input. As in
// the root package's BenchmarkTurn the history is kept near n: the memory
// is built 2h messages short of n (warm-up turns included) and rebuilt,
// timer stopped, every 2h turns. cpu-ns/op is the process's CPU time per
// turn, the rebuilds' left out.
func BenchmarkRecallCorpusTurn(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			ctx := context.Background()
			h := max(1, min(n/16, b.N/2))
			m := corpusRecall(b, n-2*h-6)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			var paused time.Duration // CPU time of the rebuilds
			for i := 0; i < b.N; i++ {
				if i > 0 && i%(2*h) == 0 {
					b.StopTimer()
					p0 := processCPU(b)
					m = corpusRecall(b, n-2*h-6)
					paused += processCPU(b) - p0
					b.StartTimer()
				}
				in, out := corpusTurn(1_000_000 + (n/2+i)%4096)
				if err := m.SaveContext(ctx, in, out); err != nil {
					b.Fatal(err)
				}
				if _, err := m.LoadMemoryVariables(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
			spent := processCPU(b) - cpu0 - paused
			b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the process's CPU time (every thread), from getrusage.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
