package main

// The scale benchmark (issue 20, `-scale`): one PostgreSQL holding many
// users' conversations, populated through pgstore's public API, and
// several processes — this binary re-executed as workers
// (scale_worker.go) — serving random users' loads and saves against it at
// once, as the processes of an agent service would. The parent starts the
// server, populates it, starts the workers, aggregates what they report
// and renders the markdown section (scale_report.go).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/pgstore"
)

// scaleConfig is the scale benchmark's part of the command line.
type scaleConfig struct {
	on       bool          // -scale: run the scale benchmark alone
	users    int           // users in the database
	convs    int           // conversations per user
	msgs     int           // messages per conversation (even: turns of two)
	procs    int           // serving processes
	clients  int           // concurrent requests per process
	duration time.Duration // how long each process serves, at least
	maxDur   time.Duration // how long each process serves at most
	rssAt    []int         // distinct users seen at which a process records its memory
	out      string        // file the markdown section is written to ("": none)
}

// The defaults are issue 20's figures: 1,000 users × 10 conversations ×
// 100 messages, 4 processes.
const (
	defaultScaleUsers    = 1000
	defaultScaleConvs    = 10
	defaultScaleMsgs     = 100
	defaultScaleProcs    = 4
	defaultScaleClients  = 1
	defaultScaleDuration = 90 * time.Second
	defaultScaleMaxDur   = 20 * time.Minute
	defaultScaleRSSAt    = "100,1000"
)

// scaleTenant is the Tenant of every identity the benchmark writes.
const scaleTenant = "scale"

// scaleUser and scaleConversation name user u and its conversation c.
func scaleUser(u int) string         { return fmt.Sprintf("user-%05d", u) }
func scaleConversation(c int) string { return fmt.Sprintf("conv-%03d", c) }

// scaleStoreOptions are the pgstore options of every store the scale
// benchmark opens: the one that populates the database and each serving
// process's. This list is the one place they are set, so the population
// writes exactly what the workers read; to have PostgreSQL keep
// memories.Recall's index (pgstore.WithRecallIndex), add
// {"pgstore.WithRecallIndex()", pgstore.WithRecallIndex()} to it. Each
// entry names its option as the report prints it.
var scaleStoreOptions = []struct {
	name string
	opt  pgstore.Option
}{{"pgstore.WithRecallIndex()", pgstore.WithRecallIndex()}}

// scaleOptions returns the options of scaleStoreOptions.
func scaleOptions() []pgstore.Option {
	opts := make([]pgstore.Option, len(scaleStoreOptions))
	for i, o := range scaleStoreOptions {
		opts[i] = o.opt
	}
	return opts
}

// scaleOptionsText names the options of scaleStoreOptions for the report.
func scaleOptionsText() string {
	if len(scaleStoreOptions) == 0 {
		return "none (pgstore's defaults: no recall index in the database)"
	}
	names := make([]string, len(scaleStoreOptions))
	for i, o := range scaleStoreOptions {
		names[i] = "`" + o.name + "`"
	}
	return strings.Join(names, ", ")
}

// defineScaleFlags defines the -scale flags on fs, into c; the returned
// string is -scale-rss-at's value, which checkScaleFlags parses.
func defineScaleFlags(fs *flag.FlagSet, c *scaleConfig) *string {
	fs.BoolVar(&c.on, "scale", false, "run the scale benchmark alone: a throwaway PostgreSQL populated with -scale-users × -scale-convs × -scale-msgs messages, served by -scale-procs processes at once (prints a markdown section; see -scale-out)")
	fs.IntVar(&c.users, "scale-users", defaultScaleUsers, "scale: users in the database")
	fs.IntVar(&c.convs, "scale-convs", defaultScaleConvs, "scale: conversations per user")
	fs.IntVar(&c.msgs, "scale-msgs", defaultScaleMsgs, "scale: messages per conversation (even: human/AI turns)")
	fs.IntVar(&c.procs, "scale-procs", defaultScaleProcs, "scale: serving processes, each with its own store and memory stack")
	fs.IntVar(&c.clients, "scale-clients", defaultScaleClients, "scale: concurrent requests per process")
	fs.DurationVar(&c.duration, "scale-duration", defaultScaleDuration, "scale: how long each process serves (longer until it has seen every user, so that every -scale-rss-at mark is reached)")
	fs.DurationVar(&c.maxDur, "scale-max-duration", defaultScaleMaxDur, "scale: how long each process serves at most, whether it has seen every user or not (a mark not reached is reported as such)")
	fs.StringVar(&c.out, "scale-out", "", "scale: also write the markdown section to this file")
	return fs.String("scale-rss-at", defaultScaleRSSAt, "scale: distinct users seen at which each process records its resident memory (comma-separated; marks above -scale-users are dropped)")
}

// checkScaleFlags checks the -scale flags fs parsed into c and parses
// rssAt into c.rssAt. Without -scale no other -scale-* flag may be set;
// with it, none of the other benchmarks' flags.
func checkScaleFlags(fs *flag.FlagSet, c *scaleConfig, rssAt string) error {
	var scaleSet, otherSet []string
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "scale":
		case strings.HasPrefix(f.Name, "scale-"):
			scaleSet = append(scaleSet, "-"+f.Name)
		default:
			otherSet = append(otherSet, "-"+f.Name)
		}
	})
	if !c.on {
		if len(scaleSet) > 0 {
			return fmt.Errorf("%s: the -scale-* flags need -scale", strings.Join(scaleSet, ", "))
		}
		return nil
	}
	if len(otherSet) > 0 {
		return fmt.Errorf("%s: -scale runs the scale benchmark alone, which takes only -scale-* flags", strings.Join(otherSet, ", "))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"-scale-users", c.users}, {"-scale-convs", c.convs}, {"-scale-procs", c.procs}, {"-scale-clients", c.clients}} {
		if f.v < 1 {
			return fmt.Errorf("%s %d: must be at least 1", f.name, f.v)
		}
	}
	if c.msgs < 2 || c.msgs%2 != 0 {
		return fmt.Errorf("-scale-msgs %d: must be even and at least 2 (a conversation is human/AI turns)", c.msgs)
	}
	if c.duration <= 0 {
		return fmt.Errorf("-scale-duration %v: must be positive", c.duration)
	}
	if c.maxDur < c.duration {
		return fmt.Errorf("-scale-max-duration %v: must be at least -scale-duration (%v)", c.maxDur, c.duration)
	}
	c.rssAt = nil
	for _, f := range strings.Split(rssAt, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-scale-rss-at %q: want positive user counts separated by commas", rssAt)
		}
		if n <= c.users && !slices.Contains(c.rssAt, n) {
			c.rssAt = append(c.rssAt, n)
		}
	}
	if len(c.rssAt) == 0 {
		c.rssAt = []int{c.users}
	}
	slices.Sort(c.rssAt)
	return nil
}

// scaleResult is everything one scale run measured.
type scaleResult struct {
	cfg     scaleConfig
	args    []string
	machine machine
	took    time.Duration
	server  string // PostgreSQL's version
	pop     populateResult
	vacuum  time.Duration // VACUUM (ANALYZE) and CHECKPOINT after the population
	indexed time.Duration // the recall index's backfill of the population (0: the index is off)
	before  dbSize        // after the population
	after   dbSize        // after the serving
	workers []scaleWorkerReport
	span    time.Duration // serving: from the start signal to the last report
}

// populateResult is what the population wrote and how long it took.
type populateResult struct {
	messages, conversations int
	calls                   int // AppendBatches calls
	took                    time.Duration
}

// dbSize is the database's size on disk.
type dbSize struct {
	database     int64    // pg_database_size
	tables       int64    // memstack's tables, with their indexes and TOAST
	indexes      int64    // of which indexes
	recall       int64    // the recall index tables (prefix + "recall%"), with their indexes
	recallTables []string // their names; none: the store keeps no recall index
	messages     int64    // rows of the messages table (recall journals included)
}

// runScaleCommand runs the scale benchmark of cfg, writes its markdown
// section to stdout and to cfg.scale.out if set. Progress goes to stderr.
func runScaleCommand(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	res, err := runScale(ctx, cfg.scale, cfg.args, stderr)
	if err != nil {
		return err
	}
	md := renderScale(res)
	if cfg.scale.out != "" {
		if err := os.WriteFile(cfg.scale.out, []byte(md), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", cfg.scale.out, err)
		}
	}
	_, err = io.WriteString(stdout, md)
	return err
}

// runScale starts a throwaway PostgreSQL, populates it, serves it from
// sc.procs worker processes and returns what they measured. Everything it
// starts is stopped before it returns.
func runScale(ctx context.Context, sc scaleConfig, args []string, stderr io.Writer) (*scaleResult, error) {
	progress := &lockedWriter{w: stderr}
	start := time.Now()
	res := &scaleResult{cfg: sc, args: args, machine: describeMachine(start)}
	fmt.Fprintf(progress, "scale: %d CPUs, load average %s; %s users × %s conversations × %s messages, %d processes\n",
		res.machine.cpus, res.machine.loadBefore, fmtCount(sc.users), fmtCount(sc.convs), fmtCount(sc.msgs), sc.procs)

	srv, err := testsvc.StartPostgresServer()
	if err != nil {
		return nil, fmt.Errorf("starting PostgreSQL: %w", err)
	}
	defer srv.Stop()
	dsn := srv.DSN()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer func() { _ = admin.Close(context.WithoutCancel(ctx)) }()
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&res.server); err != nil {
		return nil, fmt.Errorf("reading PostgreSQL's version: %w", err)
	}
	res.server = "PostgreSQL " + strings.Fields(res.server)[0]

	// The population writes with pgstore's defaults (no recall index), as
	// a deployment that had the messages before it turned the index on;
	// then a Store with the serving options opens the tables, and, when
	// they turn the recall index on, its background backfill indexes
	// every conversation, timed until the index is complete.
	s, err := pgstore.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	res.pop, err = populate(ctx, s, sc, progress)
	if cerr := s.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the populating store: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	if res.indexed, err = indexPopulation(ctx, dsn, admin); err != nil {
		return nil, err
	}
	if res.indexed > 0 {
		fmt.Fprintf(progress, "scale: the recall index's backfill indexed the population in %v\n", res.indexed.Round(time.Millisecond))
	}
	t0 := time.Now()
	for _, q := range []string{"VACUUM (ANALYZE)", "CHECKPOINT"} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("%s after the population: %w", q, err)
		}
	}
	res.vacuum = time.Since(t0)
	if res.before, err = measureDBSize(ctx, admin); err != nil {
		return nil, err
	}
	if want := sc.users * sc.convs * sc.msgs; int(res.before.messages) != want {
		return nil, fmt.Errorf("the messages table has %d rows after the population, want %d", res.before.messages, want)
	}
	fmt.Fprintf(progress, "scale: VACUUM (ANALYZE) and CHECKPOINT in %v; database %s, memstack tables %s (indexes %s), recall index %s\n",
		res.vacuum.Round(time.Millisecond), fmtBytes(float64(res.before.database)), fmtBytes(float64(res.before.tables)),
		fmtBytes(float64(res.before.indexes)), fmtBytes(float64(res.before.recall)))

	res.workers, res.span, err = serveWithWorkers(ctx, dsn, sc, progress)
	if err != nil {
		return nil, err
	}
	if res.after, err = measureDBSize(ctx, admin); err != nil {
		return nil, err
	}
	res.machine.loadAfter = loadAverage()
	res.took = time.Since(start)
	fmt.Fprintf(progress, "scale: done in %v, load average %s\n", res.took.Round(time.Second), res.machine.loadAfter)
	return res, nil
}

// indexPopulation opens the tables with the serving options and, if the
// recall index is then on, waits for its backfill to index every
// conversation; it returns how long that took (0 when the index is off).
func indexPopulation(ctx context.Context, dsn string, admin *pgx.Conn) (time.Duration, error) {
	start := time.Now()
	s, err := pgstore.Open(ctx, dsn, scaleOptions()...)
	if err != nil {
		return 0, fmt.Errorf("opening the store with the serving options: %w", err)
	}
	defer func() { _ = s.Close() }()
	var on bool
	if err := admin.QueryRow(ctx, "SELECT enabled FROM memstack_recall_meta").Scan(&on); err != nil {
		return 0, fmt.Errorf("reading whether the recall index is on: %w", err)
	}
	if !on {
		return 0, nil
	}
	probe := store.RecallScope{Scope: store.UserScope(scaleTenant, scaleUser(0))}
	for {
		_, err := s.SearchRecall(ctx, probe, indexkit.Query{Terms: []string{"x"}, K: 1})
		if err == nil {
			return time.Since(start), nil
		}
		if !errors.Is(err, store.ErrRecallNotReady) {
			return 0, fmt.Errorf("waiting for the recall index: %w", err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// The population's shape: scalePopulateGroup users' conversations per
// AppendBatches call (one turn of each), scalePopulateWriters calls at
// once.
const (
	scalePopulateGroup   = 100
	scalePopulateWriters = 3
)

// scaleEpoch is the time of the first populated turn. A user's
// conversation c starts c weeks later, each group of users an hour after
// the previous group, and its turns are a minute apart.
var scaleEpoch = time.Date(2026, time.January, 5, 9, 0, 0, 0, time.UTC)

// populateTime is the time of turn t of conversation c of the users of
// group g.
func populateTime(g, c, t int) time.Time {
	return scaleEpoch.Add(time.Duration(c)*7*24*time.Hour + time.Duration(g%8)*time.Hour + time.Duration(t)*time.Minute)
}

// scaleTurn is the text index (benchcorpus.Human and AI) of turn t of
// conversation c of user u: every turn of the database is distinct.
func scaleTurn(sc scaleConfig, u, c, t int) int { return (u*sc.convs+c)*(sc.msgs/2) + t }

// populate writes sc.users × sc.convs conversations of sc.msgs messages
// through s's public API: store.MultiAppender's AppendBatches, each call
// one turn (a human and an AI message, dated with memstack.WithTime) of
// scalePopulateGroup users' conversation, scalePopulateWriters calls at
// once. A conversation's turns are appended in order; the groups of users
// are written concurrently.
func populate(ctx context.Context, s *pgstore.Store, sc scaleConfig, progress io.Writer) (populateResult, error) {
	var ma store.MultiAppender = s
	groups := (sc.users + scalePopulateGroup - 1) / scalePopulateGroup
	turns := sc.msgs / 2
	total := sc.users * sc.convs * sc.msgs
	res := populateResult{messages: total, conversations: sc.users * sc.convs}
	var written, calls atomic.Int64
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Progress every tenth.
	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	progressDone.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		step := max(total/10, 1)
		next := step
		for {
			select {
			case <-stopProgress:
				return
			case <-tick.C:
				if n := int(written.Load()); n >= next && n < total {
					el := time.Since(start)
					fmt.Fprintf(progress, "scale: populated %s of %s messages in %v (%s messages/s)\n",
						fmtCount(n), fmtCount(total), el.Round(time.Second), fmtCount(int(float64(n)/el.Seconds())))
					next = (n/step + 1) * step
				}
			}
		}
	})

	writers := min(scalePopulateWriters, groups)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			batches := make([]store.Batch, 0, scalePopulateGroup)
			for c := range sc.convs {
				for t := range turns {
					for g := w; g < groups; g += writers {
						batches = batches[:0]
						for u := g * scalePopulateGroup; u < min((g+1)*scalePopulateGroup, sc.users); u++ {
							k := scaleTurn(sc, u, c, t)
							batches = append(batches, store.Batch{
								ID:       memstack.Identity{Tenant: scaleTenant, User: scaleUser(u), Conversation: scaleConversation(c)},
								Messages: []llms.ChatMessage{llms.HumanChatMessage{Content: humanText(k)}, llms.AIChatMessage{Content: aiText(k)}},
							})
						}
						if err := ma.AppendBatches(memstack.WithTime(ctx, populateTime(g, c, t)), batches...); err != nil {
							errs[w] = fmt.Errorf("populating turn %d of conversation %d of users %d to %d: %w",
								t, c, g*scalePopulateGroup, g*scalePopulateGroup+len(batches)-1, err)
							cancel()
							return
						}
						calls.Add(1)
						written.Add(int64(2 * len(batches)))
					}
				}
			}
		})
	}
	wg.Wait()
	close(stopProgress)
	progressDone.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	res.took = time.Since(start)
	res.calls = int(calls.Load())
	fmt.Fprintf(progress, "scale: populated %s messages (%s conversations) in %v: %s messages/s, %s AppendBatches calls\n",
		fmtCount(total), fmtCount(res.conversations), res.took.Round(time.Millisecond),
		fmtCount(int(float64(total)/res.took.Seconds())), fmtCount(res.calls))
	return res, nil
}

// measureDBSize reads the database's size and the memstack tables' through
// conn.
func measureDBSize(ctx context.Context, conn *pgx.Conn) (dbSize, error) {
	var d dbSize
	prefix := strings.ReplaceAll(pgstore.DefaultTablePrefix, "_", `\_`)
	err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database()),
	coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint,
	coalesce(sum(pg_indexes_size(c.oid)), 0)::bigint,
	coalesce(sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relname LIKE $2), 0)::bigint,
	coalesce(array_agg(c.relname::text ORDER BY c.relname) FILTER (WHERE c.relname LIKE $2), '{}')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema() AND c.relname LIKE $1`,
		prefix+"%", prefix+"recall%").Scan(&d.database, &d.tables, &d.indexes, &d.recall, &d.recallTables)
	if err != nil {
		return d, fmt.Errorf("measuring the database's size: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgstore.DefaultTablePrefix+"messages").Scan(&d.messages); err != nil {
		return d, fmt.Errorf("counting the stored messages: %w", err)
	}
	return d, nil
}

// scaleWorkerSpec is what a serving process is told: where the database
// is, what it holds and how to serve it. The parent passes it as JSON
// after scaleWorkerFlag.
type scaleWorkerSpec struct {
	Index    int           `json:"index"` // 1-based
	DSN      string        `json:"dsn"`
	Users    int           `json:"users"`
	Convs    int           `json:"convs"`
	Msgs     int           `json:"msgs"`
	Clients  int           `json:"clients"`
	Duration time.Duration `json:"duration"`
	MaxDur   time.Duration `json:"max_duration"`
	RSSAt    []int         `json:"rss_at"`
}

// scaleReadyLine is the line a worker writes to stdout once its store is
// open and its stack built; scaleGoLine is what the parent then writes to
// its stdin to start every worker at once.
const (
	scaleReadyLine = "ready"
	scaleGoLine    = "go"
)

// scaleReadyTimeout bounds a worker's start: opening its store and
// building its stack.
const scaleReadyTimeout = 2 * time.Minute

// scaleProc is one started worker process.
type scaleProc struct {
	index int // 1-based
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// serveWithWorkers starts sc.procs worker processes against dsn, waits
// until each is ready, starts them together and collects their reports,
// ordered by process. span is the serving's wall time: from the start
// signal to the last report. Every process started is waited for.
func serveWithWorkers(ctx context.Context, dsn string, sc scaleConfig, progress io.Writer) (reports []scaleWorkerReport, span time.Duration, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, 0, fmt.Errorf("finding this program to run its serving processes: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var procs []*scaleProc
	defer func() {
		// After an error, kill every process still running. Either way,
		// close their stdin (a worker ends when it reads EOF) and reap
		// them.
		if err != nil {
			cancel()
		}
		for _, p := range procs {
			_ = p.stdin.Close()
			if werr := p.cmd.Wait(); err == nil && werr != nil {
				err = fmt.Errorf("serving process %d: %w", p.index, werr)
			}
		}
	}()
	for i := 1; i <= sc.procs; i++ {
		spec, err := json.Marshal(scaleWorkerSpec{Index: i, DSN: dsn, Users: sc.users, Convs: sc.convs, Msgs: sc.msgs,
			Clients: sc.clients, Duration: sc.duration, MaxDur: sc.maxDur, RSSAt: sc.rssAt})
		if err != nil {
			return nil, 0, fmt.Errorf("encoding the spec of serving process %d: %w", i, err)
		}
		cmd := exec.CommandContext(ctx, exe, scaleWorkerFlag, string(spec))
		cmd.Stderr = progress
		cmd.SysProcAttr = workerProcAttr()
		cmd.WaitDelay = 5 * time.Second
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, 0, fmt.Errorf("serving process %d: %w", i, err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, 0, fmt.Errorf("serving process %d: %w", i, err)
		}
		if err := cmd.Start(); err != nil {
			return nil, 0, fmt.Errorf("starting serving process %d: %w", i, err)
		}
		procs = append(procs, &scaleProc{index: i, cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<16)})
	}

	// Every process says it is ready, then all are told to go.
	readyErrs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() {
			line, err := p.out.ReadString('\n')
			if err != nil || strings.TrimSpace(line) != scaleReadyLine {
				readyErrs[i] = fmt.Errorf("serving process %d did not get ready (read %q): %w", p.index, line, errors.Join(err, errors.New("see its error above")))
			}
		})
	}
	timer := time.AfterFunc(scaleReadyTimeout, cancel)
	wg.Wait()
	timer.Stop()
	if err := errors.Join(readyErrs...); err != nil {
		return nil, 0, err
	}
	fmt.Fprintf(progress, "scale: %d serving processes ready; serving for %v, or until each has seen all %s users (at most %v)\n",
		len(procs), sc.duration, fmtCount(sc.users), sc.maxDur)
	start := time.Now()
	for _, p := range procs {
		if _, err := io.WriteString(p.stdin, scaleGoLine+"\n"); err != nil {
			return nil, 0, fmt.Errorf("starting serving process %d: %w", p.index, err)
		}
	}

	reports = make([]scaleWorkerReport, len(procs))
	reportErrs := make([]error, len(procs))
	for i, p := range procs {
		wg.Go(func() {
			line, err := p.out.ReadBytes('\n')
			if err != nil {
				reportErrs[i] = fmt.Errorf("serving process %d sent no report: %w", p.index, errors.Join(err, errors.New("see its error above")))
				return
			}
			if err := json.Unmarshal(bytes.TrimSpace(line), &reports[i]); err != nil {
				reportErrs[i] = fmt.Errorf("decoding the report of serving process %d: %w", p.index, err)
			}
		})
	}
	wg.Wait()
	span = time.Since(start)
	if err := errors.Join(reportErrs...); err != nil {
		return nil, 0, err
	}
	return reports, span, nil
}

// lockedWriter serializes writes to w: the serving processes' stderr
// copiers and the parent's progress share it.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes p to the underlying writer under the lock.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
