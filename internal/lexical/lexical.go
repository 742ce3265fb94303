// Package lexical is the tokenizer of memstack's lexical index, in a
// package of its own so that a store that keeps the index beside its
// messages (store/indexkit) tokenises as retrieval.BM25 does without
// linking the rest of package retrieval. retrieval re-exports it
// (retrieval.Tokenize, Stem, StopWord, TokenizeWith); see there.
package lexical

import (
	"strings"
	"unicode"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/kljensen/snowball/english"
)

// Tokenize splits text into the terms BM25 indexes and searches:
//
//  1. lower-case (Unicode);
//  2. split into runs of Unicode letters and digits; everything else
//     (spaces, punctuation, apostrophes, symbols) separates terms. A rune
//     of a script written without spaces (Han, Hiragana, Katakana, Hangul)
//     is a term of its own, so such text is searched by character;
//  3. drop English stop words (StopWord) and one-letter Latin terms;
//  4. stem (Stem: English Snowball), so "settled", "settle" and
//     "settling" meet.
//
// Text in other languages is tokenised by steps 1, 2 and 4 and matched
// word for word (the English stemmer rarely changes non-English words).
func Tokenize(text string) []string { return tokenize(text, Stem) }

// TokenizeWith returns Tokenize with stem in place of Stem (nil: no
// stemming) — the same splitting, lower-casing and stop words with
// another stemmer, another language's say. Pass it to WithTokenizer.
func TokenizeWith(stem func(string) string) func(text string) []string {
	if stem == nil {
		stem = func(w string) string { return w }
	}
	return func(text string) []string { return tokenize(text, stem) }
}

func tokenize(text string, stem func(string) string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() == 0 {
			return
		}
		w := cur.String()
		cur.Reset()
		if !keep(w) {
			return
		}
		out = append(out, stem(w))
	}
	for _, r := range text {
		switch {
		case splitRune(r):
			flush()
			out = append(out, string(unicode.ToLower(r)))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			cur.WriteRune(unicode.ToLower(r))
		default:
			flush()
		}
	}
	flush()
	return out
}

// splitRune reports whether r belongs to a script written without spaces
// between words, whose runes are indexed one by one.
func splitRune(r rune) bool {
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

func keep(w string) bool {
	if len(w) == 1 && w[0] >= 'a' && w[0] <= 'z' {
		return false
	}
	return !StopWord(w)
}

// StopWord reports whether w (lower-case) is an English stop word: a word
// so common that it says nothing about what a text is about.
func StopWord(w string) bool {
	_, ok := stopWords[w]
	return ok
}

// Stem returns the English Snowball (Porter2) stem of w (lower-case), so
// the forms of a word meet: "settled", "settle" and "settling" give
// "settl", "planned" and "plans" give "plan", and "news" stays "news".
// It is github.com/kljensen/snowball's English stemmer, a maintained
// implementation of the published algorithm. Words it does not treat
// (other scripts, digits) pass through unchanged.
func Stem(w string) string {
	if w == "" {
		return w
	}
	if s, ok := stems.Get(w); ok {
		return s
	}
	s := english.Stem(w, true)
	if len(w) <= maxCachedWord {
		stems.Add(w, s)
	}
	return s
}

// stems caches Stem's results: a conversation repeats its words, and the
// Snowball algorithm costs more than a look-up.
var stems, _ = lru.New[string, string](stemCacheSize)

// Stem cache bounds: how many words, and the longest word cached.
const (
	stemCacheSize = 1 << 16
	maxCachedWord = 64
)

// stopWords is a common English stop-word list (articles, pronouns,
// auxiliaries, prepositions, conjunctions, question words).
var stopWords = func() map[string]struct{} {
	words := strings.Fields(`
a about above after again against all am an and any are aren as at
be because been before being below between both but by
can cannot could couldn
did didn do does doesn doing don down during
each few for from further
had hadn has hasn have haven having he her here hers herself him himself his how
i if in into is isn it its itself
just let ll me more most mustn my myself
no nor not now of off on once only or other ought our ours ourselves out over own
re same shan she should shouldn so some such
than that the their theirs them themselves then there these they this those through to too
under until up us very
was wasn we were weren what when where which while who whom why will with won would wouldn
ve you your yours yourself yourselves
`)
	m := make(map[string]struct{}, len(words))
	for _, w := range words {
		m[w] = struct{}{}
	}
	return m
}()
