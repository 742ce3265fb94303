package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// config is the parsed command line and the run parameters it implies.
type config struct {
	out    string // output directory
	quick  bool
	max    int  // largest history length, in messages
	stores bool // start Redis and PostgreSQL even in quick mode; fail if missing
	args   []string

	sizes []int // history lengths, in messages (even)

	// Turn-cost loop.
	reps   int           // repetitions per (memory, size); the median is reported
	target time.Duration // timed work per repetition

	// Summary section.
	summaryTurns   int           // turns of the virtual-clock and back-to-back runs
	paceTurns      int           // turns of the paced background run
	pace           time.Duration // gap between turns of the paced run
	modelLatency   time.Duration // the model double's time per call
	fanoutOps      int           // saves and loads per CombinedMemory row
	childLatency   time.Duration // each sleepy child's time per call
	storeTurns     int           // turns per conversation in the store runs
	storeConvs     int           // concurrent conversations in the store runs
	storeSizes     []int         // conversation sizes of storetest.MeasureSize
	storeSamples   int           // timed calls per median in MeasureSize
	windowSizes    []int         // conversation sizes of measureWindows
	windowSamples  int           // timed loads per memory in measureWindows
	userConvs      []int         // conversations per user in measureUserRecall
	startServers   bool          // try Redis and PostgreSQL
	requireServers bool          // a server that cannot start is an error

	scale scaleConfig // -scale: the scale benchmark alone (scale.go)
}

const (
	defaultOut = "docs/bench"
	defaultMax = 100_000
	quickMax   = 1_000
	minSize    = 100
)

// parseFlags parses args into a config. An invalid flag value is an error
// naming the flag.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("memstack-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.out, "out", defaultOut, "directory for results.md and turn-cost.svg (created if missing)")
	fs.BoolVar(&cfg.quick, "quick", false, "small sizes, few repetitions, no servers: seconds instead of minutes")
	fs.IntVar(&cfg.max, "max", defaultMax, "largest history length in messages (sizes are 100, 1,000, ... up to it; default 1,000 with -quick)")
	fs.BoolVar(&cfg.stores, "stores", false, "benchmark Redis and PostgreSQL (throwaway servers on 127.0.0.1); fail if they cannot start. Without it they run when installed, except with -quick")
	rssAt := defineScaleFlags(fs, &cfg.scale)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: go run ./cmd/memstack-bench [-out %s] [-quick] [-max %d] [-stores]\n", defaultOut, defaultMax)
		fmt.Fprintf(fs.Output(), "       go run ./cmd/memstack-bench -scale [-scale-users %d] [-scale-convs %d] [-scale-msgs %d] [-scale-procs %d] [-scale-duration %v] [-scale-out FILE]\n\n",
			defaultScaleUsers, defaultScaleConvs, defaultScaleMsgs, defaultScaleProcs, defaultScaleDuration)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return config{}, fmt.Errorf("unexpected argument %q: the command takes flags only", fs.Arg(0))
	}
	if err := checkScaleFlags(fs, &cfg.scale, *rssAt); err != nil {
		return config{}, err
	}
	maxSet := false
	fs.Visit(func(f *flag.Flag) { maxSet = maxSet || f.Name == "max" })
	if cfg.quick && !maxSet {
		cfg.max = quickMax
	}
	if cfg.max < minSize {
		return config{}, fmt.Errorf("-max %d: the largest history must be at least %d messages", cfg.max, minSize)
	}
	if strings.TrimSpace(cfg.out) == "" {
		return config{}, fmt.Errorf("-out: the output directory must not be empty")
	}
	cfg.args = append([]string(nil), args...)
	cfg.sizes = sizesUpTo(cfg.max)

	cfg.modelLatency = 200 * time.Millisecond
	cfg.childLatency = 5 * time.Millisecond
	cfg.storeConvs = 32
	cfg.pace = 10 * time.Millisecond
	cfg.requireServers = cfg.stores
	cfg.startServers = cfg.stores || !cfg.quick
	if cfg.quick {
		cfg.reps, cfg.target = 3, 5*time.Millisecond
		cfg.summaryTurns, cfg.paceTurns = 100, 30
		cfg.fanoutOps = 10
		cfg.storeTurns = 10
		cfg.storeSizes, cfg.storeSamples = []int{1000}, 20
		cfg.windowSizes, cfg.windowSamples = []int{100, 1000}, 20
		cfg.userConvs = []int{10}
	} else {
		cfg.reps, cfg.target = 5, 200*time.Millisecond
		cfg.summaryTurns, cfg.paceTurns = 1000, 200
		cfg.fanoutOps = 100
		cfg.storeTurns = 100
		cfg.storeSizes, cfg.storeSamples = []int{1000, 100000}, 200
		cfg.windowSizes, cfg.windowSamples = []int{1000, 100000}, 200
		cfg.userConvs = []int{100, 1000}
	}
	return cfg, nil
}

// sizesUpTo returns 100, 1,000, 10,000, ... up to max, and max itself
// (rounded down to an even number) if it is not a power of ten.
func sizesUpTo(max int) []int {
	var sizes []int
	for n := minSize; n <= max; n *= 10 {
		sizes = append(sizes, n)
		if n > max/10 {
			break
		}
	}
	if last := max &^ 1; last > sizes[len(sizes)-1] {
		sizes = append(sizes, last)
	}
	return sizes
}

// writeOutputs writes results.md and turn-cost.svg into dir.
func writeOutputs(dir, md string, svg []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the output directory %s: %w", dir, err)
	}
	for name, data := range map[string][]byte{"results.md": []byte(md), "turn-cost.svg": svg} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return nil
}
