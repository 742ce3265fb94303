package extract_test

import (
	"context"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstack/memstack/extract"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// Issue 17, item 9: the pattern extractor must bound its work on large
// input and honour its context's deadline while it works.

// bigText returns size bytes of ordinary English prose that states no
// fact.
func bigText(size int) string {
	const unit = "The weather was fine and the meeting ran long. Nothing else happened today! "
	return strings.Repeat(unit, size/len(unit)+1)[:size]
}

// extractWithin runs p.Extract in a goroutine and fails the test when it
// has not returned within limit (the goroutine is left to finish: on the
// old code it would run for many seconds).
func extractWithin(t *testing.T, limit time.Duration, p *extract.Patterns, ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error, time.Duration) {
	t.Helper()
	type answer struct {
		c   []extract.Candidate
		err error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		c, err := p.Extract(ctx, msgs)
		done <- answer{c, err}
	}()
	select {
	case a := <-done:
		return a.c, a.err, time.Since(start)
	case <-time.After(limit):
		t.Fatalf("Extract did not return within %v", limit)
		return nil, nil, 0
	}
}

// TestPatterns_HugeMessageIsBounded: a 10 MB message costs what its first
// DefaultMaxScanBytes cost; before the fix it was scanned whole (about
// 10 s, a minute and more under -race).
func TestPatterns_HugeMessageIsBounded(t *testing.T) {
	p := newPatterns(t)
	text := "My name is Ana. " + bigText(10<<20) + " I live in Lisbon."
	got, err, took := extractWithin(t, time.Second, p, context.Background(), human(text))
	require.NoError(t, err)
	t.Logf("10 MB message: %v", took)
	// The head is read; the text beyond the limit is not.
	assert.Equal(t, []fact{{"user name", "Ana"}}, facts(got))
	// Twice in a row (two saves of the message) is bounded as well.
	_, err, took2 := extractWithin(t, time.Second, p, context.Background(), human(text))
	require.NoError(t, err)
	assert.Less(t, took+took2, 2*time.Second)
}

// TestPatterns_ManyMatchesAreLinear: every match asks whether its
// sentence is a question; with no sentence end in sight each asking
// scanned the rest of the message, so many matches were quadratic (this
// 8 MB message with 8,192 matches took some 20 s). A cheap rule isolates
// that cost.
func TestPatterns_ManyMatchesAreLinear(t *testing.T) {
	p := newPatterns(t, extract.WithoutDefaultRules(), extract.WithMaxScanBytes(8<<20),
		extract.WithRules(extract.Rule{Name: "x", Pattern: regexp.MustCompile(`(?P<value>xyzzy)`), Attribute: "x"}))
	text := strings.Repeat("xyzzy"+strings.Repeat(" ", 1019), 8192)
	got, err, took := extractWithin(t, 5*time.Second, p, context.Background(), human(text))
	require.NoError(t, err)
	t.Logf("8 MB, 8,192 matches: %v", took)
	assert.Equal(t, []fact{{"user x", "xyzzy"}}, facts(got))
}

// expiring is a context whose deadline passes right after its first Err
// check: the extractor must notice it while it works, not only before.
type expiring struct {
	context.Context
	checks atomic.Int64
}

func (c *expiring) Err() error {
	if c.checks.Add(1) > 1 {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *expiring) Done() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// TestPatterns_DeadlineDuringExtraction: a deadline that passes during an
// extraction ends it with an error wrapping context.DeadlineExceeded and
// no candidates; before the fix the context was looked at once per 64
// messages, so a turn's extraction ran to its end and returned facts.
func TestPatterns_DeadlineDuringExtraction(t *testing.T) {
	p := newPatterns(t)
	t.Run("deterministic", func(t *testing.T) {
		ctx := &expiring{Context: context.Background()}
		got, err := p.Extract(ctx, human("I'm Ana and I live in Lisbon"))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Nil(t, got)
	})
	t.Run("real deadline", func(t *testing.T) {
		// 60 messages at the scan limit: about a second of work (many
		// under -race), a 100 ms deadline.
		msgs := make([]llms.ChatMessage, 60)
		for i := range msgs {
			msgs[i] = llms.HumanChatMessage{Content: "I'm Ana. " + bigText(extract.DefaultMaxScanBytes)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		got, err, took := extractWithin(t, 5*time.Second, p, ctx, msgs)
		t.Logf("60 × %d B under a 100 ms deadline: %v", extract.DefaultMaxScanBytes, took)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Nil(t, got)
		assert.Less(t, took, time.Second, "the deadline must be honoured promptly")
	})
}

// TestPatterns_ScanLimitCut: the scanned part ends at a sentence or word
// boundary, so a fact cut by the limit is not kept half.
func TestPatterns_ScanLimitCut(t *testing.T) {
	p := newPatterns(t, extract.WithMaxScanBytes(1024))
	pad := bigText(1000)
	got, err := p.Extract(context.Background(), human("I'm Ana. "+pad+" I live in New York City"))
	require.NoError(t, err)
	assert.Equal(t, []fact{{"user name", "Ana"}}, facts(got), "a place cut by the limit is not kept")

	_, err = extract.NewPatterns(extract.WithMaxScanBytes(0))
	require.ErrorIs(t, err, extract.ErrInvalidOption)
	assert.Contains(t, err.Error(), "WithMaxScanBytes(0)")
}
