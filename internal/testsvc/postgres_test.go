package testsvc

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pgConnect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestPostgresShared(t *testing.T) {
	dsn := Postgres(t)
	assert.Equal(t, dsn, Postgres(t), "the shared server is started once per test binary")

	u, err := url.Parse(dsn)
	require.NoError(t, err)
	assert.Equal(t, "postgres", u.Scheme)
	assert.Equal(t, "127.0.0.1", u.Hostname())
	assert.Equal(t, "disable", u.Query().Get("sslmode"))

	ctx := context.Background()
	conn := pgConnect(t, dsn)
	var listen, sockets, fsync, syncCommit string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_setting('listen_addresses'), current_setting('unix_socket_directories'), current_setting('fsync'), current_setting('synchronous_commit')").
		Scan(&listen, &sockets, &fsync, &syncCommit))
	assert.Equal(t, "127.0.0.1", listen, "the server listens on loopback only")
	assert.NotEqual(t, "/var/run/postgresql", sockets, "the unix socket lives in the throwaway directory")
	assert.Equal(t, "off", fsync)
	assert.Equal(t, "on", syncCommit, "commits are acknowledged only after the WAL is written")
}

func TestStartPostgresKillRestart(t *testing.T) {
	srv := StartPostgres(t)
	assert.NotEqual(t, srv.DSN(), Postgres(t), "a private server is not the shared one")
	ctx := context.Background()

	conn := pgConnect(t, srv.DSN())
	_, err := conn.Exec(ctx, "CREATE TABLE kept (v text)")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO kept VALUES ('acknowledged')")
	require.NoError(t, err)

	require.NoError(t, srv.Kill())
	require.NoError(t, srv.Kill(), "killing a stopped server is a no-op")

	// The old connection is broken and a new one is refused.
	_, err = conn.Exec(ctx, "SELECT 1")
	assert.Error(t, err, "a connection to a killed server fails")
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = pgx.Connect(short, srv.DSN())
	assert.Error(t, err, "nothing listens after Kill")

	require.NoError(t, srv.Restart())
	conn2 := pgConnect(t, srv.DSN())
	var v string
	require.NoError(t, conn2.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))
	assert.Equal(t, "acknowledged", v, "an acknowledged commit survives a crash")

	// Restart of a running server kills it first and comes back.
	require.NoError(t, srv.Restart())
	conn3 := pgConnect(t, srv.DSN())
	require.NoError(t, conn3.QueryRow(ctx, "SELECT v FROM kept").Scan(&v))

	srv.Stop()
	srv.Stop() // idempotent
	assert.Error(t, srv.Restart(), "a stopped server's data is gone")
}

func TestPgFindBinPicksNewest(t *testing.T) {
	assert.Greater(t, pgVersion("/usr/lib/postgresql/16/bin"), pgVersion("/usr/lib/postgresql/15/bin"))
	assert.Greater(t, pgVersion("/usr/lib/postgresql/10/bin"), pgVersion("/usr/lib/postgresql/9.6/bin"))
	assert.Equal(t, -1.0, pgVersion("/opt/pg/bin"))
}
