package memories

import "time"

// factsSettings holds the options of the Facts memory (see facts.go, where
// the options are defined). A zero field means "not set": the constructor
// applies the default.
type factsSettings struct {
	maxPerTurn int
	maxFacts   int
	tokens     int
	clock      func() time.Time
	hook       func(FactsEvent)
	perUser    bool
	timeout    time.Duration
}

// factsCount is the option name(n) of a count that must be at least 1:
// it runs set, or records the error of a smaller n.
func factsCount(name string, n int, set func(*factsSettings)) FactsOption {
	return factsOpt(func(c *config) {
		if n < 1 {
			c.bad("%s(%d): n must be at least 1", name, n)
			return
		}
		set(&c.facts)
	})
}
