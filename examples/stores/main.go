// Command stores puts each layer of one memory stack on the store that
// fits it — the hybrid set-up several agent replicas share:
//
//   - the recent window (memories.RecentN, 4 messages) on Redis
//     (redisstore, namespace "recent"): small, hot, read on every turn;
//   - the full transcript (memories.Buffer) on PostgreSQL (pgstore,
//     namespace "transcript"): durable, queryable, shared;
//   - a running summary (memories.Summary with the offline extractive
//     summarizer) on SQLite (sqlitestore, namespace "summary"): embedded,
//     and the summary itself is kept in the store's state.
//
// All three sit behind one combined.Memory inside langchaingo's
// chains.NewConversation with a scripted model (llms/fake), and every call
// carries the user's identity (memstack.WithIdentity). The program
//
//  1. plays a five-turn conversation through the chain and prints what each
//     layer loads and what each store holds;
//  2. closes every client and builds a second set of stores and memories
//     over the same servers and file — a restarted process, or another
//     replica — and shows that every layer loads exactly what it loaded
//     before, the summary included, without summarizing again;
//  3. calls Forget for the identity on each store and shows that nothing is
//     left.
//
// It checks each of these claims itself and fails if one does not hold.
// It starts by forgetting the identity, so it can be run again and again.
//
// Usage:
//
//	go run ./examples/stores [-redis 127.0.0.1:6379] [-postgres DSN] [-sqlite FILE] [-timeout 5s]
//
// -redis defaults to $MEMSTACK_REDIS_ADDR, else 127.0.0.1:6379 (host:port or
// a redis:// URL); -postgres to $MEMSTACK_POSTGRES_DSN, else
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable; -sqlite to
// memstack-stores-example.db in os.TempDir(). The example writes under the
// stores' default key and table prefixes ("memstack", "memstack_") and only
// for the identity acme:ana:offsite.
//
// When a server cannot be reached within -timeout the program prints one
// line naming the address and the commands that start such a server, and
// exits with status 1. README.md has the commands to start both servers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms/fake"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/summarizer"
)

// Defaults of the flags (each overridden by its environment variable).
const (
	defaultRedis    = "127.0.0.1:6379"
	defaultPostgres = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	defaultSQLite   = "memstack-stores-example.db" // in os.TempDir()
	defaultTimeout  = 5 * time.Second
)

// The namespaces of the three layers.
const (
	nsRecent     = "recent"
	nsTranscript = "transcript"
	nsSummary    = "summary"
)

// user is whose conversation the example stores and then forgets.
var user = memstack.Identity{Tenant: "acme", User: "ana", Conversation: "offsite"}

// script is the conversation: the user's messages and the scripted model's
// answers.
var script = []struct{ q, a string }{
	{"Hi, I'm Ana and I'm planning our team offsite.", "Happy to help, Ana. Where and when?"},
	{"Lisbon, on 14 May, for 12 people.", "Lisbon on 14 May for 12 people: noted."},
	{"The budget is 5,040 euros.", "Budget noted: 5,040 euros."},
	{"Please book LX Factory for the day.", "LX Factory is booked for 14 May."},
	{"What do we have so far?", "Lisbon, 14 May, 12 people, 5,040 euros, LX Factory."},
}

func main() {
	// go-redis logs every failed dial itself; run reports an unreachable
	// server once, in one line.
	logging.Disable()
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		os.Exit(2) // the flag package has printed the problem and the usage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, os.Stdout, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "stores:", oneLine(err.Error()))
		os.Exit(1)
	}
}

// config is what the flags select.
type config struct {
	// redisAddr is the Redis server: host:port or a redis:// URL.
	redisAddr string
	// postgresDSN is the PostgreSQL connection string.
	postgresDSN string
	// sqlitePath is the SQLite database file (created if missing).
	sqlitePath string
	// timeout bounds connecting to each server.
	timeout time.Duration
}

var errUsage = errors.New("usage error")

// parseFlags reads the command line; problems are written to stderr and
// returned as errUsage (or flag.ErrHelp for -h).
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("stores", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.redisAddr, "redis", envOr("MEMSTACK_REDIS_ADDR", defaultRedis),
		"Redis server for the recent window: host:port or redis:// URL ($MEMSTACK_REDIS_ADDR)")
	fs.StringVar(&c.postgresDSN, "postgres", envOr("MEMSTACK_POSTGRES_DSN", defaultPostgres),
		"PostgreSQL DSN for the transcript ($MEMSTACK_POSTGRES_DSN)")
	fs.StringVar(&c.sqlitePath, "sqlite", filepath.Join(os.TempDir(), defaultSQLite),
		"SQLite file for the running summary (created if missing)")
	fs.DurationVar(&c.timeout, "timeout", defaultTimeout, "time limit for connecting to each server")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, errUsage
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "unexpected arguments: %q\n", fs.Args())
	case c.timeout <= 0:
		fmt.Fprintf(stderr, "-timeout %v: must be positive\n", c.timeout)
	case c.redisAddr == "" || c.postgresDSN == "" || c.sqlitePath == "":
		fmt.Fprintln(stderr, "-redis, -postgres and -sqlite must not be empty")
	default:
		return c, nil
	}
	fs.Usage()
	return c, errUsage
}

func envOr(key, def string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return def
}

// oneLine joins the lines of a message, so an error prints as one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// run is the program; it returns an error instead of exiting so that tests
// can run it against their own servers.
func run(ctx context.Context, w io.Writer, cfg config) error {
	ctx = memstack.WithIdentity(ctx, user)

	// --- Process 1 -------------------------------------------------------
	st, err := openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	// Start from nothing, whatever an earlier run left behind.
	if err := st.forget(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "Identity %s; one CombinedMemory, three layers, three stores:\n", user)
	fmt.Fprintf(w, "  {{.history}}     RecentN(4) on Redis %s, namespace %q\n", st.redisAt, nsRecent)
	fmt.Fprintf(w, "  {{.transcript}}  Buffer     on PostgreSQL %s, namespace %q\n", st.postgresAt, nsTranscript)
	fmt.Fprintf(w, "  {{.summary}}     Summary    on SQLite %s, namespace %q\n", cfg.sqlitePath, nsSummary)

	fmt.Fprintln(w, "\n== 1. A conversation chain, five turns ==")
	first, err := newLayers(st)
	if err != nil {
		return err
	}
	defer first.Close()
	answers := make([]string, len(script))
	for i, t := range script {
		answers[i] = t.a
	}
	// chains.NewConversation's prompt reads {{.history}}: the model sees
	// the recent window. The transcript and the summary are loaded with it,
	// for a prompt that wants them.
	chain := chains.NewConversation(fake.NewFakeLLM(answers), first.mem)
	for _, t := range script {
		a, err := chains.Run(ctx, chain, t.q)
		if err != nil {
			return fmt.Errorf("running the chain: %w", err)
		}
		fmt.Fprintf(w, "Q: %s\nA: %s\n", t.q, a)
	}
	before, err := snapshot(ctx, st, first)
	if err != nil {
		return err
	}
	if before.summaryCalls == 0 || !before.hasSummary {
		return errors.New("the summary layer folded nothing in five turns")
	}
	fmt.Fprintln(w)
	before.print(w, first.mem.MemoryVariables(ctx))
	fmt.Fprintf(w, "Summarizer calls: %d\n", before.summaryCalls)

	// The process stops: close every memory and every client.
	if err := errors.Join(first.Close(), st.Close()); err != nil {
		return fmt.Errorf("closing the first set: %w", err)
	}

	// --- Process 2 -------------------------------------------------------
	fmt.Fprintln(w, "\n== 2. Restart: new clients, new memories, same servers and file ==")
	st, err = openStores(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	second, err := newLayers(st)
	if err != nil {
		return err
	}
	defer second.Close()
	after, err := snapshot(ctx, st, second)
	if err != nil {
		return err
	}
	after.print(w, second.mem.MemoryVariables(ctx))
	if err := before.sameAs(after); err != nil {
		return fmt.Errorf("after the restart: %w", err)
	}
	fmt.Fprintf(w, "Every layer loads what it loaded before the restart (summarizer calls since: %d).\n", after.summaryCalls)

	// --- Forget ----------------------------------------------------------
	fmt.Fprintf(w, "\n== 3. Forget %s on every store ==\n", user)
	for _, s := range st.all() {
		if err := s.store.Forget(ctx, user); err != nil {
			return fmt.Errorf("forgetting %s on %s: %w", user, s.name, err)
		}
		fmt.Fprintf(w, "%s: Forget done\n", s.name)
	}
	gone, err := snapshot(ctx, st, second)
	if err != nil {
		return err
	}
	gone.print(w, second.mem.MemoryVariables(ctx))
	if err := gone.empty(); err != nil {
		return fmt.Errorf("after Forget: %w", err)
	}
	fmt.Fprintln(w, "Nothing is left of the conversation.")
	return nil
}

// stores are the three backends of one process.
type stores struct {
	redis      *redisstore.Store
	postgres   *pgstore.Store
	sqlite     *sqlitestore.Store
	redisAt    string // host:port, never a password
	postgresAt string
}

// namedStore is a store and how the output calls it.
type namedStore struct {
	name  string
	store store.Store
}

func (s *stores) all() []namedStore {
	return []namedStore{{"Redis", s.redis}, {"PostgreSQL", s.postgres}, {"SQLite", s.sqlite}}
}

// forget removes the identity from every store.
func (s *stores) forget(ctx context.Context) error {
	for _, n := range s.all() {
		if err := n.store.Forget(ctx, user); err != nil {
			return fmt.Errorf("forgetting %s on %s: %w", user, n.name, err)
		}
	}
	return nil
}

// Close closes every store that is open; it is safe to call twice.
func (s *stores) Close() error {
	var errs []error
	if s.redis != nil {
		errs = append(errs, s.redis.Close())
		s.redis = nil
	}
	if s.postgres != nil {
		errs = append(errs, s.postgres.Close())
		s.postgres = nil
	}
	if s.sqlite != nil {
		errs = append(errs, s.sqlite.Close())
		s.sqlite = nil
	}
	return errors.Join(errs...)
}

// openStores connects to Redis and PostgreSQL, each within cfg.timeout,
// and opens the SQLite file. A server that cannot be reached is an
// unreachableError.
func openStores(ctx context.Context, cfg config) (*stores, error) {
	redisAt, err := redisHostPort(cfg.redisAddr)
	if err != nil {
		return nil, err
	}
	postgresAt, err := postgresHostPort(cfg.postgresDSN)
	if err != nil {
		return nil, err
	}
	s := &stores{redisAt: redisAt, postgresAt: postgresAt}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()

	cctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	s.redis, err = redisstore.Open(cctx, cfg.redisAddr, redisstore.WithNamespace(nsRecent))
	cancel()
	if err != nil {
		return nil, unreachable(ctx, "Redis", "-redis", redisAt, cfg.timeout, err)
	}

	cctx, cancel = context.WithTimeout(ctx, cfg.timeout)
	s.postgres, err = pgstore.Open(cctx, cfg.postgresDSN, pgstore.WithNamespace(nsTranscript))
	cancel()
	if err != nil {
		return nil, unreachable(ctx, "PostgreSQL", "-postgres", postgresAt, cfg.timeout, err)
	}

	s.sqlite, err = sqlitestore.Open(ctx, cfg.sqlitePath, sqlitestore.WithNamespace(nsSummary))
	if err != nil {
		return nil, fmt.Errorf("opening the SQLite file (-sqlite): %w", err)
	}
	ok = true
	return s, nil
}

// redisHostPort returns the host:port of a Redis address (host:port or
// URL), leaving out any password.
func redisHostPort(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		return addr, nil
	}
	o, err := redis.ParseURL(addr)
	if err != nil {
		return "", fmt.Errorf("-redis: not host:port or a valid redis:// URL: %w", err)
	}
	return o.Addr, nil
}

// postgresHostPort returns the host:port of a DSN, leaving out any
// password.
func postgresHostPort(dsn string) (string, error) {
	c, err := pgconn.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse errors redact the password.
		return "", fmt.Errorf("-postgres: not a valid PostgreSQL DSN: %w", err)
	}
	if strings.HasPrefix(c.Host, "/") {
		return fmt.Sprintf("%s/.s.PGSQL.%d", c.Host, c.Port), nil
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), nil
}

// unreachableError says which server could not be reached and how to start
// one. Its message is one line.
type unreachableError struct {
	server, flag, addr, why, start string
	err                            error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach %s at %s (%s). Start one with: %s ; or point %s at yours (see examples/stores/README.md)",
		e.server, e.addr, e.why, e.start, e.flag)
}

func (e *unreachableError) Unwrap() error { return e.err }

// unreachable builds the error for a server that Open could not reach. An
// interrupted run (ctx done) is reported as such instead.
func unreachable(ctx context.Context, server, flagName, addr string, timeout time.Duration, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("connecting to %s at %s: %w", server, addr, ctx.Err())
	}
	why := oneLine(err.Error())
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	case errors.Is(err, context.DeadlineExceeded):
		why = fmt.Sprintf("no answer within %v", timeout)
	}
	port := "PORT"
	if _, p, splitErr := net.SplitHostPort(addr); splitErr == nil {
		port = p
	}
	start := fmt.Sprintf(`redis-server --port %s --bind 127.0.0.1 --save ""`, port)
	if server == "PostgreSQL" {
		start = postgresStart(port)
	}
	return &unreachableError{server: server, flag: flagName, addr: addr, why: why, start: start, err: err}
}

// postgresStart returns the commands that start a throwaway PostgreSQL
// server on 127.0.0.1:port with Debian's postgresql package, run as the
// postgres user (PostgreSQL refuses to run as root).
func postgresStart(port string) string {
	bin := pgBinDir()
	if bin == "" {
		return fmt.Sprintf(`apt-get install postgresql, then initdb and pg_ctl as in the README (port %s)`, port)
	}
	const data = "/tmp/memstack-pgdata"
	return fmt.Sprintf(`sudo -u postgres %s/initdb -D %s && sudo -u postgres %s/pg_ctl -D %s -l %s/server.log -o "-p %s -k /tmp -c listen_addresses=127.0.0.1" start`,
		bin, data, bin, data, data, port)
}

// pgBinDir returns the newest /usr/lib/postgresql/<version>/bin holding
// pg_ctl, or "" if there is none.
func pgBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) float64 {
		v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		if err != nil {
			return -1
		}
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if fi, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil && fi.Mode()&0o111 != 0 {
			return d
		}
	}
	return ""
}

// layers is one process's memory stack.
type layers struct {
	recent     *memories.RecentN
	transcript *memories.Buffer
	summary    *memories.Summary
	mem        *combined.Memory
}

// newLayers builds the three memories over s and combines them. Every
// layer requires an identity, so a call without one fails instead of
// writing a shared conversation.
func newLayers(s *stores) (*layers, error) {
	// Each layer is the only reader of its store here, so each may keep
	// its store small with a retention (memories.WithRetention): without
	// one no memory removes a message, and one store can serve a whole
	// stack (see the README's Storage section).
	recent, err := memories.NewRecentN(4,
		memories.WithStore(s.redis), memories.WithRetention(memories.KeepLast(50)), memories.WithRequireIdentity())
	if err != nil {
		return nil, err
	}
	transcript, err := memories.NewBuffer(memories.WithMemoryKey("transcript"),
		memories.WithStore(s.postgres), memories.WithRequireIdentity())
	if err != nil {
		return nil, err
	}
	// Keep the last 4 messages raw; fold older ones, at least 2 at a time,
	// into a summary kept in the SQLite store's state, and remove what the
	// summary covers (KeepLast(0)).
	summary, err := memories.NewSummary(summarizer.NewExtractive(),
		memories.WithMemoryKey("summary"), memories.WithMaxMessages(4), memories.WithBatchSize(2),
		memories.WithStore(s.sqlite), memories.WithRetention(memories.KeepLast(0)), memories.WithRequireIdentity())
	if err != nil {
		return nil, err
	}
	mem, err := combined.New([]schema.Memory{recent, transcript, summary}, combined.WithStrictKeys())
	if err != nil {
		_ = summary.Close()
		return nil, err
	}
	return &layers{recent: recent, transcript: transcript, summary: summary, mem: mem}, nil
}

// Close stops the summary layer (the others hold nothing to stop).
func (l *layers) Close() error { return l.summary.Close() }

// state is what the layers load and the stores hold for the identity at one
// moment.
type state struct {
	vars         map[string]string
	counts       map[string]int // stored messages, by store name
	hasSummary   bool           // SQLite holds a running summary
	summaryCalls int64          // summarizer calls made by these layers
}

// snapshot loads every layer through the combined memory and asks every
// store what it holds.
func snapshot(ctx context.Context, s *stores, l *layers) (state, error) {
	vars, err := l.mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		return state{}, fmt.Errorf("loading the memory: %w", err)
	}
	st := state{vars: map[string]string{}, counts: map[string]int{}, summaryCalls: l.summary.Stats().Calls}
	for k, v := range vars {
		str, ok := v.(string)
		if !ok {
			return state{}, fmt.Errorf("variable %q is a %T, not a string", k, v)
		}
		st.vars[k] = str
	}
	for _, n := range s.all() {
		stat, err := n.store.Stat(ctx, user)
		if err != nil {
			return state{}, fmt.Errorf("reading %s: %w", n.name, err)
		}
		st.counts[n.name] = stat.Count
	}
	sum, err := s.sqlite.GetState(ctx, user, memories.SummaryStateName)
	if err != nil {
		return state{}, fmt.Errorf("reading the summary state from SQLite: %w", err)
	}
	st.hasSummary = sum.Exists()
	return st, nil
}

// print writes what the stores hold and each variable, in keys' order.
func (st state) print(w io.Writer, keys []string) {
	extra := ""
	if st.hasSummary {
		extra = " + a running summary"
	}
	fmt.Fprintf(w, "Stored: Redis %d messages, PostgreSQL %d messages, SQLite %d messages%s\n",
		st.counts["Redis"], st.counts["PostgreSQL"], st.counts["SQLite"], extra)
	for _, k := range keys {
		v := st.vars[k]
		if v == "" {
			v = "(empty)"
		}
		fmt.Fprintf(w, "[%s]\n%s\n", k, v)
	}
}

// sameAs returns an error naming what differs between st and other
// (summarizer calls aside: they count one process's work).
func (st state) sameAs(other state) error {
	for k, v := range st.vars {
		if other.vars[k] != v {
			return fmt.Errorf("variable %q differs", k)
		}
	}
	if len(other.vars) != len(st.vars) {
		return fmt.Errorf("%d variables, not %d", len(other.vars), len(st.vars))
	}
	if !reflect.DeepEqual(st.counts, other.counts) {
		return fmt.Errorf("the stores hold %v messages, not %v", other.counts, st.counts)
	}
	if st.hasSummary != other.hasSummary {
		return fmt.Errorf("running summary present: %t, not %t", other.hasSummary, st.hasSummary)
	}
	if other.summaryCalls != 0 {
		return fmt.Errorf("the summary layer summarized again (%d calls) instead of resuming", other.summaryCalls)
	}
	return nil
}

// empty returns an error naming what is left, if anything.
func (st state) empty() error {
	for k, v := range st.vars {
		if v != "" {
			return fmt.Errorf("variable %q still loads %d bytes", k, len(v))
		}
	}
	for name, n := range st.counts {
		if n != 0 {
			return fmt.Errorf("%s still holds %d messages", name, n)
		}
	}
	if st.hasSummary {
		return errors.New("SQLite still holds the running summary")
	}
	return nil
}
