//go:build !race

package combined_test

// raceEnabled reports whether the race detector is on: it adds
// allocations of its own, so allocation counts are not compared then.
const raceEnabled = false
