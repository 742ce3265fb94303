//go:build race

package tokens

// raceEnabled reports whether the race detector is on: it slows the
// regexp a test compares with, so that test samples runes.
const raceEnabled = true
