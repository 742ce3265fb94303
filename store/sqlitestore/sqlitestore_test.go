package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
)

var (
	alice = memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob   = memstack.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
)

func open(t *testing.T, path string, opts ...sqlitestore.Option) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawDB opens the file with plain SQL, the way an operator (or a disk
// error) would change it behind the store's back.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_busy_timeout=5000")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func contents(rs []store.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Message.GetContent()
	}
	return out
}

func TestCorruptRow(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path)
	require.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: "h1"}, llms.AIChatMessage{Content: "a1"}))
	require.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: "h2"}, llms.AIChatMessage{Content: "a2"}))
	require.NoError(t, s.Append(ctx, bob, llms.HumanChatMessage{Content: "b1"}))
	recs, err := s.All(ctx, alice)
	require.NoError(t, err)
	bad := recs[1].Seq

	cases := []struct {
		name  string
		value any
		want  string
	}{
		{"garbage bytes", []byte{0x00, 0xff, 's', 'e', 'c', 'r', 'e', 't'}, "invalid JSON"},
		{"unknown type", []byte(`{"v":1,"type":"robot","content":"secret"}`), `unknown message type "robot"`},
		{"empty blob", []byte{}, "empty value"},
		{"text not JSON", "secret text", "invalid JSON"},
	}
	db := rawDB(t, path)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := db.ExecContext(ctx, `UPDATE memstack_messages SET message = ? WHERE seq = ?`, c.value, bad)
			require.NoError(t, err)

			_, err = s.All(ctx, alice)
			require.Error(t, err)
			assert.ErrorIs(t, err, store.ErrCorrupt)
			assert.Contains(t, err.Error(), fmt.Sprintf("Seq %d", bad), "the error names the Seq")
			assert.Contains(t, err.Error(), alice.Key(), "the error names the identity")
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "secret", "the error never shows the stored content")

			_, err = s.Last(ctx, alice, 10)
			assert.ErrorIs(t, err, store.ErrCorrupt)

			// Newer messages of the same identity and other identities
			// are still readable.
			last, err := s.Last(ctx, alice, 2)
			require.NoError(t, err)
			assert.Equal(t, []string{"h2", "a2"}, contents(last))
			other, err := s.All(ctx, bob)
			require.NoError(t, err)
			assert.Equal(t, []string{"b1"}, contents(other))
			st, err := s.Stat(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, 4, st.Count)
		})
	}

	// The corrupt message can be removed and the conversation goes on.
	n, err := s.RemovePrefix(ctx, alice, bad)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	recs, err = s.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"h2", "a2"}, contents(recs))
}

func TestClosedStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s, err := sqlitestore.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: "h"}))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close is idempotent")

	err = s.Append(ctx, alice, llms.HumanChatMessage{Content: "x"})
	assert.ErrorIs(t, err, sqlitestore.ErrClosed)
	assert.Contains(t, err.Error(), "store is closed")
	_, err = s.All(ctx, alice)
	assert.ErrorIs(t, err, sqlitestore.ErrClosed)
	_, err = s.Last(ctx, alice, 1)
	assert.ErrorIs(t, err, sqlitestore.ErrClosed)
	_, err = s.Stat(ctx, alice)
	assert.ErrorIs(t, err, sqlitestore.ErrClosed)
	_, err = s.RemovePrefix(ctx, alice, 10)
	assert.ErrorIs(t, err, sqlitestore.ErrClosed)
	assert.ErrorIs(t, s.Clear(ctx, alice), sqlitestore.ErrClosed)
	assert.ErrorIs(t, s.Forget(ctx, alice), sqlitestore.ErrClosed)
	_, err = s.GetState(ctx, alice, "x")
	assert.ErrorIs(t, err, sqlitestore.ErrClosed)
	_, err = s.PutState(ctx, alice, "x", []byte("v"), 0)
	assert.ErrorIs(t, err, sqlitestore.ErrClosed)

	// The data is intact for the next Open.
	s2 := open(t, path)
	recs, err := s2.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"h"}, contents(recs))
}

func TestNamespaces(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	recent := open(t, path, sqlitestore.WithNamespace("recent"))
	facts := open(t, path, sqlitestore.WithNamespace("facts"))
	def := open(t, path)
	assert.Equal(t, "recent", recent.Namespace())
	assert.Equal(t, sqlitestore.DefaultNamespace, def.Namespace())

	for _, s := range []*sqlitestore.Store{recent, facts, def} {
		for _, id := range []memstack.Identity{alice, bob} {
			require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: s.Namespace() + " " + id.User}))
			absent, err := s.GetState(ctx, id, "summary")
			require.NoError(t, err)
			require.False(t, absent.Exists())
			_, err = s.PutState(ctx, id, "summary", []byte(s.Namespace()), absent.Version)
			require.NoError(t, err)
		}
	}
	// check reads id's messages and "summary" in s; wantState "" means no
	// value.
	check := func(s *sqlitestore.Store, id memstack.Identity, want []string, wantState string) store.State {
		t.Helper()
		recs, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, want, contents(recs), "namespace %s, %s", s.Namespace(), id.User)
		st, err := s.GetState(ctx, id, "summary")
		require.NoError(t, err)
		if wantState == "" {
			assert.Nil(t, st.Value, "namespace %s, %s: no value", s.Namespace(), id.User)
		} else {
			assert.Equal(t, wantState, string(st.Value), "namespace %s, %s", s.Namespace(), id.User)
		}
		return st
	}
	// Each namespace sees its own rows.
	check(recent, alice, []string{"recent alice"}, "recent")
	check(facts, alice, []string{"facts alice"}, "facts")

	// Clear works within one namespace: it marks alice there only.
	recentBob := check(recent, bob, []string{"recent bob"}, "recent")
	require.NoError(t, recent.Clear(ctx, alice))
	cleared := check(recent, alice, []string{}, "")
	assert.Positive(t, cleared.Version, "Clear gives alice a fresh absent version in its namespace")
	check(facts, alice, []string{"facts alice"}, "facts")
	check(def, alice, []string{"default alice"}, "default")
	assert.Equal(t, recentBob, check(recent, bob, []string{"recent bob"}, "recent"))

	// Forget removes the identity from every namespace of the file, its
	// Clear mark included, and nothing else.
	require.NoError(t, facts.Forget(ctx, alice))
	var forgotten []int64
	for _, s := range []*sqlitestore.Store{recent, facts, def} {
		st := check(s, alice, []string{}, "")
		forgotten = append(forgotten, st.Version)
		check(s, bob, []string{s.Namespace() + " bob"}, s.Namespace())
	}
	assert.Greater(t, forgotten[0], cleared.Version, "Forget removes the Clear mark; the newer forgotten version shows")
	assert.Equal(t, []int64{forgotten[0], forgotten[0], forgotten[0]}, forgotten, "after Forget alice's absent version is the file's forgotten version in every namespace")
	// Also in a namespace whose Store is closed now.
	require.NoError(t, def.Append(ctx, alice, llms.HumanChatMessage{Content: "again"}))
	require.NoError(t, def.Close())
	require.NoError(t, recent.Forget(ctx, alice))
	def2 := open(t, path)
	check(def2, alice, []string{}, "")
}

func TestSchemaIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")

	// Many Opens of a new file at the same moment all succeed.
	var wg sync.WaitGroup
	stores := make([]*sqlitestore.Store, 6)
	errs := make([]error, len(stores))
	for i := range stores {
		wg.Go(func() {
			stores[i], errs[i] = sqlitestore.Open(ctx, path, sqlitestore.WithNamespace(fmt.Sprint("ns", i)))
		})
	}
	wg.Wait()
	for i, s := range stores {
		require.NoError(t, errs[i])
		require.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: fmt.Sprint(i)}))
		require.NoError(t, s.Close())
	}
	// Opening again keeps the data and the schema version.
	s := open(t, path, sqlitestore.WithNamespace("ns3"))
	recs, err := s.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"3"}, contents(recs))

	db := rawDB(t, path)
	var rows, version int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*), max(version) FROM memstack_schema`).Scan(&rows, &version))
	assert.Equal(t, 1, rows)
	assert.Equal(t, sqlitestore.SchemaVersion, version)
	var mode string
	require.NoError(t, db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
	assert.Equal(t, "wal", mode)

	// A file from a newer version is refused, naming both versions.
	_, err = db.ExecContext(ctx, `UPDATE memstack_schema SET version = 99`)
	require.NoError(t, err)
	_, err = sqlitestore.Open(ctx, path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "schema version 99")
	assert.Contains(t, err.Error(), path)
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cases := []struct {
		name string
		path string
		opts []sqlitestore.Option
		want string
	}{
		{"empty path", "", nil, "path is empty"},
		{"empty namespace", filepath.Join(dir, "a.db"), []sqlitestore.Option{sqlitestore.WithNamespace("")}, "WithNamespace"},
		{"long namespace", filepath.Join(dir, "a.db"), []sqlitestore.Option{sqlitestore.WithNamespace(string(make([]byte, 201)))}, "WithNamespace"},
		{"busy timeout", filepath.Join(dir, "a.db"), []sqlitestore.Option{sqlitestore.WithBusyTimeout(0)}, "WithBusyTimeout"},
		{"synchronous", filepath.Join(dir, "a.db"), []sqlitestore.Option{sqlitestore.WithSynchronous("sometimes")}, "WithSynchronous"},
		{"max conns", filepath.Join(dir, "a.db"), []sqlitestore.Option{sqlitestore.WithMaxOpenConns(0)}, "WithMaxOpenConns"},
		{"mmap size", filepath.Join(dir, "a.db"), []sqlitestore.Option{sqlitestore.WithMmapSize(-1)}, "WithMmapSize: -1 is negative"},
		{"nil option", filepath.Join(dir, "a.db"), []sqlitestore.Option{nil}, "nil option"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := sqlitestore.Open(ctx, c.path, c.opts...)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Contains(t, err.Error(), c.want)
		})
	}

	t.Run("missing directory", func(t *testing.T) {
		path := filepath.Join(dir, "no", "such", "dir", "m.db")
		_, err := sqlitestore.Open(ctx, path)
		require.Error(t, err)
		assert.Contains(t, err.Error(), path)
	})
	t.Run("not a database", func(t *testing.T) {
		path := filepath.Join(dir, "text.db")
		require.NoError(t, os.WriteFile(path, []byte("this is not a SQLite database, just some text that is long enough to fill a header........"), 0o600))
		_, err := sqlitestore.Open(ctx, path)
		require.Error(t, err)
		assert.Contains(t, err.Error(), path)
	})
	t.Run("cancelled context", func(t *testing.T) {
		c, cancel := context.WithCancel(ctx)
		cancel()
		_, err := sqlitestore.Open(c, filepath.Join(dir, "c.db"))
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("options apply", func(t *testing.T) {
		s := open(t, filepath.Join(dir, "o.db"), sqlitestore.WithSynchronous("full"),
			sqlitestore.WithBusyTimeout(time.Second), sqlitestore.WithMaxOpenConns(2))
		require.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: "x"}))
	})
	t.Run("memory mapping", func(t *testing.T) {
		for _, c := range []struct {
			opts []sqlitestore.Option
			want int64
		}{
			{nil, sqlitestore.DefaultMmapSize},
			{[]sqlitestore.Option{sqlitestore.WithMmapSize(0)}, 0},
			{[]sqlitestore.Option{sqlitestore.WithMmapSize(3 << 20)}, 3 << 20},
			{[]sqlitestore.Option{sqlitestore.WithMmapSize(1 << 20)}, 1 << 20},
			{[]sqlitestore.Option{sqlitestore.WithMmapSize(1 << 20), sqlitestore.WithReadOnly()}, 1 << 20},
		} {
			path := filepath.Join(dir, "mmap.db")
			s := open(t, path, c.opts...)
			_, err := s.All(ctx, alice)
			require.NoError(t, err)
			n, err := s.MmapSize()
			require.NoError(t, err)
			assert.Equal(t, c.want, n, "%d options", len(c.opts))
		}
	})
	t.Run("path with URI characters", func(t *testing.T) {
		path := filepath.Join(dir, "we?ird #name%20&x=y.db")
		s := open(t, path)
		require.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: "x"}))
		_, err := os.Stat(path)
		assert.NoError(t, err, "the file is created under its exact name")
	})
}

// TestAppendWaitingForLockHonoursContext holds the file's write lock from
// another connection: an Append gives up when its ctx ends, stores nothing,
// and works again once the lock is released.
func TestAppendWaitingForLockHonoursContext(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlitestore.WithBusyTimeout(20*time.Millisecond))
	db := rawDB(t, path)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Append(short, alice, llms.HumanChatMessage{Content: "x"})
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second, "the wait is bounded by ctx")

	_, err = conn.ExecContext(ctx, `ROLLBACK`)
	require.NoError(t, err)
	require.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: "y"}))
	recs, err := s.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"y"}, contents(recs), "the timed-out Append stored nothing")
}

const childEnv = "SQLITESTORE_TEST_CHILD"

// TestChildProcessWriter appends turns to the file named by the environment;
// it runs only as a child of TestMultiProcessWriters (and the other tests
// that call startChildWriters). A writer named "keyed…" appends turn i of
// every worker under append key "turn-i", with the same text.
func TestChildProcessWriter(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("only run as a child of TestMultiProcessWriters")
	}
	var path, name string
	var turns int
	_, err := fmt.Sscanf(spec, "%s %s %d", &path, &name, &turns)
	require.NoError(t, err)
	s := open(t, path)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range turns {
				ctx := context.Background()
				text := fmt.Sprintf("%s-%d %03d", name, w, i)
				if strings.HasPrefix(name, "keyed") {
					ctx, text = store.WithAppendKey(ctx, fmt.Sprint("turn-", i)), fmt.Sprintf("keyed %03d", i)
				}
				assert.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: text}, llms.AIChatMessage{Content: text}))
			}
		})
	}
	wg.Wait()
}

// startChildWriters starts two child processes that append turns turns
// to path through TestChildProcessWriter, named names (default p1 and
// p2), and returns a func that waits for them and fails t if one failed.
func startChildWriters(path string, turns int, names ...string) (wait func(t *testing.T)) {
	if len(names) == 0 {
		names = []string{"p1", "p2"}
	}
	var cmds []*exec.Cmd
	for _, name := range names {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestChildProcessWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", childEnv, path, name, turns))
		cmds = append(cmds, cmd)
	}
	outs := make([][]byte, len(cmds))
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Go(func() { outs[i], errs[i] = cmd.CombinedOutput() })
	}
	return func(t *testing.T) {
		t.Helper()
		wg.Wait()
		for i := range cmds {
			require.NoError(t, errs[i], "child %d:\n%s", i+1, outs[i])
		}
	}
}

// TestMultiProcessWriters has three processes append to one conversation in
// one file at the same time: nothing is lost, every turn is whole.
func TestMultiProcessWriters(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child process")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	s := open(t, path)
	const turns = 25
	wait := startChildWriters(path, turns)
	for i := range turns {
		text := fmt.Sprintf("p0-0 %03d", i)
		require.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: text}, llms.AIChatMessage{Content: text}))
	}
	wait(t)

	recs, err := s.All(ctx, alice)
	require.NoError(t, err)
	require.Len(t, recs, 2*turns*(1+2*4), "no write of any process is lost")
	next := map[string]int{}
	for i := 0; i < len(recs); i += 2 {
		h, a := recs[i].Message.GetContent(), recs[i+1].Message.GetContent()
		require.Equal(t, h, a, "turns are whole and adjacent")
		var w string
		var n int
		_, err := fmt.Sscanf(h, "%s %d", &w, &n)
		require.NoError(t, err)
		require.Equal(t, next[w], n, "writer %s's order is kept", w)
		next[w]++
		if i > 0 {
			require.Greater(t, recs[i].Seq, recs[i-1].Seq)
		}
	}
	assert.Len(t, next, 9)
}

// TestMultiProcessAppendKeys has three processes, four writers in each
// of the two children, append the same keyed turns to one conversation
// at the same time: each key's turn is stored once, whole, in order, and
// counted once.
func TestMultiProcessAppendKeys(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child process")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	s := open(t, path)
	const turns = 25
	wait := startChildWriters(path, turns, "keyed1", "keyed2")
	for i := range turns {
		text := fmt.Sprintf("keyed %03d", i)
		require.NoError(t, s.Append(store.WithAppendKey(ctx, fmt.Sprint("turn-", i)), alice,
			llms.HumanChatMessage{Content: text}, llms.AIChatMessage{Content: text}))
	}
	wait(t)

	recs, err := s.All(ctx, alice)
	require.NoError(t, err)
	want := make([]string, 0, 2*turns)
	for i := range turns {
		text := fmt.Sprintf("keyed %03d", i)
		want = append(want, text, text)
	}
	// A writer appends turn i after turn i-1 is stored (by it or another),
	// so the turns are in order.
	assert.Equal(t, want, contents(recs), "each keyed turn once, whole, in order")
	st, err := s.Stat(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, statOf(recs), st, "counted once")
}

func TestAsHistoryOverSQLiteSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	s, err := sqlitestore.Open(ctx, path, sqlitestore.WithNamespace("buffer"))
	require.NoError(t, err)

	mem := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s, alice)))
	for i := 1; i <= 3; i++ {
		require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": "q" + strconv.Itoa(i)}, map[string]any{"output": "a" + strconv.Itoa(i)}))
	}
	bobMem := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s, bob)))
	require.NoError(t, bobMem.SaveContext(ctx, map[string]any{"input": "hi"}, map[string]any{"output": "hey"}))
	require.NoError(t, s.Close())

	// A new process: a new Store over the same file.
	s2 := open(t, path, sqlitestore.WithNamespace("buffer"))
	mem2 := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s2, alice)))
	vars, err := mem2.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "Human: q1\nAI: a1\nHuman: q2\nAI: a2\nHuman: q3\nAI: a3", vars["history"])

	mem2r := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s2, alice)), memory.WithReturnMessages(true))
	vars, err = mem2r.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	msgs, ok := vars["history"].([]llms.ChatMessage)
	require.True(t, ok)
	assert.Equal(t, llms.HumanChatMessage{Content: "q1"}, msgs[0])
	assert.Equal(t, llms.AIChatMessage{Content: "a3"}, msgs[5])

	require.NoError(t, mem2.Clear(ctx))
	vars, err = mem2.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "", vars["history"])
	bobVars, err := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s2, bob))).LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "Human: hi\nAI: hey", bobVars["history"], "clearing alice's buffer leaves bob's")

	h := store.AsHistory(s2, alice)
	require.NoError(t, h.SetMessages(ctx, []llms.ChatMessage{llms.SystemChatMessage{Content: "sys"}, llms.HumanChatMessage{Content: "new"}}))
	got, err := h.Messages(ctx)
	require.NoError(t, err)
	assert.Equal(t, []llms.ChatMessage{llms.SystemChatMessage{Content: "sys"}, llms.HumanChatMessage{Content: "new"}}, got)
}

// TestAppendsBehindAnExpiredWriter: while another connection holds the
// write lock, Appends with short deadlines give up and store nothing, and
// Appends with longer ones, queued with them, are all committed once the
// lock is released — whichever of them was the writer when the deadline hit.
func TestAppendsBehindAnExpiredWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path, sqlitestore.WithBusyTimeout(10*time.Millisecond))
	db := rawDB(t, path)
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)

	var wg sync.WaitGroup
	shortErrs := make([]error, 8)
	longErrs := make([]error, 8)
	for i := range 8 {
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, time.Duration(50+10*i)*time.Millisecond)
			defer cancel()
			shortErrs[i] = s.Append(c, alice, llms.HumanChatMessage{Content: "short"})
		})
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			text := fmt.Sprint("long ", i)
			longErrs[i] = s.Append(c, alice, llms.HumanChatMessage{Content: text}, llms.AIChatMessage{Content: text})
		})
	}
	time.Sleep(400 * time.Millisecond) // every short deadline has passed
	_, err = conn.ExecContext(ctx, `ROLLBACK`)
	require.NoError(t, err)
	wg.Wait()

	for i := range 8 {
		assert.ErrorIs(t, shortErrs[i], context.DeadlineExceeded, "short Append %d", i)
		assert.NoError(t, longErrs[i], "long Append %d", i)
	}
	recs, err := s.All(ctx, alice)
	require.NoError(t, err)
	require.Len(t, recs, 16, "every long Append is stored, no short one")
	for i := 0; i < len(recs); i += 2 {
		assert.NotEqual(t, "short", recs[i].Message.GetContent())
		assert.Equal(t, recs[i].Message.GetContent(), recs[i+1].Message.GetContent(), "turns stay whole")
	}
}
