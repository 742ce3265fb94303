package tokens

import (
	"regexp"
	"unicode"
	"unicode/utf8"
)

// Counting a piece of text the way tiktoken-go encodes it, faster.
//
// tiktoken-go splits a text into pre-tokens with cl100k's pattern run by
// github.com/dlclark/regexp2 (a backtracking engine, for the pattern's
// look-ahead), then looks each pre-token up in the BPE ranks and runs BPE
// only on those it does not find. The split is most of the time a count
// takes. countOrdinary does the same with Go's own regexp package on an
// equivalent pattern, and hands tiktoken-go only the pre-tokens that are
// not a single token:
//
//   - `\s` is regexp2's: unicode.IsSpace, which is exactly
//     [\t\n\v\f\r\x85\p{Z}] (a test checks every rune);
//   - `(?i:'s|'t|'re|'ve|'m|'ll|'d)` is spelled with ASCII classes: no
//     other rune lowers to those letters (regexp2 compares with
//     unicode.ToLower; a test checks every rune);
//   - `\s+(?!\S)|\s+`, a run of spaces, is matched whole and then, when a
//     character other than a space follows and the run is longer than one
//     rune, gives its last rune back to the next pre-token — what the
//     look-ahead does.
//
// Go's regexp is leftmost-first, as a backtracking engine is, so on a
// pattern with no look-around the two find the same matches. A test
// compares the pre-tokens with regexp2's on random texts made of every
// kind of character the pattern treats apart, and counts with whole-text
// encoding. Text that is not valid UTF-8 is left to tiktoken-go (regexp2
// and Go's regexp see its bad bytes differently).
const cl100kSpace = `\t\n\v\f\r\x{85}\p{Z}`

var cl100kSplit = regexp.MustCompile(`'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]` +
	`|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^` + cl100kSpace + `\p{L}\p{N}]+[\r\n]*` +
	`|[` + cl100kSpace + `]*[\r\n]+|[` + cl100kSpace + `]+`)

// eachPretoken calls f with each of text's cl100k pre-tokens, in order.
// text must be valid UTF-8.
func eachPretoken(text string, f func(string)) {
	for pos := 0; pos < len(text); {
		loc := cl100kSplit.FindStringIndex(text[pos:])
		if loc == nil || loc[0] != 0 || loc[1] == 0 {
			// Every character starts a match; this is not reached.
			f(text[pos:])
			return
		}
		end := pos + loc[1]
		m := text[pos:end]
		if end < len(text) && allSpace(m) {
			// A run of spaces before another character: the pattern's
			// look-ahead leaves the last space to the next pre-token.
			if _, size := utf8.DecodeLastRuneInString(m); size < len(m) {
				m, end = m[:len(m)-size], end-size
			}
		}
		f(m)
		pos = end
	}
}

// allSpace reports whether s is made of white space only, with no line
// break at its end (a run the pattern's last two alternatives match).
func allSpace(s string) bool {
	if c := s[len(s)-1]; c == '\n' || c == '\r' {
		return false
	}
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// countOrdinary returns len(c.t.EncodeOrdinary(text)), faster (see
// above): a pre-token found in the ranks is one token, any other is
// encoded by tiktoken-go.
func (c tiktokenCounter) countOrdinary(text string) int {
	if c.ranks == nil || !utf8.ValidString(text) {
		return len(c.t.EncodeOrdinary(text))
	}
	n := 0
	eachPretoken(text, func(p string) {
		if _, ok := c.ranks[p]; ok {
			n++
			return
		}
		n += len(c.t.EncodeOrdinary(p))
	})
	return n
}
