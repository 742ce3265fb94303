package memories_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
	"github.com/tmc/langchaingo/llms"
)

// The summary benchmarks run a 1,000-turn conversation against a model test
// double that takes 200 ms per call, and report per 1,000 turns:
//
//   - calls/1000turns: summarizer (model) calls;
//   - p50-µs, p99-µs: SaveContext latency;
//   - model-s/1000turns: time saves spent waiting for the model.
//
// BenchmarkSummaryCalls compares memstack's count mode (n = 15, m = 6),
// its token mode, and the strategy of LangChain's summary-buffer memory
// (once the buffer is full, every turn prunes the oldest messages and makes
// one summarization call). These run synchronously, so the double adds its
// 200 ms to a virtual clock instead of sleeping (1,000 turns would otherwise
// take minutes); a save's latency is its wall time plus the virtual model
// time it waited for. BenchmarkSummaryBackgroundSave runs memstack's
// background mode against a double that really sleeps 200 ms.
//
//	go test -run '^$' -bench 'Summary' -benchtime 3x ./memories/

const (
	benchTurns        = 1000
	benchModelLatency = 200 * time.Millisecond
)

// benchModel is the benchmarks' model double: a short summary after
// latency, really slept or added to a virtual clock.
type benchModel struct {
	sleep   bool
	calls   atomic.Int64
	virtual atomic.Int64 // nanoseconds of virtual model time
}

func (d *benchModel) GenerateContent(ctx context.Context, _ []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	d.calls.Add(1)
	if d.sleep {
		select {
		case <-time.After(benchModelLatency):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		d.virtual.Add(int64(benchModelLatency))
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "The user asked about many items; the assistant answered each with care."}}}, nil
}

func (d *benchModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, d, prompt, options...)
}

func reportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// benchSaver stores one turn; it is a memory's SaveContext or a simulated
// strategy.
type benchSaver func(ctx context.Context, i int) error

func runBenchTurns(b *testing.B, newSaver func(model *benchModel) (benchSaver, func() error)) {
	b.Helper()
	var calls, virtual int64
	var lat []time.Duration
	for range b.N {
		model := &benchModel{}
		save, done := newSaver(model)
		lat = make([]time.Duration, 0, benchTurns)
		ctx := context.Background()
		for i := 1; i <= benchTurns; i++ {
			before := model.virtual.Load()
			start := time.Now()
			if err := save(ctx, i); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start)+time.Duration(model.virtual.Load()-before))
		}
		if done != nil {
			if err := done(); err != nil {
				b.Fatal(err)
			}
		}
		calls, virtual = model.calls.Load(), model.virtual.Load()
	}
	b.ReportMetric(float64(calls), "calls/1000turns")
	b.ReportMetric(time.Duration(virtual).Seconds(), "model-s/1000turns")
	reportLatencies(b, lat)
}

func BenchmarkSummaryCalls(b *testing.B) {
	memstackSaver := func(opts ...memories.SummaryOption) func(model *benchModel) (benchSaver, func() error) {
		return func(model *benchModel) (benchSaver, func() error) {
			mem, err := memories.NewSummary(summarizer.New(model), opts...)
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context, i int) error { return smSave(b, mem, ctx, i) }, mem.Close
		}
	}
	b.Run("memstack-count-n15-m6", func(b *testing.B) {
		runBenchTurns(b, memstackSaver(memories.WithMaxMessages(15), memories.WithBatchSize(6)))
	})
	b.Run("memstack-tokens-t400", func(b *testing.B) {
		runBenchTurns(b, memstackSaver(memories.WithMaxTokens(400)))
	})
	b.Run("langchain-summary-buffer-n15", func(b *testing.B) {
		runBenchTurns(b, func(model *benchModel) (benchSaver, func() error) {
			// LangChain's ConversationSummaryBufferMemory.prune, with the
			// limit in messages: after each save, while the buffer is over
			// the limit pop the oldest message, then make one call that
			// folds the popped messages into the moving summary.
			s := summarizer.New(model)
			var buffer []llms.ChatMessage
			summary := ""
			return func(ctx context.Context, i int) error {
				buffer = append(buffer, llms.HumanChatMessage{Content: smHuman(i)}, llms.AIChatMessage{Content: smAI(i)})
				var pruned []llms.ChatMessage
				for len(buffer) > 15 {
					pruned = append(pruned, buffer[0])
					buffer = buffer[1:]
				}
				if len(pruned) == 0 {
					return nil
				}
				next, err := s.Summarize(ctx, summary, pruned)
				if err != nil {
					return err
				}
				summary = next
				return nil
			}, nil
		})
	})
}

// BenchmarkSummaryBackgroundSave measures SaveContext in background mode
// with a model that really takes 200 ms: back to back (all 1,000 turns as
// fast as they can be saved; the worker folds the backlog in as few calls as
// it can), and with one turn per millisecond (saves run while the worker
// summarizes and commits).
func BenchmarkSummaryBackgroundSave(b *testing.B) {
	for _, bc := range []struct {
		name string
		gap  time.Duration
	}{{"back-to-back", 0}, {"one-turn-per-ms", time.Millisecond}} {
		b.Run(bc.name, func(b *testing.B) {
			var calls int64
			var lat []time.Duration
			for range b.N {
				model := &benchModel{sleep: true}
				mem, err := memories.NewSummary(summarizer.New(model), memories.WithBackground(true))
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				lat = make([]time.Duration, 0, benchTurns)
				for i := 1; i <= benchTurns; i++ {
					if bc.gap > 0 {
						time.Sleep(bc.gap)
					}
					start := time.Now()
					if err := smSave(b, mem, ctx, i); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				if err := mem.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				calls = model.calls.Load()
				if st := mem.Stats(); st.Failures != 0 || st.MessagesFolded < 2*benchTurns-15 {
					b.Fatalf("unexpected stats %+v", st)
				}
				_ = mem.Close()
			}
			b.ReportMetric(float64(calls), "calls/1000turns")
			reportLatencies(b, lat)
		})
	}
}
