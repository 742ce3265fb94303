package memories

// recallSettings holds the options of the Recall memory (see recall.go).
type recallSettings struct{}
