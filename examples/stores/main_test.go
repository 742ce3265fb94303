package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/sqlitestore"
)

// mainArgsEnv, when set, makes the test binary run main with the JSON
// array of arguments it holds, so a test can check the real exit status
// and stderr.
const mainArgsEnv = "MEMSTACK_STORES_EXAMPLE_MAIN_ARGS"

func TestMain(m *testing.M) {
	if raw, ok := os.LookupEnv(mainArgsEnv); ok {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, "bad", mainArgsEnv, err)
			os.Exit(3)
		}
		os.Args = append([]string{"stores"}, args...)
		main()
		os.Exit(0)
	}
	logging.Disable() // as main does: the unreachable-server tests would log every dial
	code := m.Run()
	testsvc.StopAll()
	os.Exit(code)
}

// The layers' variables after the five turns.
const (
	wantHistory = "Human: Please book LX Factory for the day.\n" +
		"AI: LX Factory is booked for 14 May.\n" +
		"Human: What do we have so far?\n" +
		"AI: Lisbon, 14 May, 12 people, 5,040 euros, LX Factory."
	wantTranscript = "Human: Hi, I'm Ana and I'm planning our team offsite.\n" +
		"AI: Happy to help, Ana. Where and when?\n" +
		"Human: Lisbon, on 14 May, for 12 people.\n" +
		"AI: Lisbon on 14 May for 12 people: noted.\n" +
		"Human: The budget is 5,040 euros.\n" +
		"AI: Budget noted: 5,040 euros.\n" +
		wantHistory
)

// realConfig returns a config for the real test servers and a fresh
// SQLite file.
func realConfig(t *testing.T) config {
	t.Helper()
	return config{
		redisAddr:   testsvc.Redis(t),
		postgresDSN: testsvc.Postgres(t),
		sqlitePath:  filepath.Join(t.TempDir(), "memory.db"),
		timeout:     10 * time.Second,
	}
}

// openAll opens the three stores the example uses, in its namespaces.
func openAll(t *testing.T, cfg config) map[string]store.Store {
	t.Helper()
	ctx := context.Background()
	r, err := redisstore.Open(ctx, cfg.redisAddr, redisstore.WithNamespace(nsRecent))
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	p, err := pgstore.Open(ctx, cfg.postgresDSN, pgstore.WithNamespace(nsTranscript))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	s, err := sqlitestore.Open(ctx, cfg.sqlitePath, sqlitestore.WithNamespace(nsSummary))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return map[string]store.Store{"Redis": r, "PostgreSQL": p, "SQLite": s}
}

// vars parses the "[key]\nvalue" blocks of one section of the output.
func vars(t *testing.T, section string) map[string]string {
	t.Helper()
	out := map[string]string{}
	parts := strings.Split("\n"+section, "\n[")
	for _, p := range parts[1:] {
		key, value, ok := strings.Cut(p, "]\n")
		require.True(t, ok, "malformed block %q", p)
		out[key] = value
	}
	return out
}

// between returns the text of out between the markers (to the end when
// end is "").
func between(t *testing.T, out, start, end string) string {
	t.Helper()
	_, rest, ok := strings.Cut(out, start)
	require.True(t, ok, "%q not in the output:\n%s", start, out)
	if end == "" {
		return rest
	}
	sec, _, ok := strings.Cut(rest, end)
	require.True(t, ok, "%q not after %q in the output:\n%s", end, start, out)
	return sec
}

func TestRunAgainstRealServers(t *testing.T) {
	cfg := realConfig(t)
	stores := openAll(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// What an earlier, interrupted run could have left for the identity,
	// and another user's conversation, in every store.
	ben := memstack.Identity{Tenant: "acme", User: "ben", Conversation: "offsite"}
	for name, s := range stores {
		require.NoError(t, s.Forget(ctx, ben), name) // servers outlive a test under -count
		require.NoError(t, s.Append(ctx, user, llms.HumanChatMessage{Content: "stale message"}), name)
		require.NoError(t, s.Append(ctx, ben, llms.HumanChatMessage{Content: "Ben's message"}), name)
	}

	var buf bytes.Buffer
	require.NoError(t, run(ctx, &buf, cfg))
	out := buf.String()
	assert.NotContains(t, out, "stale message", "the run starts from a clean slate")
	assert.NotContains(t, out, "Ben", "another user's conversation never shows")

	assert.Contains(t, out, "RecentN(4) on Redis "+cfg.redisAddr+", namespace \"recent\"\n")
	assert.Contains(t, out, "Q: Lisbon, on 14 May, for 12 people.\nA: Lisbon on 14 May for 12 people: noted.\n")

	// 1. After the turns.
	turns := between(t, out, "A: Lisbon, 14 May, 12 people, 5,040 euros, LX Factory.\n\n", "Summarizer calls: ")
	assert.True(t, strings.HasPrefix(turns,
		"Stored: Redis 10 messages, PostgreSQL 10 messages, SQLite 4 messages + a running summary\n"), turns)
	got := vars(t, strings.TrimSuffix(turns, "\n"))
	require.Len(t, got, 3, turns)
	assert.Equal(t, wantHistory, got["history"])
	assert.Equal(t, wantTranscript, got["transcript"])
	summary, ok := strings.CutPrefix(got["summary"], memories.SummaryPrefix)
	require.True(t, ok, "the summary layer loads its summary first: %q", got["summary"])
	sumLine, raw, _ := strings.Cut(summary, "\n")
	assert.Equal(t, wantHistory, raw, "the summary layer keeps the last four messages raw")
	assert.Contains(t, sumLine, "14 May")
	assert.Contains(t, sumLine, "5,040 euros")
	assert.Contains(t, out, "Summarizer calls: 3\n", "10 messages, 4 raw, batches of 2: folds after turns 3, 4, 5")

	// 2. After the restart: the same, without summarizing again.
	restart := between(t, out, "== 2. Restart: new clients, new memories, same servers and file ==\n", "Every layer loads")
	assert.Equal(t, turns, restart, "the restarted memories load what the first ones did")
	assert.Contains(t, out, "Every layer loads what it loaded before the restart (summarizer calls since: 0).\n")

	// 3. After Forget: nothing.
	forget := between(t, out, "== 3. Forget acme:ana:offsite on every store ==\n", "")
	assert.Equal(t, "Redis: Forget done\nPostgreSQL: Forget done\nSQLite: Forget done\n"+
		"Stored: Redis 0 messages, PostgreSQL 0 messages, SQLite 0 messages\n"+
		"[history]\n(empty)\n[transcript]\n(empty)\n[summary]\n(empty)\n"+
		"Nothing is left of the conversation.\n", forget)

	// Checked from outside the program: Ana is gone from every store, Ben
	// is untouched.
	for name, s := range stores {
		st, err := s.Stat(ctx, user)
		require.NoError(t, err, name)
		assert.Zero(t, st.Count, "%s still holds Ana's messages", name)
		recs, err := s.All(ctx, ben)
		require.NoError(t, err, name)
		if assert.Len(t, recs, 1, name) {
			assert.Equal(t, "Ben's message", recs[0].Message.GetContent(), name)
		}
	}
	state, err := stores["SQLite"].GetState(ctx, user, memories.SummaryStateName)
	require.NoError(t, err)
	assert.False(t, state.Exists(), "the running summary is forgotten too")

	// The example can be run again on the same servers and file, and says
	// the same.
	var again bytes.Buffer
	require.NoError(t, run(ctx, &again, cfg))
	assert.Equal(t, out, again.String())
}

// silentServer accepts connections and never answers: a server that hangs.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(done)
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

func closedAddr(t *testing.T) string {
	t.Helper()
	port, err := testsvc.FreePort()
	require.NoError(t, err)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

func TestUnreachableServer(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, cfg *config) (addr string)
		// want are passages of the error; ADDR and PORT stand for the
		// unreachable server's.
		want []string
	}{
		{
			name: "redis on a closed port",
			setup: func(t *testing.T, cfg *config) string {
				cfg.redisAddr = closedAddr(t)
				return cfg.redisAddr
			},
			want: []string{
				"cannot reach Redis at ADDR (connection refused). ",
				`Start one with: redis-server --port PORT --bind 127.0.0.1 --save "" ;`,
				"point -redis at yours",
			},
		},
		{
			name: "redis that never answers",
			setup: func(t *testing.T, cfg *config) string {
				cfg.redisAddr = silentServer(t)
				cfg.timeout = 500 * time.Millisecond
				return cfg.redisAddr
			},
			want: []string{
				"cannot reach Redis at ADDR (no answer within 500ms). ",
				`redis-server --port PORT --bind 127.0.0.1`,
			},
		},
		{
			name: "postgres on a closed port",
			setup: func(t *testing.T, cfg *config) string {
				cfg.redisAddr = testsvc.Redis(t)
				addr := closedAddr(t)
				cfg.postgresDSN = "postgres://postgres:secret-pw@" + addr + "/postgres?sslmode=disable"
				return addr
			},
			want: []string{
				"cannot reach PostgreSQL at ADDR (connection refused). ",
				"initdb -D /tmp/memstack-pgdata && ",
				`pg_ctl -D /tmp/memstack-pgdata -l /tmp/memstack-pgdata/server.log -o "-p PORT -k /tmp -c listen_addresses=127.0.0.1" start ;`,
				"point -postgres at yours",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config{
				postgresDSN: defaultPostgres,
				sqlitePath:  filepath.Join(t.TempDir(), "memory.db"),
				timeout:     5 * time.Second,
			}
			addr := tt.setup(t, &cfg)
			_, port, err := net.SplitHostPort(addr)
			require.NoError(t, err)

			var buf bytes.Buffer
			start := time.Now()
			err = run(context.Background(), &buf, cfg)
			took := time.Since(start)

			require.Error(t, err)
			var ue *unreachableError
			assert.True(t, errors.As(err, &ue), "an unreachableError: %v", err)
			msg := err.Error()
			assert.NotContains(t, msg, "\n", "one line")
			assert.NotContains(t, msg, "secret-pw", "never the password")
			for _, w := range tt.want {
				w = strings.ReplaceAll(strings.ReplaceAll(w, "ADDR", addr), "PORT", port)
				assert.Contains(t, msg, w)
			}
			assert.Less(t, took, cfg.timeout+2*time.Second, "bounded by the timeout")
			assert.Empty(t, buf.String(), "nothing printed before the servers are reached")
			_, statErr := os.Stat(cfg.sqlitePath)
			assert.True(t, os.IsNotExist(statErr), "no SQLite file created")
		})
	}
}

// TestMainUnreachableExitsWithOneLine runs the real main in a child
// process: status 1, one line on stderr, no stack trace, no go-redis log.
func TestMainUnreachableExitsWithOneLine(t *testing.T) {
	addr := closedAddr(t)
	args, err := json.Marshal([]string{"-redis", addr, "-sqlite", filepath.Join(t.TempDir(), "m.db"), "-timeout", "3s"})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+string(args))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)

	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "exits with a status: %v (stderr %q)", err, stderr.String())
	assert.Equal(t, 1, exit.ExitCode())
	assert.Empty(t, stdout.String())
	line := stderr.String()
	assert.Equal(t, 1, strings.Count(line, "\n"), "exactly one line: %q", line)
	assert.True(t, strings.HasPrefix(line, "stores: cannot reach Redis at "+addr+" (connection refused). Start one with: redis-server --port "), line)
	assert.NotContains(t, line, "goroutine")
	assert.Less(t, took, 10*time.Second)
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    config
		wantErr error
	}{
		{
			name: "defaults",
			want: config{redisAddr: defaultRedis, postgresDSN: defaultPostgres,
				sqlitePath: filepath.Join(os.TempDir(), defaultSQLite), timeout: defaultTimeout},
		},
		{
			name: "environment",
			env:  map[string]string{"MEMSTACK_REDIS_ADDR": "127.0.0.1:7000", "MEMSTACK_POSTGRES_DSN": "postgres://u@127.0.0.1:6000/db"},
			want: config{redisAddr: "127.0.0.1:7000", postgresDSN: "postgres://u@127.0.0.1:6000/db",
				sqlitePath: filepath.Join(os.TempDir(), defaultSQLite), timeout: defaultTimeout},
		},
		{
			name: "flags win over the environment",
			env:  map[string]string{"MEMSTACK_REDIS_ADDR": "127.0.0.1:7000"},
			args: []string{"-redis", "127.0.0.1:7001", "-postgres", "postgres://x@127.0.0.1:1/y", "-sqlite", "/tmp/a.db", "-timeout", "2s"},
			want: config{redisAddr: "127.0.0.1:7001", postgresDSN: "postgres://x@127.0.0.1:1/y", sqlitePath: "/tmp/a.db", timeout: 2 * time.Second},
		},
		{name: "zero timeout", args: []string{"-timeout", "0s"}, wantErr: errUsage},
		{name: "stray argument", args: []string{"extra"}, wantErr: errUsage},
		{name: "unknown flag", args: []string{"-nope"}, wantErr: errUsage},
		{name: "empty sqlite path", args: []string{"-sqlite", ""}, wantErr: errUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("MEMSTACK_REDIS_ADDR", tt.env["MEMSTACK_REDIS_ADDR"])
			t.Setenv("MEMSTACK_POSTGRES_DSN", tt.env["MEMSTACK_POSTGRES_DSN"])
			var stderr bytes.Buffer
			got, err := parseFlags(tt.args, &stderr)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				assert.NotEmpty(t, stderr.String(), "the problem is explained")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestBadAddressesAreFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  config
		want string
	}{
		{"redis URL", config{redisAddr: "redis://127.0.0.1:6379/notadb", postgresDSN: defaultPostgres}, "-redis: "},
		{"postgres DSN", config{redisAddr: defaultRedis, postgresDSN: "postgres://u:pw@127.0.0.1:notaport/db"}, "-postgres: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.sqlitePath = filepath.Join(t.TempDir(), "m.db")
			tt.cfg.timeout = time.Second
			err := run(context.Background(), &bytes.Buffer{}, tt.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			var ue *unreachableError
			assert.False(t, errors.As(err, &ue), "a bad address is not an unreachable server")
		})
	}
}
