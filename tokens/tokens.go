// Package tokens counts tokens for memories that keep within a token budget.
//
// Counter is the one small interface a memory needs. CL100K is the default:
// OpenAI's cl100k_base encoding (GPT-3.5/GPT-4 family), computed fully
// offline from the BPE ranks embedded in this package (cl100k_base only,
// gzipped: about 0.8 MB of the binary; the table's SHA-256 is checked on
// load). It never touches the network, never logs and never calls a
// process-wide setter: the encoder is built from github.com/pkoukk/tiktoken-go's
// constructors without its global BPE loader, so an application's own
// tiktoken.SetBpeLoader stays in force. Other models tokenise differently;
// plug their counter in with memories.WithTokenCounter.
package tokens

import (
	"errors"
	"fmt"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"

	"github.com/memstack/memstack/internal/textkey"
)

// Counter counts the tokens of a text. Implementations must be safe for
// concurrent use, must return n >= 0 and must not fail: a counter that
// cannot tokenise should return an over-estimate rather than an error.
//
// memstack never trusts a count blindly: it calls a Counter through Count,
// and reports a negative count or a panic as an error (wrapping
// ErrBadCount) — a load that needs the count fails, naming the counter —
// never as a blown token budget or a crash. A very large count is valid
// (the text is treated as too big to fit).
type Counter interface {
	CountTokens(text string) int
}

// ErrBadCount is wrapped by the error Count returns when a Counter breaks
// its contract: it returned a negative count, or panicked (the error then
// also wraps the panic's value when that is an error). The error names the
// counter's type.
var ErrBadCount = errors.New("tokens: bad token count")

// Count returns c.CountTokens(text), checked: a negative count is an
// error naming the counter's type and the value, a panic in the counter an
// error naming its type and the panic's value (the panic does not go on),
// and a nil counter an error; each wraps ErrBadCount, and the count
// returned with it is 0. Memories and budgets count through Count; a
// Counter written for memstack may call it too, to count with another
// Counter.
func Count(c Counter, text string) (n int, err error) {
	if c == nil {
		return 0, fmt.Errorf("%w: the counter is nil", ErrBadCount)
	}
	defer func() {
		if p := recover(); p != nil {
			n = 0
			if pe, ok := p.(error); ok {
				err = fmt.Errorf("%w: the counter %T panicked counting a text of %d bytes: %w", ErrBadCount, c, len(text), pe)
			} else {
				err = fmt.Errorf("%w: the counter %T panicked counting a text of %d bytes: %v", ErrBadCount, c, len(text), p)
			}
		}
	}()
	n = c.CountTokens(text)
	if n < 0 {
		return 0, fmt.Errorf("%w: the counter %T returned %d for a text of %d bytes (a count must not be negative)", ErrBadCount, c, n, len(text))
	}
	return n, nil
}

// CounterFunc adapts a function to Counter.
type CounterFunc func(text string) int

// CountTokens implements Counter.
func (f CounterFunc) CountTokens(text string) int { return f(text) }

var (
	cl100kOnce     sync.Once
	cl100k         *tiktoken.Tiktoken
	cl100kRanksMap map[string]int
	cl100kErr      error
)

func loadCL100K() { cl100k, cl100kRanksMap, cl100kErr = newCL100K() }

// CL100K returns the offline cl100k_base counter. The encoding is loaded on
// first use (about 100 ms) and shared by every caller.
func CL100K() (Counter, error) {
	cl100kOnce.Do(loadCL100K)
	if cl100kErr != nil {
		return nil, fmt.Errorf("tokens: loading cl100k_base: %w", cl100kErr)
	}
	cl100kLinesOnce.Do(func() { cl100kLines = textkey.NewCounts(lineCacheSize) })
	return tiktokenCounter{cl100k, cl100kLines, cl100kRanksMap}, nil
}

var (
	cl100kLinesOnce sync.Once
	cl100kLines     *textkey.Counts
)

// Counting a long text line by line: see tiktokenCounter.CountTokens.
const (
	lineCacheSize = 16384 // lines whose counts are kept
	maxCachedLine = 4096  // bytes; longer lines are counted every time
)

type tiktokenCounter struct {
	t     *tiktoken.Tiktoken
	lines *textkey.Counts // by the piece's key: the cache holds no text (a piece is a slice of a larger text)
	ranks map[string]int  // the encoder's BPE ranks (see countOrdinary)
}

// CountTokens counts ordinary tokens: special-token text such as
// "<|endoftext|>" in a message counts as plain text and never panics.
//
// A text is counted piece by piece, each piece's count cached: the
// rendered variables a memory loads repeat the same lines from load to
// load, so counting a prompt-sized text costs a few map look-ups. The sum
// is exact, not an estimate: a text is cut only after a run of line
// breaks followed by a character that is not white space, which is always
// a boundary of cl100k's pre-tokenizer (its pattern ends every match that
// holds a line break at the last break, and no match starts with a line
// break followed by that character), and BPE never merges across such a
// boundary. Each piece is cut once more before its end (see tail): the
// line breaks after a letter or digit, or the punctuation at the end of a
// line with the breaks after it, are a match of their own, so a line
// counted alone (an item a budget weighs) and the same line inside a
// rendered variable share their cached count. A line longer than 1 KiB is
// cut further, before a word (see splitLong), so counting costs time
// linear in the text's length whatever it holds; only a run of over 1 KiB
// without a space is counted in chunks, within a token or so per KiB of
// its exact count.
func (c tiktokenCounter) CountTokens(text string) int {
	if text == "" {
		return 0
	}
	if c.lines == nil {
		return c.countOrdinary(text)
	}
	n := 0
	for start := 0; start < len(text); {
		end := nextCut(text, start)
		body, tail := splitTail(text[start:end])
		for _, p := range splitLong(body) {
			n += c.countPiece(p)
		}
		n += c.countPiece(tail)
		start = end
	}
	return n
}

// splitTail cuts a piece (see nextCut) into its body and its tail, where
// cl100k's pre-tokenizer always has a match boundary: the tail is the
// piece's trailing line breaks, after a letter or a digit; or its
// trailing punctuation run (with the one space before it, if any) and the
// line breaks after it, after a letter or a digit. No match of the
// pattern holds a letter or digit and a line break, or a letter or digit
// and the punctuation after it (a letter's match ends at its last letter,
// a number's at its third digit, and the punctuation alternative " ?[^\s
// \p{L}\p{N}]+[\r\n]*" starts with the space or the punctuation), and the
// body ends with a letter or digit, so no look-ahead in it reaches past
// its end: the body and the tail count alone what they count together.
// Any other piece is its own body, with no tail. (Only ASCII punctuation
// is cut off: it is punctuation to the pattern whatever the Unicode
// version of the regexp engine.)
func splitTail(p string) (body, tail string) {
	e := len(p)
	for e > 0 && (p[e-1] == '\n' || p[e-1] == '\r') {
		e--
	}
	cut := e
	for cut > 0 && isASCIIPunct(p[cut-1]) {
		cut--
	}
	if cut < e && cut > 0 && p[cut-1] == ' ' {
		cut-- // " ?": the punctuation's match takes one space before it
	}
	if cut == 0 {
		return p, ""
	}
	r, _ := utf8.DecodeLastRuneInString(p[:cut])
	if !unicode.IsLetter(r) && !unicode.IsNumber(r) {
		return p, ""
	}
	return p[:cut], p[cut:]
}

// maxPiece is the longest piece counted at once, in bytes: BPE's cost
// grows with the square of a run's length, so longer pieces are cut.
const maxPiece = 1024

// splitLong cuts p into pieces of at most maxPiece bytes. Each cut is,
// where the piece allows, before a space that follows a character other
// than white space and precedes a letter: a boundary of cl100k's
// pre-tokenizer (the space opens the next word's match; the match before
// it ends at the character before), so the count stays exact. A run of
// more than maxPiece bytes with no such place — one long "word", a DNA
// sequence, a base64 blob — is cut at a character boundary, which may
// change its count by a token or so per cut: linear time, not an exact
// count, for such text.
func splitLong(p string) []string {
	if len(p) <= maxPiece {
		return []string{p}
	}
	var out []string
	for len(p) > maxPiece {
		cut := -1
		for i := maxPiece; i > maxPiece/2; i-- {
			if p[i] == ' ' && !isSpaceAt(p, i-1) && startsLetter(p[i+1:]) {
				cut = i
				break
			}
		}
		if cut < 0 {
			cut = maxPiece
			for cut > 0 && !utf8.RuneStart(p[cut]) {
				cut--
			}
		}
		out = append(out, p[:cut])
		p = p[cut:]
	}
	return append(out, p)
}

// isASCIIPunct reports whether b is ASCII punctuation or a symbol: not a
// letter, digit, white space or control character.
func isASCIIPunct(b byte) bool {
	return b > ' ' && b < 0x7f && !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9')
}

// startsLetter reports whether s starts with a letter.
func startsLetter(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r)
}

// nextCut returns the end of the piece of text that starts at start: just
// after the first run of line breaks that is followed by a character other
// than white space, or the end of text.
func nextCut(text string, start int) int {
	for i := start; i < len(text); i++ {
		if text[i] != '\n' && text[i] != '\r' {
			continue
		}
		j := i
		for j < len(text) && (text[j] == '\n' || text[j] == '\r') {
			j++
		}
		if j < len(text) && !isSpaceAt(text, j) {
			return j
		}
		i = j - 1
	}
	return len(text)
}

// isSpaceAt reports whether the rune at text[i:] is white space.
func isSpaceAt(text string, i int) bool {
	r, _ := utf8.DecodeRuneInString(text[i:])
	return unicode.IsSpace(r)
}

func (c tiktokenCounter) countPiece(p string) int {
	if p == "" {
		return 0
	}
	if len(p) > maxCachedLine {
		return c.countOrdinary(p)
	}
	k := textkey.Of(p)
	if n, ok := c.lines.Get(k); ok {
		return n
	}
	n := c.countOrdinary(p)
	c.lines.Add(k, n)
	return n
}
