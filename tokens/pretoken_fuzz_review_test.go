package tokens

import (
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// FuzzReviewS30PretokenEnd: pretokenEnd is cl100kSplit's match, and
// eachPretoken splits as tiktoken-go's regexp2 pattern, on any valid UTF-8.
func FuzzReviewS30PretokenEnd(f *testing.F) {
	for _, s := range pretokenParts {
		f.Add(s + "a")
	}
	f.Add("'\u2019s \u02bcll x\u0085\u0085y")
	re := regexp2.MustCompile(cl100kPattern, regexp2.None)
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) || text == "" {
			return
		}
		for pos := 0; pos < len(text); {
			want := regexpEnd(t, text[pos:])
			got := pretokenEnd(text[pos:])
			if got != want {
				t.Fatalf("at %d of %q: pretokenEnd %d, regexp %d", pos, text, got, want)
			}
			pos += got
		}
		var want []string
		for m, err := re.FindStringMatch(text); m != nil; m, err = re.FindNextMatch(m) {
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, m.String())
		}
		var got []string
		eachPretoken(text, func(p string) { got = append(got, p) })
		if len(got) != len(want) {
			t.Fatalf("%q: got %q, want %q", text, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q: got %q, want %q", text, got, want)
			}
		}
	})
}
