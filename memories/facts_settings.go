package memories

// factsSettings holds the options of the Facts memory (see facts.go).
type factsSettings struct{}
