package testsvc

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// psql runs one SQL command against dsn with the server's own psql (this
// module has no PostgreSQL driver) and returns its unaligned output.
func psql(t *testing.T, dsn, sql string) (string, error) {
	t.Helper()
	bin, err := pgFindBin()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "psql"), "-X", "-q", "-t", "-A", "-w", "-F", "|", "-v", "ON_ERROR_STOP=1", "-c", sql, dsn).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("psql: %w: %s", err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out)), nil
}

func mustPsql(t *testing.T, dsn, sql string) string {
	t.Helper()
	out, err := psql(t, dsn, sql)
	require.NoError(t, err)
	return out
}

func TestPostgresShared(t *testing.T) {
	dsn := Postgres(t)
	assert.Equal(t, dsn, Postgres(t), "the shared server is started once per test binary")

	u, err := url.Parse(dsn)
	require.NoError(t, err)
	assert.Equal(t, "postgres", u.Scheme)
	assert.Equal(t, "127.0.0.1", u.Hostname())
	assert.Equal(t, "disable", u.Query().Get("sslmode"))

	row := strings.Split(mustPsql(t, dsn, "SELECT current_setting('listen_addresses'), current_setting('unix_socket_directories'), current_setting('fsync'), current_setting('synchronous_commit')"), "|")
	require.Len(t, row, 4)
	listen, sockets, fsync, syncCommit := row[0], row[1], row[2], row[3]
	assert.Equal(t, "127.0.0.1", listen, "the server listens on loopback only")
	assert.NotEqual(t, "/var/run/postgresql", sockets, "the unix socket lives in the throwaway directory")
	assert.Equal(t, "off", fsync)
	assert.Equal(t, "on", syncCommit, "commits are acknowledged only after the WAL is written")
}

func TestStartPostgresKillRestart(t *testing.T) {
	srv := StartPostgres(t)
	assert.NotEqual(t, srv.DSN(), Postgres(t), "a private server is not the shared one")
	mustPsql(t, srv.DSN(), "CREATE TABLE kept (v text)")
	mustPsql(t, srv.DSN(), "INSERT INTO kept VALUES ('acknowledged')")

	require.NoError(t, srv.Kill())
	require.NoError(t, srv.Kill(), "killing a stopped server is a no-op")
	_, err := psql(t, srv.DSN()+"&connect_timeout=2", "SELECT 1")
	assert.Error(t, err, "nothing listens after Kill")

	require.NoError(t, srv.Restart())
	assert.Equal(t, "acknowledged", mustPsql(t, srv.DSN(), "SELECT v FROM kept"), "an acknowledged commit survives a crash")

	// Restart of a running server kills it first and comes back.
	require.NoError(t, srv.Restart())
	assert.Equal(t, "acknowledged", mustPsql(t, srv.DSN(), "SELECT v FROM kept"))

	srv.Stop()
	srv.Stop() // idempotent
	assert.Error(t, srv.Restart(), "a stopped server's data is gone")
}

func TestPgFindBinPicksNewest(t *testing.T) {
	assert.Greater(t, pgVersion("/usr/lib/postgresql/16/bin"), pgVersion("/usr/lib/postgresql/15/bin"))
	assert.Greater(t, pgVersion("/usr/lib/postgresql/10/bin"), pgVersion("/usr/lib/postgresql/9.6/bin"))
	assert.Equal(t, -1.0, pgVersion("/opt/pg/bin"))
}
