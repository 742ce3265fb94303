package main

import (
	"fmt"
	"strings"
	"time"
)

// Headings of the report's sections and tables (main_test.go checks them).
const (
	headTitle      = "# memstack benchmark results"
	headMachine    = "## Machine"
	headTurns      = "## Cost of one turn"
	headTurnTime   = "### Wall-clock time per turn"
	headTurnCPU    = "### CPU time per turn"
	headTurnAllocs = "### Allocations per turn"
	headTurnSpread = "### Fastest and slowest repetition"
	headSummary    = "## Summary memories: model calls and save latency"
	headFanout     = "## CombinedMemory: children run concurrently"
	headStores     = "## Store backends"
	headWindows    = "### Window loads over one long conversation"
	headUsers      = "### Recall across a user's conversations"
)

// renderMarkdown renders the results as the report docs/bench/results.md.
func renderMarkdown(r *results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	cfg := r.cfg

	p("%s\n\n", headTitle)
	flags := "no flags"
	if len(cfg.args) > 0 {
		flags = "`" + strings.Join(cfg.args, " ") + "`"
	}
	p("Written by `go run ./cmd/memstack-bench` (%s) on %s, in %s. Every number below comes from that one run, memstack and langchaingo v0.1.14 side by side in the same process.\n\n",
		flags, r.machine.date.Format("2006-01-02 15:04 MST"), r.took.Round(time.Second))
	if cfg.quick {
		p("**This is a `-quick` run** (small sizes, few and short repetitions, no servers): it checks that the command works; its numbers are rough.\n\n")
	}

	p("%s\n\n", headMachine)
	p("| | |\n|---|---|\n")
	p("| CPU | %s |\n", r.machine.cpuModel)
	p("| logical CPUs (GOMAXPROCS) | %d (%d) |\n", r.machine.cpus, r.machine.gomaxprocs)
	p("| memory | %s |\n", r.machine.memoryTotal)
	p("| Go | %s %s |\n", r.machine.goVersion, r.machine.osArch)
	p("| date | %s |\n", r.machine.date.Format(time.RFC3339))
	p("| load average (1, 5, 15 min) at start | %s |\n", r.machine.loadBefore)
	p("| load average (1, 5, 15 min) at end | %s |\n\n", r.machine.loadAfter)
	p("The machine may be shared: a load average above the CPU count means other work competed for the cores, which inflates wall-clock times.\n\n")

	renderTurns(&b, r)
	renderSummary(&b, r)
	renderFanout(&b, r)
	renderStores(&b, r)
	return b.String()
}

func renderTurns(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	cfg := r.cfg
	p("%s\n\n", headTurns)
	p("One turn is what a chain does with its memory on every call: `SaveContext` of the new turn, then `LoadMemoryVariables` (string mode). ")
	p("Each cell is the median of %d repetitions, each repetition about %s of timed turns (at least 30 for Summary, which folds every few turns). ",
		cfg.reps, fmtDur(cfg.target))
	p("History lengths are in messages (a turn is two). Each memstack memory is listed above its langchaingo counterpart (Summary, CombinedMemory, Facts and Recall have none); RecentN(10) shows 10 messages, as ConversationWindowBuffer(5) does (5 pairs).\n\n")
	p("![Cost of one turn against history length, log-log](turn-cost.svg)\n\n")
	p("The plot shows the CPU time per turn (the steadier figure on a shared machine; see below), memstack solid, langchaingo dashed, each memstack memory in the colour of its langchaingo counterpart.\n\n")

	header := func(last string) {
		p("| memory | library |")
		for _, n := range cfg.sizes {
			p(" %s |", fmtCount(n))
		}
		p("%s\n|---|---|", last)
		for range cfg.sizes {
			p("---:|")
		}
		if last != "" {
			p("---:|")
		}
		p("\n")
	}

	first, lastN := cfg.sizes[0], cfg.sizes[len(cfg.sizes)-1]
	p("%s\n\n", headTurnTime)
	header(fmt.Sprintf(" %s ÷ %s |", fmtCount(lastN), fmtCount(first)))
	for _, s := range r.turns {
		p("| %s | %s |", s.name, s.library)
		for _, pt := range s.points {
			p(" %s |", fmtNs(pt.ns))
		}
		ratio := s.points[len(s.points)-1].ns / s.points[0].ns
		p(" %s× |\n", sig3(ratio))
	}
	p("\n")

	p("%s\n\n", headTurnCPU)
	p("Process CPU time per turn (getrusage: every thread, the memory's goroutines and the garbage collector included), median of the repetitions. Unlike wall-clock time it does not count time spent waiting for a core, so on a busy machine it is the steadier figure.\n\n")
	header(fmt.Sprintf(" %s ÷ %s |", fmtCount(lastN), fmtCount(first)))
	for _, s := range r.turns {
		p("| %s | %s |", s.name, s.library)
		for _, pt := range s.points {
			p(" %s |", fmtNs(pt.cpu))
		}
		ratio := s.points[len(s.points)-1].cpu / s.points[0].cpu
		p(" %s× |\n", sig3(ratio))
	}
	p("\n")

	p("%s\n\n", headTurnAllocs)
	p("Heap allocations and bytes allocated per turn (runtime.MemStats over every timed turn, as `go test -benchmem` counts them).\n\n")
	header("")
	for _, s := range r.turns {
		p("| %s | %s |", s.name, s.library)
		for _, pt := range s.points {
			p(" %s allocs, %s |", fmtAllocs(pt.allocs), fmtBytes(pt.bytes))
		}
		p("\n")
	}
	p("\n")

	p("%s\n\n", headTurnSpread)
	p("Fastest – slowest repetition, and the number of timed turns over all repetitions. ")
	p("For the memories that keep every message (marked ±), the history swings around its nominal length as described below.\n\n")
	header("")
	for _, s := range r.turns {
		p("| %s | %s |", s.name, s.library)
		for _, pt := range s.points {
			swing := ""
			if pt.swing > 0 {
				swing = fmt.Sprintf(", ±%s msgs", fmtCount(2*pt.swing))
			}
			p(" %s – %s (%s turns%s) |", fmtNs(pt.lo), fmtNs(pt.hi), fmtCount(pt.turns), swing)
		}
		p("\n")
	}
	p("\n")

	p("How the histories are built (fast, and leaving each memory exactly as its own `SaveContext` of every turn would):\n\n")
	p("- memstack memories: the first N−2 messages are appended to the memory's store directly (what `SaveContext` stores), then the last turn goes through the memory's own `SaveContext` (RecentN and TokenWindow store it; Summary folds everything but its 15 raw messages in one call) and one load warms the caches, as the previous turn of a running chain would.\n")
	p("- langchaingo `ConversationBuffer`: its chat history is pre-filled with all N messages (it only appends). `ConversationWindowBuffer(5)`: pre-filled with N−2, then its `SaveContext` of the last turn cuts it to its window.\n")
	p("- langchaingo `ConversationTokenBuffer(2000)`: the last %d turns are replayed through its `SaveContext`. It only trims when saving, and after any number of saves it holds the longest suffix that fits its limit, so this is exactly its state after N/2 saves; pre-filling all N messages would make the first save recount the buffer once per dropped message (hours at 100,000). It counts tokens with `llms.CountTokens`, which in v0.1.14 falls back to characters/4 and logs a warning per count: the standard logger is silenced during the run, which flatters it slightly.\n", tokenBufferReplayTurns)
	p("- Memories that keep every message (every memstack memory — none removes a message without a retention — and ConversationBuffer) are built with N−2h−6 messages and rebuilt outside the timed region after every 2h timed turns, each rebuild followed by 3 untimed warm-up turns (and, from 10,000 messages on, by a garbage collection first, so that the rebuild's garbage is not collected on the clock), so their history stays within N ± 2h messages while timed, N on average (h ≤ N/20).\n")
	p("- Summary uses the offline extractive summarizer (`summarizer.NewExtractive()`), synchronously, with the default n = 15, m = 6: its cost per turn includes a summarization every third turn.\n")
	p("- Facts uses the offline pattern extractor (`extract.NewPatterns()`), synchronously: every turn is scanned by its rules and the extraction state updated. This corpus states no fact its default rules recognise, so no facts are stored or loaded; the row measures the per-turn extraction overhead. Its history is built by extracting the pre-filled turns one by one, as the saves would have.\n")
	p("- Recall uses its default index (BM25, in process memory, no model): a save indexes the new exchange, a load searches every exchange of the conversation with the turn's input and returns the best 3. Its history is indexed in one batch on first use.\n\n")
}

func renderSummary(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("%s\n\n", headSummary)
	p("A model test double that takes %s per call summarizes (through `summarizer.New`, the LLM summarizer). ", fmtDur(r.cfg.modelLatency))
	p("The synchronous rows use a virtual clock: the double adds %s to a counter instead of sleeping, and a save's latency is its wall time plus the model time it waited for, so %s turns take seconds instead of minutes. ",
		fmtDur(r.cfg.modelLatency), fmtCount(r.cfg.summaryTurns))
	p("The background rows use a double that really sleeps; their saves never wait for the model.\n\n")
	p("| strategy | clock | turns | model calls | calls per 100 turns | model time saves waited for, per 100 turns | save p50 | save p99 |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.summary {
		waited := fmtDur(s.waitedPer100())
		if s.waited == 0 {
			waited = "none"
		}
		p("| %s | %s | %s | %s | %.1f | %s | %s | %s |\n",
			s.strategy, s.clock, fmtCount(s.turns), fmtCount(int(s.calls)), s.callsPer100(), waited, fmtDur(s.p50), fmtDur(s.p99))
	}
	p("\n")
	p("- Count mode folds the oldest batch (at least 6 messages, ending at a turn boundary) once more than 15 messages are unsummarized: the first call comes at turn 8, then one every 3 turns, at most ⌈messages ÷ batch⌉ calls.\n")
	p("- Token mode folds when the unsummarized messages exceed 2,000 tokens, down to about 1,000: one call per ~1,000 tokens of conversation.\n")
	p("- LangChain's summary-buffer memory (simulated: after each save, pop the oldest messages until the buffer is within its limit, then one call folds them into the summary) makes one call on every turn once its buffer is full.\n")
	p("- Background mode stores the turn and returns; one worker per conversation folds whatever has piled up in one call, so turns that arrive while the model works cost no extra calls.\n\n")
}

func renderFanout(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("%s\n\n", headFanout)
	p("Each child is a user's `schema.Memory` whose every `SaveContext` and `LoadMemoryVariables` takes %s (a remote call, say). %d saves and %d loads per row.\n\n",
		fmtDur(r.cfg.childLatency), r.cfg.fanoutOps, r.cfg.fanoutOps)
	p("| memory | save p50 | save p99 | load p50 | load p99 |\n|---|---:|---:|---:|---:|\n")
	for _, f := range r.fanout {
		p("| %s | %s | %s | %s | %s |\n", f.memory, fmtDur(f.saveP50), fmtDur(f.saveP99), fmtDur(f.loadP50), fmtDur(f.loadP99))
	}
	p("\n`combined.Memory` runs its children concurrently: three %s children cost about %s per call, not the %s of calling them one after another.\n\n",
		fmtDur(r.cfg.childLatency), fmtDur(r.cfg.childLatency), fmtDur(3*r.cfg.childLatency))
}

func renderStores(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("%s\n\n", headStores)
	p("`storetest.Measure`: %d conversations run concurrently, each appending %s turns (one `Append` of a human and an AI message, about 100 bytes each) and loading `Last(10)` after each, as a window memory does on every turn. Saves per second count turns over the whole run's wall time, loads included.\n\n",
		r.cfg.storeConvs, fmtCount(r.cfg.storeTurns))
	p("| backend | saves/s | load p50 | load p99 | saves | wall time | set-up |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, s := range r.stores {
		if s.skipped != "" {
			p("| %s | – | – | – | – | – | %s |\n", s.backend, s.skipped)
			continue
		}
		p("| %s | %s | %s | %s | %s | %s | %s |\n", s.backend, fmtCount(int(s.res.SavesPerSec)),
			fmtDur(s.res.LoadP50), fmtDur(s.res.LoadP99), fmtCount(s.res.Saves), fmtDur(s.res.Duration), s.setup)
	}
	p("\nThe same work done with each driver's minimal commands, against the same kind of server in the same run (`cmd/memstack-bench/minimal.go`: a message is its role and text, no Seqs handed out, versions, namespaces, idempotency tokens, change feed or retention; SQLite: two INSERTs in a transaction and a SELECT … LIMIT over an index; Redis: one RPUSH and one LRANGE; PostgreSQL: one multi-row INSERT and a SELECT … LIMIT over an index). The store's overhead is its figure against the minimal one's: a saves ratio above 1× means the store saves faster than the minimal commands (sqlitestore commits concurrent appends in one transaction), a load ratio above 1× that it loads slower.\n\n")
	p("| backend | minimal saves/s | minimal load p50 | store saves/s ÷ minimal | store load p50 ÷ minimal |\n|---|---:|---:|---:|---:|\n")
	for _, s := range r.stores {
		if s.minimal == nil {
			continue
		}
		m := s.minimal
		p("| %s | %s | %s | %.2f× | %.2f× |\n", s.backend, fmtCount(int(m.SavesPerSec)), fmtDur(m.LoadP50),
			s.res.SavesPerSec/m.SavesPerSec, float64(s.res.LoadP50)/float64(m.LoadP50))
	}
	if len(r.cfg.storeSizes) > 0 {
		p("\n`storetest.MeasureSize`: one conversation of N messages; the median of %d `Stat` calls (what every memory load pays) and of %d one-turn `Append`s, one `RemovePrefix` of all but the newest 10 messages, then `Stat` and `Append` again — a store whose cost grows with what it once held shows it in the last two columns.\n\n", r.cfg.storeSamples, r.cfg.storeSamples)
		p("| backend | messages | Stat | Append | RemovePrefix | Stat after | Append after |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for _, s := range r.stores {
			for _, z := range s.sizes {
				p("| %s | %s | %s | %s | %s | %s | %s |\n", s.backend, fmtCount(z.Messages), fmtDur(z.Stat), fmtDur(z.Append),
					fmtDur(z.RemovePrefix), fmtDur(z.StatAfter), fmtDur(z.AppendAfter))
			}
		}
	}
	renderWindows(b, r)
	renderUsers(b, r)
	p("\nThe servers are throwaway processes on this machine (loopback, no persistence or fsync): the numbers show the stores' own overhead, not a production deployment's disk or network.\n")
}

// renderWindows writes the window-load table: each memory's load over
// the smallest and the largest conversation, and their ratio.
func renderWindows(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	sizes := r.cfg.windowSizes
	if len(sizes) < 2 {
		return
	}
	small, large := sizes[0], sizes[len(sizes)-1]
	p("\n%s\n\n", headWindows)
	p("One conversation of %s and one of %s messages (a system prompt, then turns) in the store, each the stack's one transcript; each memory saves one turn in both (Summary folds all but its 15 raw messages into its summary) and then loads %d times from each (`LoadMemoryVariables`, string mode), the two conversations alternating so both are measured under the same machine load. ", fmtCount(small), fmtCount(large), r.cfg.windowSamples)
	p("A load reads the pinned system messages and the newest messages (`store.Messages.Tail`), never the whole conversation, so it should cost the same at %s messages as at %s: the last column is the ratio of the p50s.\n\n", fmtCount(large), fmtCount(small))
	p("| backend | memory | %s p50 | %s p95 | %s p50 | %s p95 | %s ÷ %s |\n|---|---|---:|---:|---:|---:|---:|\n",
		fmtCount(small), fmtCount(small), fmtCount(large), fmtCount(large), fmtCount(large), fmtCount(small))
	for _, s := range r.stores {
		for _, wm := range windowMemories {
			var lo, hi *windowResult
			for i := range s.windows {
				w := &s.windows[i]
				if w.memory != wm.name {
					continue
				}
				switch w.messages {
				case small:
					lo = w
				case large:
					hi = w
				}
			}
			if lo == nil || hi == nil {
				continue
			}
			p("| %s | %s | %s | %s | %s | %s | %.2f× |\n", s.backend, wm.name, fmtDur(lo.p50), fmtDur(lo.p95), fmtDur(hi.p50), fmtDur(hi.p95),
				float64(hi.p50)/float64(lo.p50))
		}
	}
}

// renderUsers writes the user-level recall table: a budgeted load in a
// new conversation of a user with many conversations, and a save's cost
// against a conversation-scoped Recall's.
func renderUsers(b *strings.Builder, r *results) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	if len(r.cfg.userConvs) == 0 {
		return
	}
	p("\n%s\n\n", headUsers)
	p("One user with N conversations of %d messages each in the store; a stack `RecentN(6)` + `Recall()` (which searches every conversation of the user) under `combined.WithTokenBudget(1000)` loads in a new conversation of that user: the first load of a fresh stack, as a new process's (cold, p50 and p95 of %d fresh stacks: over an in-process index it lists the user's conversations and indexes them; over SQLite or PostgreSQL with the recall index, it searches the database), then %d budgeted loads, each with another question. Saves: `SaveContext` of a user-scoped `Recall` and of a conversation-scoped one, alternating, p50; the ratio is what user-level memory costs a save (nothing more over a store with a change feed, SQLite and Redis; a recall-journal entry in the same atomic write over PostgreSQL; a second write in memory). Over PostgreSQL the tables are vacuumed and analyzed (`VACUUM (ANALYZE)`) once the user is filled, before the loads, as autovacuum keeps a deployment's tables as they grow (the scale benchmark does the same after its population).\n\n", userRecallMessages, coldSamples, r.cfg.windowSamples)
	p("| backend | conversations | cold first load p50 | cold p95 | load p50 | load p95 | save, user scope | save, conversation scope | ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.stores {
		for _, u := range s.users {
			p("| %s | %s | %s | %s | %s | %s | %s | %s | %.2f× |\n", s.backend, fmtCount(u.conversations), fmtDur(u.coldP50), fmtDur(u.coldP95), fmtDur(u.loadP50), fmtDur(u.loadP95),
				fmtDur(u.saveUser), fmtDur(u.saveConv), float64(u.saveUser)/float64(u.saveConv))
		}
	}
}
