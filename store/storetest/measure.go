package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// Result is what Measure measured.
type Result struct {
	// Saves is the number of turns appended (each one Append of two
	// messages).
	Saves int
	// Duration is the wall-clock time of the whole run, loads included.
	Duration time.Duration
	// SavesPerSec is Saves / Duration.
	SavesPerSec float64
	// LoadP50 and LoadP99 are the median and 99th-percentile latency of
	// Last(10), the load a window memory does before every turn.
	LoadP50, LoadP99 time.Duration
}

// String formats r for a benchmark table.
func (r Result) String() string {
	return fmt.Sprintf("%d saves in %v: %.0f saves/s, load p50 %v, p99 %v",
		r.Saves, r.Duration.Round(time.Millisecond), r.SavesPerSec, r.LoadP50, r.LoadP99)
}

// Measure runs conversations goroutines, each appending turns turns (a
// human and an AI message, about 100 bytes each, in one Append) to its own
// identity and loading Last(10) after each append, the way a window memory
// uses a store. It returns the saves per second and the load latency
// percentiles. The identities are fresh (a random user per call) and are
// forgotten afterwards, outside the measured time, so Measure can run
// against a shared store. It stops at the first error.
func Measure(ctx context.Context, s store.Store, conversations int, turns int) (Result, error) {
	if s == nil {
		return Result{}, fmt.Errorf("%w: storetest.Measure: store is nil", store.ErrInvalidArgument)
	}
	run := randomHex(6)
	ids := make([]memstack.Identity, max(conversations, 0))
	for i := range ids {
		ids[i] = memstack.Identity{Tenant: "storetest-measure", User: run, Conversation: fmt.Sprint(i)}
	}
	return MeasureWith(ctx, Workload{
		Append: func(ctx context.Context, c int, msgs ...llms.ChatMessage) error {
			return s.Append(ctx, ids[c], msgs...)
		},
		Last: func(ctx context.Context, c, n int) (int, error) {
			rs, err := s.Last(ctx, ids[c], n)
			return len(rs), err
		},
		Forget: func(ctx context.Context, c int) error { return s.Forget(ctx, ids[c]) },
	}, conversations, turns)
}

// Workload is the work Measure times, done through something other than
// a store.Store — a database driver's own commands, say, to set a store's
// overhead against (cmd/memstack-bench does). Append stores one turn's
// messages in conversation c (0 ≤ c < conversations), as one write; Last
// reads the newest n messages of c and returns how many it read; Forget,
// if not nil, removes c after the run, outside the measured time.
type Workload struct {
	Append func(ctx context.Context, c int, msgs ...llms.ChatMessage) error
	Last   func(ctx context.Context, c, n int) (int, error)
	Forget func(ctx context.Context, c int) error
}

// MeasureWith is Measure over w: the same turns, the same loads, the same
// checks (a Last(10) that returns another count than the turns appended
// so far hold is an error) and the same result.
func MeasureWith(ctx context.Context, w Workload, conversations int, turns int) (Result, error) {
	if w.Append == nil || w.Last == nil {
		return Result{}, fmt.Errorf("%w: storetest.Measure: the workload needs Append and Last", store.ErrInvalidArgument)
	}
	if conversations < 1 || turns < 1 {
		return Result{}, fmt.Errorf("%w: storetest.Measure: conversations (%d) and turns (%d) must be at least 1",
			store.ErrInvalidArgument, conversations, turns)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	latencies := make([][]time.Duration, conversations)
	errs := make([]error, conversations)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range conversations {
		wg.Go(func() {
			lat := make([]time.Duration, 0, turns)
			defer func() { latencies[i] = lat }()
			for n := range turns {
				err := w.Append(ctx, i,
					llms.HumanChatMessage{Content: fmt.Sprintf("turn %d: what did we decide about the launch date and the budget?", n)},
					llms.AIChatMessage{Content: fmt.Sprintf("turn %d: launch on the 14th, budget capped at 20k, review on Friday.", n)})
				if err != nil {
					errs[i] = fmt.Errorf("storetest.Measure: conversation %d, turn %d: append: %w", i, n, err)
					cancel()
					return
				}
				t0 := time.Now()
				got, err := w.Last(ctx, i, 10)
				lat = append(lat, time.Since(t0))
				if err != nil {
					errs[i] = fmt.Errorf("storetest.Measure: conversation %d, turn %d: Last(10): %w", i, n, err)
					cancel()
					return
				}
				if want := min(2*(n+1), 10); got != want {
					errs[i] = fmt.Errorf("storetest.Measure: conversation %d, turn %d: Last(10) returned %d messages, want %d", i, n, got, want)
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	var cleanup []error
	if w.Forget != nil {
		for i := range conversations {
			if err := w.Forget(context.WithoutCancel(ctx), i); err != nil {
				cleanup = append(cleanup, fmt.Errorf("storetest.Measure: forgetting conversation %d: %w", i, err))
				break
			}
		}
	}
	if err := errors.Join(append(errs, cleanup...)...); err != nil {
		return Result{}, err
	}

	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	slices.Sort(all)
	saves := conversations * turns
	return Result{
		Saves:       saves,
		Duration:    elapsed,
		SavesPerSec: float64(saves) / elapsed.Seconds(),
		LoadP50:     percentile(all, 0.50),
		LoadP99:     percentile(all, 0.99),
	}, nil
}

// percentile returns the p-quantile of the sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// Bench benchmarks the stores open returns with Measure, in the
// sub-benchmarks "conversations=1" and "conversations=32". b.N is the total
// number of saves (turns), spread over the conversations; each
// sub-benchmark reports saves/s, load-p50-µs and load-p99-µs with
// b.ReportMetric. Use it from a backend's benchmark:
//
//	func BenchmarkMyStore(b *testing.B) { storetest.Bench(b, opener) }
//
// and run go test -run '^$' -bench MyStore -benchtime 2000x.
func Bench(b *testing.B, open Opener) {
	b.Helper()
	if open == nil {
		b.Fatal("storetest.Bench: Opener is nil")
	}
	k := &kit{open: open, prefix: randomHex(4)}
	for _, conversations := range []int{1, 32} {
		b.Run(fmt.Sprintf("conversations=%d", conversations), func(b *testing.B) {
			ns := fmt.Sprintf("bench%s_%d", k.prefix, k.n.Add(1))
			s, err := open(b, ns)
			if err != nil {
				b.Fatalf("storetest.Bench: Opener(ns=%q): %v", ns, err)
			}
			if c, ok := s.(io.Closer); ok {
				b.Cleanup(func() {
					if err := c.Close(); err != nil {
						b.Errorf("storetest.Bench: closing the store: %v", err)
					}
				})
			}
			turns := max((b.N+conversations-1)/conversations, 1)
			b.ResetTimer()
			res, err := Measure(context.Background(), s, conversations, turns)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.SavesPerSec, "saves/s")
			b.ReportMetric(float64(res.LoadP50.Nanoseconds())/1e3, "load-p50-µs")
			b.ReportMetric(float64(res.LoadP99.Nanoseconds())/1e3, "load-p99-µs")
		})
	}
}

// SizeResult is what MeasureSize measured on one conversation of Messages
// messages.
type SizeResult struct {
	// Messages is the conversation's size before the removal.
	Messages int
	// Stat and Append are the median latencies of Stat and of a one-turn
	// Append (two messages) on the full conversation.
	Stat, Append time.Duration
	// RemovePrefix is the time of one RemovePrefix of all but the newest
	// 10 messages.
	RemovePrefix time.Duration
	// AppendAfter and StatAfter are the medians once the prefix is gone:
	// a store whose cost grows with what it once held shows it here.
	AppendAfter, StatAfter time.Duration
}

// MeasureSize fills one fresh conversation of s with messages messages (in
// Appends of up to 1,000), then times Stat and one-turn Appends (samples
// each, medians), one RemovePrefix of all but the newest 10 messages, and
// Stat and Append again; the conversation is forgotten afterwards. It is
// the cost of a long conversation: what every load (Stat) and save
// (Append) pays at that size, and what trimming it costs.
func MeasureSize(ctx context.Context, s store.Store, messages, samples int) (SizeResult, error) {
	if s == nil {
		return SizeResult{}, fmt.Errorf("%w: storetest.MeasureSize: store is nil", store.ErrInvalidArgument)
	}
	if messages < 20 || samples < 1 {
		return SizeResult{}, fmt.Errorf("%w: storetest.MeasureSize: messages (%d) must be at least 20 and samples (%d) at least 1",
			store.ErrInvalidArgument, messages, samples)
	}
	id := memstack.Identity{Tenant: "storetest-measure", User: randomHex(6), Conversation: "size"}
	defer func() { _ = s.Forget(context.WithoutCancel(ctx), id) }()
	batch := make([]llms.ChatMessage, 0, 1000)
	for n := 0; n < messages; {
		batch = batch[:0]
		for len(batch) < cap(batch) && n < messages {
			if n%2 == 0 {
				batch = append(batch, llms.HumanChatMessage{Content: fmt.Sprintf("message %d: what did we decide about the launch date?", n)})
			} else {
				batch = append(batch, llms.AIChatMessage{Content: fmt.Sprintf("message %d: launch on the 14th, review on Friday.", n)})
			}
			n++
		}
		if err := s.Append(ctx, id, batch...); err != nil {
			return SizeResult{}, fmt.Errorf("storetest.MeasureSize: filling the conversation: %w", err)
		}
	}
	res := SizeResult{Messages: messages}
	timeStat := func() (time.Duration, error) {
		return median(samples, func() error { _, err := s.Stat(ctx, id); return err })
	}
	timeAppend := func() (time.Duration, error) {
		return median(samples, func() error {
			return s.Append(ctx, id, llms.HumanChatMessage{Content: "and the budget?"}, llms.AIChatMessage{Content: "capped at 20k."})
		})
	}
	var err error
	if res.Stat, err = timeStat(); err != nil {
		return SizeResult{}, fmt.Errorf("storetest.MeasureSize: Stat: %w", err)
	}
	if res.Append, err = timeAppend(); err != nil {
		return SizeResult{}, fmt.Errorf("storetest.MeasureSize: Append: %w", err)
	}
	recs, err := s.Last(ctx, id, 11)
	if err != nil {
		return SizeResult{}, fmt.Errorf("storetest.MeasureSize: Last: %w", err)
	}
	t0 := time.Now()
	if _, err := s.RemovePrefix(ctx, id, recs[0].Seq); err != nil {
		return SizeResult{}, fmt.Errorf("storetest.MeasureSize: RemovePrefix: %w", err)
	}
	res.RemovePrefix = time.Since(t0)
	if res.StatAfter, err = timeStat(); err != nil {
		return SizeResult{}, fmt.Errorf("storetest.MeasureSize: Stat after the removal: %w", err)
	}
	if res.AppendAfter, err = timeAppend(); err != nil {
		return SizeResult{}, fmt.Errorf("storetest.MeasureSize: Append after the removal: %w", err)
	}
	return res, nil
}

// median runs f n times and returns the median duration.
func median(n int, f func() error) (time.Duration, error) {
	ds := make([]time.Duration, n)
	for i := range ds {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ds[i] = time.Since(t0)
	}
	slices.Sort(ds)
	return ds[n/2], nil
}
