package tokens

import "github.com/pkoukk/tiktoken-go"

// NewCL100KEncoder builds a fresh cl100k_base encoder, for tests that
// compare the counter with whole-text encoding.
func NewCL100KEncoder() (*tiktoken.Tiktoken, error) {
	t, _, err := newCL100K()
	return t, err
}

// PiecesOf returns the pieces CountTokens caches for text, bodies and
// tails, in order.
func PiecesOf(text string) []string {
	var out []string
	for start := 0; start < len(text); {
		end := nextCut(text, start)
		body, tail := splitTail(text[start:end])
		out = append(out, splitLong(body)...)
		if tail != "" {
			out = append(out, tail)
		}
		start = end
	}
	return out
}
