package memstack_test

import (
	"os"
	"testing"

	"github.com/memstack/memstack/internal/testsvc"
)

// TestMain is this package's only TestMain (there can be one per test
// binary): it stops every server the tests started through testsvc — the
// shared `ollama serve` of the Ollama tests — once all tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	testsvc.StopAll()
	os.Exit(code)
}
