package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// results is everything one run measured.
type results struct {
	cfg     config
	machine machine
	took    time.Duration
	turns   []turnSeries
	summary []summaryRow
	fanout  []fanoutRow
	stores  []storeRow
}

// machine describes where the run happened.
type machine struct {
	cpuModel    string
	cpus        int
	gomaxprocs  int
	goVersion   string
	osArch      string
	date        time.Time
	loadBefore  string // /proc/loadavg's 1, 5 and 15-minute averages
	loadAfter   string
	memoryTotal string
}

// runAll runs every benchmark in turn.
func runAll(ctx context.Context, cfg config, progress io.Writer) (*results, error) {
	start := time.Now()
	res := &results{cfg: cfg, machine: describeMachine(start)}
	fmt.Fprintf(progress, "memstack-bench: %d CPUs, %s, load average %s, sizes %v\n",
		res.machine.cpus, res.machine.goVersion, res.machine.loadBefore, cfg.sizes)

	// langchaingo's token buffer logs a warning through the standard logger
	// on every token count; silence it for the run (see the package doc).
	w, flags := log.Writer(), log.Flags()
	log.SetOutput(io.Discard)
	defer func() {
		log.SetOutput(w)
		log.SetFlags(flags)
	}()

	var err error
	if res.turns, err = runTurnCosts(ctx, cfg, progress); err != nil {
		return nil, err
	}
	if res.summary, err = runSummaries(ctx, cfg, progress); err != nil {
		return nil, err
	}
	if res.fanout, err = runFanout(ctx, cfg, progress); err != nil {
		return nil, err
	}
	if res.stores, err = runStores(ctx, cfg, progress); err != nil {
		return nil, err
	}
	res.machine.loadAfter = loadAverage()
	res.took = time.Since(start)
	fmt.Fprintf(progress, "memstack-bench: done in %v, load average %s\n", res.took.Round(time.Second), res.machine.loadAfter)
	return res, nil
}

func describeMachine(now time.Time) machine {
	return machine{
		cpuModel:    cpuModel(),
		cpus:        runtime.NumCPU(),
		gomaxprocs:  runtime.GOMAXPROCS(0),
		goVersion:   runtime.Version(),
		osArch:      runtime.GOOS + "/" + runtime.GOARCH,
		date:        now.UTC(),
		loadBefore:  loadAverage(),
		memoryTotal: memTotal(),
	}
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "unknown".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// memTotal returns MemTotal of /proc/meminfo in GiB, or "unknown".
func memTotal() string {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseFloat(fields[1], 64); err == nil {
				return fmt.Sprintf("%.0f GiB", kb/(1<<20))
			}
		}
	}
	return "unknown"
}

// loadAverage returns the 1, 5 and 15-minute load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// ---------------------------------------------------------------------------
// Formatting.

// fmtNs formats nanoseconds with three significant digits and a unit.
func fmtNs(ns float64) string {
	switch {
	case math.IsNaN(ns) || ns < 0:
		return "?"
	case ns < 1e3:
		return sig3(ns) + " ns"
	case ns < 1e6:
		return sig3(ns/1e3) + " µs"
	case ns < 1e9:
		return sig3(ns/1e6) + " ms"
	default:
		return sig3(ns/1e9) + " s"
	}
}

func fmtDur(d time.Duration) string { return fmtNs(float64(d)) }

// sig3 formats v (0 < v < 1000) with three significant digits.
func sig3(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "?"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// fmtBytes formats a byte count with a binary unit.
func fmtBytes(b float64) string {
	switch {
	case b < 1024:
		return strconv.FormatFloat(b, 'f', 0, 64) + " B"
	case b < 1<<20:
		return sig3(b/1024) + " KiB"
	case b < 1<<30:
		return sig3(b/(1<<20)) + " MiB"
	default:
		return sig3(b/(1<<30)) + " GiB"
	}
}

// fmtCount writes n with thousands separators: 100000 -> "100,000".
func fmtCount(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + fmtCount(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fmtAllocs formats allocations per turn.
func fmtAllocs(a float64) string {
	if a >= 100 {
		return fmtCount(int(math.Round(a)))
	}
	return strconv.FormatFloat(a, 'f', 1, 64)
}
