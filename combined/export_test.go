package combined

// CountsShared reports whether a's and b's budgets share their token-count
// cache.
func CountsShared(a, b *Memory) bool {
	return a.budget != nil && b.budget != nil && a.budget.counts == b.budget.counts
}
