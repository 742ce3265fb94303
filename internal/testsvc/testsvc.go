// Package testsvc starts the real servers memstack's tests run against —
// Redis, PostgreSQL, Ollama — on 127.0.0.1, each on a free port with a
// throwaway data directory, and stops them when the test binary is done.
//
// Servers come from the machine (Debian's redis-server and postgresql
// packages; an ollama binary built by scripts/test.sh). When one is missing a
// test is skipped with a message saying how to install it — except when the
// CI environment variable is set, where a missing server is a test failure,
// never a skip. Nothing here ever talks to an address other than loopback.
package testsvc

import (
	"fmt"
	"net"
	"os"
	"testing"
)

// InCI reports whether the tests run under CI (the CI environment variable
// is set and not "false"), where missing servers are failures.
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// Missing reports a server that cannot be started: a skip on a developer's
// machine, a failure under CI.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		tb.Fatalf("CI is set and a required server is missing: %s", msg)
	}
	tb.Skipf("skipping: %s", msg)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testsvc: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
