package proof_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

// errInjected is the error faultyModel returns for an injected failure.
var errInjected = errors.New("faulty model: injected failure")

// faultyModel is an llms.Model test double standing in for an unreliable
// model: of its calls, failPct percent fail at once with errInjected,
// hangPct percent block until their context is done (a timeout) and the
// rest answer. Which call does what is decided by a fixed pseudo-random
// sequence over the call number. An answer names the writer and the newest
// turn in the transcript it was given ("Writer 3: turns up to 17 are
// summarized."), so the committed summary tells which turns it covers. It
// counts what it injected and is safe for concurrent use.
type faultyModel struct {
	failPct, hangPct uint64

	calls, fails, hangs, answers atomic.Int64
	hungNow                      atomic.Int64 // calls blocked right now
}

var _ llms.Model = (*faultyModel)(nil)

// splitmix64 is a fixed pseudo-random function of the call number.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

var transcriptMarker = regexp.MustCompile(`\[(\d+)/(\d+)\]`)

// GenerateContent implements llms.Model.
func (m *faultyModel) GenerateContent(ctx context.Context, msgs []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	n := m.calls.Add(1)
	switch r := splitmix64(uint64(n)) % 100; {
	case r < m.failPct:
		m.fails.Add(1)
		return nil, errInjected
	case r < m.failPct+m.hangPct:
		m.hangs.Add(1)
		m.hungNow.Add(1)
		defer m.hungNow.Add(-1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var human string
	for _, mc := range msgs {
		if mc.Role != llms.ChatMessageTypeHuman {
			continue
		}
		for _, p := range mc.Parts {
			if t, ok := p.(llms.TextContent); ok {
				human += t.Text
			}
		}
	}
	_, lines, _ := strings.Cut(human, "New lines of conversation:\n")
	marks := transcriptMarker.FindAllStringSubmatch(lines, -1)
	if len(marks) == 0 {
		return nil, fmt.Errorf("faulty model: no turn marker in the transcript")
	}
	last := marks[len(marks)-1]
	m.answers.Add(1)
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{
		Content: fmt.Sprintf("Writer %s: turns up to %s are summarized.", last[1], last[2]),
	}}}, nil
}

// Call implements llms.Model the way langchaingo's models do.
func (m *faultyModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

var summarizedRe = regexp.MustCompile(`^Writer (\d+): turns up to (\d+) are summarized\.$`)

// hookCounts classifies the SummaryEvents a Summary reported.
type hookCounts struct {
	events, injected, timeouts, other atomic.Int64
	firstOther                        atomic.Value
}

func (h *hookCounts) hook(ev memories.SummaryEvent) {
	h.events.Add(1)
	switch {
	case ev.Err == nil:
	case errors.Is(ev.Err, errInjected):
		h.injected.Add(1)
	case errors.Is(ev.Err, context.DeadlineExceeded) || errors.Is(ev.Err, context.Canceled):
		h.timeouts.Add(1)
	default:
		h.other.Add(1)
		h.firstOther.CompareAndSwap(nil, ev.Err)
	}
}

// TestModelFaults drives Summary over a model that fails 30% of its calls
// and times out on 10%, in synchronous and background mode, with several
// writers at once:
//
//   - no accepted turn is lost: every SaveContext that returned nil, or an
//     error saying the turn was stored, has its messages either raw in the
//     store or covered by the committed summary — covered + raw is exactly
//     the accepted turns, in order, and the summary text (which names the
//     newest turn it covers) agrees with the folded count;
//   - every load succeeds and ends with the turn just saved (the raw window
//     is shown when summarization fails);
//   - failures are reported: the hook sees every injected failure, Stats
//     counts every failed call, and in synchronous mode the caller gets an
//     error for each failed summarization;
//   - a call never runs past its deadline by more than a second.
func TestModelFaults(t *testing.T) {
	for _, background := range []bool{false, true} {
		name := map[bool]string{false: "sync", true: "background"}[background]
		t.Run(name, func(t *testing.T) { modelFaults(t, background) })
	}
}

func modelFaults(t *testing.T, background bool) {
	const (
		writers  = 8
		turns    = 60
		deadline = 150 * time.Millisecond
		slack    = time.Second
	)
	model := &faultyModel{failPct: 30, hangPct: 10}
	st := store.NewInMemory()
	var hc hookCounts
	sum, err := memories.NewSummary(summarizer.New(model),
		memories.WithStore(st), memories.WithRequireIdentity(),
		memories.WithMaxMessages(6), memories.WithBatchSize(2),
		memories.WithRetryBackoff(0, 0), // retry at the next turn: more calls, more faults
		memories.WithBackground(background),
		memories.WithSummaryHook(hc.hook))
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = sum.Close()
		}
	})

	problems := &limiter{t: t, max: 20}
	var (
		accepted     [writers][]int // turns accepted per writer, in order
		rejected     [writers][]int
		reportedErrs atomic.Int64 // SaveContext errors saying the turn was stored
		loads        atomic.Int64
		wg           sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			id := proofIdentity(w)
			for j := range turns {
				h, a := turnText(w, j)
				ctx, cancel := context.WithTimeout(memstack.WithIdentity(context.Background(), id), deadline)
				t0 := time.Now()
				err := sum.SaveContext(ctx, map[string]any{"input": h}, map[string]any{"output": a})
				took := time.Since(t0)
				cancel()
				if took > deadline+slack {
					problems.Errorf("writer %d turn %d: SaveContext took %v with a %v deadline", w, j, took, deadline)
				}
				switch {
				case err == nil:
					accepted[w] = append(accepted[w], j)
				case strings.Contains(err.Error(), "stored; summarization failed"):
					accepted[w] = append(accepted[w], j)
					reportedErrs.Add(1)
					if background {
						problems.Errorf("writer %d turn %d: background SaveContext returned the summarization error %v", w, j, err)
					}
					if !errors.Is(err, errInjected) && !errors.Is(err, context.DeadlineExceeded) {
						problems.Errorf("writer %d turn %d: the error does not wrap its cause: %v", w, j, err)
					}
				default:
					rejected[w] = append(rejected[w], j)
					problems.Errorf("writer %d turn %d: SaveContext failed without storing the turn: %v", w, j, err)
				}

				if background {
					// Let the worker keep up, so that it calls the model
					// about once per turn rather than once per burst.
					time.Sleep(2 * time.Millisecond)
				}
				lctx, lcancel := context.WithTimeout(memstack.WithIdentity(context.Background(), id), time.Second)
				vars, err := sum.LoadMemoryVariables(lctx, nil)
				lcancel()
				loads.Add(1)
				if s, _ := vars["history"].(string); err != nil || !strings.HasSuffix(s, "Human: "+h+"\nAI: "+a) {
					problems.Errorf("writer %d turn %d: load failed or misses the turn just saved (err %v)", w, j, err)
				}
			}
		})
	}
	wg.Wait()

	stalled := 0
	if background {
		// A hung call blocks its identity's worker: let the rest finish,
		// then see what is still stuck.
		fctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		ferr := sum.Flush(fctx)
		cancel()
		stalled = int(model.hungNow.Load())
		t.Logf("background: Flush after the run: %v; model calls still blocked: %d of %d writers", ferr, stalled, writers)
		require.NoError(t, sum.Close())
		closed = true
		assert.Zero(t, model.hungNow.Load(), "Close ends every blocked call")
	}

	// Every accepted turn is covered or raw, exactly once, in order.
	ctx := context.Background()
	var summarized, rawTotal int64
	maxRaw := 0
	for w := range writers {
		id := proofIdentity(w)
		want := make([]llms.ChatMessage, 0, 2*len(accepted[w]))
		for _, j := range accepted[w] {
			h, a := turnText(w, j)
			want = append(want, llms.HumanChatMessage{Content: h}, llms.AIChatMessage{Content: a})
		}
		ss, raw := readSummary(t, ctx, st, id)
		if ss.Folded < 0 || int(ss.Folded) > len(want) {
			t.Errorf("writer %d: the summary claims %d folded messages of %d accepted", w, ss.Folded, len(want))
			continue
		}
		tl := count(w, messagesOf(raw), want[ss.Folded:])
		assert.Equal(t, tally{}, tl, "writer %d: the raw messages are exactly the accepted ones the summary does not cover (folded %d, raw %d, accepted %d)",
			w, ss.Folded, len(raw), len(want))
		if ss.Folded > 0 {
			m := summarizedRe.FindStringSubmatch(ss.Summary)
			if assert.NotNil(t, m, "writer %d: the committed summary is one of the model's answers: %q", w, ss.Summary) {
				assert.Equal(t, strconv.Itoa(w), m[1], "writer %d: the summary is of its own conversation", w)
				_, lastTurn, _ := parseMarker(want[ss.Folded-1].GetContent())
				assert.Equal(t, strconv.Itoa(lastTurn), m[2], "writer %d: the summary covers exactly the folded turns", w)
			}
		}
		for _, j := range rejected[w] {
			h, _ := turnText(w, j)
			recs, _ := st.All(ctx, id)
			for _, r := range recs {
				assert.NotEqual(t, h, r.Message.GetContent(), "writer %d: turn %d was reported as not stored but is there", w, j)
			}
		}
		summarized += ss.Folded
		rawTotal += int64(len(raw))
		maxRaw = max(maxRaw, len(raw))
	}

	stats := sum.Stats()
	injected := model.fails.Load() + model.hangs.Load()
	t.Logf("%d writers × %d turns: model calls %d (failed %d, timed out %d, answered %d); Summary calls %d, failures %d, folded %d; "+
		"hook events %d (injected %d, timeouts %d, other %d); SaveContext errors saying the turn was stored %d; loads %d; "+
		"at the end %d messages summarized, %d raw (at most %d for one writer; WithMaxMessages is 6)",
		writers, turns, model.calls.Load(), model.fails.Load(), model.hangs.Load(), model.answers.Load(),
		stats.Calls, stats.Failures, stats.MessagesFolded, hc.events.Load(), hc.injected.Load(), hc.timeouts.Load(),
		hc.other.Load(), reportedErrs.Load(), loads.Load(), summarized, rawTotal, maxRaw)

	assert.Zero(t, problems.count(), "problems reported above")
	assert.Positive(t, model.fails.Load(), "the double injected failures")
	assert.Positive(t, model.hangs.Load(), "the double injected timeouts")
	assert.Positive(t, model.answers.Load(), "some summaries succeeded")
	assert.Equal(t, stats.MessagesFolded, summarized, "Stats.MessagesFolded matches the committed states")
	assert.Equal(t, model.fails.Load(), hc.injected.Load(), "the hook reports every injected failure")
	assert.GreaterOrEqual(t, hc.timeouts.Load(), model.hangs.Load(), "the hook reports every timed-out call")
	assert.Zero(t, hc.other.Load(), "no other failure (first: %v)", hc.firstOther.Load())
	// Stats counts every summarizer call that failed: the model's failures
	// and timeouts, plus calls cut short by their context before reaching
	// the model.
	assert.GreaterOrEqual(t, stats.Failures, injected, "Stats.Failures counts every failed model call")
	assert.LessOrEqual(t, stats.Failures, injected+int64(writers)+hc.timeouts.Load()-model.hangs.Load(),
		"Stats.Failures counts nothing that did not fail")
	if !background {
		assert.Equal(t, hc.injected.Load()+hc.timeouts.Load(), reportedErrs.Load(),
			"in synchronous mode the caller gets one error per failed summarization")
	}
}
