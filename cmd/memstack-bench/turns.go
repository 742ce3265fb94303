package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

// tokenLimit is the budget of both token-window memories.
const tokenLimit = 2000

// Libraries, as the tables and the plot name them.
const (
	libMemstack    = "memstack"
	libLangchaingo = "langchaingo"
)

// subject is one memory under the turn-cost benchmark.
type subject struct {
	// name is the memory as the tables show it, e.g. "RecentN(10)".
	name    string
	library string // libMemstack or libLangchaingo
	// pair groups a memstack memory with its langchaingo counterpart: they
	// share a colour in the plot and sit next to each other in the tables.
	pair int
	// grows is set for memories that keep every message (see measureTurns).
	grows bool
	// minTurns is the least number of timed turns per repetition (Summary
	// folds every few turns: a repetition must average over several folds).
	minTurns int
	// mayLoadEmpty is set for memories whose variable may rightly be empty
	// for this corpus (Facts: the corpus states no fact its extractor
	// recognises); checkLoads then only checks that it loads.
	mayLoadEmpty bool
	// build returns the memory holding a conversation of n messages, left
	// as n/2 calls of its SaveContext would leave it, warmed by one load.
	build func(ctx context.Context, c *corpus, n int) (schema.Memory, error)
}

// label is the memory's series name: library and memory.
func (s subject) label() string { return s.library + " " + s.name }

// subjects lists the memories of the turn-cost benchmark, each memstack
// memory followed by its langchaingo counterpart (Summary, CombinedMemory,
// Facts and Recall have none).
func subjects() []subject {
	return []subject{
		{name: "Buffer", library: libMemstack, pair: 0, grows: true, build: buildBuffer},
		{name: "ConversationBuffer", library: libLangchaingo, pair: 0, grows: true, build: buildConversationBuffer},
		{name: "RecentN(10)", library: libMemstack, pair: 1, grows: true, build: buildRecentN},
		{name: "ConversationWindowBuffer(5)", library: libLangchaingo, pair: 1, build: buildWindowBuffer},
		{name: "TokenWindow(2000)", library: libMemstack, pair: 2, grows: true, build: buildTokenWindow},
		{name: "ConversationTokenBuffer(2000)", library: libLangchaingo, pair: 2, build: buildTokenBuffer},
		{name: "Summary (extractive)", library: libMemstack, pair: 3, grows: true, minTurns: 30, build: buildSummary},
		{name: "CombinedMemory(Buffer, RecentN(10))", library: libMemstack, pair: 4, grows: true, build: buildCombined},
		{name: "Facts (pattern extractor)", library: libMemstack, pair: 5, grows: true, mayLoadEmpty: true, build: buildFacts},
		{name: "Recall (BM25)", library: libMemstack, pair: 6, grows: true, build: buildRecall},
	}
}

// ---------------------------------------------------------------------------
// Building memories.

// defaultID is the identity every memory is called with: none in the
// context, so the memories use their default, the zero Identity.
var defaultID memstack.Identity

// prefilledStore returns an in-memory store holding the first n-2 messages
// of the conversation: exactly what SaveContext of those turns appends.
func prefilledStore(ctx context.Context, c *corpus, n int) (*store.InMemory, error) {
	s := store.NewInMemory()
	if n > 2 {
		if err := s.Append(ctx, defaultID, c.history(n-2)...); err != nil {
			return nil, fmt.Errorf("pre-filling the store with %d messages: %w", n-2, err)
		}
	}
	return s, nil
}

// finish saves the conversation's last turn (turn n/2-1) through the
// memory's own SaveContext, which does the memory's housekeeping, and loads
// once, as the previous turn of a running chain would.
func finish(ctx context.Context, m schema.Memory, n int) (schema.Memory, error) {
	t := newTurn(n/2 - 1)
	if err := m.SaveContext(ctx, t.in, t.out); err != nil {
		return nil, fmt.Errorf("saving turn %d: %w", n/2-1, err)
	}
	if _, err := m.LoadMemoryVariables(ctx, map[string]any{}); err != nil {
		return nil, fmt.Errorf("warm-up load: %w", err)
	}
	return m, nil
}

func buildBuffer(ctx context.Context, c *corpus, n int) (schema.Memory, error) {
	s, err := prefilledStore(ctx, c, n)
	if err != nil {
		return nil, err
	}
	b, err := memories.NewBuffer(memories.WithStore(s))
	if err != nil {
		return nil, err
	}
	return finish(ctx, b, n)
}

func buildRecentN(ctx context.Context, c *corpus, n int) (schema.Memory, error) {
	s, err := prefilledStore(ctx, c, n)
	if err != nil {
		return nil, err
	}
	m, err := memories.NewRecentN(10, memories.WithStore(s))
	if err != nil {
		return nil, err
	}
	return finish(ctx, m, n)
}

func buildTokenWindow(ctx context.Context, c *corpus, n int) (schema.Memory, error) {
	s, err := prefilledStore(ctx, c, n)
	if err != nil {
		return nil, err
	}
	m, err := memories.NewTokenWindow(tokenLimit, memories.WithStore(s))
	if err != nil {
		return nil, err
	}
	return finish(ctx, m, n)
}

// buildSummary builds a Summary (count mode, n = 15, m = 6, synchronous)
// with the offline extractive summarizer. Its store is pre-filled with the
// whole history unsummarized, so the last turn's save folds everything but
// the raw window in one call: after it, the memory is in the state a long
// conversation leaves it in (a 200-token summary and at most 15 raw
// messages), whatever the history length.
func buildSummary(ctx context.Context, c *corpus, n int) (schema.Memory, error) {
	s, err := prefilledStore(ctx, c, n)
	if err != nil {
		return nil, err
	}
	m, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(s))
	if err != nil {
		return nil, err
	}
	return finish(ctx, m, n)
}

func buildCombined(ctx context.Context, c *corpus, n int) (schema.Memory, error) {
	// One store for the stack: the turn is stored once, both layers read
	// it.
	st, err := prefilledStore(ctx, c, n)
	if err != nil {
		return nil, err
	}
	recent, err := memories.NewRecentN(10, memories.WithMemoryKey("recent"), memories.WithStore(st))
	if err != nil {
		return nil, err
	}
	full, err := memories.NewBuffer(memories.WithStore(st))
	if err != nil {
		return nil, err
	}
	m, err := combined.New([]schema.Memory{full, recent})
	if err != nil {
		return nil, err
	}
	return finish(ctx, m, n)
}

// buildFacts builds a Facts memory with the offline pattern extractor
// (extract.NewPatterns), synchronous. Its store is pre-filled with the
// history unextracted, so the last turn's save extracts every turn, one by
// one, as the saves would have: the state after it is the state of n/2
// saves. (This corpus states no fact the default rules recognise, so the
// memory measures the extraction scan and the state update of every turn,
// and loads no facts.)
func buildFacts(ctx context.Context, c *corpus, n int) (schema.Memory, error) {
	s, err := prefilledStore(ctx, c, n)
	if err != nil {
		return nil, err
	}
	ext, err := extract.NewPatterns()
	if err != nil {
		return nil, err
	}
	m, err := memories.NewFacts(ext, memories.WithStore(s))
	if err != nil {
		return nil, err
	}
	return finish(ctx, m, n)
}

// buildRecall builds a Recall memory with its default index (BM25, in
// process memory, no model). On its first use of an identity a Recall
// indexes every stored exchange at once, so the last turn's save indexes
// the pre-filled history: the index after it is the index of n/2 saves.
// Each load searches it with the turn's input.
func buildRecall(ctx context.Context, c *corpus, n int) (schema.Memory, error) {
	s, err := prefilledStore(ctx, c, n)
	if err != nil {
		return nil, err
	}
	m, err := memories.NewRecall(memories.WithStore(s))
	if err != nil {
		return nil, err
	}
	return finish(ctx, m, n)
}

// buildConversationBuffer pre-fills the chat history with all n messages:
// a ConversationBuffer only appends, so that is exactly what its
// SaveContext of the same turns leaves.
func buildConversationBuffer(_ context.Context, c *corpus, n int) (schema.Memory, error) {
	h := memory.NewChatMessageHistory(memory.WithPreviousMessages(c.history(n)))
	return memory.NewConversationBuffer(memory.WithChatHistory(h)), nil
}

// buildWindowBuffer pre-fills n-2 messages and saves the last turn, which
// cuts the history to the window, as every save does.
func buildWindowBuffer(ctx context.Context, c *corpus, n int) (schema.Memory, error) {
	var prev []llms.ChatMessage
	if n > 2 {
		prev = c.history(n - 2)
	}
	h := memory.NewChatMessageHistory(memory.WithPreviousMessages(prev))
	return finish(ctx, memory.NewConversationWindowBuffer(5, memory.WithChatHistory(h)), n)
}

// tokenBufferReplayTurns is how many of the last turns are replayed into a
// ConversationTokenBuffer: 100 turns (about 6,000 tokens by its count) are
// well over its 2,000-token limit, which buildTokenBuffer checks.
const tokenBufferReplayTurns = 100

// buildTokenBuffer replays the last turns through the token buffer's own
// SaveContext (see the package documentation for why that gives exactly
// the state of n/2 saves).
func buildTokenBuffer(ctx context.Context, _ *corpus, n int) (schema.Memory, error) {
	// langchaingo counts with llms.CountTokens, through tiktoken-go; for
	// model "" it loads no encoding file (it falls back to characters/4),
	// so nothing is downloaded.
	m := memory.NewConversationTokenBuffer(noModel{}, tokenLimit)
	from := max(n/2-tokenBufferReplayTurns, 0)
	for i := from; i < n/2; i++ {
		t := newTurn(i)
		if err := m.SaveContext(ctx, t.in, t.out); err != nil {
			return nil, fmt.Errorf("replaying turn %d: %w", i, err)
		}
	}
	msgs, err := m.ChatHistory.Messages(ctx)
	if err != nil {
		return nil, err
	}
	if n/2 > tokenBufferReplayTurns && len(msgs) >= 2*tokenBufferReplayTurns {
		return nil, fmt.Errorf("the token buffer was not trimmed: replaying %d turns left %d messages; replay more turns",
			tokenBufferReplayTurns, len(msgs))
	}
	return m, nil
}

// noModel is the llms.Model NewConversationTokenBuffer requires. The token
// buffer never calls it (it counts with llms.CountTokens).
type noModel struct{}

func (noModel) GenerateContent(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error) {
	return nil, fmt.Errorf("memstack-bench: the token buffer's model is not meant to be called")
}

func (noModel) Call(context.Context, string, ...llms.CallOption) (string, error) {
	return "", fmt.Errorf("memstack-bench: the token buffer's model is not meant to be called")
}

// checkLoads makes sure a freshly built memory loads the conversation it
// was built with: every loaded string holds the last turn's user message
// (the load's input is that message, which is what Recall searches for).
func checkLoads(ctx context.Context, s subject, m schema.Memory, n int) error {
	last := humanText(n/2 - 1)
	v, err := m.LoadMemoryVariables(ctx, map[string]any{"input": last})
	if err != nil {
		return err
	}
	if len(v) == 0 {
		return fmt.Errorf("the memory loaded no variable")
	}
	for k, val := range v {
		str, ok := val.(string)
		if !ok {
			return fmt.Errorf("variable %q is a %T, not a string", k, val)
		}
		if !s.mayLoadEmpty && !strings.Contains(str, last) {
			return fmt.Errorf("variable %q (%d bytes) does not hold the last turn", k, len(str))
		}
	}
	return nil
}

// closeMemory closes a memory that has a Close method (Summary).
func closeMemory(m schema.Memory) {
	if c, ok := m.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// ---------------------------------------------------------------------------
// Measuring.

// turnPoint is the cost of one turn of one memory at one history length.
type turnPoint struct {
	n int // history length, in messages
	// ns is the median over the repetitions of the time per turn; lo and hi
	// are the fastest and slowest repetition.
	ns, lo, hi float64
	// cpu is the median over the repetitions of the process CPU time per
	// turn (every thread: the memory's goroutines and the garbage
	// collector); NaN when the platform cannot tell.
	cpu float64
	// allocs and bytes are heap allocations and bytes allocated per turn,
	// over every timed turn.
	allocs, bytes float64
	turns         int // timed turns, all repetitions
	swing         int // h: the history swings within n ± 2h messages (0: bounded)
}

// turnSeries is one memory's points, one per history length.
type turnSeries struct {
	subject
	points []turnPoint
}

// sink keeps loaded variables alive so the loads cannot be optimised away.
var sink map[string]any

// runTurn saves opTurns[i] and loads.
func runTurn(ctx context.Context, m schema.Memory, i int) error {
	t := opTurns[i%len(opTurns)]
	if err := m.SaveContext(ctx, t.in, t.out); err != nil {
		return fmt.Errorf("SaveContext: %w", err)
	}
	v, err := m.LoadMemoryVariables(ctx, t.in)
	if err != nil {
		return fmt.Errorf("LoadMemoryVariables: %w", err)
	}
	sink = v
	return nil
}

// Limits of the timed loop.
const (
	maxTurnsPerRep    = 200_000
	maxSegmentsPerRep = 100
	warmupTurns       = 3
	gcAfterRebuild    = 10_000
)

// measureTurns measures one memory at history length n.
//
// A probe first estimates the time per turn; a repetition then runs enough
// turns to take about cfg.target (at least s.minTurns). A bounded memory
// (one that trims, or folds, its history) is built once and runs every
// repetition after a few warm-up turns. A memory that grows is built with
// n-2h-2w messages and rebuilt after every 2h timed turns, outside the
// timed region, followed, for large histories (n >= gcAfterRebuild), by a
// garbage collection (so that the rebuild's megabytes of garbage are not
// collected on the clock; for small histories the garbage is small and a
// forced collection would leave background runtime work to the short
// timed stretch that follows), and by w = warmupTurns untimed turns
// (so that the timed turns do not pay for cold caches), which keeps its
// history within n ± 2h, n on average, with h = min(n/20, turns per
// repetition / 2). Allocations are read from runtime.MemStats, and the
// process CPU time from getrusage, around each timed stretch.
func measureTurns(ctx context.Context, cfg config, c *corpus, s subject, n int) (turnPoint, error) {
	m, err := s.build(ctx, c, n)
	if err != nil {
		return turnPoint{}, fmt.Errorf("building it with %d messages: %w", n, err)
	}
	if err := checkLoads(ctx, s, m, n); err != nil {
		closeMemory(m)
		return turnPoint{}, fmt.Errorf("after building it with %d messages: %w", n, err)
	}
	op := 0
	if !s.grows {
		for ; op < warmupTurns; op++ {
			if err := runTurn(ctx, m, op); err != nil {
				return turnPoint{}, err
			}
		}
	}

	// Probe: double the batch until one takes a tenth of the target (a
	// growing memory stays within n/20 turns of n).
	probeCap := 10_000
	if s.grows {
		probeCap = max(1, n/20)
	}
	var probeTurns int
	var probeTime time.Duration
	for batch := 1; probeTurns < probeCap; batch *= 2 {
		batch = min(batch, probeCap-probeTurns)
		start := time.Now()
		for range batch {
			if err := runTurn(ctx, m, op); err != nil {
				return turnPoint{}, err
			}
			op++
		}
		d := time.Since(start)
		probeTurns += batch
		probeTime += d
		if d >= cfg.target/10 {
			break
		}
	}
	est := probeTime / time.Duration(probeTurns)
	perRep := int(min(int64(cfg.target/max(est, 1)), maxTurnsPerRep))
	perRep = max(perRep, s.minTurns, 1)

	h, segLen, segments := 0, perRep, 1
	if s.grows {
		closeMemory(m)
		h = max(1, min(n/20, perRep/2))
		segLen = 2 * h
		segments = min((perRep+segLen-1)/segLen, maxSegmentsPerRep)
		perRep = segments * segLen
	}

	p := turnPoint{n: n, swing: h}
	samples := make([]float64, 0, cfg.reps)
	cpuSamples := make([]float64, 0, cfg.reps)
	cpuOK := true
	var mallocs, bytes uint64
	var ms0, ms1 runtime.MemStats
	for range cfg.reps {
		if !s.grows {
			runtime.GC()
		}
		var elapsed, cpu time.Duration
		for range segments {
			if err := ctx.Err(); err != nil {
				return turnPoint{}, err
			}
			if s.grows {
				size := n - 2*h - 2*warmupTurns
				if m, err = s.build(ctx, c, size); err != nil {
					return turnPoint{}, fmt.Errorf("rebuilding it with %d messages: %w", size, err)
				}
				if n >= gcAfterRebuild {
					runtime.GC()
				}
				for range warmupTurns {
					if err := runTurn(ctx, m, op); err != nil {
						return turnPoint{}, err
					}
					op++
				}
			}
			runtime.ReadMemStats(&ms0)
			cpu0, ok0 := processCPU()
			start := time.Now()
			for range segLen {
				if err := runTurn(ctx, m, op); err != nil {
					return turnPoint{}, err
				}
				op++
			}
			elapsed += time.Since(start)
			cpu1, ok1 := processCPU()
			cpuOK = cpuOK && ok0 && ok1
			cpu += cpu1 - cpu0
			runtime.ReadMemStats(&ms1)
			mallocs += ms1.Mallocs - ms0.Mallocs
			bytes += ms1.TotalAlloc - ms0.TotalAlloc
			if s.grows {
				closeMemory(m)
			}
		}
		samples = append(samples, float64(elapsed.Nanoseconds())/float64(perRep))
		cpuSamples = append(cpuSamples, float64(cpu.Nanoseconds())/float64(perRep))
		p.turns += perRep
	}
	if !s.grows {
		closeMemory(m)
	}
	slices.Sort(samples)
	p.ns, p.lo, p.hi = median(samples), samples[0], samples[len(samples)-1]
	slices.Sort(cpuSamples)
	p.cpu = math.NaN()
	if cpuOK {
		p.cpu = median(cpuSamples)
	}
	p.allocs = float64(mallocs) / float64(p.turns)
	p.bytes = float64(bytes) / float64(p.turns)
	return p, nil
}

// median returns the median of sorted values.
func median(sorted []float64) float64 {
	k := len(sorted)
	if k%2 == 1 {
		return sorted[k/2]
	}
	return (sorted[k/2-1] + sorted[k/2]) / 2
}

// runTurnCosts measures every subject at every size.
func runTurnCosts(ctx context.Context, cfg config, progress io.Writer) ([]turnSeries, error) {
	c := &corpus{}
	var out []turnSeries
	for _, s := range subjects() {
		ts := turnSeries{subject: s}
		for _, n := range cfg.sizes {
			p, err := measureTurns(ctx, cfg, c, s, n)
			if err != nil {
				return nil, fmt.Errorf("turn cost of %s at %d messages: %w", s.label(), n, err)
			}
			fmt.Fprintf(progress, "turn cost: %-48s history=%-7d %10s/turn (CPU %10s) %9.1f allocs/turn (%d turns)\n",
				s.label(), n, fmtNs(p.ns), fmtNs(p.cpu), p.allocs, p.turns)
			ts.points = append(ts.points, p)
		}
		out = append(out, ts)
	}
	return out, nil
}
