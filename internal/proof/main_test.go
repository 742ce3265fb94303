package proof_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/memstack/memstack/internal/testsvc"
)

// TestMain stops the servers the tests started through testsvc (the shared
// Redis and PostgreSQL servers and the private ones of the fault tests)
// once all tests are done.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // go-redis logs every failed dial during the outages
	code := m.Run()
	testsvc.StopAll()
	os.Exit(code)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
