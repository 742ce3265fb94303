//go:build !race

package tokens

// raceEnabled reports whether the race detector is on (it is not).
const raceEnabled = false
