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
