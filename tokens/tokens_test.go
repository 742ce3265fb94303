package tokens_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
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
	enc, err := tokens.NewCL100KEncoder()
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
	enc, err := tokens.NewCL100KEncoder()
	require.NoError(t, err)
	parts := []string{"Human: ", "AI: ", "hello", "world", " ", "  ", "\n", "\n\n", "\r\n", "\n ", " \n", ".", "!", "?\n",
		"[8 May 2023]", "123", "4567", "'s", "'re", "é", "naïve", "数据", "—", "\t", "\n\t", "x", "Z", "(", ")", ",", "\"", "😀",
		" .", "...", "?!", " :)\n", "'", "\u00a0", "\u2028", "-", "°", "½", "Ⅻ", "٣", "\v", "\x85", "’"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 4000; i++ {
		var b strings.Builder
		for b.Len() < 1+rng.IntN(1800) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		text := b.String()
		want := len(enc.EncodeOrdinary(text))
		require.Equal(t, want, c.CountTokens(text), "text %q", text)
		require.Equal(t, want, c.CountTokens(text), "cached, text %q", text)
	}
}

// A line counted alone (an item a budget weighs) and the same line
// inside a rendered variable, with a line break after it, share their
// cached count: their pieces' bodies are the same.
func TestCL100KLineAndRenderShareAPiece(t *testing.T) {
	for _, line := range []string{"AI: we settled on the blue plan.", "Human: what did we decide?", "AI: Friday 12", "Human: ok :)", "AI: fine ."} {
		alone := tokens.PiecesOf(line)
		inside := tokens.PiecesOf("[8 May 2023]\n" + line + "\nHuman: and then?")
		require.NotEmpty(t, alone)
		assert.Contains(t, inside, alone[0], "the line %q", line)
	}
}

// longTexts returns n different 64 KiB texts made by next.
func longTexts(n int, next func(*rand.Rand) string) []string {
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for b.Len() < 64<<10 {
			b.WriteString(next(rng))
		}
		out[i] = b.String()
	}
	return out
}

// BenchmarkCL100KLongRun and BenchmarkCL100KLongWords count 64 KiB texts
// never seen before (no piece cached): one run of A, C, G and T with no
// space, and ordinary words. Counting stays linear: the run costs at most
// a few times the words (issue 10: it took seconds).
func BenchmarkCL100KLongRun(b *testing.B) {
	benchLong(b, func(r *rand.Rand) string { return string("ACGT"[r.IntN(4)]) })
}

func BenchmarkCL100KLongWords(b *testing.B) {
	words := strings.Fields("the quick brown fox jumps over lazy dogs while seven wizards quietly judge boxing matches")
	benchLong(b, func(r *rand.Rand) string { return words[r.IntN(len(words))] + " " })
}

func benchLong(b *testing.B, next func(*rand.Rand) string) {
	c, err := tokens.CL100K()
	require.NoError(b, err)
	texts := longTexts(b.N, next)
	b.SetBytes(64 << 10)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.CountTokens(texts[i])
	}
}

// TestCL100KLongRunIsNearlyExact: a run of over 1 KiB with no space is
// counted in chunks; the count stays within a token per chunk of the
// exact one. Texts with spaces stay exact (TestCL100KPiecewiseIsExact).
func TestCL100KLongRunIsNearlyExact(t *testing.T) {
	c, err := tokens.CL100K()
	require.NoError(t, err)
	enc, err := tokens.NewCL100KEncoder()
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(5, 6))
	var b strings.Builder
	for b.Len() < 8<<10 {
		b.WriteByte("ACGT"[rng.IntN(4)])
	}
	text := b.String()
	want := len(enc.EncodeOrdinary(text))
	got := c.CountTokens(text)
	assert.InDelta(t, want, got, float64(len(text)/1024+1), "exact %d, counted %d", want, got)

	words := strings.Repeat("a long line of ordinary words without any line break ", 100) // 5.4 KiB, one line
	assert.Equal(t, len(enc.EncodeOrdinary(words)), c.CountTokens(words), "a long line with spaces is exact")
}

// countingLoader is an application's own tiktoken BPE loader.
type countingLoader struct{ calls int }

func (l *countingLoader) LoadTiktokenBpe(file string) (map[string]int, error) {
	l.calls++
	return nil, fmt.Errorf("the application's loader was asked for %s", file)
}

// memstack builds its encoder without tiktoken-go's global loader: an
// application's own SetBpeLoader is still in force after CL100K, and
// CL100K works whatever loader the application set.
//
// It runs in a child process, so that CL100K is first called after the
// application set its loader (a Once in the parent may have run already).
func TestCL100KLeavesTheApplicationsLoaderAlone(t *testing.T) {
	if os.Getenv("TOKENS_LOADER_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCL100KLeavesTheApplicationsLoaderAlone$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "TOKENS_LOADER_CHILD=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "--- PASS: TestCL100KLeavesTheApplicationsLoaderAlone", "%s", out)
		return
	}
	mine := &countingLoader{}
	tiktoken.SetBpeLoader(mine)
	defer tiktoken.SetBpeLoader(tiktoken.NewDefaultBpeLoader())
	c, err := tokens.CL100K()
	require.NoError(t, err)
	assert.Equal(t, 2, c.CountTokens("hello world"))
	assert.Zero(t, mine.calls, "CL100K did not go through the global loader")
	_, err = tiktoken.GetEncoding("p50k_base")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the application's loader was asked for")
	assert.Equal(t, 1, mine.calls, "the application's loader is still the one tiktoken-go uses")
}
