package indexkit

// SetPrune turns Search's pruning on or off and returns its setting.
func SetPrune(on bool) bool {
	was := prune
	prune = on
	return was
}
