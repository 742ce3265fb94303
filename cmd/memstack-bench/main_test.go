package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/internal/testsvc"
)

// TestMain runs the test binary as a serving process of the scale
// benchmark when TestScale's run re-executes it (os.Args[1] is
// scaleWorkerFlag), as the command's binary runs itself; otherwise it runs
// the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == scaleWorkerFlag {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRunQuick runs the command as `memstack-bench -quick -out DIR` and
// checks what it writes: the markdown has every section, table and row,
// and the SVG is a well-formed SVG document holding every series.
func TestRunQuick(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bench")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	require.NoError(t, run(context.Background(), []string{"-quick", "-out", dir}, &stdout, &stderr), "stderr:\n%s", stderr.String())
	t.Logf("quick run took %v", time.Since(start))

	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	require.NoError(t, err)
	assert.Equal(t, string(md), stdout.String(), "the markdown printed is the markdown written")
	checkMarkdown(t, string(md), []int{100, 1000})

	svg, err := os.ReadFile(filepath.Join(dir, "turn-cost.svg"))
	require.NoError(t, err)
	checkSVG(t, svg)

	assert.Contains(t, stderr.String(), "turn cost: memstack Buffer", "progress goes to stderr")
}

func checkMarkdown(t *testing.T, md string, sizes []int) {
	t.Helper()
	assert.True(t, strings.HasPrefix(md, headTitle+"\n"), "the report starts with its title")
	for _, h := range []string{headMachine, headTurns, headTurnTime, headTurnCPU, headTurnAllocs, headTurnSpread, headSummary, headFanout, headStores} {
		assert.Contains(t, md, "\n"+h+"\n", "section %q", h)
	}
	assert.Contains(t, md, "**This is a `-quick` run**")
	assert.Contains(t, md, "![Cost of one turn against history length, log-log](turn-cost.svg)")
	for _, row := range []string{"| CPU |", "| logical CPUs (GOMAXPROCS) |", "| Go | go", "| date |", "at start |", "at end |"} {
		assert.Contains(t, md, row, "machine row %q", row)
	}

	// The four turn tables: a header with every size, and one row per
	// memory with one cell per size.
	header := "| memory | library |"
	for _, n := range sizes {
		header += " " + fmtCount(n) + " |"
	}
	assert.Equal(t, 4, strings.Count(md, header+"\n")+strings.Count(md, header+" "), "four turn tables with columns %v", sizes)
	for _, s := range subjects() {
		prefix := "| " + s.name + " | " + s.library + " |"
		lines := linesWithPrefix(md, prefix)
		require.Len(t, lines, 4, "memory %s has a row in each turn table", s.label())
		for _, line := range lines {
			// | name | library | one cell per size [| ratio] |
			cells := strings.Count(line, "|") - 1
			assert.GreaterOrEqual(t, cells, 2+len(sizes), "row %q", line)
			assert.NotContains(t, line, "?", "row %q has an unformattable number", line)
		}
		assert.Regexp(t, `\d+(\.\d+)? (ns|µs|ms|s) \|`, lines[0], "time row of %s", s.label())
		assert.Regexp(t, `\d+(\.\d+)? (ns|µs|ms|s) \|`, lines[1], "CPU time row of %s", s.label())
		assert.Contains(t, lines[2], "allocs, ", "allocation row of %s", s.label())
		assert.Contains(t, lines[3], " turns", "spread row of %s", s.label())
	}

	for _, name := range []string{stratCount, stratTokens, stratBufferLC, stratBackground, stratPaced} {
		assert.Len(t, linesWithPrefix(md, "| "+name+" |"), 1, "summary row %q", name)
	}
	for _, name := range []string{fanOne, fanCombined, fanSequential} {
		assert.Len(t, linesWithPrefix(md, "| "+name+" |"), 1, "combined row %q", name)
	}
	assert.Contains(t, md, "\n"+headWindows+"\n")
	assert.Contains(t, md, "| backend | memory | 100 p50 | 100 p95 | 1,000 p50 | 1,000 p95 | 1,000 ÷ 100 |")
	assert.Contains(t, md, "| backend | minimal saves/s | minimal load p50 | store saves/s ÷ minimal | store load p50 ÷ minimal |")
	for _, name := range []string{backendInMemory, backendSQLite, backendSQLiteRI} {
		rows := linesWithPrefix(md, "| "+name+" |")
		if name == backendSQLite {
			// | backend | minimal saves/s | minimal load p50 | ratio | ratio |: after the throughput row
			require.Greater(t, len(rows), 1)
			assert.Regexp(t, `^\| [^|]+ \| [\d,]+ \| [\d.]+ (ns|µs|ms|s) \| \d+\.\d\d× \| \d+\.\d\d× \|$`, rows[1],
				"%s has a row of the driver's minimal commands: saves/s, load p50 and the two ratios", name)
			rows = slices.Delete(rows, 1, 2)
		}
		require.Len(t, rows, 3+len(windowMemories), "store rows %q: throughput, one size (1,000 messages in quick mode), one window row per memory, one user-recall row", name)
		assert.NotContains(t, rows[0], "not run", "%s runs in quick mode", name)
		assert.Regexp(t, `^\| [^|]+ \| [\d,]+ \|`, rows[0], "%s has a saves/s figure", name)
		assert.Regexp(t, `^\| [^|]+ \| 1,000 \|( [\d.]+ (ns|µs|ms|s) \|){5}$`, rows[1], "%s has a size row with five durations", name)
		for i, wm := range windowMemories {
			assert.Regexp(t, `^\| [^|]+ \| `+regexp.QuoteMeta(wm.name)+` \|( [\d.]+ (ns|µs|ms|s) \|){4} \d+\.\d\d× \|$`, rows[2+i],
				"%s has a window row for %s: four durations and a ratio", name, wm.name)
		}
		// | backend | conversations | cold p50 | cold p95 | p50 | p95 | save user | save conversation | ratio |
		assert.Regexp(t, `^\| [^|]+ \| 10 \|( [\d.]+ (ns|µs|ms|s) \|){6} \d+\.\d\d× \|$`, rows[2+len(windowMemories)],
			"%s has a user-recall row: a user with 10 conversations in quick mode, six durations and a ratio", name)
	}
	assert.Contains(t, md, "\n"+headUsers+"\n")
	assert.Contains(t, md, "| backend | messages | Stat | Append | RemovePrefix | Stat after | Append after |")
	for _, name := range []string{backendRedis, backendPostgres, backendPostgresRI} {
		rows := linesWithPrefix(md, "| "+name+" |")
		require.Len(t, rows, 1, "store row %q", name)
		assert.Contains(t, rows[0], "not run: -quick starts no servers", "%s is not started in quick mode", name)
	}
}

func linesWithPrefix(s, prefix string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return out
}

// checkSVG parses svg as XML and checks the root, the axis labels, every
// series name in the legend and the dashed langchaingo lines.
func checkSVG(t *testing.T, svg []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var root string
	var texts []string
	var inText bool
	dashed := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the SVG is well-formed XML")
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
				assert.Equal(t, "http://www.w3.org/2000/svg", tok.Name.Space, "SVG namespace")
			}
			inText = tok.Name.Local == "text"
			if inText {
				texts = append(texts, "")
			}
			if tok.Name.Local == "path" {
				for _, a := range tok.Attr {
					if a.Name.Local == "style" && strings.Contains(a.Value, "stroke-dasharray") {
						dashed++
					}
				}
			}
		case xml.CharData:
			if inText {
				texts[len(texts)-1] += string(tok)
			}
		case xml.EndElement:
			inText = false
		}
	}
	require.Equal(t, "svg", root, "the root element")
	for _, want := range []string{
		"Cost of one turn (SaveContext + LoadMemoryVariables) vs history length",
		"history length (messages, log scale)",
		plotCPULabel,
		"100", "1,000",
	} {
		assert.Contains(t, texts, want, "text %q", want)
	}
	langchaingo := 0
	for _, s := range subjects() {
		assert.Contains(t, texts, s.label(), "series %q in the legend", s.label())
		if s.library == libLangchaingo {
			langchaingo++
		}
	}
	// Each langchaingo series is dashed twice: its line and its legend
	// thumbnail.
	assert.Equal(t, 2*langchaingo, dashed, "dashed paths")
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{name: "defaults", check: func(t *testing.T, c config) {
			assert.Equal(t, "docs/bench", c.out)
			assert.Equal(t, []int{100, 1_000, 10_000, 100_000}, c.sizes)
			assert.True(t, c.startServers, "a full run starts the servers that are installed")
			assert.False(t, c.requireServers)
			assert.Equal(t, 5, c.reps)
		}},
		{name: "quick", args: []string{"-quick"}, check: func(t *testing.T, c config) {
			assert.Equal(t, []int{100, 1_000}, c.sizes)
			assert.False(t, c.startServers, "-quick starts no servers")
		}},
		{name: "quick with stores", args: []string{"-quick", "-stores"}, check: func(t *testing.T, c config) {
			assert.True(t, c.startServers)
			assert.True(t, c.requireServers)
		}},
		{name: "quick with max", args: []string{"-quick", "-max", "10000"}, check: func(t *testing.T, c config) {
			assert.Equal(t, []int{100, 1_000, 10_000}, c.sizes)
		}},
		{name: "max not a power of ten", args: []string{"-max", "2501"}, check: func(t *testing.T, c config) {
			assert.Equal(t, []int{100, 1_000, 2_500}, c.sizes)
		}},
		{name: "scale defaults", args: []string{"-scale"}, check: func(t *testing.T, c config) {
			assert.True(t, c.scale.on)
			assert.Equal(t, scaleConfig{on: true, users: 1000, convs: 10, msgs: 100, procs: 4, clients: 1,
				duration: 90 * time.Second, maxDur: 20 * time.Minute, rssAt: []int{100, 1000}}, c.scale, "issue 20's figures")
			assert.True(t, c.scale.isIssueScale())
		}},
		{name: "scale small", args: []string{"-scale", "-scale-users", "50", "-scale-msgs", "20", "-scale-rss-at", "10, 5,10,500", "-scale-out", "s.md"},
			check: func(t *testing.T, c config) {
				assert.Equal(t, 50, c.scale.users)
				assert.Equal(t, []int{5, 10}, c.scale.rssAt, "sorted, deduplicated, marks above the users dropped")
				assert.Equal(t, "s.md", c.scale.out)
				assert.False(t, c.scale.isIssueScale())
			}},
		{name: "scale marks all above the users", args: []string{"-scale", "-scale-users", "50"}, check: func(t *testing.T, c config) {
			assert.Equal(t, []int{50}, c.scale.rssAt, "the default marks are above 50 users: the mark is every user")
		}},
		{name: "scale flag without scale", args: []string{"-scale-users", "5"}, wantErr: "-scale-users: the -scale-* flags need -scale"},
		{name: "scale with quick", args: []string{"-scale", "-quick"}, wantErr: "-quick: -scale runs the scale benchmark alone"},
		{name: "scale odd messages", args: []string{"-scale", "-scale-msgs", "7"}, wantErr: "-scale-msgs 7"},
		{name: "scale no processes", args: []string{"-scale", "-scale-procs", "0"}, wantErr: "-scale-procs 0"},
		{name: "scale bad marks", args: []string{"-scale", "-scale-rss-at", "10,x"}, wantErr: "-scale-rss-at"},
		{name: "scale no duration", args: []string{"-scale", "-scale-duration", "0s"}, wantErr: "-scale-duration"},
		{name: "scale cap below duration", args: []string{"-scale", "-scale-duration", "2m", "-scale-max-duration", "1m"}, wantErr: "-scale-max-duration 1m0s"},
		{name: "max too small", args: []string{"-max", "99"}, wantErr: "-max 99"},
		{name: "empty out", args: []string{"-out", " "}, wantErr: "-out"},
		{name: "stray argument", args: []string{"now"}, wantErr: `unexpected argument "now"`},
		{name: "unknown flag", args: []string{"-fast"}, wantErr: "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
	_, err := parseFlags([]string{"-h"}, io.Discard)
	assert.ErrorIs(t, err, flag.ErrHelp)
}

func TestFormatting(t *testing.T) {
	tests := []struct{ got, want string }{
		{fmtNs(812), "812 ns"},
		{fmtNs(2_314), "2.31 µs"},
		{fmtNs(14_230_000), "14.2 ms"},
		{fmtNs(1_200_000_000), "1.20 s"},
		{fmtNs(-1), "?"},
		{fmtCount(0), "0"},
		{fmtCount(999), "999"},
		{fmtCount(1000), "1,000"},
		{fmtCount(100_000), "100,000"},
		{fmtCount(-12345), "-12,345"},
		{fmtBytes(512), "512 B"},
		{fmtBytes(3 * 1024), "3.00 KiB"},
		{fmtBytes(10.5 * (1 << 20)), "10.5 MiB"},
		{fmtAllocs(17.55), "17.6"},
		{fmtAllocs(3018.4), "3,018"},
		{fmtPow(1e3), "1 µs"},
		{fmtPow(1e8), "100 ms"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.got)
	}
}

// TestSummaryStrategies checks the claims the summary table makes, on 200
// turns: count mode makes at most one call per batch of 6 messages, about a
// third of LangChain's summary-buffer strategy, which calls on every turn
// once full.
func TestSummaryStrategies(t *testing.T) {
	ctx := context.Background()
	const turns = 200
	count, err := runVirtual(ctx, stratCount, turns, 200*time.Millisecond, summaryMemory())
	require.NoError(t, err)
	lc, err := runVirtual(ctx, stratBufferLC, turns, 200*time.Millisecond, summaryBufferStrategy(15))
	require.NoError(t, err)

	assert.LessOrEqual(t, count.calls, int64((2*turns+5)/6), "count mode: at most ⌈messages/batch⌉ calls")
	assert.Greater(t, count.calls, int64(turns/4), "count mode summarizes as the conversation grows")
	assert.Equal(t, int64(turns-7), lc.calls, "summary-buffer: one call per turn from the 8th turn on")
	assert.Equal(t, 200*time.Millisecond, lc.p50.Round(10*time.Millisecond), "summary-buffer: the typical save waits for the model")
	assert.Less(t, count.p50, 100*time.Millisecond, "count mode: the typical save does not wait for the model")
	assert.Equal(t, time.Duration(count.calls)*200*time.Millisecond, count.waited)
}

// TestFanoutRunsChildrenConcurrently checks the CombinedMemory table's
// claim with 5 ms children.
func TestFanoutRunsChildrenConcurrently(t *testing.T) {
	cfg := config{fanoutOps: 5, childLatency: 5 * time.Millisecond}
	rows, err := runFanout(context.Background(), cfg, io.Discard)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	one, comb, seq := rows[0], rows[1], rows[2]
	assert.GreaterOrEqual(t, one.saveP50, 5*time.Millisecond)
	assert.GreaterOrEqual(t, seq.saveP50, 15*time.Millisecond, "one after another: three waits")
	assert.Less(t, comb.saveP50, seq.saveP50*2/3, "combined saves run the children concurrently")
	assert.Less(t, comb.loadP50, seq.loadP50*2/3, "combined loads run the children concurrently")
}

func TestSizesUpTo(t *testing.T) {
	assert.Equal(t, []int{100}, sizesUpTo(100))
	assert.Equal(t, []int{100, 150}, sizesUpTo(151))
	assert.Equal(t, []int{100, 1000, 10000, 100000}, sizesUpTo(100000))
	assert.Equal(t, []int{100, 1000, 10000, 100000, 1000000}, sizesUpTo(1000000))
}

// TestStoresWithServers runs the store section as a full run does: every
// backend, Redis and PostgreSQL on throwaway servers started through
// testsvc and stopped afterwards. A server that is not installed is
// reported as skipped, except under CI, where it is an error.
func TestStoresWithServers(t *testing.T) {
	cfg := config{startServers: true, requireServers: testsvc.InCI(), storeConvs: 4, storeTurns: 5}
	rows, err := runStores(context.Background(), cfg, io.Discard)
	require.NoError(t, err)
	require.Len(t, rows, len(storeBackends()))
	for _, r := range rows {
		if r.skipped != "" {
			assert.Contains(t, []string{backendRedis, backendPostgres, backendPostgresRI}, r.backend, "only server backends may be skipped")
			assert.Equal(t, "not run: the server is not installed", r.skipped)
			continue
		}
		assert.Equal(t, 20, r.res.Saves, r.backend)
		assert.Positive(t, r.res.SavesPerSec, r.backend)
		assert.Positive(t, r.res.LoadP99, r.backend)
	}
}

// TestScale runs the scale benchmark as `memstack-bench -scale` at a tiny
// size — 5 users × 2 conversations × 20 messages, 2 serving processes
// (this test binary re-executed, see TestMain) for 2 seconds — against a
// real PostgreSQL, and checks the markdown section it prints and writes:
// every table and figure is there and sane. PostgreSQL missing is a skip,
// a failure under CI.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and two processes")
	}
	out := filepath.Join(t.TempDir(), "scale.md")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-scale", "-scale-users", "5", "-scale-convs", "2", "-scale-msgs", "20",
		"-scale-procs", "2", "-scale-duration", "2s", "-scale-rss-at", "2,5", "-scale-out", out}, &stdout, &stderr)
	if errors.Is(err, testsvc.ErrPostgresNotInstalled) {
		testsvc.Missing(t, "%v", err)
	}
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	md := stdout.String()
	written, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, md, string(written), "the section printed is the section written")
	t.Logf("stderr:\n%s", stderr.String())

	assert.True(t, strings.HasPrefix(md, headScale+"\n"), "the section starts with its heading")
	for _, h := range []string{headScalePop, headScaleLatency, headScaleSize, headScaleMemory, headScaleTargets} {
		assert.Contains(t, md, "\n"+h+"\n", "section %q", h)
	}
	assert.Contains(t, md, "**200 messages**")
	assert.Contains(t, md, "This run is smaller than the issue's")

	// Population: | 5 | 2 | 20 | 200 | calls | took | messages/s | backfill | vacuum |
	pop := linesWithPrefix(md, "| 5 | 2 | 20 | 200 |")
	require.Len(t, pop, 1, "the population row")
	assert.Regexp(t, `^\| 5 \| 2 \| 20 \| 200 \| 20 \| `+durRE+` \| [\d,]+ \| `+durRE+` \| `+durRE+` \|$`, pop[0],
		"20 AppendBatches calls (each a turn of the 5 users' conversation), a time, a rate, the recall index's backfill (on) and the vacuum's time")

	// Latencies: count, p50, p95, p99, max per row; p95 ≥ p50 > 0.
	counts := map[string]int{}
	for _, name := range []string{scaleRowWarm, scaleRowCold, scaleRowLoads, scaleRowSave} {
		rows := linesWithPrefix(md, "| "+name+" |")
		require.Len(t, rows, 1, "latency row %q", name)
		m := regexp.MustCompile(`^\| [^|]+ \| ([\d,]+) \| (` + durRE + `) \| (` + durRE + `) \| (` + durRE + `) \| (` + durRE + `) \|$`).FindStringSubmatch(rows[0])
		require.NotNil(t, m, "row %q: a count and four durations", rows[0])
		counts[name] = parseCount(t, m[1])
		p50, p95, p99, hi := parseDur(t, m[2]), parseDur(t, m[3]), parseDur(t, m[4]), parseDur(t, m[5])
		assert.Positive(t, p50, name)
		assert.GreaterOrEqual(t, p95, p50, name)
		assert.GreaterOrEqual(t, p99, p95, name)
		assert.GreaterOrEqual(t, hi, p99, name)
	}
	assert.Equal(t, 10, counts[scaleRowCold], "one cold load per user per process")
	assert.Positive(t, counts[scaleRowWarm], "two seconds of serving make warm loads")
	assert.Equal(t, counts[scaleRowWarm]+counts[scaleRowCold], counts[scaleRowLoads])
	assert.Equal(t, counts[scaleRowLoads], counts[scaleRowSave], "a save per load")
	m := regexp.MustCompile(`Saves per second, all processes: \*\*([\d,]+)\*\* \(([\d,]+) saves in (` + durRE + `) of serving, a save per request\)\. CPU time per request, .*: \*\*(` + durRE + `)\*\*`).FindStringSubmatch(md)
	require.NotNil(t, m, "the saves-per-second line, with the CPU time per request")
	assert.Positive(t, parseCount(t, m[1]), "saves per second")
	assert.Equal(t, counts[scaleRowSave], parseCount(t, m[2]))
	assert.GreaterOrEqual(t, parseDur(t, m[3]), 2*time.Second, "each process serves for -scale-duration")
	assert.Positive(t, parseDur(t, m[4]), "CPU time per request")

	// Sizes: the database and the tables have a size; the messages table
	// holds the population, then a turn and a journal entry per save.
	for _, prefix := range []string{"| database (`pg_database_size`) |", "| memstack's tables, with their indexes and TOAST |", "| of which indexes |"} {
		rows := linesWithPrefix(md, prefix)
		require.Len(t, rows, 1, prefix)
		assert.Regexp(t, `^`+regexp.QuoteMeta(prefix)+`( [\d.]+ (B|KiB|MiB|GiB) \|){2}$`, rows[0])
	}
	assert.Len(t, linesWithPrefix(md, "| of which the recall index's tables (`memstack_recall%`), with their indexes |"), 1)
	rows := linesWithPrefix(md, "| rows of the messages table (recall journals included) | 200 | ")
	require.Len(t, rows, 1, "the messages table holds the population's 200 messages")
	m = regexp.MustCompile(`\| 200 \| ([\d,]+) \|$`).FindStringSubmatch(rows[0])
	require.NotNil(t, m, rows[0])
	after := parseCount(t, m[1])
	assert.GreaterOrEqual(t, after, 200+2*counts[scaleRowSave], "then a turn per save")
	assert.LessOrEqual(t, after, 200+3*counts[scaleRowSave], "and at most a journal entry with it")

	// Per process: one row each, served at least the duration, every user
	// seen, every mark reached, every RSS and heap figure positive.
	for _, proc := range []string{"1", "2"} {
		rows := linesWithPrefix(md, "| "+proc+" |")
		require.Len(t, rows, 1, "row of process %s", proc)
		cells := strings.Split(strings.Trim(rows[0], "| "), " | ")
		require.Len(t, cells, 13, "process, served, requests, saves/s, CPU per request, users seen, new conversations, ready, two marks, end, peak, ratio: %q", rows[0])
		assert.GreaterOrEqual(t, parseDur(t, cells[1]), 2*time.Second, "served")
		assert.Positive(t, parseCount(t, cells[2]), "requests")
		assert.Positive(t, parseCount(t, cells[3]), "saves/s")
		assert.Positive(t, parseDur(t, cells[4]), "CPU per request")
		assert.Equal(t, "5", cells[5], "process %s has seen every user", proc)
		for _, c := range cells[7:11] {
			mm := regexp.MustCompile(`^([\d.]+ (?:B|KiB|MiB|GiB)) / ([\d.]+ (?:B|KiB|MiB|GiB))$`).FindStringSubmatch(c)
			require.NotNil(t, mm, "cell %q: RSS / heap (a mark not reached would say so)", c)
			assert.Positive(t, parseBytes(t, mm[1]), "RSS in %q", c)
			assert.Positive(t, parseBytes(t, mm[2]), "heap in %q", c)
		}
		assert.Positive(t, parseBytes(t, cells[11]), "peak RSS")
		assert.Regexp(t, `^\d+\.\d\d×$`, cells[12], "RSS growth from 2 to 5 users")
	}
	assert.Contains(t, md, "| process | served | requests | saves/s | CPU per request | users seen | new conversations | ready | at 2 users | at 5 users | end | peak RSS | RSS 5 ÷ 2 |")

	// Targets: both judged.
	assert.Regexp(t, `\| load p95 ≤ 20\.0 ms with 2 processes over 200 messages \| p95 `+durRE+` .* \| (✓|✗) \|`, md)
	assert.Regexp(t, `\| per-process memory flat from 2 to 5 users seen .* \| RSS ×\d+\.\d\d in the worst process \| (✓|✗) \|`, md)
	assert.Contains(t, stderr.String(), "scale: process 2: 5 users seen", "the processes' progress reaches stderr")
}

// durRE matches a duration as fmtDur writes it.
const durRE = `[\d.]+ (?:ns|µs|ms|s)`

// parseDur parses a duration as fmtDur writes it ("3.22 ms").
func parseDur(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(strings.ReplaceAll(s, " ", ""))
	require.NoError(t, err, "duration %q", s)
	return d
}

// parseCount parses a count as fmtCount writes it ("1,234").
func parseCount(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	require.NoError(t, err, "count %q", s)
	return n
}

// parseBytes parses a size as fmtBytes writes it ("10.5 MiB").
func parseBytes(t *testing.T, s string) float64 {
	t.Helper()
	num, unit, ok := strings.Cut(s, " ")
	require.True(t, ok, "size %q", s)
	v, err := strconv.ParseFloat(num, 64)
	require.NoError(t, err, "size %q", s)
	scale := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
	require.Positive(t, scale, "unit of %q", s)
	return v * scale
}

// TestScaleTraffic checks the serving processes' traffic: users drawn at
// random, each user's first request cold and no other, the marks on the
// requests that reach them, and the traffic ending only once the duration
// is over and every user has been seen.
func TestScaleTraffic(t *testing.T) {
	spec := scaleWorkerSpec{Index: 1, Users: 7, Convs: 3, Msgs: 10, Clients: 1, Duration: time.Nanosecond, MaxDur: time.Hour, RSSAt: []int{3, 7}}
	tr := newScaleTraffic(spec, time.Now().Add(-time.Second))
	seen := map[string]bool{}
	var marks []int
	requests := 0
	for {
		r, ok := tr.next()
		if !ok {
			break
		}
		requests++
		require.Less(t, requests, 1000, "the traffic ends once every user is seen")
		assert.Equal(t, !seen[r.id.User], r.cold, "request %d: cold exactly on its user's first", requests)
		seen[r.id.User] = true
		assert.Equal(t, scaleTenant, r.id.Tenant)
		assert.NotEmpty(t, r.question)
		assert.NotEmpty(t, r.answer)
		if r.mark > 0 {
			assert.Len(t, seen, r.mark, "a mark on the request that reaches it")
			marks = append(marks, r.mark)
		}
		_, recorded := tr.finish(r)
		assert.Equal(t, r.mark > 0, recorded)
	}
	assert.Len(t, seen, spec.Users)
	assert.Equal(t, []int{3, 7}, marks)
	require.Len(t, tr.marks, 2)
	assert.Equal(t, 7, tr.marks[1].Users)
	assert.Positive(t, tr.marks[0].Requests)
	assert.Positive(t, tr.marks[0].Heap)

	long := newScaleTraffic(scaleWorkerSpec{Index: 2, Users: 2, Convs: 1, Msgs: 2, Clients: 1, Duration: time.Hour, MaxDur: time.Hour}, time.Now())
	for range 50 {
		r, ok := long.next()
		require.True(t, ok, "the duration is not over")
		assert.Contains(t, []string{"user-00000", "user-00001"}, r.id.User)
	}

	capped := newScaleTraffic(scaleWorkerSpec{Index: 3, Users: 1_000_000, Convs: 1, Msgs: 2, Clients: 1, Duration: time.Nanosecond, MaxDur: time.Millisecond},
		time.Now().Add(-time.Second))
	_, ok := capped.next()
	assert.False(t, ok, "past -scale-max-duration the traffic ends, every user seen or not")
}
