//go:build unix

package memstack_test

// Benchmarks comparing memstack's memories with langchaingo's own memories
// in one binary, so that benchstat can put them side by side.
//
//   - BenchmarkTurn: one chain turn, SaveContext then LoadMemoryVariables
//     (string mode), on a conversation of history=N messages.
//   - BenchmarkLoad: LoadMemoryVariables alone, memstack's Buffer against
//     langchaingo's ConversationBuffer.
//
// Reproduce (the numbers in docs/benchmarks.md come from this command, about 4
// minutes on 2 cores):
//
//	go test -run '^$' -bench 'BenchmarkTurn|BenchmarkLoad' -benchmem -count 6 -benchtime 300ms . > bench-raw.txt
//	benchstat bench-raw.txt                # every result, with confidence intervals
//	benchstat -col /history bench-raw.txt  # each memory across sizes, vs history=100
//
// The per-op work does not depend on b.N (see BenchmarkTurn), so any
// -benchtime gives the same figures; 300ms keeps the run short while giving
// the microsecond-scale ops tens of thousands of iterations. -count 6 is the
// fewest samples for which benchstat prints a confidence interval.
//
// Besides ns/op (wall time), the benchmarks whose timer runs without a
// break (BenchmarkLoad, and BenchmarkTurn for the windowed memories) report
// cpu-ns/op: the CPU time of the whole process (all threads, GC included)
// per op, from getrusage. On a shared machine wall time also counts the
// time the benchmark waited for a core; CPU time does not, so it is less
// sensitive to other work running alongside. It is left out where the
// loop stops the timer to rebuild a memory: the kernel books other
// threads' CPU time (the GC's, for one) late, so what they spent during the
// break would be counted as spent in the loop. (getrusage is why this file
// builds on unix only.)

import (
	"context"
	"fmt"
	"github.com/memstack/memstack/internal/benchcorpus"
	"io"
	"log"
	"syscall"
	"testing"
	"time"

	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"
)

// benchSizes are the history lengths, in messages (N/2 turns).
var benchSizes = []int{100, 1_000, 10_000, 100_000}

// tokenLimit is the budget of both token-window memories.
const tokenLimit = 2000

// ---------------------------------------------------------------------------
// Deterministic, realistic-ish conversation text.

// humanText and aiText are turn i's messages, from the corpus shared with
// the other benchmark (internal/benchcorpus).
func humanText(i int) string { return benchcorpus.Human(i) }

func aiText(i int) string { return benchcorpus.AI(i) }

type benchTurn struct{ in, out map[string]any }

func newBenchTurn(i int) benchTurn {
	return benchTurn{
		in:  map[string]any{"input": humanText(i)},
		out: map[string]any{"output": aiText(i)},
	}
}

// opTurns are the turns the timed loops save, built once so that building
// maps is not part of what is measured. Neither library changes them.
var opTurns = func() []benchTurn {
	t := make([]benchTurn, 4096)
	for i := range t {
		t[i] = newBenchTurn(1_000_000 + i)
	}
	return t
}()

// historyMessages returns the n messages of turns 0..n/2-1 as langchaingo
// messages: exactly what SaveContext of those turns stores.
func historyMessages(n int) []llms.ChatMessage {
	msgs := make([]llms.ChatMessage, 0, n)
	for i := 0; i < n/2; i++ {
		msgs = append(msgs, llms.HumanChatMessage{Content: humanText(i)}, llms.AIChatMessage{Content: aiText(i)})
	}
	return msgs
}

// saveTurns saves turns from..to-1 through the memory's own SaveContext.
func saveTurns(b *testing.B, m schema.Memory, from, to int) {
	b.Helper()
	ctx := context.Background()
	for i := from; i < to; i++ {
		t := newBenchTurn(i)
		if err := m.SaveContext(ctx, t.in, t.out); err != nil {
			b.Fatalf("prefill SaveContext(turn %d): %v", i, err)
		}
	}
}

// warm loads once, so that the measured loop sees the memory as a running
// conversation does (every turn of a chain loads before it saves). For
// memstack.Buffer this renders the history once into its cache; after that
// a load renders only the messages added since the previous load.
func warm(b *testing.B, m schema.Memory) {
	b.Helper()
	if _, err := m.LoadMemoryVariables(context.Background(), map[string]any{}); err != nil {
		b.Fatalf("warm-up load: %v", err)
	}
}

// ---------------------------------------------------------------------------
// The memories under test.

// fakeLLM is the llms.Model that NewConversationTokenBuffer requires. The
// token buffer never calls it: it counts with llms.CountTokens("", text)
// (token_buffer.go, getNumTokensFromMessages), which does not involve the
// model at all.
type fakeLLM struct{}

func (fakeLLM) GenerateContent(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error) {
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "ok"}}}, nil
}

func (fakeLLM) Call(context.Context, string, ...llms.CallOption) (string, error) { return "ok", nil }

type benchMemory struct {
	name string
	// grows is set for memories that keep every message: their history
	// grows by 2 messages per op, so the loop rebuilds them periodically to
	// keep the history near N (see runTurns).
	grows bool
	// quietLog discards the standard logger's output while the memory is
	// built and measured (see quietLog).
	quietLog bool
	build    func(b *testing.B, n int) schema.Memory
}

// quietLog sends the standard logger's output to io.Discard until the
// benchmark ends. langchaingo's token buffer logs "[WARN] Failed to
// calculate number of tokens" on every count (several per save), which
// would flood the benchmark output. The log package skips formatting
// entirely when its output is io.Discard, so this makes langchaingo's token
// buffer a little faster than it is in a program that keeps its log: the
// comparison errs in langchaingo's favour.
func quietLog(b *testing.B) {
	w, flags := log.Writer(), log.Flags()
	log.SetOutput(io.Discard)
	b.Cleanup(func() {
		log.SetOutput(w)
		log.SetFlags(flags)
	})
}

func newBufferMem(b *testing.B, n int, opts ...memories.BufferOption) schema.Memory {
	m := mustBuffer(opts...)
	saveTurns(b, m, 0, n/2)
	warm(b, m)
	return m
}

func newRecentNMem(b *testing.B, n int) schema.Memory {
	m, err := memories.NewRecentN(10)
	if err != nil {
		b.Fatal(err)
	}
	saveTurns(b, m, 0, n/2)
	warm(b, m)
	return m
}

func newTokenWindowMem(b *testing.B, n int) schema.Memory {
	m, err := memories.NewTokenWindow(tokenLimit)
	if err != nil {
		b.Fatal(err)
	}
	saveTurns(b, m, 0, n/2)
	warm(b, m)
	return m
}

func newCombinedMem(b *testing.B, n int) schema.Memory {
	// One store for the stack: each turn is stored once.
	st := store.NewInMemory()
	recent, err := memories.NewRecentN(10, memories.WithMemoryKey("recent"), memories.WithStore(st))
	if err != nil {
		b.Fatal(err)
	}
	m, err := combined.New([]schema.Memory{mustBuffer(memories.WithStore(st)), recent})
	if err != nil {
		b.Fatal(err)
	}
	saveTurns(b, m, 0, n/2)
	warm(b, m)
	return m
}

// newConversationBufferMem pre-fills the chat history directly: that is
// exactly what SaveContext of the same turns would leave in it (a
// ConversationBuffer only appends), and it keeps the 100,000-message setup
// fast.
func newConversationBufferMem(b *testing.B, n int) schema.Memory {
	h := memory.NewChatMessageHistory(memory.WithPreviousMessages(cachedHistory(b, n)))
	return memory.NewConversationBuffer(memory.WithChatHistory(h))
}

// historyCache keeps the messages of the last historyMessages call while
// one benchmark runs, so that rebuilding a ConversationBuffer (see
// runTurns) does not generate the text again. WithPreviousMessages copies
// the slice, and the messages are values, so sharing them is safe.
var historyCache struct {
	n    int
	msgs []llms.ChatMessage
}

func cachedHistory(b *testing.B, n int) []llms.ChatMessage {
	if historyCache.msgs == nil || historyCache.n != n {
		historyCache.n, historyCache.msgs = n, historyMessages(n)
		// Drop it when the benchmark ends, so that it does not stay live
		// (and cost GC time) during the benchmarks after it.
		b.Cleanup(func() { historyCache.n, historyCache.msgs = 0, nil })
	}
	return historyCache.msgs
}

func newConversationWindowBufferMem(b *testing.B, n int) schema.Memory {
	m := memory.NewConversationWindowBuffer(5)
	saveTurns(b, m, 0, n/2)
	return m
}

// tokenBufferReplayTurns is how many of the last turns are replayed into a
// ConversationTokenBuffer: 100 turns (about 6,000 tokens) are well over its
// 2,000-token limit, which the setup checks.
const tokenBufferReplayTurns = 100

// newConversationTokenBufferMem builds a ConversationTokenBuffer in the
// state it is in after n messages were saved through its own SaveContext.
//
// That state is bounded: the token buffer trims only in SaveContext, and
// after each save it drops the oldest messages one at a time until the
// whole rendered history counts at most 2,000 tokens. So after any number
// of saves it holds the longest suffix of the conversation that fits, and
// that suffix depends only on the last turns. Replaying the last
// tokenBufferReplayTurns turns through its real SaveContext therefore gives
// exactly the state n messages would give, in a fraction of the time (each
// of its saves re-encodes the whole buffer once per message dropped, so
// replaying all 50,000 turns of the largest size would take minutes).
//
// Pre-filling its ChatHistory with all n messages instead
// (memory.WithPreviousMessages) would benchmark a state SaveContext never
// produces, and the first timed save would then re-encode the whole history
// once per message dropped: O(n²) tokens, hours at n = 100,000, and a per-op
// cost that depends on b.N. So no size needs capping.
func newConversationTokenBufferMem(b *testing.B, n int) schema.Memory {
	// langchaingo counts with llms.CountTokens, which goes through
	// tiktoken-go; its default BPE loader would download encoding files,
	// but with langchaingo v0.1.14 and tiktoken-go v0.1.8 no file is loaded
	// at all: CountTokens("", text) finds no encoding for model "" and then
	// fails on GetEncoding("gpt2"), which tiktoken-go does not know, so it
	// falls back to len([]rune(text))/4 and logs a WARN line on every call.
	// runTurns discards those log lines; see quietLog. (memstack's own
	// counter never touches tiktoken-go's loader.)
	m := memory.NewConversationTokenBuffer(fakeLLM{}, tokenLimit)
	from := max(n/2-tokenBufferReplayTurns, 0)
	saveTurns(b, m, from, n/2)
	msgs, err := m.ChatHistory.Messages(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if n/2 > tokenBufferReplayTurns && len(msgs) >= 2*tokenBufferReplayTurns {
		b.Fatalf("token buffer was not trimmed: replaying %d turns left %d messages; replay more turns",
			tokenBufferReplayTurns, len(msgs))
	}
	return m
}

var turnMemories = []benchMemory{
	{name: "memstack.Buffer", grows: true, build: func(b *testing.B, n int) schema.Memory { return newBufferMem(b, n) }},
	{name: "memstack.RecentN10", grows: true, build: newRecentNMem},
	{name: "memstack.TokenWindow2000", grows: true, build: newTokenWindowMem},
	{name: "memstack.CombinedBufferRecentN10", grows: true, build: newCombinedMem},
	{name: "langchaingo.ConversationBuffer", grows: true, build: newConversationBufferMem},
	{name: "langchaingo.ConversationWindowBuffer5", build: newConversationWindowBufferMem},
	{name: "langchaingo.ConversationTokenBuffer2000", quietLog: true, build: newConversationTokenBufferMem},
}

var loadMemories = []benchMemory{
	{name: "memstack.Buffer", build: func(b *testing.B, n int) schema.Memory { return newBufferMem(b, n) }},
	// The same Buffer with its rendering cache turned off: every load reads
	// the store and renders the whole history, as langchaingo does. It shows
	// how much of the difference is the cache.
	{name: "memstack.BufferNoCache", build: func(b *testing.B, n int) schema.Memory {
		return newBufferMem(b, n, memories.WithCacheSize(0))
	}},
	{name: "langchaingo.ConversationBuffer", build: newConversationBufferMem},
}

// ---------------------------------------------------------------------------
// Benchmarks.

var benchSink map[string]any

// cpuClock measures the process CPU time between start and report; start
// it right after ResetTimer, in a loop that never stops the timer.
type cpuClock struct {
	since time.Duration
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (c *cpuClock) start(b *testing.B) { c.since = processCPU(b) }

// report reports the CPU time per op since start.
func (c *cpuClock) report(b *testing.B) {
	spent := processCPU(b) - c.since
	b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkTurn measures one chain turn: SaveContext of a new turn, then
// LoadMemoryVariables (string mode), on a conversation of N messages.
//
// The work per op must not depend on b.N; each op adds a turn (2 messages).
//
//   - langchaingo's window and token buffers are bounded: after N+2k
//     messages they hold what they hold after N, so the extra turns change
//     nothing. Each is built once per sub-benchmark, by saving N messages,
//     and reused by the successive runs the testing package makes of it
//     (while it sizes b.N, and for -count).
//   - The memories that keep every message (every memstack memory: none
//     removes a message without a retention; ConversationBuffer) would
//     grow from N to N+2·b.N messages.
//     The loop keeps their history centred on N: it builds them h turns
//     short of N/2 turns and, every 2h ops, builds them again with the timer
//     stopped, so the history swings between N-2h and N+2h messages, N on
//     average, with h = min(N/16, b.N/2) turns (at most ±12.5%). All of them
//     are treated alike, although it matters mostly for ConversationBuffer,
//     whose cost grows with its history (memstack.Buffer's does not).
func BenchmarkTurn(b *testing.B) {
	for _, mem := range turnMemories {
		for _, n := range benchSizes {
			var bounded schema.Memory // reused across the runs of one sub-benchmark
			b.Run(fmt.Sprintf("%s/history=%d", mem.name, n), func(b *testing.B) {
				runTurns(b, mem, n, &bounded)
			})
		}
	}
}

func runTurns(b *testing.B, mem benchMemory, n int, bounded *schema.Memory) {
	if mem.quietLog {
		quietLog(b)
	}
	ctx := context.Background()
	var m schema.Memory
	h := 0 // turns short of N/2 at each (re)build; 0: never rebuilt
	if mem.grows {
		h = max(1, min(n/16, b.N/2))
		m = mem.build(b, n-2*h)
	} else {
		if *bounded == nil {
			*bounded = mem.build(b, n)
		}
		m = *bounded
	}
	var cpu cpuClock
	b.ReportAllocs()
	b.ResetTimer()
	cpu.start(b)
	for i := 0; i < b.N; i++ {
		if h > 0 && i > 0 && i%(2*h) == 0 {
			b.StopTimer()
			m = mem.build(b, n-2*h)
			b.StartTimer()
		}
		t := opTurns[(n/2+i)%len(opTurns)]
		if err := m.SaveContext(ctx, t.in, t.out); err != nil {
			b.Fatal(err)
		}
		v, err := m.LoadMemoryVariables(ctx, t.in)
		if err != nil {
			b.Fatal(err)
		}
		benchSink = v
	}
	if !mem.grows {
		cpu.report(b)
	}
}

// BenchmarkLoad measures LoadMemoryVariables alone (string mode) on a
// conversation of N messages: memstack's Buffer against langchaingo's
// ConversationBuffer. Nothing is saved in the loop, so the history stays at
// exactly N. memstack.Buffer was warmed by one load in its setup (as a
// running conversation is), so its loads return the cached rendering after
// checking the store's Stat; memstack.BufferNoCache renders every time.
func BenchmarkLoad(b *testing.B) {
	for _, n := range benchSizes {
		checkSameRendering(b, n)
	}
	for _, mem := range loadMemories {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/history=%d", mem.name, n), func(b *testing.B) {
				ctx := context.Background()
				m := mem.build(b, n)
				in := map[string]any{"input": "next question"}
				var cpu cpuClock
				b.ReportAllocs()
				b.ResetTimer()
				cpu.start(b)
				for i := 0; i < b.N; i++ {
					v, err := m.LoadMemoryVariables(ctx, in)
					if err != nil {
						b.Fatal(err)
					}
					benchSink = v
				}
				cpu.report(b)
			})
		}
	}
}

// checkSameRendering makes sure the two buffers compared by BenchmarkLoad
// hold the same conversation and load the same string, so that they are
// timed doing the same job.
func checkSameRendering(b *testing.B, n int) {
	b.Helper()
	ctx := context.Background()
	ours, err := newBufferMem(b, n).LoadMemoryVariables(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	theirs, err := newConversationBufferMem(b, n).LoadMemoryVariables(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := ours["history"].(string)
	if s == "" || s != theirs["history"] {
		b.Fatalf("history=%d: memstack.Buffer and ConversationBuffer load different histories (%d vs %d bytes)",
			n, len(s), len(fmt.Sprint(theirs["history"])))
	}
}
