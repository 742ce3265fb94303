package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
)

// newSQLiteFile creates a memstack SQLite file, as an application would.
func newSQLiteFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "memory.db")
	s, err := sqlitestore.Open(context.Background(), path)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	return path
}

// importJSONL is two conversations of a user: a trip with a system
// prompt and enough turns to be summarized, and a billing question.
func importJSONL() string {
	day := time.Date(2025, 3, 2, 10, 0, 0, 0, time.UTC)
	var b strings.Builder
	line := func(conv, role, content string, at time.Time) {
		fmt.Fprintf(&b, `{"conversation":%q,"role":%q,"content":%q,"time":%q}`+"\n", conv, role, content, at.Format(time.RFC3339))
	}
	line("trip", "system", "You are a travel agent.", day)
	line("trip", "user", "I live in Oslo.", day.Add(time.Second))
	line("trip", "assistant", "Oslo is lovely.", day.Add(2*time.Second))
	line("billing", "user", "Where is invoice 4711?", day.Add(time.Minute))
	line("billing", "assistant", "Invoice 4711 was paid on 1 March.", day.Add(time.Minute+time.Second))
	for i := range 9 {
		at := day.Add(time.Duration(1+i) * time.Hour)
		line("trip", "user", fmt.Sprintf("Question %d: does the Lisbon flight leave on day %d?", i, i+1), at)
		line("trip", "assistant", fmt.Sprintf("Answer %d: yes, on day %d.", i, i+1), at.Add(time.Second))
	}
	line("trip", "user", "Thanks!", day.Add(12*time.Hour))
	return b.String()
}

var exportedAt = regexp.MustCompile(`(?m)^\s*"exported_at": ".*",\n`)

func exportUser(t *testing.T, dsn string) string {
	t.Helper()
	code, out, errOut := runCmd(t, "export", "-store", dsn, "-tenant", "acme", "-user", "ana")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, exportedAt, out)
	return exportedAt.ReplaceAllString(out, "")
}

func TestImportSQLiteTwice(t *testing.T) {
	ctx := context.Background()
	path := newSQLiteFile(t)
	file := filepath.Join(t.TempDir(), "history.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(importJSONL()), 0o600))
	dsn := "sqlite://" + path

	code, out, errOut := runCmd(t, "import", "-store", dsn, "-tenant", "acme", "-user", "ana", file)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "imported 2 conversations, 11 exchanges, 24 messages (0 already stored, 0 skipped)\n", out)
	first := exportUser(t, dsn)

	const want = "imported 2 conversations, 0 exchanges, 0 messages (24 already stored, 0 skipped)\n"
	code, out, errOut = runCmd(t, "import", "-store", dsn, "-tenant", "acme", "-user", "ana", file)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, want, out, "the second import finds every message stored")
	assert.Equal(t, first, exportUser(t, dsn), "the second import changed the store")

	// The application's stack, opened on the file as the README does,
	// finds the imported history at its times, and what the layers derived.
	s, err := sqlitestore.Open(ctx, path)
	require.NoError(t, err)
	defer s.Close()
	trip := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "trip"}
	recs, err := s.All(ctx, trip)
	require.NoError(t, err)
	require.Len(t, recs, 1+2+18+1)
	assert.True(t, recs[0].Time.Equal(time.Date(2025, 3, 2, 10, 0, 0, 0, time.UTC)))
	assert.True(t, recs[len(recs)-1].Time.Equal(time.Date(2025, 3, 2, 22, 0, 0, 0, time.UTC)))
	st, err := s.GetState(ctx, trip, memories.SummaryStateName)
	require.NoError(t, err)
	assert.NotEmpty(t, st.Value, "no summary")
	assert.Contains(t, first, "Oslo")
	assert.Contains(t, first, `"conversation": "\u0000memstack-user-facts"`)

	// The same file through standard input: nothing new either.
	stdin = strings.NewReader(importJSONL())
	t.Cleanup(func() { stdin = os.Stdin })
	code, out, errOut = runCmd(t, "import", "-store", path, "-tenant", "acme", "-user", "ana", "-")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, want, out)
	assert.Equal(t, first, exportUser(t, dsn))
}

func TestImportExportIntoAnotherFile(t *testing.T) {
	// export → import into a new file → export: the same transcripts.
	src := newSQLiteFile(t)
	jsonl := filepath.Join(t.TempDir(), "history.jsonl")
	require.NoError(t, os.WriteFile(jsonl, []byte(importJSONL()), 0o600))
	code, _, errOut := runCmd(t, "import", "-store", src, "-tenant", "acme", "-user", "ana", jsonl)
	require.Equal(t, 0, code, errOut)
	exported := filepath.Join(t.TempDir(), "ana.json")
	code, _, errOut = runCmd(t, "export", "-store", src, "-tenant", "acme", "-user", "ana", "-o", exported)
	require.Equal(t, 0, code, errOut)

	dst := newSQLiteFile(t)
	code, out, errOut := runCmd(t, "import", "-store", dst, "-tenant", "acme", "-user", "ana", "-namespace", "layers", exported)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "imported 2 conversations, 11 exchanges, 24 messages (0 already stored, 0 skipped)\n", out)

	ctx := context.Background()
	a, err := sqlitestore.Open(ctx, src)
	require.NoError(t, err)
	defer a.Close()
	b, err := sqlitestore.Open(ctx, dst, sqlitestore.WithNamespace("layers"))
	require.NoError(t, err)
	defer b.Close()
	for _, conv := range []string{"trip", "billing"} {
		id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: conv}
		ra, err := a.All(ctx, id)
		require.NoError(t, err)
		rb, err := b.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, rb, len(ra))
		for i := range ra {
			assert.Equal(t, ra[i].Message, rb[i].Message)
			assert.True(t, ra[i].Time.Equal(rb[i].Time))
		}
	}
}

func TestImportErrors(t *testing.T) {
	path := newSQLiteFile(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	require.NoError(t, os.WriteFile(good, []byte(importJSONL()), 0o600))
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(importJSONL()+`{"conversation":"x","role":"wizard","content":"s3cret","time":"2025-03-02T10:00:00Z"}`+"\n"), 0o600))
	missing := filepath.Join(dir, "nope.db")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no file", []string{"import", "-store", path, "-tenant", "acme", "-user", "ana"}, 2, "name the FILE"},
		{"two files", []string{"import", "-store", path, "-tenant", "acme", "-user", "ana", good, good}, 2, "unexpected argument"},
		{"all users", []string{"import", "-store", path, "-tenant", "acme", "-all-users", good}, 2, "-all-users does not apply"},
		{"no user", []string{"import", "-store", path, "-tenant", "acme", good}, 2, "exactly one of -user"},
		{"no tenant", []string{"import", "-store", path, "-user", "ana", good}, 2, "-tenant is required"},
		{"empty namespace", []string{"import", "-store", path, "-tenant", "acme", "-user", "ana", "-namespace", "", good}, 2, "-namespace is empty"},
		{"namespace on export", []string{"export", "-store", path, "-tenant", "acme", "-user", "ana", "-namespace", "x"}, 2, "-namespace is for import"},
		{"a missing file", []string{"import", "-store", path, "-tenant", "acme", "-user", "ana", filepath.Join(dir, "nope.jsonl")}, 1, "nope.jsonl"},
		{"a bad line", []string{"import", "-store", path, "-tenant", "acme", "-user", "ana", bad}, 1, `line 25: field "role"`},
		{"a missing store", []string{"import", "-store", missing, "-tenant", "acme", "-user", "ana", good}, 1, "nope.db"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, c.args...)
			assert.Equal(t, c.code, code, errOut)
			assert.Empty(t, out)
			assert.Contains(t, errOut, c.want)
			assert.NotContains(t, errOut, "s3cret")
		})
	}
	_, err := os.Stat(missing)
	assert.True(t, os.IsNotExist(err), "import never creates a store")
	// Nothing was imported by the failing commands.
	s, err := sqlitestore.Open(context.Background(), path)
	require.NoError(t, err)
	defer s.Close()
	ids, err := s.Identities(context.Background(), store.UserScope("acme", "ana"))
	require.NoError(t, err)
	assert.Empty(t, ids)
}

func TestImportEveryBackendTwice(t *testing.T) {
	file := filepath.Join(t.TempDir(), "history.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(importJSONL()), 0o600))
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			common := []string{"-store", b.dsn, "-tenant", "acme", "-user", "ana"}
			if b.prefix != "" {
				common = append(common, "-prefix", b.prefix)
			}
			export := func() string {
				code, out, errOut := runCmd(t, append([]string{"export"}, common...)...)
				require.Equal(t, 0, code, errOut)
				return exportedAt.ReplaceAllString(out, "")
			}
			imp := append(append([]string{"import"}, common...), "-namespace", "recent", file)
			code, out, errOut := runCmd(t, imp...)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, "imported 2 conversations, 11 exchanges, 24 messages (0 already stored, 0 skipped)\n", out)
			first := export()
			assert.Contains(t, first, "Invoice 4711 was paid on 1 March.")
			code, _, errOut = runCmd(t, imp...)
			require.Equal(t, 0, code, errOut)
			assert.Equal(t, first, export(), "the second import changed the store")
			recs, err := b.layers[0].All(context.Background(), memstack.Identity{Tenant: "acme", User: "ana", Conversation: "billing"})
			require.NoError(t, err)
			require.Len(t, recs, 2)
			assert.True(t, recs[0].Time.Equal(time.Date(2025, 3, 2, 10, 1, 0, 0, time.UTC)))
		})
	}
}
