package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/store/storekit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.StopAll()
	os.Exit(code)
}

// backend is one real store the command runs against: its DSN and two
// namespaces (memory layers) of it.
type backend struct {
	name, dsn, prefix string
	layers            []store.Store
}

func backends(t *testing.T) []backend {
	ctx := context.Background()
	var out []backend

	path := filepath.Join(t.TempDir(), "memory.db")
	var sq []store.Store
	for _, ns := range []string{"recent", "facts"} {
		s, err := sqlitestore.Open(ctx, path, sqlitestore.WithNamespace(ns))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		sq = append(sq, s)
	}
	out = append(out, backend{"SQLite", "sqlite://" + path, "", sq})

	addr := testsvc.Redis(t)
	prefix := "cmdtest-" + strings.ReplaceAll(t.Name(), "/", "-")
	var rs []store.Store
	for _, ns := range []string{"recent", "facts"} {
		s, err := redisstore.Open(ctx, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace(ns))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		rs = append(rs, s)
	}
	out = append(out, backend{"Redis", "redis://" + addr + "/0", prefix, rs})

	dsn := testsvc.Postgres(t)
	tp := fmt.Sprintf("cmd%d_", len(t.Name()))
	var ps []store.Store
	for _, ns := range []string{"recent", "facts"} {
		s, err := pgstore.Open(ctx, dsn, pgstore.WithTablePrefix(tp), pgstore.WithNamespace(ns))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		ps = append(ps, s)
	}
	out = append(out, backend{"PostgreSQL", dsn, tp, ps})
	return out
}

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

var (
	ana1 = memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}
	ana2 = memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c:2"}
	ben  = memstack.Identity{Tenant: "acme", User: "ben", Conversation: "c1"}
	anaB = memstack.Identity{Tenant: "acme", User: "anab", Conversation: "c1"}
)

func TestListExportForget(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for li, s := range b.layers {
				for _, id := range []memstack.Identity{ana1, ana2, ben, anaB} {
					require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: fmt.Sprintf("layer %d: I am %s", li, id.User)}, llms.AIChatMessage{Content: "hi"}))
					st, err := s.GetState(ctx, id, "summary")
					require.NoError(t, err)
					_, err = s.PutState(ctx, id, "summary", []byte(`{"summary":"about `+id.User+`"}`), st.Version)
					require.NoError(t, err)
				}
			}
			common := []string{"-store", b.dsn, "-tenant", "acme"}
			if b.prefix != "" {
				common = append(common, "-prefix", b.prefix)
			}
			withUser := append(append([]string{}, common...), "-user", "ana")

			code, out, errOut := runCmd(t, append([]string{"list"}, withUser...)...)
			require.Equal(t, 0, code, errOut)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, 2, out)
			assert.True(t, strings.HasPrefix(lines[0], ana2.Key()+"\t"), out)
			assert.True(t, strings.HasPrefix(lines[1], ana1.Key()+"\t"), out)

			file := filepath.Join(t.TempDir(), "ana.json")
			code, _, errOut = runCmd(t, append([]string{"export", "-o", file}, withUser...)...)
			require.Equal(t, 0, code, errOut)
			raw, err := os.ReadFile(file)
			require.NoError(t, err)
			var ex struct {
				Tenant     string `json:"tenant"`
				User       string `json:"user"`
				Identities []struct {
					Conversation string `json:"conversation"`
					Namespaces   []struct {
						Namespace string `json:"namespace"`
						Messages  []struct {
							Message struct {
								Type    string `json:"type"`
								Content string `json:"content"`
								At      string `json:"at"`
							} `json:"message"`
						} `json:"messages"`
						States map[string]struct {
							Value string `json:"value"`
						} `json:"states"`
					} `json:"namespaces"`
				} `json:"identities"`
			}
			require.NoError(t, json.Unmarshal(raw, &ex), string(raw))
			assert.Equal(t, "acme", ex.Tenant)
			assert.Equal(t, "ana", ex.User)
			require.Len(t, ex.Identities, 2)
			for _, ie := range ex.Identities {
				require.Len(t, ie.Namespaces, 2, "both layers are exported")
				for _, ne := range ie.Namespaces {
					require.Len(t, ne.Messages, 2)
					assert.Contains(t, ne.Messages[0].Message.Content, "I am ana")
					assert.Equal(t, "human", ne.Messages[0].Message.Type)
					assert.NotEmpty(t, ne.Messages[0].Message.At, "messages carry their time")
					assert.Equal(t, `{"summary":"about ana"}`, ne.States["summary"].Value)
				}
			}
			assert.NotContains(t, string(raw), "I am ben")
			assert.NotContains(t, string(raw), "I am anab")

			code, _, errOut = runCmd(t, append([]string{"forget"}, withUser...)...)
			assert.Equal(t, 2, code, "forget asks for -yes")
			assert.Contains(t, errOut, "-yes")
			code, out, errOut = runCmd(t, append([]string{"forget", "-yes"}, withUser...)...)
			require.Equal(t, 0, code, errOut)
			assert.Contains(t, out, "forgot 2 conversations")
			code, out, _ = runCmd(t, append([]string{"list"}, withUser...)...)
			require.Equal(t, 0, code)
			assert.Empty(t, strings.TrimSpace(out), "nothing of ana is left")
			for _, s := range b.layers {
				for _, id := range []memstack.Identity{ana1, ana2} {
					recs, err := s.All(ctx, id)
					require.NoError(t, err)
					assert.Empty(t, recs)
				}
				for _, id := range []memstack.Identity{ben, anaB} {
					recs, err := s.All(ctx, id)
					require.NoError(t, err)
					assert.Len(t, recs, 2, "%s is untouched", id.Key())
				}
			}

			code, out, errOut = runCmd(t, append([]string{"list", "-all-users"}, common...)...)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, 2, strings.Count(out, "\n"), "ben and anab remain: %s", out)
		})
	}
}

func TestUsageErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.db")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "no command"},
		{"unknown command", []string{"drop"}, 2, `unknown command "drop"`},
		{"no store", []string{"list", "-tenant", "t", "-user", "u"}, 2, "-store is required"},
		{"no user", []string{"list", "-store", missing, "-tenant", "t"}, 2, "exactly one of -user, -empty-user and -all-users"},
		{"user and all users", []string{"list", "-store", missing, "-tenant", "t", "-user", "u", "-all-users"}, 2, "exactly one of -user, -empty-user and -all-users"},
		{"empty user and all users", []string{"list", "-store", missing, "-tenant", "t", "-empty-user", "-all-users"}, 2, "exactly one of -user, -empty-user and -all-users"},
		{"user and empty user", []string{"list", "-store", missing, "-tenant", "t", "-user", "u", "-empty-user"}, 2, "exactly one of -user, -empty-user and -all-users"},
		{"an empty user", []string{"list", "-store", missing, "-tenant", "t", "-user", ""}, 2, "-user is empty: name the empty user with -empty-user"},
		{"no tenant", []string{"list", "-store", missing, "-all-users"}, 2, "-tenant is required (-empty-tenant for the empty tenant)"},
		{"no tenant, one user", []string{"export", "-store", missing, "-user", "u"}, 2, "-tenant is required"},
		{"no tenant, forget", []string{"forget", "-store", missing, "-all-users", "-yes"}, 2, "-tenant is required"},
		{"an empty tenant", []string{"forget", "-store", missing, "-tenant", "", "-all-users", "-yes"}, 2, "-tenant is empty: name the empty tenant with -empty-tenant"},
		{"tenant and empty tenant", []string{"list", "-store", missing, "-tenant", "t", "-empty-tenant", "-all-users"}, 2, "one of -tenant and -empty-tenant, not both"},
		{"unknown DSN", []string{"list", "-store", "mysql://x", "-tenant", "t", "-user", "u"}, 2, "want sqlite:///path"},
		{"forget without -yes", []string{"forget", "-store", missing, "-tenant", "t", "-user", "u"}, 2, "add -yes"},
		{"-o on list", []string{"list", "-store", missing, "-tenant", "t", "-user", "u", "-o", "x"}, 2, "-o is for export"},
		{"a missing SQLite file", []string{"list", "-store", missing, "-tenant", "t", "-user", "u"}, 1, "nope.db"},
		{"a password is not printed", []string{"list", "-store", "postgres://me:secret@127.0.0.1:1/db?connect_timeout=1", "-tenant", "t", "-user", "u"}, 1, "me:xxxxx@"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runCmd(t, c.args...)
			assert.Equal(t, c.code, code, errOut)
			assert.Contains(t, errOut, c.want)
			assert.NotContains(t, errOut, "secret")
		})
	}
	_, err := os.Stat(missing)
	assert.True(t, os.IsNotExist(err), "the command never creates a store")
}

// noTenant are identities of the empty tenant: an application that does
// not use tenants keeps every user there.
var (
	noTenantU1 = memstack.Identity{User: "u1", Conversation: "c1"}
	noTenantU2 = memstack.Identity{User: "u2", Conversation: "c1"}
)

// TestTenantIsRequired: -all-users without -tenant used to forget every
// user of the empty tenant — for an application without tenants,
// everyone — and exit 0. The tenant must be named: -tenant T, or
// -empty-tenant for the empty one; an empty -tenant (an unset shell
// variable) is refused as well.
func TestTenantIsRequired(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			ids := []memstack.Identity{noTenantU1, noTenantU2, ana1}
			for _, s := range b.layers {
				for _, id := range ids {
					require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: "I am " + id.User}, llms.AIChatMessage{Content: "hi"}))
				}
			}
			common := []string{"-store", b.dsn}
			if b.prefix != "" {
				common = append(common, "-prefix", b.prefix)
			}
			with := func(cmd string, args ...string) []string {
				return append(append([]string{cmd}, args...), common...)
			}
			for _, c := range []struct {
				args []string
				want string
			}{
				{with("forget", "-all-users", "-yes"), "-tenant"},
				{with("list", "-all-users"), "-tenant"},
				{with("export", "-all-users"), "-tenant"},
				{with("forget", "-user", "u1", "-yes"), "-tenant"},
				{with("forget", "-all-users", "-yes", "-tenant", ""), "-empty-tenant"},
				{with("list", "-all-users", "-tenant", ""), "-empty-tenant"},
				{with("forget", "-all-users", "-yes", "-tenant", "acme", "-empty-tenant"), "-empty-tenant"},
				{with("forget", "-empty-tenant", "-user", "", "-yes"), "-empty-user"},
			} {
				code, out, errOut := runCmd(t, c.args...)
				assert.Equal(t, 2, code, "%q: %s%s", c.args, out, errOut)
				assert.Contains(t, errOut, c.want, "%q", c.args)
				assert.NotContains(t, out, "forgot", "%q", c.args)
			}
			for _, s := range b.layers {
				for _, id := range ids {
					recs, err := s.All(ctx, id)
					require.NoError(t, err)
					assert.Len(t, recs, 2, "%s is untouched", id.Key())
				}
			}

			code, out, errOut := runCmd(t, with("list", "-empty-tenant", "-all-users")...)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, 2, strings.Count(out, "\n"), out)
			code, out, errOut = runCmd(t, with("forget", "-empty-tenant", "-all-users", "-yes")...)
			require.Equal(t, 0, code, errOut)
			assert.Contains(t, out, `forgot 2 conversations of tenant "" (every user)`)
			for _, s := range b.layers {
				for _, id := range []memstack.Identity{noTenantU1, noTenantU2} {
					recs, err := s.All(ctx, id)
					require.NoError(t, err)
					assert.Empty(t, recs, "%s is forgotten", id.Key())
				}
				recs, err := s.All(ctx, ana1)
				require.NoError(t, err)
				assert.Len(t, recs, 2, "another tenant is untouched")
			}
		})
	}
}

// fileState is what a SQLite file and its companions hold: the database
// file's hash, and which of -wal, -shm and -journal exist with what size.
func fileState(t *testing.T, path string) map[string]string {
	t.Helper()
	out := map[string]string{}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	out[""] = fmt.Sprintf("%x", sha256.Sum256(raw))
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if fi, err := os.Stat(path + suffix); err == nil {
			out[suffix] = fmt.Sprint(fi.Size())
		}
	}
	return out
}

// TestForeignSQLiteFileUntouched: every command against a SQLite file
// that holds no memstack tables used to create six tables and switch the
// file to WAL. Now each says so and exits 1, and the file is the same
// byte for byte, with no -wal, -shm or -journal next to it.
func TestForeignSQLiteFileUntouched(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	for _, q := range []string{
		`CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`,
		`INSERT INTO notes (body) VALUES ('not memstack''s')`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	before := fileState(t, path)
	require.Len(t, before, 1, "no companion files: %v", before)

	out := filepath.Join(t.TempDir(), "export.json")
	for _, dsn := range []string{"sqlite://" + path, path} {
		for _, args := range [][]string{
			{"list", "-tenant", "acme", "-user", "ana"},
			{"list", "-tenant", "acme", "-all-users"},
			{"export", "-tenant", "acme", "-user", "ana"},
			{"export", "-tenant", "acme", "-all-users", "-o", out},
			{"forget", "-tenant", "acme", "-user", "ana", "-yes"},
			{"forget", "-tenant", "acme", "-all-users", "-yes"},
		} {
			args = append(args, "-store", dsn)
			code, stdout, errOut := runCmd(t, args...)
			assert.Equal(t, 1, code, "%q: %s%s", args, stdout, errOut)
			assert.Contains(t, errOut, "opening "+path+": no memstack tables in the file", "%q", args)
			assert.Empty(t, stdout, "%q", args)
			assert.Equal(t, before, fileState(t, path), "%q changed the file", args)
		}
	}
	_, err = os.Stat(out)
	assert.True(t, os.IsNotExist(err), "no export file is left: %v", err)

	db, err = sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var tables string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT group_concat(name) FROM sqlite_schema`).Scan(&tables))
	assert.Equal(t, "notes", tables)
	var mode string
	require.NoError(t, db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
	assert.Equal(t, "delete", mode)
}

// TestReadOnlyCommandsWriteNothing: list and export of a memstack file
// used to open it for writing (registering a namespace, which changed the
// file). Now they read it read-only: the database file is the same byte
// for byte; the only trace is SQLite's own -wal (empty) and -shm files,
// which every reader of a WAL file creates when they are missing.
func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	s, err := sqlitestore.Open(ctx, path, sqlitestore.WithNamespace("recent"))
	require.NoError(t, err)
	for _, id := range []memstack.Identity{ana1, ben} {
		require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: "I am " + id.User}, llms.AIChatMessage{Content: "hi"}))
	}
	require.NoError(t, s.Close())
	before := fileState(t, path)
	require.Len(t, before, 1, "at rest, a WAL file has no companions: %v", before)

	dsn := "sqlite://" + path
	code, out, errOut := runCmd(t, "list", "-store", dsn, "-tenant", "acme", "-all-users")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, 2, strings.Count(out, "\n"), out)
	code, out, errOut = runCmd(t, "export", "-store", dsn, "-tenant", "acme", "-user", "ana")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "I am ana")
	code, out, errOut = runCmd(t, "list", "-store", dsn, "-tenant", "acme", "-user", "nobody")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, out)
	assert.Contains(t, errOut, `no conversations of user "nobody" of tenant "acme" in `+path)

	after := fileState(t, path)
	assert.Equal(t, before[""], after[""], "the database file is unchanged")
	assert.Equal(t, "0", after["-wal"], "the WAL is empty: %v", after)
	assert.NotContains(t, after, "-journal")

	// The file reads the same, and no namespace was registered.
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var nss string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT group_concat(ns) FROM memstack_namespaces`).Scan(&nss))
	assert.Equal(t, "recent", nss)

	// forget writes what it removes, and nothing else: no namespace of
	// its own either.
	code, out, errOut = runCmd(t, "forget", "-store", dsn, "-tenant", "acme", "-user", "ana", "-yes")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "forgot 1 conversations")
	require.NoError(t, db.QueryRowContext(ctx, `SELECT group_concat(ns) FROM memstack_namespaces`).Scan(&nss))
	assert.Equal(t, "recent", nss)
	var keys string
	require.NoError(t, db.QueryRowContext(ctx, `SELECT group_concat(DISTINCT identity) FROM memstack_messages`).Scan(&keys))
	assert.Equal(t, ben.Key(), keys)
}

// schemaV1 is memstack's SQLite schema version 1, as the builds before
// memstack_stat created it (store/sqlitestore's migrate_test.go).
var schemaV1 = []string{
	`PRAGMA journal_mode=WAL`,
	`CREATE TABLE memstack_schema (version INTEGER NOT NULL)`,
	`CREATE TABLE memstack_messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, ns TEXT NOT NULL, identity TEXT NOT NULL, system INTEGER NOT NULL, message BLOB NOT NULL)`,
	`CREATE INDEX memstack_messages_conv ON memstack_messages (ns, identity, seq)`,
	`CREATE TABLE memstack_state (ns TEXT NOT NULL, identity TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (ns, identity, name)) WITHOUT ROWID`,
	`CREATE TABLE memstack_namespaces (ns TEXT PRIMARY KEY) WITHOUT ROWID`,
	`CREATE TABLE memstack_counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL)`,
	`INSERT INTO memstack_counter (id, value) VALUES (1, 0)`,
	`INSERT INTO memstack_schema (version) VALUES (1)`,
	`INSERT INTO memstack_namespaces (ns) VALUES ('recent')`,
}

// TestOldSchemaNotMigrated: the command used to migrate a file of an
// older schema version, under an application that may still run the
// older build. Now every command refuses it, saying it needs migrating by
// the application, and leaves it as it was.
func TestOldSchemaNotMigrated(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	for _, q := range schemaV1 {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	msg, err := storekit.EncodeMessageAt(llms.HumanChatMessage{Content: "I am ana"}, storekit.AppendTime(ctx))
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO memstack_messages (ns, identity, system, message) VALUES ('recent', ?, 0, ?)`, ana1.Key(), msg)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before := fileState(t, path)

	for _, args := range [][]string{
		{"list", "-tenant", "acme", "-user", "ana"},
		{"export", "-tenant", "acme", "-all-users"},
		{"forget", "-tenant", "acme", "-user", "ana", "-yes"},
	} {
		args = append(args, "-store", "sqlite://"+path)
		code, out, errOut := runCmd(t, args...)
		assert.Equal(t, 1, code, "%q: %s%s", args, out, errOut)
		assert.Contains(t, errOut, "schema version 1", "%q", args)
		assert.Contains(t, errOut, "migrat", "%q", args)
		assert.Empty(t, out)
		assert.Equal(t, before[""], fileState(t, path)[""], "%q changed the file", args)
	}
	s, err := sqlitestore.Open(ctx, path) // the application's build migrates it
	require.NoError(t, err)
	require.NoError(t, s.Close())
	code, out, errOut := runCmd(t, "list", "-store", "sqlite://"+path, "-tenant", "acme", "-user", "ana")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, ana1.Key())
}

// TestReadOnlyStores: list and export open every backend so that it
// cannot write — SQLite read-only, PostgreSQL in read-only sessions — and
// never touch what a Redis server holds; a PostgreSQL prefix without
// tables is reported, not created.
func TestReadOnlyStores(t *testing.T) {
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for _, s := range b.layers {
				require.NoError(t, s.Append(ctx, ana1, llms.HumanChatMessage{Content: "I am ana"}))
			}
			o := options{dsn: b.dsn, prefix: b.prefix, readOnly: true}
			s, _, closeStore, err := openStore(ctx, o)
			require.NoError(t, err)
			defer closeStore()
			if b.name != "Redis" { // Redis has no read-only connections: see the snapshot below
				err = s.Append(ctx, ana1, llms.HumanChatMessage{Content: "a write"})
				require.Error(t, err, "a read-only store refuses writes")
				assert.Regexp(t, "read-?only", err.Error())
				recs, err := b.layers[0].All(ctx, ana1)
				require.NoError(t, err)
				assert.Len(t, recs, 1)
			}

			var before map[string]string
			if b.name == "Redis" {
				before = redisSnapshot(t, b.dsn)
			}
			common := []string{"-store", b.dsn, "-tenant", "acme"}
			if b.prefix != "" {
				common = append(common, "-prefix", b.prefix)
			}
			for _, args := range [][]string{
				{"list", "-all-users"}, {"list", "-user", "nobody"},
				{"export", "-all-users"}, {"export", "-user", "nobody"},
			} {
				code, _, errOut := runCmd(t, append(args, common...)...)
				require.Equal(t, 0, code, "%q: %s", args, errOut)
			}
			if b.name == "Redis" {
				assert.Equal(t, before, redisSnapshot(t, b.dsn), "list and export changed nothing on the server")
			}
		})
	}

	t.Run("PostgreSQL without tables", func(t *testing.T) {
		dsn := testsvc.Postgres(t)
		for _, cmd := range [][]string{{"list", "-user", "ana"}, {"export", "-all-users"}, {"forget", "-all-users", "-yes"}} {
			code, out, errOut := runCmd(t, append(cmd, "-store", dsn, "-prefix", "cmdnotables_", "-tenant", "acme")...)
			assert.Equal(t, 1, code, "%q: %s%s", cmd, out, errOut)
			assert.Contains(t, errOut, fmt.Sprintf("no memstack tables at schema version %d in ", pgstore.SchemaVersion), cmd)
			assert.Contains(t, errOut, `(table prefix "cmdnotables_")`, cmd)
		}
		_, err := pgstore.Open(ctx, dsn, pgstore.WithTablePrefix("cmdnotables_"), pgstore.WithoutDDL())
		require.ErrorIs(t, err, pgstore.ErrSchemaVersion)
		assert.Contains(t, err.Error(), "do not exist", "no table was created")
	})
}

// redisSnapshot returns every key of the Redis database at url with its
// serialized value.
func redisSnapshot(t *testing.T, url string) map[string]string {
	t.Helper()
	ctx := context.Background()
	opts, err := redis.ParseURL(url)
	require.NoError(t, err)
	c := redis.NewClient(opts)
	defer c.Close()
	keys, err := c.Keys(ctx, "*").Result()
	require.NoError(t, err)
	out := map[string]string{}
	for _, k := range keys {
		v, err := c.Dump(ctx, k).Result()
		require.NoError(t, err)
		ttl, err := c.PTTL(ctx, k).Result()
		require.NoError(t, err)
		out[k] = fmt.Sprintf("%x ttl=%v", v, ttl > 0)
	}
	require.NotEmpty(t, out)
	return out
}
