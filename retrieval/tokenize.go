package retrieval

import "github.com/memstack/memstack/internal/lexical"

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
// Stores that keep the recall index beside their messages (store/indexkit)
// tokenise with the same function.
func Tokenize(text string) []string { return lexical.Tokenize(text) }

// TokenizeWith returns Tokenize with stem in place of Stem (nil: no
// stemming) — the same splitting, lower-casing and stop words with
// another stemmer, another language's say. Pass it to WithTokenizer.
func TokenizeWith(stem func(string) string) func(text string) []string {
	return lexical.TokenizeWith(stem)
}

// StopWord reports whether w (lower-case) is an English stop word: a word
// so common that it says nothing about what a text is about.
func StopWord(w string) bool { return lexical.StopWord(w) }

// Stem returns the English Snowball (Porter2) stem of w (lower-case), so
// the forms of a word meet: "settled", "settle" and "settling" give
// "settl", "planned" and "plans" give "plan", and "news" stays "news".
// It is github.com/kljensen/snowball's English stemmer, a maintained
// implementation of the published algorithm. Words it does not treat
// (other scripts, digits) pass through unchanged.
func Stem(w string) string { return lexical.Stem(w) }
