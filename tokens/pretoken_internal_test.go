package tokens

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/dlclark/regexp2"
	"github.com/stretchr/testify/require"
)

// cl100kSpace is regexp2's \s (TestPretokenClassesAreRegexp2s).
const cl100kSpace = `\t\n\v\f\r\x{85}\p{Z}`

// cl100kSplit is cl100kPattern for Go's regexp package (see pretoken.go):
// what pretokenEnd scans for by hand.
var cl100kSplit = regexp.MustCompile(`'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]` +
	`|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^` + cl100kSpace + `\p{L}\p{N}]+[\r\n]*` +
	`|[` + cl100kSpace + `]*[\r\n]+|[` + cl100kSpace + `]+`)

// regexpEnd is cl100kSplit's match at the start of text.
func regexpEnd(t *testing.T, text string) int {
	loc := cl100kSplit.FindStringIndex(text)
	require.True(t, loc != nil && loc[0] == 0 && loc[1] > 0, "no match at the start of %q", text)
	return loc[1]
}

// pretokenEnd matches what Go's regexp matches with cl100kSplit, for every
// rune in the contexts that decide which alternative takes it, and on
// random texts.
func TestPretokenEndIsTheRegexps(t *testing.T) {
	contexts := []string{"%s", "%sa", "%s1", "%s.", "%s ", "%s\n", " %s", " %sa", "'%s", "a%s", "1%s", "%s%s", "%s%s%s%s", "\n %s", " \n%s"}
	step := rune(1)
	if raceEnabled || testing.Short() {
		step = 17 // every rune's class is still met many times over
	}
	for r := rune(0); r <= unicode.MaxRune; r += step {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		c := string(r)
		for _, f := range contexts {
			text := strings.ReplaceAll(f, "%s", c)
			require.Equal(t, regexpEnd(t, text), pretokenEnd(text), "%U in %q", r, f)
		}
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for range 20000 {
		text := randomPretokenText(rng, 80)
		for pos := 0; pos < len(text); pos += pretokenEnd(text[pos:]) {
			require.Equal(t, regexpEnd(t, text[pos:]), pretokenEnd(text[pos:]), "at %d of %q", pos, text)
		}
	}
}

// The classes countOrdinary's pattern spells out are regexp2's, on every
// rune: its \s (unicode.IsSpace) is [\t\n\v\f\r\x85\p{Z}], and no rune but
// the ASCII capitals lowers to a contraction's letters (regexp2's (?i)
// compares with unicode.ToLower).
func TestPretokenClassesAreRegexp2s(t *testing.T) {
	space := regexp.MustCompile(`^[` + cl100kSpace + `]$`)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // surrogates are not runes of valid UTF-8
		}
		require.Equal(t, unicode.IsSpace(r), space.MatchString(string(r)), "%U", r)
		if l := unicode.ToLower(r); strings.ContainsRune("strevmld", l) {
			require.True(t, r < 0x80, "%U lowers to %c", r, l)
		}
	}
}

// pretokenParts are what rendered prompts hold and every kind of
// character the pattern treats apart: letters (Latin, accented, other
// scripts, the long s), digits of several scripts, punctuation, symbols,
// emoji, every kind of white space (ASCII, NEL, no-break, ideographic,
// line and paragraph separators, a Mongolian vowel separator that is no
// longer a space), runs of them, line breaks, contractions in both cases.
var pretokenParts = []string{"Human: ", "AI: ", "hello", "world", " ", "  ", "   ", "\n", "\n\n", "\r\n", "\r", "\n ", " \n",
	".", "!", "?\n", "[8 May 2023]", "123", "4567", "'s", "'S", "'re", "'RE", "'Ll", "'d", "'x", "'", "''", " '", "é", "naïve",
	"数据", "—", "\t", "\n\t", "\v", "\f", "\u0085", "\u00a0", "\u1680", "\u2002", "\u2028", "\u2029", "\u202f", "\u3000", "\u180e",
	"\u200b", "x", "Z", "(", ")", ",", "\"", "😀", " .", "...", "?!", " :)\n", "-", "°", "½", "Ⅻ", "٣", "߀", "ſ", "'ſ", "K",
	"İ", "ß", "<|endoftext|>", "\x00", "\u0301", "a\u0301", " 12", "1,284", "E1032", "14:30"}

func randomPretokenText(rng *rand.Rand, most int) string {
	var b strings.Builder
	for b.Len() < 1+rng.IntN(most) {
		b.WriteString(pretokenParts[rng.IntN(len(pretokenParts))])
	}
	return b.String()
}

// eachPretoken splits texts exactly as tiktoken-go's regexp2 pattern does.
func TestPretokensAreRegexp2s(t *testing.T) {
	re := regexp2.MustCompile(cl100kPattern, regexp2.None)
	rng := rand.New(rand.NewPCG(11, 12))
	for range 10000 {
		text := randomPretokenText(rng, 160)
		var want []string
		for m, err := re.FindStringMatch(text); m != nil; m, err = re.FindNextMatch(m) {
			require.NoError(t, err)
			want = append(want, m.String())
		}
		var got []string
		eachPretoken(text, func(p string) { got = append(got, p) })
		require.Equal(t, want, got, "text %q", text)
	}
}

// countOrdinary counts what tiktoken-go's EncodeOrdinary encodes, on
// random texts, invalid UTF-8 included.
func TestCountOrdinaryIsEncodeOrdinary(t *testing.T) {
	c, err := CL100K()
	require.NoError(t, err)
	tc := c.(tiktokenCounter)
	rng := rand.New(rand.NewPCG(13, 14))
	for i := range 6000 {
		text := randomPretokenText(rng, 300)
		if i%50 == 0 {
			text += "\xff\xfe" + text[:len(text)/2] // bad bytes, a cut rune
		}
		require.Equal(t, len(tc.t.EncodeOrdinary(text)), tc.countOrdinary(text), "text %q", text)
	}
}
