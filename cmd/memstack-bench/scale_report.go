package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memstack/memstack/store/pgstore"
)

// Headings of the scale section (main_test.go checks them). The section
// starts with a level-2 heading, so it can be appended to
// docs/bench/results.md.
const (
	headScale        = "## Scale: many users, several processes, one PostgreSQL"
	headScalePop     = "### Population"
	headScaleLatency = "### Loads and saves, all processes"
	headScaleSize    = "### Size on disk"
	headScaleMemory  = "### Per process: throughput and memory"
	headScaleTargets = "### Against issue 20's targets"
)

// Issue 20's targets: a load's p95 over 1,000,000 messages served by 4
// processes, and each process's memory flat from 100 to 1,000 users seen
// (flat: its resident set grows by at most scaleFlatRatio).
const (
	scaleLoadTarget = 20 * time.Millisecond
	scaleFlatRatio  = 1.2
)

// Row labels of the latency table.
const (
	scaleRowWarm  = "load, after the user's first in the process"
	scaleRowCold  = "cold first load of a user in a process"
	scaleRowLoads = "every load"
	scaleRowSave  = "save (`SaveContext`)"
)

// scaleStats is a latency distribution's summary.
type scaleStats struct {
	n                  int
	p50, p95, p99, max time.Duration
}

// statsOf sorts d and summarises it.
func statsOf(d []time.Duration) scaleStats {
	slices.Sort(d)
	if len(d) == 0 {
		return scaleStats{}
	}
	return scaleStats{n: len(d), p50: percentile(d, 0.50), p95: percentile(d, 0.95), p99: percentile(d, 0.99), max: d[len(d)-1]}
}

// scaleTotals is what every process measured, together.
type scaleTotals struct {
	warm, cold, loads, saves scaleStats
	savesPerSec              float64
}

// totals aggregates the processes' reports.
func (r *scaleResult) totals() scaleTotals {
	var warm, cold, saves []time.Duration
	for _, w := range r.workers {
		warm = append(warm, w.Warm...)
		cold = append(cold, w.Cold...)
		saves = append(saves, w.Saves...)
	}
	loads := append(append([]time.Duration(nil), warm...), cold...)
	t := scaleTotals{warm: statsOf(warm), cold: statsOf(cold), loads: statsOf(loads), saves: statsOf(saves)}
	if r.span > 0 {
		t.savesPerSec = float64(len(saves)) / r.span.Seconds()
	}
	return t
}

// markAt returns w's memory mark at users seen, if w reached it.
func (w scaleWorkerReport) markAt(users int) (scaleMark, bool) {
	for _, m := range w.Marks {
		if m.Users == users {
			return m, true
		}
	}
	return scaleMark{}, false
}

// rssGrowth returns, per process, its resident set at the last memory
// mark of the configuration divided by the one at the first (0 for a
// process that did not reach both), and the worst (largest). ok is false
// when the configuration has fewer than two marks or a process did not
// reach them.
func (r *scaleResult) rssGrowth() (per []float64, worst float64, ok bool) {
	marks := r.cfg.rssAt
	if len(marks) < 2 {
		return nil, 0, false
	}
	ok = true
	for _, w := range r.workers {
		first, ok1 := w.markAt(marks[0])
		last, ok2 := w.markAt(marks[len(marks)-1])
		if !ok1 || !ok2 || first.RSS <= 0 {
			per = append(per, 0)
			ok = false
			continue
		}
		g := float64(last.RSS) / float64(first.RSS)
		per = append(per, g)
		worst = max(worst, g)
	}
	return per, worst, ok
}

// cpuPerRequest returns the processes' CPU time while serving divided by
// their requests, or 0 where the platform cannot tell.
func (r *scaleResult) cpuPerRequest() time.Duration {
	var cpu time.Duration
	n := 0
	for _, w := range r.workers {
		if w.CPU <= 0 {
			return 0
		}
		cpu += w.CPU
		n += w.Requests
	}
	if n == 0 {
		return 0
	}
	return cpu / time.Duration(n)
}

// isIssueScale reports whether the run had issue 20's shape: 1,000 users
// × 10 conversations × 100 messages, 4 processes.
func (c scaleConfig) isIssueScale() bool {
	return c.users == defaultScaleUsers && c.convs == defaultScaleConvs && c.msgs == defaultScaleMsgs && c.procs == defaultScaleProcs
}

// renderScale renders the scale run as a markdown section.
func renderScale(r *scaleResult) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := r.cfg
	t := r.totals()
	messages := c.users * c.convs * c.msgs

	p("%s\n\n", headScale)
	p("Written by `go run ./cmd/memstack-bench %s` on %s, in %s, on %s (%d logical CPUs, GOMAXPROCS %d, %s, %s %s); load average %s at the start, %s at the end (above %d, other work competed for the cores).\n\n",
		strings.Join(r.args, " "), r.machine.date.Format("2006-01-02 15:04 MST"), r.took.Round(time.Second), r.machine.cpuModel,
		r.machine.cpus, r.machine.gomaxprocs, r.machine.memoryTotal, r.machine.goVersion, r.machine.osArch,
		r.machine.loadBefore, r.machine.loadAfter, r.machine.cpus)
	p("A throwaway %s on 127.0.0.1 (fsync off, shared_buffers 64 MB, on this machine: the server shares its cores with the serving processes) holds %s users × %s conversations × %s messages = **%s messages**, written through pgstore's public API: `AppendBatches` (`store.MultiAppender`) of one turn — a human and an AI message of the benchmark corpus — of %d users' conversations per call, %d calls at once, every turn dated (`memstack.WithTime`: a user's conversations a week apart, their turns a minute apart), with pgstore's defaults; then a Store with the serving options opens the tables (with the recall index on, its background backfill indexes every conversation, as it would a deployment's existing messages, timed until complete), then `VACUUM (ANALYZE)` and `CHECKPOINT`. Serving store options: %s.\n\n",
		r.server, fmtCount(c.users), fmtCount(c.convs), fmtCount(c.msgs), fmtCount(messages), min(scalePopulateGroup, c.users), scalePopulateWriters, scaleOptionsText())
	p("Then %d processes — this binary re-executed, each with its own `pgstore.Open` pool and one memory stack for every user, the user-recall table's: `RecentN(6)` + `Recall()` of the user's conversations under `combined.WithTokenBudget(1000)` — serve at once, %d request(s) at a time each, for %v (longer, up to %v, if a process has not yet seen every user). A request is a random user's (drawn uniformly, with replacement: a process sees more users as it serves, and a process keeps serving until it has seen all %s). It continues one of the user's conversations, chosen at random, or one time in %.0f starts a new one; it loads with a question the user asked before (`LoadMemoryVariables`), then saves the turn (`SaveContext`: one transaction, which over PostgreSQL also writes the user's recall-journal entry when the Recall indexes in process). A user's first load in a process is cold: with the in-process index (the default) that process's Recall lists, reads and indexes every conversation of the user; with the recall index in the database, it searches the database.\n\n",
		c.procs, c.clients, c.duration, c.maxDur, fmtCount(c.users), 1/scaleNewShare)

	p("%s\n\n", headScalePop)
	indexed := "off"
	if r.indexed > 0 {
		indexed = fmtDur(r.indexed)
	}
	p("| users | conversations per user | messages per conversation | messages | `AppendBatches` calls | took | messages/s | recall index backfill | `VACUUM (ANALYZE)` + `CHECKPOINT` |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n\n", fmtCount(c.users), fmtCount(c.convs), fmtCount(c.msgs), fmtCount(r.pop.messages),
		fmtCount(r.pop.calls), fmtDur(r.pop.took), fmtCount(int(float64(r.pop.messages)/r.pop.took.Seconds())), indexed, fmtDur(r.vacuum))

	p("%s\n\n", headScaleLatency)
	p("| | count | p50 | p95 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n")
	for _, row := range []struct {
		name string
		s    scaleStats
	}{{scaleRowWarm, t.warm}, {scaleRowCold, t.cold}, {scaleRowLoads, t.loads}, {scaleRowSave, t.saves}} {
		p("| %s | %s | %s | %s | %s | %s |\n", row.name, fmtCount(row.s.n), fmtDur(row.s.p50), fmtDur(row.s.p95), fmtDur(row.s.p99), fmtDur(row.s.max))
	}
	p("\nSaves per second, all processes: **%s** (%s saves in %s of serving, a save per request).", fmtCount(int(t.savesPerSec)), fmtCount(t.saves.n), fmtDur(r.span))
	if cpu := r.cpuPerRequest(); cpu > 0 {
		p(" CPU time per request, a load and a save, in the serving processes (getrusage: every thread, the garbage collector included; the database's own is not counted): **%s**. Unlike the latencies it does not count waiting for a core, so it is the steadier figure on a shared machine.", fmtDur(cpu))
	}
	p("\n\n")

	p("%s\n\n", headScaleSize)
	recall := func(d dbSize) string {
		if len(d.recallTables) == 0 {
			return "none (the store keeps no recall index)"
		}
		return fmt.Sprintf("%s (%d tables)", fmtBytes(float64(d.recall)), len(d.recallTables))
	}
	p("| | after the population | after the serving |\n|---|---:|---:|\n")
	p("| database (`pg_database_size`) | %s | %s |\n", fmtBytes(float64(r.before.database)), fmtBytes(float64(r.after.database)))
	p("| memstack's tables, with their indexes and TOAST | %s | %s |\n", fmtBytes(float64(r.before.tables)), fmtBytes(float64(r.after.tables)))
	p("| of which indexes | %s | %s |\n", fmtBytes(float64(r.before.indexes)), fmtBytes(float64(r.after.indexes)))
	p("| of which the recall index's tables (`%srecall%%`), with their indexes | %s | %s |\n", pgstore.DefaultTablePrefix, recall(r.before), recall(r.after))
	p("| rows of the messages table (recall journals included) | %s | %s |\n\n", fmtCount(int(r.before.messages)), fmtCount(int(r.after.messages)))

	p("%s\n\n", headScaleMemory)
	p("Each process's requests and saves per second over its serving time, its CPU time per request, and its resident set (VmRSS of /proc/self/status, read as it is: no garbage collection first) / Go heap in use (the heap's spans in use, `runtime.MemStats.HeapInuse`) when it was ready, when it had seen N distinct users, and at the end; peak is VmHWM.\n\n")
	growth, worst, grown := r.rssGrowth()
	p("| process | served | requests | saves/s | CPU per request | users seen | new conversations | ready |")
	for _, m := range c.rssAt {
		p(" at %s users |", fmtCount(m))
	}
	p(" end | peak RSS |")
	if len(c.rssAt) >= 2 {
		p(" RSS %s ÷ %s |", fmtCount(c.rssAt[len(c.rssAt)-1]), fmtCount(c.rssAt[0]))
	}
	p("\n|---:|---:|---:|---:|---:|---:|---:|---:|")
	for range c.rssAt {
		p("---:|")
	}
	p("---:|---:|")
	if len(c.rssAt) >= 2 {
		p("---:|")
	}
	p("\n")
	mem := func(m scaleMark) string {
		return fmtBytes(float64(m.RSS)) + " / " + fmtBytes(float64(m.Heap))
	}
	for i, w := range r.workers {
		cpu := "–"
		if w.CPU > 0 && w.Requests > 0 {
			cpu = fmtDur(w.CPU / time.Duration(w.Requests))
		}
		p("| %d | %s | %s | %s | %s | %s | %s | %s |", w.Index, fmtDur(w.Served), fmtCount(w.Requests),
			fmtCount(int(float64(len(w.Saves))/w.Served.Seconds())), cpu, fmtCount(w.UsersSeen), fmtCount(w.NewConversations), mem(w.Start))
		for _, at := range c.rssAt {
			if m, ok := w.markAt(at); ok {
				p(" %s |", mem(m))
			} else {
				p(" not reached |")
			}
		}
		p(" %s | %s |", mem(w.End), fmtBytes(float64(w.PeakRSS)))
		if len(c.rssAt) >= 2 {
			if growth[i] > 0 {
				p(" %.2f× |", growth[i])
			} else {
				p(" – |")
			}
		}
		p("\n")
	}
	p("\n")

	p("%s\n\n", headScaleTargets)
	if !c.isIssueScale() {
		p("This run is smaller than the issue's (1,000 users × 10 conversations × 100 messages, 4 processes): its figures do not meet or miss the targets at their scale.\n\n")
	}
	p("| target | this run | met |\n|---|---|:---:|\n")
	p("| load p95 ≤ %s with %d processes over %s messages | p95 %s after the user's first load (every load: %s; cold first loads: %s) | %s |\n",
		fmtDur(scaleLoadTarget), c.procs, fmtCount(messages), fmtDur(t.warm.p95), fmtDur(t.loads.p95), fmtDur(t.cold.p95), mark(t.warm.p95 <= scaleLoadTarget))
	switch {
	case grown:
		p("| per-process memory flat from %s to %s users seen (resident set ×%.1f at most) | RSS ×%.2f in the worst process | %s |\n",
			fmtCount(c.rssAt[0]), fmtCount(c.rssAt[len(c.rssAt)-1]), scaleFlatRatio, worst, mark(worst <= scaleFlatRatio))
	case len(c.rssAt) >= 2:
		p("| per-process memory flat from %s to %s users seen | not every process reached both marks within -scale-max-duration (%v) | – |\n",
			fmtCount(c.rssAt[0]), fmtCount(c.rssAt[len(c.rssAt)-1]), c.maxDur)
	default:
		p("| per-process memory flat from 100 to 1,000 users seen | one memory mark in this run (-scale-rss-at) | – |\n")
	}
	p("\n")
	return b.String()
}

// mark renders a target's verdict.
func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}
