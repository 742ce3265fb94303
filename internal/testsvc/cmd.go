package testsvc

// Servers for programs that have no testing.TB, such as cmd/memstack-bench.
//
// The functions here start the same throwaway servers as Redis and Postgres
// (loopback only, a free port, a temporary data directory, a parent-death
// signal), but each call starts a server of its own that nothing else
// shares, reports problems as errors instead of skipping or failing a test,
// and leaves stopping it to the caller: call Stop when done (StopAll does
// not know these servers). If the program dies first, the parent-death
// signal takes the server down; only its temporary directory is left.

import (
	"errors"
	"fmt"
)

// ErrPostgresNotInstalled is wrapped by StartPostgresServer's error when
// PostgreSQL's initdb and postgres binaries cannot be found (or, running as
// root, there is no postgres user to run them as).
var ErrPostgresNotInstalled = errors.New("testsvc: PostgreSQL is not installed")

// StartRedisServer starts a private Redis server on 127.0.0.1 that keeps
// nothing on disk (--save "", --appendonly no, as the shared test server)
// and returns it once it answers PING. The caller must call Stop, which
// kills the server and removes its data directory. The error wraps
// ErrRedisNotInstalled when there is no redis-server binary.
func StartRedisServer() (*RedisServer, error) {
	return redisStart(false, false)
}

// StartPostgresServer starts a private PostgreSQL server on 127.0.0.1
// (initdb into a temporary directory, trust authentication, fsync=off, as
// the shared test server) and returns it once it accepts connections; its
// DSN method gives the connection string. The caller must call Stop, which
// stops the server and removes its data. The error wraps
// ErrPostgresNotInstalled when PostgreSQL is missing.
func StartPostgresServer() (*PostgresServer, error) {
	s, missing, err := pgStart()
	if err != nil {
		if missing {
			return nil, fmt.Errorf("%w: %w", ErrPostgresNotInstalled, err)
		}
		return nil, fmt.Errorf("testsvc: starting a PostgreSQL server: %w", err)
	}
	return s, nil
}
