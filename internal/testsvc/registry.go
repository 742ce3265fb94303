package testsvc

import "sync"

// The servers this package starts register how to stop themselves here, so
// that one StopAll, called from a test binary's TestMain, stops every server
// of every kind (Redis, PostgreSQL, ...) that the binary started.
var (
	stopMu sync.Mutex
	stops  []func()
)

// registerStop adds f to the functions StopAll runs. Server helpers call it
// once per server they start.
func registerStop(f func()) {
	stopMu.Lock()
	defer stopMu.Unlock()
	stops = append(stops, f)
}

// StopAll stops every server this package started in this test binary and
// removes their data directories; it is safe to call more than once and from
// several goroutines. A package whose tests use testsvc calls it after
// m.Run, because servers are shared by all tests of a binary and outlive any
// single test:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		testsvc.StopAll()
//		os.Exit(code)
//	}
func StopAll() {
	stopMu.Lock()
	fs := stops
	stops = nil
	stopMu.Unlock()
	// Stop in reverse order of start, like deferred calls.
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}
