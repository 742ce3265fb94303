package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/sqlitestore"
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
		{"no user", []string{"list", "-store", missing, "-tenant", "t"}, 2, "exactly one of -user and -all-users"},
		{"user and all users", []string{"list", "-store", missing, "-tenant", "t", "-user", "u", "-all-users"}, 2, "exactly one of -user and -all-users"},
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
