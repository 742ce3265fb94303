package proof_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/adk/v2/session"

	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/store/sqlitestore"
)

// TestADKUserForgottenByCommand: the memstack command exports and forgets
// an ADK user (app → -tenant, user → -user) from the store the services
// use: the memory of every session, the sessions and the user's state,
// and nothing of another user.
func TestADKUserForgottenByCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "memstack")
	build := exec.Command("go", "build", "-o", bin, "github.com/memstack/memstack/cmd/memstack")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the memstack command: %s", out)

	path := filepath.Join(dir, "agent.db")
	st, err := sqlitestore.Open(openCtx(t), path)
	s := closeLater(t, "sqlitestore.Open", st, err)
	sessions, err := adk.NewSessionService(s)
	require.NoError(t, err)
	mem, err := adk.NewMemoryService(s)
	require.NoError(t, err)
	f := adkFixture{st: s, sessions: sessions, mem: mem}
	ctx := context.Background()
	for _, user := range []string{"ana", "bo"} {
		sess := f.session(t, "travel", user, "s1",
			adkText("e1", "user", adkDay, "The offsite is in Lisbon, says "+user+"."),
			adkText("e2", "planner", adkDay.Add(time.Minute), "Noted: Lisbon."))
		require.NoError(t, mem.AddSessionToMemory(ctx, sess))
	}
	_, err = sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s2", State: map[string]any{"user:tier": "gold"}})
	require.NoError(t, err)

	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		require.NoError(t, err, "memstack %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	dsn := "sqlite://" + path
	exported := filepath.Join(dir, "ana.json")
	run("export", "-store", dsn, "-tenant", "travel", "-user", "ana", "-o", exported)
	data, err := os.ReadFile(exported)
	require.NoError(t, err)
	assert.Contains(t, string(data), "says ana", "the memory of the session")
	assert.Contains(t, string(data), "adk-event", "the session's events")
	assert.Contains(t, string(data), "gold", "the user's state")
	assert.NotContains(t, string(data), "says bo")

	assert.Contains(t, run("forget", "-store", dsn, "-tenant", "travel", "-user", "ana", "-yes"), "forgot")
	assert.Empty(t, search(t, mem, "travel", "ana", "offsite Lisbon"))
	_, err = sessions.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
	assert.ErrorIs(t, err, adk.ErrSessionNotFound)
	assert.NotEmpty(t, search(t, mem, "travel", "bo", "offsite Lisbon"), "bo is kept")
	got, err := sessions.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "bo", SessionID: "s1"})
	require.NoError(t, err)
	assert.Equal(t, 2, got.Session.Events().Len())
}
