// Package benchcorpus is the deterministic conversation text memstack's
// benchmarks replay (bench_test.go and cmd/memstack-bench), so both measure
// the same corpus and their numbers agree: realistic-ish support-chat turns
// of about 10 to 30 words, the same on every run and machine.
package benchcorpus

import "fmt"

var (
	subjects = []string{
		"the invoice", "my order", "the deployment", "our staging cluster", "the quarterly report",
		"the login page", "this recipe", "the flight to Lisbon", "my tax return", "the database migration",
		"the new laptop", "the customer ticket", "the onboarding guide", "the API rate limit", "the garden shed",
		"the marketing plan", "the kitchen renovation", "my running schedule", "the unit tests", "the contract draft",
	}
	verbs = []string{
		"check", "update", "summarise", "cancel", "schedule", "compare", "explain", "fix", "translate", "review",
		"estimate", "book", "rewrite", "split", "merge", "document",
	}
	details = []string{
		"before Friday", "for the whole team", "in plain English", "with the latest numbers", "without breaking anything",
		"as cheaply as possible", "in under an hour", "for next quarter", "using the old template", "so my manager can read it",
		"including the tax", "for both regions", "with a short bullet list", "in three steps", "after the holidays",
	}
	fillers = []string{
		"I think", "honestly", "by the way", "as I mentioned earlier", "if that makes sense", "just to be clear",
		"no rush", "thanks again", "one more thing", "to be fair", "last time", "apparently",
	}
	facts = []string{
		"the total comes to 1,284 euros", "it was last changed on 12 March", "there are 42 open items",
		"the error code is E1032", "the meeting is at 14:30 in room B", "version 3.7 fixed the timeout",
		"the warranty runs for two years", "the file is about 18 MB", "the discount is 15 percent",
		"shipping takes four to six days", "the backup ran at 02:00 without errors", "two reviewers approved it",
	}
)

// rng is a tiny deterministic generator (an LCG).
type rng uint64

func (r *rng) next(n int) int {
	*r = *r*6364136223846793005 + 1442695040888963407
	return int(uint64(*r>>33) % uint64(n))
}

func pick(r *rng, list []string) string { return list[r.next(len(list))] }

// Human is the user's message of turn i.
func Human(i int) string {
	r := rng(uint64(i)*2 + 1)
	s := fmt.Sprintf("Could you %s %s %s?", pick(&r, verbs), pick(&r, subjects), pick(&r, details))
	for k := r.next(3); k > 0; k-- {
		s += fmt.Sprintf(" %s, %s.", pick(&r, fillers), pick(&r, facts))
	}
	return s
}

// AI is the model's answer of turn i.
func AI(i int) string {
	r := rng(uint64(i)*2 + 2)
	s := fmt.Sprintf("Sure, I will %s %s %s.", pick(&r, verbs), pick(&r, subjects), pick(&r, details))
	for k := 1 + r.next(3); k > 0; k-- {
		s += fmt.Sprintf(" Note that %s.", pick(&r, facts))
	}
	return s
}
