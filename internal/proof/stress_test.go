package proof_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
)

// The size of TestStress. The normal run is the short version; the long
// version (issue 6: 1,000 identities × 100 turns per backend) runs with
// -stress.long or MEMSTACK_STRESS_LONG=1 (see the package documentation).
var (
	stressLong  = flag.Bool("stress.long", false, "TestStress: the long version, 1,000 identities × 100 turns per backend")
	stressIDs   = flag.Int("stress.ids", 0, "TestStress: identities per backend (0: 32, or 1,000 with -stress.long)")
	stressTurns = flag.Int("stress.turns", 0, "TestStress: turns per identity (0: 20, or 100 with -stress.long)")
)

func stressSize() (ids, turns int) {
	ids, turns = 32, 20
	if *stressLong || os.Getenv("MEMSTACK_STRESS_LONG") == "1" {
		ids, turns = 1000, 100
	}
	if *stressIDs > 0 {
		ids = *stressIDs
	}
	if *stressTurns > 0 {
		turns = *stressTurns
	}
	return ids, turns
}

// recentN is the window of the stress stack's RecentN.
const recentN = 10

// TestStress runs every identity concurrently through one combined.Memory
// (Buffer + RecentN(10) + Summary with the extractive summarizer in
// background mode) on each backend, then checks every identity's state in
// every layer. See the package documentation.
func TestStress(t *testing.T) {
	ids, turns := stressSize()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			stress(t, b, ids, turns)
		})
	}
}

func stress(t *testing.T, b backend, ids, turns int) {
	open := b.space(t)
	bufStore, recStore, sumStore := open("buffer"), open("recent"), open("summary")

	var hookFailures atomic.Int64
	var firstHookErr atomic.Value
	buf := mustBuffer(memories.WithStore(bufStore), memories.WithMemoryKey("transcript"), memories.WithRequireIdentity())
	// RecentN has its store to itself, so a retention may keep it O(n).
	rec, err := memories.NewRecentN(recentN, memories.WithStore(recStore), memories.WithMemoryKey("recent"), memories.WithRequireIdentity(),
		memories.WithRetention(memories.KeepLast(recentN)))
	require.NoError(t, err)
	sum, err := memories.NewSummary(summarizer.NewExtractive(),
		memories.WithStore(sumStore), memories.WithMemoryKey("summary"), memories.WithRequireIdentity(),
		memories.WithBackground(true),
		memories.WithSummaryHook(func(ev memories.SummaryEvent) {
			if ev.Err != nil {
				hookFailures.Add(1)
				firstHookErr.CompareAndSwap(nil, ev.Err)
			}
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sum.Close() })
	mem, err := combined.New([]schema.Memory{buf, rec, sum}, combined.WithStrictKeys())
	require.NoError(t, err)

	problems := &limiter{t: t, max: 20}
	base := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			ctx := memstack.WithIdentity(base, proofIdentity(i))
			for j := range turns {
				h, a := turnText(i, j)
				if err := mem.SaveContext(ctx, map[string]any{"input": h}, map[string]any{"output": a}); err != nil {
					problems.Errorf("%s: writer %d turn %d: SaveContext: %v", b.name, i, j, err)
					continue
				}
				if j%5 != 4 && j != turns-1 {
					continue
				}
				vars, err := mem.LoadMemoryVariables(ctx, nil)
				if err != nil {
					problems.Errorf("%s: writer %d turn %d: LoadMemoryVariables: %v", b.name, i, j, err)
					continue
				}
				last := "Human: " + h + "\nAI: " + a
				for _, key := range []string{"transcript", "recent", "summary"} {
					s, _ := vars[key].(string)
					if !strings.HasSuffix(s, last) {
						problems.Errorf("%s: writer %d turn %d: %q does not end with the turn just saved", b.name, i, j, key)
					}
					if k := foreignLine(i, s); k != "" {
						problems.Errorf("%s: writer %d turn %d: %q shows another writer's line %q", b.name, i, j, key, k)
					}
				}
			}
		})
	}
	wg.Wait()
	saved := time.Since(start)
	fctx, cancel := context.WithTimeout(base, 10*time.Minute)
	defer cancel()
	require.NoError(t, sum.Flush(fctx), "the background summaries finish")
	flushed := time.Since(start)

	// Check every identity, a few at a time.
	var (
		mu                             sync.Mutex
		bufTally, sumTally             tally
		recentWrong, recentBig, behind int
		folded, notFolded, stateWrong  int64
		next                           atomic.Int64
		checkers                       sync.WaitGroup
	)
	for range 8 {
		checkers.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= ids {
					return
				}
				id := proofIdentity(i)
				ctx := memstack.WithIdentity(base, id)
				want := expected(i, turns)

				recs, err := bufStore.All(ctx, id)
				if err != nil {
					problems.Errorf("%s: buffer store All(%s): %v", b.name, id, err)
					continue
				}
				bt := count(i, messagesOf(recs), want)
				if bt != (tally{}) {
					problems.Errorf("%s: writer %d: Buffer transcript differs from what it sent: %+v", b.name, i, bt)
				}

				recentOK := true
				vars, err := rec.LoadMemoryVariables(ctx, nil)
				wantRecent, _ := llms.GetBufferString(want[max(len(want)-recentN, 0):], "Human", "AI")
				if err != nil || vars["recent"] != wantRecent {
					recentOK = false
					problems.Errorf("%s: writer %d: RecentN shows %q (err %v), want its last %d messages %q", b.name, i, vars["recent"], err, recentN, wantRecent)
				}
				st, err := recStore.Stat(ctx, id)
				big := err != nil || st.Count > recentN+16+2
				if big {
					problems.Errorf("%s: writer %d: RecentN's store holds %d messages (err %v): it is not trimmed to O(n)", b.name, i, st.Count, err)
				}

				ss, raw := readSummary(t, ctx, sumStore, id)
				var st2 tally
				stOK := ss.Folded >= 0 && int(ss.Folded) <= len(want)
				if stOK {
					st2 = count(i, messagesOf(raw), want[ss.Folded:])
				}
				if !stOK || st2 != (tally{}) {
					problems.Errorf("%s: writer %d: Summary folded %d and keeps %d raw messages, which are not exactly the %d it was sent: %+v",
						b.name, i, ss.Folded, len(raw), len(want), st2)
				}
				lagging := len(raw) > memories.DefaultMaxMessages
				if lagging {
					problems.Errorf("%s: writer %d: after Flush %d messages are still raw (more than %d)", b.name, i, len(raw), memories.DefaultMaxMessages)
				}
				svars, err := sum.LoadMemoryVariables(ctx, nil)
				wantRaw, _ := llms.GetBufferString(messagesOf(raw), "Human", "AI")
				if s, _ := svars["summary"].(string); err != nil || !strings.HasSuffix(s, wantRaw) ||
					(ss.Folded > 0) != strings.HasPrefix(s, memories.SummaryPrefix) {
					problems.Errorf("%s: writer %d: Summary loads %q (err %v), want the summary then %q", b.name, i, s, err, wantRaw)
				}

				mu.Lock()
				bufTally.add(bt)
				sumTally.add(st2)
				if !recentOK {
					recentWrong++
				}
				if big {
					recentBig++
				}
				if lagging {
					behind++
				}
				if !stOK {
					stateWrong++
				}
				folded += ss.Folded
				if ss.Folded == 0 && 2*turns > memories.DefaultMaxMessages {
					notFolded++
				}
				mu.Unlock()
			}
		})
	}
	checkers.Wait()

	stats := sum.Stats()
	t.Logf("%s: %d identities × %d turns (%d messages per layer): saved in %v (%.0f turns/s), summaries flushed at %v, checked at %v",
		b.name, ids, turns, 2*ids*turns, saved.Round(time.Millisecond), float64(ids*turns)/saved.Seconds(),
		flushed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	t.Logf("%s: Buffer lost %d, duplicated %d, foreign %d, transcripts differing %d; RecentN windows wrong %d, stores untrimmed %d; "+
		"Summary raw lost %d, duplicated %d, foreign %d, differing %d, lagging %d; summarizer calls %d, failures %d, messages folded %d",
		b.name, bufTally.lost, bufTally.duplicated, bufTally.foreign, bufTally.mismatched, recentWrong, recentBig,
		sumTally.lost, sumTally.duplicated, sumTally.foreign, sumTally.mismatched, behind, stats.Calls, stats.Failures, stats.MessagesFolded)

	assert.Zero(t, problems.count(), "problems reported above (%d in all)", problems.count())
	assert.Equal(t, tally{}, bufTally, "Buffer transcripts: 0 lost, 0 duplicated, 0 from another identity")
	assert.Equal(t, tally{}, sumTally, "Summary: covered + raw is exactly what was sent")
	assert.Zero(t, recentWrong, "RecentN shows exactly the last %d messages", recentN)
	assert.Zero(t, stateWrong)
	assert.Zero(t, notFolded, "every identity with more than %d messages got a summary", memories.DefaultMaxMessages)
	assert.Zero(t, hookFailures.Load(), "summarization failures (first: %v)", firstHookErr.Load())
	assert.Zero(t, stats.Failures)
	assert.Equal(t, folded, stats.MessagesFolded, "Stats.MessagesFolded is the sum of the identities' folded counts")
}

// foreignLine returns the first line of a rendered history that carries
// another writer's marker, or "".
func foreignLine(i int, rendered string) string {
	for _, line := range strings.Split(rendered, "\n") {
		_, rest, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		if w, _, ok := parseMarker(rest); ok && w != i {
			return line
		}
	}
	return ""
}
