package tokens_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/memstack/memstack/tokens"
	"github.com/pkoukk/tiktoken-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCL100K(t *testing.T) {
	c, err := tokens.CL100K()
	require.NoError(t, err)
	enc, err := tiktoken.GetEncoding("cl100k_base") // uses the offline loader CL100K installed
	require.NoError(t, err)
	for _, tc := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"hello world", 2},
		{"Human: What did we settle on?", len(enc.EncodeOrdinary("Human: What did we settle on?"))},
		{"日本語のテキスト", len(enc.EncodeOrdinary("日本語のテキスト"))},
		// Special-token text is counted as plain text, never a panic.
		{"<|endoftext|>", len(enc.EncodeOrdinary("<|endoftext|>"))},
	} {
		assert.Equal(t, tc.want, c.CountTokens(tc.text), "%q", tc.text)
	}
	assert.Greater(t, c.CountTokens("<|endoftext|>"), 1, "special tokens are split as text")
}

func TestCL100KConcurrent(t *testing.T) {
	c, err := tokens.CL100K()
	require.NoError(t, err)
	want := c.CountTokens("the quick brown fox jumps over the lazy dog")
	var wg sync.WaitGroup
	got := make([]int, 32)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = c.CountTokens("the quick brown fox jumps over the lazy dog")
		}()
	}
	wg.Wait()
	for i := range got {
		assert.Equal(t, want, got[i])
	}
}

func TestCounterFunc(t *testing.T) {
	var c tokens.Counter = tokens.CounterFunc(func(s string) int { return len(s) })
	assert.Equal(t, 5, c.CountTokens("hello"))
}

func ExampleCL100K() {
	c, err := tokens.CL100K()
	if err != nil {
		panic(err)
	}
	fmt.Println(c.CountTokens("hello world"))
	// Output: 2
}

// TestCL100KPiecewiseIsExact checks that counting a long text piece by
// piece (with the line cache) gives exactly the whole text's count, on
// random texts made of what rendered prompts hold: words, digits,
// punctuation, spaces, runs of line breaks, brackets, non-Latin scripts.
func TestCL100KPiecewiseIsExact(t *testing.T) {
	c, err := tokens.CL100K()
	require.NoError(t, err)
	enc, err := tiktoken.GetEncoding("cl100k_base")
	require.NoError(t, err)
	parts := []string{"Human: ", "AI: ", "hello", "world", " ", "  ", "\n", "\n\n", "\r\n", "\n ", " \n", ".", "!", "?\n",
		"[8 May 2023]", "123", "4567", "'s", "'re", "é", "naïve", "数据", "—", "\t", "\n\t", "x", "Z", "(", ")", ",", "\"", "😀"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		var b strings.Builder
		for b.Len() < 300+rng.IntN(1500) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		text := b.String()
		want := len(enc.EncodeOrdinary(text))
		require.Equal(t, want, c.CountTokens(text), "text %q", text)
		require.Equal(t, want, c.CountTokens(text), "cached, text %q", text)
	}
}
