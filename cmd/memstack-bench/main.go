// Command memstack-bench measures memstack's memories and stores, with
// langchaingo's own memories in the same process for comparison, and writes
// the results as a markdown report and an SVG plot (docs/benchmarks.md shows both).
//
// Usage:
//
//	go run ./cmd/memstack-bench [-out docs/bench] [-quick] [-max 100000] [-stores]
//	go run ./cmd/memstack-bench -scale [-scale-users 1000] [-scale-convs 10] [-scale-msgs 100] [-scale-procs 4] [-scale-duration 90s] [-scale-out FILE]
//
// It writes OUT/results.md and OUT/turn-cost.svg and prints the markdown to
// standard output; progress goes to standard error. The full run takes a few
// minutes on 2 cores; -quick (small sizes, few repetitions, no servers)
// takes seconds and is what the command's test runs.
//
// # What is measured
//
//  1. Cost of one turn — SaveContext of a new turn, then LoadMemoryVariables
//     (string mode), as a chain does on every call — against a history of
//     100, 1,000, 10,000 and 100,000 messages (up to -max), for every memstack
//     memory type and its langchaingo counterpart: wall-clock and process
//     CPU time per turn (getrusage; every thread, the garbage collector
//     included), each the median of several repetitions of many timed
//     turns, and heap allocations and bytes per turn (runtime.MemStats, as
//     go test -benchmem counts them). The plot shows the CPU time: on a
//     shared machine wall-clock time also counts the time spent waiting for
//     a core.
//  2. Summary memories: model calls per 100 turns and SaveContext latency
//     (p50, p99) with a model test double that takes 200 ms per call,
//     against the strategy of LangChain's summary-buffer memory (one
//     summarization call on every turn once its buffer is full).
//  3. combined.Memory over three children that each take 5 ms per save and
//     per load, against one such child and against the three called one
//     after another: children run concurrently.
//  4. Every store backend that can run: saves per second and Last(10) load
//     latency with 32 concurrent conversations (storetest.Measure), the
//     store's own costs at 1,000 and 100,000 messages of one conversation
//     (storetest.MeasureSize), and the load latency (p50, p95) of
//     RecentN(6), TokenWindow(1000) and Summary over a conversation of
//     1,000 and of 100,000 messages in that store (measureWindows).
//
// # The scale benchmark
//
// -scale runs issue 20's benchmark alone: a throwaway PostgreSQL holding
// -scale-users users × -scale-convs conversations × -scale-msgs messages
// (by default 1,000 × 10 × 100: 1,000,000 messages), populated through
// pgstore's public API, then -scale-procs processes (this binary
// re-executed) serving random users' loads and saves at once with the
// stack of the user-recall table. It prints a markdown section (load p50
// and p95, cold first loads, saves per second, the database's size on
// disk, each process's resident memory at -scale-rss-at users seen)
// in the style of results.md, and writes it to -scale-out if set. See
// scale.go.
//
// # How histories are built
//
// A history of N messages is N/2 turns of deterministic, realistic text
// (10 to 30 words a message, the corpus of the repository's bench_test.go).
// Building it must be fast, and it must leave each memory exactly as N/2
// calls of its own SaveContext would:
//
//   - memstack memories: the first N-2 messages are appended to the
//     memory's store directly (store.Messages.Append: exactly what
//     SaveContext stores), then the last turn goes through the memory's own
//     SaveContext, which does the memory's own housekeeping (Summary folds
//     everything but its raw window into the summary in one summarizer
//     call; RecentN and TokenWindow remove nothing), and one load warms
//     the caches, as the previous turn of a running chain would.
//   - langchaingo's ConversationBuffer keeps every message: its chat
//     history is pre-filled with all N. ConversationWindowBuffer is
//     pre-filled with N-2 and then saves the last turn, which cuts it to its
//     window, as every save does.
//   - langchaingo's ConversationTokenBuffer only trims in SaveContext,
//     dropping the oldest message and recounting the whole buffer until it
//     fits, so after any number of saves it holds the longest suffix of the
//     conversation that fits in its limit, which depends only on the last
//     turns: the last 100 turns are replayed through its SaveContext, which
//     gives exactly that state (pre-filling it with all N messages would
//     make the first timed save recount the buffer once per message dropped:
//     hours at 100,000 messages). langchaingo counts tokens with
//     llms.CountTokens, which in v0.1.14 falls back to len(text)/4 and logs
//     a warning on every count; the standard logger is silenced during the
//     run, which makes that memory a little faster than it is in a program
//     that keeps its log.
//
// The memories that keep every message (every memstack memory: none
// removes a message without a retention; and langchaingo's
// ConversationBuffer) grow by two messages per
// turn. To keep their history at N on average, they are built with N-2h-6
// messages, warmed by 3 untimed turns and rebuilt, outside the timed
// region, after every 2h timed turns, so the history swings between N-2h
// and N+2h messages, with h at most N/20 turns (±10%) and small enough
// that a repetition runs several segments (see measureTurns).
//
// Facts uses the offline pattern extractor and Recall its default BM25
// index; both are built like the other memstack memories (Facts extracts
// the pre-filled turns one by one, Recall indexes them in one batch on
// first use).
//
// # Summary model double
//
// The double answers a short summary after 200 ms. For the synchronous
// strategies the 200 ms is added to a virtual clock instead of slept, so
// 1,000 turns do not take minutes: a save's latency is its wall time plus
// the virtual model time it waited for, and the model time per 100 turns is
// the virtual time saves spent waiting. Background mode is measured against
// a double that really sleeps 200 ms (its saves never wait for the model,
// which is the point), with fewer turns where they arrive at a realistic
// pace.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "memstack-bench:", err)
		os.Exit(1)
	}
}

// run parses args, runs every benchmark, writes results.md and
// turn-cost.svg into the output directory and the markdown to stdout.
// Progress lines go to stderr. A cancelled ctx stops the run (and any server
// it started) at the next measurement.
//
// With -scale it runs the scale benchmark alone (scale.go) and writes its
// markdown section instead. As a serving process of that benchmark
// (args[0] is scaleWorkerFlag) it serves and reports on stdout, reading
// its start signal from the process's stdin.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == scaleWorkerFlag {
		return runScaleWorker(ctx, args[1:], os.Stdin, stdout, stderr)
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.scale.on {
		return runScaleCommand(ctx, cfg, stdout, stderr)
	}
	res, err := runAll(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	md := renderMarkdown(res)
	svg, err := renderPlot(res)
	if err != nil {
		return fmt.Errorf("drawing the plot: %w", err)
	}
	if err := writeOutputs(cfg.out, md, svg); err != nil {
		return err
	}
	_, err = io.WriteString(stdout, md)
	return err
}
