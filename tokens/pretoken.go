package tokens

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Counting a piece of text the way tiktoken-go encodes it, faster.
//
// tiktoken-go splits a text into pre-tokens with cl100k's pattern run by
// github.com/dlclark/regexp2 (a backtracking engine, for the pattern's
// look-ahead), then looks each pre-token up in the BPE ranks and runs BPE
// only on those it does not find. The split is most of the time a count
// takes. countOrdinary does the same with a hand-written scan of an
// equivalent pattern (pretokenEnd; the pattern, for Go's regexp package,
// is cl100kSplit in the tests), and hands tiktoken-go only the
// pre-tokens that are not a single token:
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
// The scan tries the alternatives in order, as a leftmost-first engine
// (Go's regexp, or a backtracking one such as regexp2) does, so on a
// pattern with no look-around it finds the same matches. Tests compare
// it with Go's regexp on every rune in several contexts, and the
// pre-tokens with regexp2's on random texts made of every kind of
// character the pattern treats apart, and counts with whole-text
// encoding. Text that is not valid UTF-8 is left to tiktoken-go
// (regexp2 and Go's regexp see its bad bytes differently).

// eachPretoken calls f with each of text's cl100k pre-tokens, in order.
// text must be valid UTF-8.
func eachPretoken(text string, f func(string)) {
	for pos := 0; pos < len(text); {
		end := pos + pretokenEnd(text[pos:])
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

// pretokenEnd returns the length of cl100kSplit's match at the start of
// text (not empty, valid UTF-8), found by hand: the pattern's
// alternatives tried in order, as the regexp's leftmost-first match
// tries them, each with the backtracking it implies worked out (a test
// compares it with the regexp on random texts). Go's regexp engine costs
// about half of a count; this scan costs a few percent.
func pretokenEnd(text string) int {
	r0, s0 := utf8.DecodeRuneInString(text)
	r1, _ := utf8.DecodeRuneInString(text[s0:]) // RuneError at the end
	// 'S, 'T, 'RE, 'VE, 'M, 'LL, 'D in either case.
	if r0 == '\'' && len(text) >= 2 {
		switch text[1] | 0x20 {
		case 's', 't', 'm', 'd':
			return 2
		case 'r', 'v':
			if len(text) >= 3 && text[2]|0x20 == 'e' {
				return 3
			}
		case 'l':
			if len(text) >= 3 && text[2]|0x20 == 'l' {
				return 3
			}
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+: the optional character is taken when a
	// letter follows it; without it the text must start with a letter.
	if r0 != '\r' && r0 != '\n' && !unicode.IsLetter(r0) && !unicode.IsNumber(r0) && s0 < len(text) && unicode.IsLetter(r1) {
		return s0 + runOf(text[s0:], unicode.IsLetter)
	}
	if unicode.IsLetter(r0) {
		return runOf(text, unicode.IsLetter)
	}
	// \p{N}{1,3}
	if unicode.IsNumber(r0) {
		n := s0
		for range 2 {
			r, size := utf8.DecodeRuneInString(text[n:])
			if n == len(text) || !unicode.IsNumber(r) {
				break
			}
			n += size
		}
		return n
	}
	// " ?[^\s\p{L}\p{N}]+[\r\n]*": the space is taken when such a
	// character follows it; a space cannot start the run itself.
	start := 0
	if r0 == ' ' && s0 < len(text) && isPunct(r1) {
		start = s0
	} else if !isPunct(r0) {
		start = -1
	}
	if start >= 0 {
		n := start + runOf(text[start:], isPunct)
		for n < len(text) && (text[n] == '\r' || text[n] == '\n') {
			n++
		}
		return n
	}
	// What is left starts with white space. \s*[\r\n]+ matches up to
	// the run's last line break (the greedy \s* gives back characters
	// until a line break follows), if it has one; else \s+ the run.
	w := runOf(text, unicode.IsSpace)
	if i := strings.LastIndexAny(text[:w], "\r\n"); i >= 0 {
		return i + 1
	}
	return w
}

// runOf returns the length of text's longest prefix of runes for which in
// is true.
func runOf(text string, in func(rune) bool) int {
	for i, r := range text {
		if !in(r) {
			return i
		}
	}
	return len(text)
}

// isPunct reports whether r is neither white space, a letter nor a
// number: [^\s\p{L}\p{N}].
func isPunct(r rune) bool {
	return !unicode.IsSpace(r) && !unicode.IsLetter(r) && !unicode.IsNumber(r)
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
