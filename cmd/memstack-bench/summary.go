package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
)

// slowModel is the summary benchmarks' model double: it answers a short
// summary after latency, really slept (sleep set) or added to a virtual
// clock (see the package documentation).
type slowModel struct {
	latency time.Duration
	sleep   bool
	calls   atomic.Int64
	virtual atomic.Int64 // nanoseconds of virtual model time
}

// modelSummary is the double's answer: short, so the LLM summarizer's
// "shorter than what it replaces" check always passes.
const modelSummary = "The user asked for help with several tasks; the assistant agreed and noted the key figures."

func (d *slowModel) GenerateContent(ctx context.Context, _ []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	d.calls.Add(1)
	if d.sleep {
		t := time.NewTimer(d.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		d.virtual.Add(int64(d.latency))
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: modelSummary}}}, nil
}

func (d *slowModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, d, prompt, options...)
}

// summaryRow is one summarization strategy's result.
type summaryRow struct {
	strategy string
	clock    string // "virtual" or "real (slept)"
	turns    int
	calls    int64
	// waited is the model time the saves waited for, in total (0 in
	// background mode, where no save waits).
	waited   time.Duration
	p50, p99 time.Duration
}

func (r summaryRow) callsPer100() float64 { return float64(r.calls) * 100 / float64(r.turns) }

func (r summaryRow) waitedPer100() time.Duration {
	return time.Duration(float64(r.waited) * 100 / float64(r.turns))
}

// saver stores turn i.
type saver func(ctx context.Context, i int) error

// percentile returns the p-quantile of sorted durations (nearest rank), as
// storetest.Measure computes it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// runVirtual saves turns turns through save, synchronously, with a model
// on the virtual clock; a save's latency is its wall time plus the virtual
// model time it waited for.
func runVirtual(ctx context.Context, name string, turns int, latency time.Duration,
	newSaver func(model *slowModel) (saver, func() error, error)) (summaryRow, error) {
	model := &slowModel{latency: latency}
	save, done, err := newSaver(model)
	if err != nil {
		return summaryRow{}, err
	}
	lat := make([]time.Duration, 0, turns)
	for i := range turns {
		if err := ctx.Err(); err != nil {
			return summaryRow{}, err
		}
		before := model.virtual.Load()
		start := time.Now()
		if err := save(ctx, i); err != nil {
			return summaryRow{}, fmt.Errorf("%s: turn %d: %w", name, i, err)
		}
		lat = append(lat, time.Since(start)+time.Duration(model.virtual.Load()-before))
	}
	if done != nil {
		if err := done(); err != nil {
			return summaryRow{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	slices.Sort(lat)
	return summaryRow{
		strategy: name, clock: "virtual", turns: turns,
		calls: model.calls.Load(), waited: time.Duration(model.virtual.Load()),
		p50: percentile(lat, 0.50), p99: percentile(lat, 0.99),
	}, nil
}

// summaryMemory returns a saver over a new memstack Summary.
func summaryMemory(opts ...memories.SummaryOption) func(model *slowModel) (saver, func() error, error) {
	return func(model *slowModel) (saver, func() error, error) {
		mem, err := memories.NewSummary(summarizer.New(model), opts...)
		if err != nil {
			return nil, nil, err
		}
		save := func(ctx context.Context, i int) error {
			t := newTurn(i)
			return mem.SaveContext(ctx, t.in, t.out)
		}
		done := func() error {
			st := mem.Stats()
			if st.Failures != 0 {
				return fmt.Errorf("%d of %d summarizations failed", st.Failures, st.Calls)
			}
			return mem.Close()
		}
		return save, done, nil
	}
}

// summaryBufferStrategy simulates LangChain's
// ConversationSummaryBufferMemory.prune with its limit in messages: after
// each save, while the buffer is over the limit, pop the oldest message;
// then make one model call (LangChain's predict_new_summary) that folds the
// popped messages into the moving summary. Once the buffer is full that is
// one model call on every turn. The model is called directly, with the
// summary and the popped lines in one prompt as LangChain does: memstack's
// LLM summarizer would refuse a summary that is not shorter than the one
// or two messages it replaces, which LangChain does not check.
func summaryBufferStrategy(limit int) func(model *slowModel) (saver, func() error, error) {
	return func(model *slowModel) (saver, func() error, error) {
		var buffer []llms.ChatMessage
		summary := ""
		return func(ctx context.Context, i int) error {
			buffer = append(buffer, llms.HumanChatMessage{Content: humanText(i)}, llms.AIChatMessage{Content: aiText(i)})
			var pruned []llms.ChatMessage
			for len(buffer) > limit {
				pruned = append(pruned, buffer[0])
				buffer = buffer[1:]
			}
			if len(pruned) == 0 {
				return nil
			}
			lines, err := llms.GetBufferString(pruned, "Human", "AI")
			if err != nil {
				return err
			}
			prompt := "Progressively summarize the lines of conversation provided, adding onto the previous summary returning a new summary.\n\n" +
				"Current summary:\n" + summary + "\n\nNew lines of conversation:\n" + lines + "\n\nNew summary:"
			next, err := llms.GenerateFromSinglePrompt(ctx, model, prompt)
			if err != nil {
				return err
			}
			summary = next
			return nil
		}, nil, nil
	}
}

// runBackground saves turns turns, gap apart, into a background-mode
// Summary over a model that really sleeps, then waits for the
// summarizations to finish. The latency is SaveContext's wall time.
func runBackground(ctx context.Context, name string, turns int, gap, latency time.Duration) (summaryRow, error) {
	model := &slowModel{latency: latency, sleep: true}
	mem, err := memories.NewSummary(summarizer.New(model), memories.WithBackground(true))
	if err != nil {
		return summaryRow{}, err
	}
	defer mem.Close()
	lat := make([]time.Duration, 0, turns)
	next := time.Now()
	for i := range turns {
		if err := ctx.Err(); err != nil {
			return summaryRow{}, err
		}
		if gap > 0 {
			next = next.Add(gap)
			time.Sleep(time.Until(next))
		}
		t := newTurn(i)
		start := time.Now()
		if err := mem.SaveContext(ctx, t.in, t.out); err != nil {
			return summaryRow{}, fmt.Errorf("%s: turn %d: %w", name, i, err)
		}
		lat = append(lat, time.Since(start))
	}
	if err := mem.Flush(ctx); err != nil {
		return summaryRow{}, fmt.Errorf("%s: flush: %w", name, err)
	}
	st := mem.Stats()
	if st.Failures != 0 {
		return summaryRow{}, fmt.Errorf("%s: %d of %d summarizations failed", name, st.Failures, st.Calls)
	}
	// After the flush at most the raw window (15 messages) is unsummarized.
	if want := int64(2*turns - memories.DefaultMaxMessages); st.MessagesFolded < want {
		return summaryRow{}, fmt.Errorf("%s: %d messages folded after the flush, want at least %d", name, st.MessagesFolded, want)
	}
	slices.Sort(lat)
	return summaryRow{
		strategy: name, clock: "real (slept)", turns: turns, calls: model.calls.Load(),
		p50: percentile(lat, 0.50), p99: percentile(lat, 0.99),
	}, nil
}

// Names of the summary strategies, as the table shows them.
const (
	stratCount      = "memstack Summary, count mode (n=15, m=6), synchronous"
	stratTokens     = "memstack Summary, token mode (t=2000), synchronous"
	stratBufferLC   = "LangChain summary-buffer strategy (15 messages), one call per turn once full"
	stratBackground = "memstack Summary, count mode, background, turns back to back"
	stratPaced      = "memstack Summary, count mode, background, one turn per 10 ms"
)

// runSummaries measures every summarization strategy.
func runSummaries(ctx context.Context, cfg config, progress io.Writer) ([]summaryRow, error) {
	var rows []summaryRow
	add := func(r summaryRow, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "summary: %-80s %6.1f calls/100 turns, save p50 %s p99 %s\n",
			r.strategy, r.callsPer100(), fmtDur(r.p50), fmtDur(r.p99))
		rows = append(rows, r)
		return nil
	}
	lat := cfg.modelLatency
	if err := add(runVirtual(ctx, stratCount, cfg.summaryTurns, lat,
		summaryMemory(memories.WithMaxMessages(15), memories.WithBatchSize(6)))); err != nil {
		return nil, err
	}
	if err := add(runVirtual(ctx, stratTokens, cfg.summaryTurns, lat,
		summaryMemory(memories.WithMaxTokens(tokenLimit)))); err != nil {
		return nil, err
	}
	if err := add(runVirtual(ctx, stratBufferLC, cfg.summaryTurns, lat, summaryBufferStrategy(15))); err != nil {
		return nil, err
	}
	if err := add(runBackground(ctx, stratBackground, cfg.summaryTurns, 0, lat)); err != nil {
		return nil, err
	}
	if err := add(runBackground(ctx, stratPaced, cfg.paceTurns, cfg.pace, lat)); err != nil {
		return nil, err
	}
	return rows, nil
}
