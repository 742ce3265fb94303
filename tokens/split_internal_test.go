package tokens

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// TestSplitLong: no piece handed to the BPE is longer than maxPiece bytes
// (BPE's cost grows with the square of a piece), the pieces make up the
// text, and where the text has a word boundary the cut is there.
func TestSplitLong(t *testing.T) {
	for _, text := range []string{
		strings.Repeat("ACGT", 16<<10),                  // 64 KiB, no space
		strings.Repeat("word ", 3000),                   // words
		strings.Repeat("é", 5000),                       // two-byte runes, no space
		strings.Repeat("x", 1500) + " tail of the text", // a long run, then words
		"short",
	} {
		pieces := splitLong(text)
		assert.Equal(t, text, strings.Join(pieces, ""))
		for i, p := range pieces {
			assert.LessOrEqual(t, len(p), maxPiece)
			assert.True(t, utf8.ValidString(p), "piece %d is cut inside a rune", i)
			if strings.Contains(text, " ") && i > 0 && len(pieces[i-1]) > maxPiece/2 && strings.HasPrefix(text, "word") {
				assert.True(t, strings.HasPrefix(p, " "), "piece %d starts at a word: %q", i, p[:min(10, len(p))])
			}
		}
	}
}
