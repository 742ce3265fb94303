package testsvc

import (
	"os"
	"testing"
)

// TestMain is this package's only TestMain (there can be one per test
// binary): it stops every server the tests started — Redis, PostgreSQL —
// once all tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	StopAll()
	os.Exit(code)
}
