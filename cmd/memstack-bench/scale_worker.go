package main

// A serving process of the scale benchmark: this binary run as
// `memstack-bench -scale-worker SPEC` by runScale (a hidden mode, never
// typed by hand). It opens its own pgstore and agent stack, says it is
// ready, waits for the parent's go, serves random users' requests — a
// load with a question, then the save of the turn — and writes its
// report to stdout as one line of JSON.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/pgstore"
)

// scaleWorkerFlag, as the first argument, runs the command as a serving
// process of the scale benchmark; the second argument is its
// scaleWorkerSpec as JSON. It is not among the command's flags.
const scaleWorkerFlag = "-scale-worker"

// scaleNewShare is the share of requests that start a new conversation of
// their user; the others continue one of the user's conversations,
// chosen at random.
const scaleNewShare = 0.1

// scaleMark is a serving process's memory at one moment.
type scaleMark struct {
	Users    int           `json:"users"`    // distinct users served so far
	Requests int           `json:"requests"` // requests completed so far
	Elapsed  time.Duration `json:"elapsed"`  // since the start signal
	RSS      int64         `json:"rss"`      // resident set size (VmRSS), bytes; 0: unknown
	Heap     int64         `json:"heap"`     // Go heap in use (objects and the free space of their spans), bytes
}

// scaleWorkerReport is what a serving process measured.
type scaleWorkerReport struct {
	Index            int             `json:"index"`
	Served           time.Duration   `json:"served"` // from the start signal to the last request's end
	Requests         int             `json:"requests"`
	UsersSeen        int             `json:"users_seen"`
	NewConversations int             `json:"new_conversations"`
	Cold             []time.Duration `json:"cold"`  // the first load of each user in this process
	Warm             []time.Duration `json:"warm"`  // every later load
	Saves            []time.Duration `json:"saves"` // every SaveContext
	CPU              time.Duration   `json:"cpu"`   // process CPU time while serving (every thread); 0: unknown
	Start            scaleMark       `json:"start"` // ready, before the first request
	Marks            []scaleMark     `json:"marks"` // at each of the spec's RSSAt users seen
	End              scaleMark       `json:"end"`
	PeakRSS          int64           `json:"peak_rss"` // VmHWM, bytes; 0: unknown
}

// runScaleWorker is the serving process: args are the spec's JSON after
// scaleWorkerFlag. It writes scaleReadyLine to stdout, waits for
// scaleGoLine on stdin, serves, and writes its report to stdout as one
// line of JSON. Reading EOF on stdin at any time (the parent closed it, or
// died) cancels the run.
func runScaleWorker(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%s takes one argument, its spec as JSON, not %d", scaleWorkerFlag, len(args))
	}
	var spec scaleWorkerSpec
	if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
		return fmt.Errorf("%s: decoding the spec: %w", scaleWorkerFlag, err)
	}
	if spec.Users < 1 || spec.Convs < 1 || spec.Msgs < 2 || spec.Clients < 1 || spec.Duration <= 0 || spec.MaxDur < spec.Duration {
		return fmt.Errorf("%s: invalid spec (users %d, conversations %d, messages %d, clients %d, duration %v, at most %v)",
			scaleWorkerFlag, spec.Users, spec.Convs, spec.Msgs, spec.Clients, spec.Duration, spec.MaxDur)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	s, err := pgstore.Open(ctx, spec.DSN, scaleOptions()...)
	if err != nil {
		return fmt.Errorf("process %d: opening the store: %w", spec.Index, err)
	}
	defer func() { _ = s.Close() }()
	mem, err := agentStack(s)
	if err != nil {
		return fmt.Errorf("process %d: building the memory stack: %w", spec.Index, err)
	}
	defer closeMemory(mem)

	if _, err := fmt.Fprintln(stdout, scaleReadyLine); err != nil {
		return fmt.Errorf("process %d: %w", spec.Index, err)
	}
	in := bufio.NewReader(stdin)
	line, err := in.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != scaleGoLine {
		return fmt.Errorf("process %d: waiting for %q on stdin: read %q: %w", spec.Index, scaleGoLine, line, errors.Join(err, errors.New("no start signal")))
	}
	go func() {
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()

	// MEMSTACK_SCALE_CPUPROFILE=dir writes each serving process's CPU
	// profile of its serving to dir/cpu-N.pprof (go tool pprof reads it).
	if dir := os.Getenv("MEMSTACK_SCALE_CPUPROFILE"); dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", spec.Index)))
		if err != nil {
			return fmt.Errorf("process %d: %w", spec.Index, err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("process %d: %w", spec.Index, err)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := serveScale(ctx, spec, mem, stderr)
	if err != nil {
		return fmt.Errorf("process %d: %w", spec.Index, err)
	}
	if err := json.NewEncoder(stdout).Encode(rep); err != nil {
		return fmt.Errorf("process %d: writing the report: %w", spec.Index, err)
	}
	return nil
}

// scaleRequest is one request a serving process makes: a load in the
// conversation id with question, then the save of question and answer.
type scaleRequest struct {
	id       memstack.Identity
	question string
	answer   string
	cold     bool // the first request of its user in this process
	mark     int  // > 0: completing it records the memory at mark users seen
	isNew    bool // a new conversation
}

// scaleTraffic hands out a serving process's requests, each for a user
// drawn uniformly at random (with replacement, as independent visitors
// come): the users a process has seen grow as a real process's do, and a
// user's first request in the process (its cold load) comes among
// others' warm ones.
type scaleTraffic struct {
	spec  scaleWorkerSpec
	start time.Time

	mu       sync.Mutex
	rng      *rand.Rand
	seen     []bool
	nseen    int
	newConvs int
	done     int // requests completed
	marks    []scaleMark
}

// newScaleTraffic returns the traffic of spec's process, seeded by its
// index: runs are repeatable but processes differ.
func newScaleTraffic(spec scaleWorkerSpec, start time.Time) *scaleTraffic {
	return &scaleTraffic{
		spec:  spec,
		start: start,
		rng:   rand.New(rand.NewPCG(uint64(spec.Index), 0x5ca1e)),
		seen:  make([]bool, spec.Users),
	}
}

// next returns the next request, or false once the process has served
// for spec.Duration and has seen every user (so that every memory mark
// is reached: with users drawn at random, seeing all N takes about
// N·ln N requests), or for spec.MaxDur.
func (t *scaleTraffic) next() (scaleRequest, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if el := time.Since(t.start); el >= t.spec.MaxDur || el >= t.spec.Duration && t.nseen == t.spec.Users {
		return scaleRequest{}, false
	}
	u := t.rng.IntN(t.spec.Users)
	var r scaleRequest
	if !t.seen[u] {
		t.seen[u], r.cold = true, true
		t.nseen++
		if slices.Contains(t.spec.RSSAt, t.nseen) {
			r.mark = t.nseen
		}
	}
	conv := scaleConversation(t.rng.IntN(t.spec.Convs))
	if t.rng.Float64() < scaleNewShare {
		t.newConvs++
		conv = fmt.Sprintf("p%d-new-%d", t.spec.Index, t.newConvs)
		r.isNew = true
	}
	r.id = memstack.Identity{Tenant: scaleTenant, User: scaleUser(u), Conversation: conv}
	// The question is one the user asked before, in any of their
	// conversations: what Recall is there to find.
	sc := scaleConfig{convs: t.spec.Convs, msgs: t.spec.Msgs}
	r.question = humanText(scaleTurn(sc, u, t.rng.IntN(t.spec.Convs), t.rng.IntN(t.spec.Msgs/2)))
	r.answer = aiText(1_000_000_000 + t.rng.IntN(1_000_000_000))
	return r, true
}

// finish counts r as completed and, if r completes a memory mark, records
// the process's memory now and returns it.
func (t *scaleTraffic) finish(r scaleRequest) (scaleMark, bool) {
	t.mu.Lock()
	t.done++
	done := t.done
	t.mu.Unlock()
	if r.mark == 0 {
		return scaleMark{}, false
	}
	m := readMemory(r.mark, done, time.Since(t.start))
	t.mu.Lock()
	t.marks = append(t.marks, m)
	t.mu.Unlock()
	return m, true
}

// scaleLatencies is what one client goroutine timed.
type scaleLatencies struct {
	cold, warm, saves []time.Duration
	last              time.Time // end of its last request
}

// serveScale serves spec.Clients concurrent request loops through mem
// until the traffic ends, and returns the process's report. Progress
// (each memory mark, and every scaleProgressEvery) goes to progress.
func serveScale(ctx context.Context, spec scaleWorkerSpec, mem schema.Memory, progress io.Writer) (scaleWorkerReport, error) {
	rep := scaleWorkerReport{Index: spec.Index, Start: readMemory(0, 0, 0)}
	cpu0, cpuOK := processCPU()
	start := time.Now()
	traffic := newScaleTraffic(spec, start)
	lat := make([]scaleLatencies, spec.Clients)
	errs := make([]error, spec.Clients)
	var wg sync.WaitGroup
	for i := range spec.Clients {
		wg.Go(func() { errs[i] = serveClient(ctx, traffic, mem, &lat[i], progress) })
	}
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	ticker.Go(func() { traffic.progress(stop, progress) })
	wg.Wait()
	close(stop)
	ticker.Wait()
	if err := errors.Join(errs...); err != nil {
		return scaleWorkerReport{}, err
	}
	if cpu1, ok := processCPU(); ok && cpuOK {
		rep.CPU = cpu1 - cpu0
	}
	rep.UsersSeen, rep.NewConversations, rep.Requests, rep.Marks = traffic.nseen, traffic.newConvs, traffic.done, traffic.marks
	var last time.Time
	for _, l := range lat {
		rep.Cold = append(rep.Cold, l.cold...)
		rep.Warm = append(rep.Warm, l.warm...)
		rep.Saves = append(rep.Saves, l.saves...)
		if l.last.After(last) {
			last = l.last
		}
	}
	rep.Served = last.Sub(start)
	slices.SortFunc(rep.Marks, func(a, b scaleMark) int { return a.Users - b.Users })
	rep.End = readMemory(rep.UsersSeen, rep.Requests, time.Since(start))
	rep.PeakRSS, _ = procStatus("VmHWM:")
	return rep, nil
}

// scaleProgressEvery is how often a serving process reports its progress.
const scaleProgressEvery = 30 * time.Second

// progress writes the process's requests, users seen and resident set to
// w every scaleProgressEvery until stop is closed.
func (t *scaleTraffic) progress(stop <-chan struct{}, w io.Writer) {
	tick := time.NewTicker(scaleProgressEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			t.mu.Lock()
			done, seen := t.done, t.nseen
			t.mu.Unlock()
			fmt.Fprintf(w, "scale: process %d: %s requests, %s users seen after %v: RSS %s\n", t.spec.Index,
				fmtCount(done), fmtCount(seen), time.Since(t.start).Round(time.Second), fmtBytes(float64(rssNow())))
		}
	}
}

// serveClient makes requests from traffic until it ends: a load in the
// request's conversation with its question, then the save of the turn, as
// an agent's chain does around its model call. It times both into lat.
func serveClient(ctx context.Context, traffic *scaleTraffic, mem schema.Memory, lat *scaleLatencies, progress io.Writer) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, ok := traffic.next()
		if !ok {
			return nil
		}
		here := memstack.WithIdentity(ctx, r.id)
		t0 := time.Now()
		if _, err := mem.LoadMemoryVariables(here, map[string]any{"input": r.question}); err != nil {
			return fmt.Errorf("loading for %s: %w", r.id.Key(), err)
		}
		t1 := time.Now()
		if err := mem.SaveContext(here, map[string]any{"input": r.question}, map[string]any{"output": r.answer}); err != nil {
			return fmt.Errorf("saving for %s: %w", r.id.Key(), err)
		}
		t2 := time.Now()
		if r.cold {
			lat.cold = append(lat.cold, t1.Sub(t0))
		} else {
			lat.warm = append(lat.warm, t1.Sub(t0))
		}
		lat.saves = append(lat.saves, t2.Sub(t1))
		lat.last = t2
		if m, ok := traffic.finish(r); ok {
			fmt.Fprintf(progress, "scale: process %d: %s users seen after %s requests, %v: RSS %s, Go heap %s\n", traffic.spec.Index,
				fmtCount(m.Users), fmtCount(m.Requests), m.Elapsed.Round(time.Millisecond), fmtBytes(float64(m.RSS)), fmtBytes(float64(m.Heap)))
		}
	}
}

// readMemory returns the process's memory now, labelled with users seen,
// requests done and the time elapsed. It reads the real resident set
// (no garbage collection first).
func readMemory(users, requests int, elapsed time.Duration) scaleMark {
	return scaleMark{Users: users, Requests: requests, Elapsed: elapsed, RSS: rssNow(), Heap: heapInUse()}
}

// rssNow returns the process's resident set size (VmRSS) in bytes, or 0
// where /proc/self/status cannot tell.
func rssNow() int64 {
	v, _ := procStatus("VmRSS:")
	return v
}

// procStatus returns the field of /proc/self/status named key (a size in
// kB, such as "VmRSS:") in bytes, and whether it was there.
func procStatus(key string) (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == key {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}

// heapMetrics are the runtime/metrics samples whose sum is the Go heap in
// use (runtime.MemStats.HeapInuse), read without stopping the world.
var heapMetrics = []string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}

// heapInUse returns the bytes of the Go heap's spans in use.
func heapInUse() int64 {
	samples := make([]metrics.Sample, len(heapMetrics))
	for i, name := range heapMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples)
	var n int64
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			n += int64(s.Value.Uint64())
		}
	}
	return n
}
