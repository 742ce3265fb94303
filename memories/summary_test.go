package memories_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
	"github.com/memstack/memstack/tokens"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

var (
	_ schema.Memory = (*memories.Summary)(nil)
	_ fmt.Stringer  = (*memories.Summary)(nil)
)

// ---------------------------------------------------------------------------
// The model test double.

// smModel is an llms.Model test double for the summarizer. It records every
// call (identity from the context, the previous summary, the transcript
// lines), answers by default with "covers" followed by every message id
// (q<i>, a<i>) in the previous summary and the transcript — so a summary
// tells exactly which messages it covers, and a message folded twice shows
// up twice — and can fail, delay, block on a gate or return any text. It
// detects two concurrent calls for the same identity.
type smModel struct {
	// answer, if set, replaces the default answer. call is 0-based.
	answer func(call int, human string) (string, error)
	// delay is how long each call takes (cut short by the context).
	delay time.Duration
	// gate, if set, makes each call wait for a value or for the context.
	gate chan struct{}

	mu         sync.Mutex
	calls      []smCall
	inflight   map[memstack.Identity]int
	cur, peak  int // calls in flight now / at most, over all identities
	sameIDPeak int // most calls in flight at once for one identity
}

type smCall struct {
	ID       memstack.Identity
	Previous string
	Lines    []string // the transcript, one line per message
	Human    string   // the whole human message
}

var smIDPattern = regexp.MustCompile(`\b[qa][0-9]+\b`)

func smCovers(text string) string {
	return "covers " + strings.Join(smIDPattern.FindAllString(text, -1), " ")
}

func (d *smModel) GenerateContent(ctx context.Context, messages []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	id, _ := memstack.IdentityFrom(ctx)
	human := ""
	for _, mc := range messages {
		if mc.Role == llms.ChatMessageTypeHuman {
			for _, p := range mc.Parts {
				if t, ok := p.(llms.TextContent); ok {
					human += t.Text
				}
			}
		}
	}
	c := smCall{ID: id, Human: human}
	if i := strings.Index(human, "New lines of conversation:\n"); i >= 0 {
		c.Lines = strings.Split(human[i+len("New lines of conversation:\n"):], "\n")
		if p, ok := strings.CutPrefix(human[:i], "Summary so far:\n"); ok {
			c.Previous = strings.TrimSuffix(p, "\n\n")
		}
	}
	d.mu.Lock()
	if d.inflight == nil {
		d.inflight = map[memstack.Identity]int{}
	}
	call := len(d.calls)
	d.calls = append(d.calls, c)
	d.inflight[id]++
	d.cur++
	d.peak = max(d.peak, d.cur)
	d.sameIDPeak = max(d.sameIDPeak, d.inflight[id])
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.inflight[id]--
		d.cur--
		d.mu.Unlock()
	}()

	if d.delay > 0 {
		select {
		case <-time.After(d.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if d.gate != nil {
		select {
		case <-d.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ans, err := smCovers(human), error(nil)
	if d.answer != nil {
		ans, err = d.answer(call, human)
	}
	if err != nil {
		return nil, err
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: ans}}}, nil
}

func (d *smModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, d, prompt, options...)
}

func (d *smModel) Calls() []smCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

func (d *smModel) NumCalls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.calls)
}

func (d *smModel) Peaks() (all, sameID int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peak, d.sameIDPeak
}

// ---------------------------------------------------------------------------
// helpers

func smNew(t testing.TB, model llms.Model, opts ...memories.SummaryOption) *memories.Summary {
	t.Helper()
	m, err := memories.NewSummary(summarizer.New(model), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func smHuman(i int) string {
	return fmt.Sprintf("q%d the user asks about item number %d in some detail", i, i)
}
func smAI(i int) string {
	return fmt.Sprintf("a%d the assistant answers about item %d with care", i, i)
}

func smSave(t testing.TB, m *memories.Summary, ctx context.Context, i int) error {
	t.Helper()
	return m.SaveContext(ctx, map[string]any{"input": smHuman(i)}, map[string]any{"output": smAI(i)})
}

// smIDs returns the ids q1, a1, ..., qn, an of turns 1..n.
func smIDs(turns ...int) []string {
	out := make([]string, 0, 2*len(turns))
	for _, i := range turns {
		out = append(out, fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
	}
	return out
}

func smRange(from, to int) []int {
	out := []int{}
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func smLoad(t testing.TB, m *memories.Summary, ctx context.Context) string {
	t.Helper()
	vars, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	s, ok := vars["history"].(string)
	require.True(t, ok, "string mode loads a string, got %T", vars["history"])
	return s
}

// smSplit splits a loaded history into the summary ("" if none) and the
// transcript lines after it.
func smSplit(loaded string) (summary string, lines []string) {
	if loaded == "" {
		return "", nil
	}
	lines = strings.Split(loaded, "\n")
	if s, ok := strings.CutPrefix(lines[0], memories.SummaryPrefix); ok {
		return s, lines[1:]
	}
	return "", lines
}

// smAudit asserts that what a load shows covers exactly the ids of sent:
// every id once (in the summary or raw), none twice, none lost, nothing
// else. It returns the ids shown raw.
func smAudit(t testing.TB, loaded string, sent []string) (raw []string) {
	t.Helper()
	summary, lines := smSplit(loaded)
	shown := smIDPattern.FindAllString(summary, -1)
	raw = smIDPattern.FindAllString(strings.Join(lines, "\n"), -1)
	shown = append(shown, raw...)
	want := slices.Clone(sent)
	sort.Strings(want)
	sort.Strings(shown)
	require.Equal(t, want, shown, "summary-covered + raw messages must be exactly the messages sent, each once")
	return raw
}

// smStore is a store.InMemory whose RemovePrefix can be made to fail, as if
// the process had crashed between committing a summary and removing the
// messages it covers.
type smStore struct {
	*store.InMemory
	failRemove atomic.Bool
	removes    atomic.Int64
}

func (s *smStore) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	s.removes.Add(1)
	if s.failRemove.Load() {
		return 0, errors.New("smStore: RemovePrefix fails on purpose")
	}
	return s.InMemory.RemovePrefix(ctx, id, through)
}

var smBG = context.Background()

// ---------------------------------------------------------------------------
// count mode

func TestSummary_CallCounts(t *testing.T) {
	tests := []struct {
		name      string
		n, m      int
		turns     int
		wantCalls int
		wantBatch int // messages per batch
		wantRaw   int
	}{
		// 14 messages after turn 7; turn 8 makes 16 > 15: fold 6 (turns
		// 1-3), 10 left; then every 3 turns (16 again): turns 8, 11, ...,
		// 38 = 11 calls, 66 messages folded, 14 raw.
		{"n=15 m=6 40 turns", 15, 6, 40, 11, 6, 14},
		// m=5 ends inside a turn; extended to the whole turn: 6.
		{"n=15 m=5 40 turns", 15, 5, 40, 11, 6, 14},
		// Turn 3 makes 6 > 4: fold 2, 4 left; then one call per turn from
		// turn 3 to 10: 8 calls.
		{"n=4 m=2 10 turns", 4, 2, 10, 8, 2, 4},
		// Turn 6 makes 12 > 10: fold 10, 2 left; again at turns 11 and 16.
		{"n=10 m=10 20 turns", 10, 10, 20, 3, 10, 10},
		{"below the limit", 15, 6, 7, 0, 0, 14},
		{"defaults 40 turns", 0, 0, 40, 11, 6, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := &smModel{}
			var opts []memories.SummaryOption
			if tt.n > 0 {
				opts = append(opts, memories.WithMaxMessages(tt.n), memories.WithBatchSize(tt.m))
			}
			mem := smNew(t, model, opts...)
			for i := 1; i <= tt.turns; i++ {
				require.NoError(t, smSave(t, mem, smBG, i))
			}
			calls := model.Calls()
			require.Len(t, calls, tt.wantCalls)
			for k, c := range calls {
				require.Len(t, c.Lines, tt.wantBatch, "call %d", k+1)
				assert.True(t, strings.HasPrefix(c.Lines[0], "Human: "), "a batch starts a turn: %q", c.Lines[0])
				assert.True(t, strings.HasPrefix(c.Lines[len(c.Lines)-1], "AI: "), "a batch ends a turn: %q", c.Lines[len(c.Lines)-1])
				if k > 0 {
					assert.Equal(t, smCovers(calls[k-1].Human), c.Previous, "call %d builds on the summary call %d committed", k+1, k)
				}
			}
			raw := smAudit(t, smLoad(t, mem, smBG), smIDs(smRange(1, tt.turns)...))
			assert.Len(t, raw, tt.wantRaw)
			assert.Equal(t, memories.SummaryStats{Calls: int64(tt.wantCalls), MessagesFolded: int64(tt.wantCalls * tt.wantBatch)}, mem.Stats())
		})
	}
}

func TestSummary_BatchKeepsToolCallsWithResults(t *testing.T) {
	model := &smModel{}
	mem := smNew(t, model, memories.WithMaxMessages(4), memories.WithBatchSize(3))
	msgs := []llms.ChatMessage{
		llms.HumanChatMessage{Content: smHuman(1)},
		llms.AIChatMessage{Content: smAI(1)},
		llms.HumanChatMessage{Content: smHuman(2)},
		llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{"item":2}`}}}},
		llms.ToolChatMessage{ID: "c1", Content: "result one"},
		llms.ToolChatMessage{ID: "c1", Content: "result two"},
		llms.AIChatMessage{Content: smAI(2)},
		llms.HumanChatMessage{Content: smHuman(3)},
		llms.AIChatMessage{Content: smAI(3)},
	}
	for i, msg := range msgs {
		require.NoError(t, mem.AddMessage(smBG, msg))
		if i < 7 {
			// From the 5th message on there are more than 4, but the
			// oldest 3 end inside turn 2 and no later turn has begun.
			require.Zero(t, model.NumCalls(), "after message %d", i+1)
		}
	}
	calls := model.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, []string{
		"Human: " + smHuman(1),
		"AI: " + smAI(1),
		"Human: " + smHuman(2),
		`AI:  {"name":"lookup","arguments":"{\"item\":2}"}`,
		"tool: result one",
		"tool: result two",
		"AI: " + smAI(2),
	}, calls[0].Lines, "the batch is extended to the end of the turn, tool results included")
	summary, lines := smSplit(smLoad(t, mem, smBG))
	assert.Equal(t, "covers q1 a1 q2 a2", summary)
	assert.Equal(t, []string{"Human: " + smHuman(3), "AI: " + smAI(3)}, lines)
}

func TestSummary_BatchWithoutHumanMessages(t *testing.T) {
	model := &smModel{}
	mem := smNew(t, model, memories.WithMaxMessages(3), memories.WithBatchSize(2))
	msgs := []llms.ChatMessage{
		llms.AIChatMessage{Content: smAI(1)},
		llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "lookup", Arguments: `{}`}}}},
		llms.ToolChatMessage{ID: "c1", Content: "result"},
		llms.AIChatMessage{Content: smAI(2)},
	}
	for _, msg := range msgs {
		require.NoError(t, mem.AddMessage(smBG, msg))
	}
	calls := model.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, []string{"AI: " + smAI(1), `AI:  {"name":"lookup","arguments":"{}"}`, "tool: result"}, calls[0].Lines,
		"with no turns, the batch ends after the whole tool group")
	summary, lines := smSplit(smLoad(t, mem, smBG))
	assert.Equal(t, "covers a1", summary)
	assert.Equal(t, []string{"AI: " + smAI(2)}, lines)
}

func TestSummary_SystemMessagesAreNeverFolded(t *testing.T) {
	model := &smModel{}
	mem := smNew(t, model, memories.WithMaxMessages(4), memories.WithBatchSize(2))
	require.NoError(t, mem.AddMessage(smBG, llms.SystemChatMessage{Content: "You are terse."}))
	for i := 1; i <= 6; i++ {
		require.NoError(t, smSave(t, mem, smBG, i))
		if i == 3 {
			require.NoError(t, mem.AddMessage(smBG, llms.SystemChatMessage{Content: "Answer in French."}))
		}
	}
	calls := model.Calls()
	require.Len(t, calls, 4, "turns 3..6 each fold one turn")
	for _, c := range calls {
		for _, l := range c.Lines {
			assert.False(t, strings.HasPrefix(l, "system:"), "system message folded: %q", l)
		}
	}
	loaded := smLoad(t, mem, smBG)
	summary, lines := smSplit(loaded)
	assert.Equal(t, "covers q1 a1 q2 a2 q3 a3 q4 a4", summary)
	assert.Equal(t, []string{
		"system: You are terse.",
		"system: Answer in French.",
		"Human: " + smHuman(5), "AI: " + smAI(5),
		"Human: " + smHuman(6), "AI: " + smAI(6),
	}, lines, "summary, then every system message, then the raw messages")
}

// ---------------------------------------------------------------------------
// loading

func TestSummary_LoadFormats(t *testing.T) {
	model := &smModel{answer: func(int, string) (string, error) { return "Ana likes tea.", nil }}
	st := store.NewInMemory()
	strMem := smNew(t, model, memories.WithStore(st), memories.WithMaxMessages(4), memories.WithBatchSize(2))
	msgMem := smNew(t, &smModel{}, memories.WithStore(st), memories.WithReturnMessages(true), memories.WithMemoryKey("chat"))
	custom := smNew(t, &smModel{}, memories.WithStore(st), memories.WithHumanPrefix("User"), memories.WithAIPrefix("Bot"))

	require.NoError(t, strMem.AddMessage(smBG, llms.SystemChatMessage{Content: "You are terse."}))
	require.NoError(t, smSave(t, strMem, smBG, 1))
	require.NoError(t, smSave(t, strMem, smBG, 2))
	before := []llms.ChatMessage{
		llms.SystemChatMessage{Content: "You are terse."},
		llms.HumanChatMessage{Content: smHuman(1)}, llms.AIChatMessage{Content: smAI(1)},
		llms.HumanChatMessage{Content: smHuman(2)}, llms.AIChatMessage{Content: smAI(2)},
	}
	assert.Equal(t, ctRender(t, before, "Human", "AI"), smLoad(t, strMem, smBG), "with no summary yet a load is GetBufferString")

	require.NoError(t, smSave(t, strMem, smBG, 3))
	require.Equal(t, 1, model.NumCalls())

	assert.Equal(t, "Summary of earlier conversation: Ana likes tea.\n"+
		"system: You are terse.\n"+
		"Human: "+smHuman(2)+"\nAI: "+smAI(2)+"\n"+
		"Human: "+smHuman(3)+"\nAI: "+smAI(3), smLoad(t, strMem, smBG))

	assert.Equal(t, []llms.ChatMessage{
		llms.SystemChatMessage{Content: "Summary of earlier conversation: Ana likes tea."},
		llms.SystemChatMessage{Content: "You are terse."},
		llms.HumanChatMessage{Content: smHuman(2)}, llms.AIChatMessage{Content: smAI(2)},
		llms.HumanChatMessage{Content: smHuman(3)}, llms.AIChatMessage{Content: smAI(3)},
	}, ctLoad(t, msgMem, smBG, "chat"))

	assert.Equal(t, "Summary of earlier conversation: Ana likes tea.\n"+
		"system: You are terse.\n"+
		"User: "+smHuman(2)+"\nBot: "+smAI(2)+"\n"+
		"User: "+smHuman(3)+"\nBot: "+smAI(3), smLoad(t, custom, smBG))

	// Only a summary: no trailing line break.
	onlySummary := smNew(t, &smModel{answer: func(int, string) (string, error) { return "Short.", nil }},
		memories.WithMaxMessages(1), memories.WithBatchSize(1))
	require.NoError(t, onlySummary.AddMessage(smBG, llms.HumanChatMessage{Content: smHuman(1)}))
	require.NoError(t, onlySummary.AddMessage(smBG, llms.HumanChatMessage{Content: smHuman(2)}))
	assert.Equal(t, "Summary of earlier conversation: Short.\nHuman: "+smHuman(2), smLoad(t, onlySummary, smBG))
}

// ---------------------------------------------------------------------------
// token mode

// smWords counts words; with it every smTokenTurn message costs 10 tokens
// (9 words rendered, plus the line break).
var smWords = tokens.CounterFunc(func(s string) int { return len(strings.Fields(s)) })

func smTokenTurn(t testing.TB, m *memories.Summary, i, words int) {
	t.Helper()
	pad := strings.Repeat(" w", words-2)
	require.NoError(t, m.SaveContext(smBG,
		map[string]any{"input": fmt.Sprintf("q%d%s", i, pad)},
		map[string]any{"output": fmt.Sprintf("a%d%s", i, pad)}))
}

func TestSummary_TokenModeWatermarks(t *testing.T) {
	model := &smModel{}
	mem := smNew(t, model, memories.WithMaxTokens(100), memories.WithTokenCounter(smWords))
	raw := func() int {
		_, lines := smSplit(smLoad(t, mem, smBG))
		return len(lines)
	}
	wantCalls := []int{0, 0, 0, 0, 0, 1, 1, 1, 1, 2}
	for i := 1; i <= 10; i++ {
		smTokenTurn(t, mem, i, 9)
		require.Equal(t, wantCalls[i-1], model.NumCalls(), "after turn %d", i)
		if i == 6 || i == 10 {
			// 120 tokens > 100: fold down to <= 50, at a turn boundary:
			// 4 messages (40 tokens) stay.
			assert.Equal(t, 4, raw(), "after turn %d", i)
		}
	}
	calls := model.Calls()
	assert.Len(t, calls[0].Lines, 8)
	assert.Len(t, calls[1].Lines, 8)
	smAudit(t, smLoad(t, mem, smBG), smIDs(smRange(1, 10)...))
}

func TestSummary_TokenModeHugeLastTurn(t *testing.T) {
	model := &smModel{}
	mem := smNew(t, model, memories.WithMaxTokens(30), memories.WithTokenCounter(smWords))
	smTokenTurn(t, mem, 1, 9)  // 20 tokens
	smTokenTurn(t, mem, 2, 20) // 42 tokens: 62 > 30, and turn 2 alone exceeds 15
	calls := model.Calls()
	require.Len(t, calls, 1)
	assert.Len(t, calls[0].Lines, 2, "everything before the newest turn is folded")
	_, lines := smSplit(smLoad(t, mem, smBG))
	assert.Len(t, lines, 2, "the newest turn stays raw")
}

// ---------------------------------------------------------------------------
// background mode

func smPercentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func TestSummary_BackgroundSavesDoNotWait(t *testing.T) {
	model := &smModel{delay: 300 * time.Millisecond}
	mem := smNew(t, model, memories.WithBackground(true))
	const turns = 150
	lat := make([]time.Duration, 0, turns)
	for i := 1; i <= turns; i++ {
		start := time.Now()
		require.NoError(t, smSave(t, mem, smBG, i))
		lat = append(lat, time.Since(start))
	}
	p99 := smPercentile(lat, 0.99)
	t.Logf("background SaveContext: p50 %v, p99 %v, max %v", smPercentile(lat, 0.5), p99, smPercentile(lat, 1))
	assert.Less(t, p99, 50*time.Millisecond, "a save must not wait for the 300 ms model")

	require.NoError(t, mem.Flush(smBG))
	raw := smAudit(t, smLoad(t, mem, smBG), smIDs(smRange(1, turns)...))
	assert.LessOrEqual(t, len(raw), 15, "after Flush the backlog is folded")
	st := mem.Stats()
	assert.GreaterOrEqual(t, st.Calls, int64(1))
	assert.LessOrEqual(t, st.Calls, int64((2*turns+5)/6), "never more than one call per batch")
	assert.Equal(t, int64(2*turns-len(raw)), st.MessagesFolded)
}

func TestSummary_BackgroundLoadsDuringSummarization(t *testing.T) {
	gate := make(chan struct{})
	model := &smModel{gate: gate}
	mem := smNew(t, model, memories.WithBackground(true))
	for i := 1; i <= 8; i++ {
		require.NoError(t, smSave(t, mem, smBG, i))
	}
	require.Eventually(t, func() bool { return model.NumCalls() == 1 }, 5*time.Second, time.Millisecond)

	// The model is busy: a load shows every message raw, no summary.
	summary, lines := smSplit(smLoad(t, mem, smBG))
	assert.Empty(t, summary)
	assert.Len(t, lines, 16)

	// Flush waits for the summarization.
	ctx, cancel := context.WithTimeout(smBG, 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, mem.Flush(ctx), context.DeadlineExceeded)

	close(gate)
	require.NoError(t, mem.Flush(smBG))
	raw := smAudit(t, smLoad(t, mem, smBG), smIDs(smRange(1, 8)...))
	assert.Len(t, raw, 10)
	assert.Equal(t, 1, model.NumCalls())
}

func TestSummary_BackgroundOneSummarizationPerIdentity(t *testing.T) {
	model := &smModel{delay: 15 * time.Millisecond}
	mem := smNew(t, model, memories.WithBackground(true), memories.WithMaxMessages(4), memories.WithBatchSize(2))
	const ids, writers, turns = 6, 3, 12
	var wg sync.WaitGroup
	for u := range ids {
		ctx := memstack.WithIdentity(smBG, memstack.Identity{User: fmt.Sprint("u", u)})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range turns {
					assert.NoError(t, smSave(t, mem, ctx, 1+w*turns+i))
				}
			}()
		}
	}
	wg.Wait()
	require.NoError(t, mem.Flush(smBG))
	all, sameID := model.Peaks()
	assert.Equal(t, 1, sameID, "two summarizations of one identity overlapped")
	assert.Greater(t, all, 1, "different identities are summarized concurrently (so the check above could fail)")
	for u := range ids {
		ctx := memstack.WithIdentity(smBG, memstack.Identity{User: fmt.Sprint("u", u)})
		smAudit(t, smLoad(t, mem, ctx), smIDs(smRange(1, writers*turns)...))
	}
}

func TestSummary_SyncOneSummarizationPerIdentity(t *testing.T) {
	model := &smModel{delay: 10 * time.Millisecond}
	mem := smNew(t, model, memories.WithMaxMessages(4), memories.WithBatchSize(2))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				assert.NoError(t, smSave(t, mem, smBG, 1+w*10+i))
			}
		}()
	}
	wg.Wait()
	_, sameID := model.Peaks()
	assert.Equal(t, 1, sameID)
	smAudit(t, smLoad(t, mem, smBG), smIDs(smRange(1, 40)...))
}

func TestSummary_Close(t *testing.T) {
	model := &smModel{gate: make(chan struct{})} // never opened
	var events []memories.SummaryEvent
	var mu sync.Mutex
	mem := smNew(t, model, memories.WithBackground(true), memories.WithSummaryHook(func(e memories.SummaryEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}))
	for i := 1; i <= 8; i++ {
		require.NoError(t, smSave(t, mem, smBG, i))
	}
	require.Eventually(t, func() bool { return model.NumCalls() == 1 }, 5*time.Second, time.Millisecond)

	done := make(chan error, 1)
	go func() { done <- mem.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the summarization")
	}
	mu.Lock()
	require.Len(t, events, 1)
	assert.ErrorIs(t, events[0].Err, context.Canceled)
	mu.Unlock()
	assert.Equal(t, memories.SummaryStats{Calls: 1, Failures: 1}, mem.Stats())

	require.ErrorIs(t, mem.Flush(smBG), memories.ErrClosed)
	require.ErrorIs(t, smSave(t, mem, smBG, 9), memories.ErrClosed)
	require.ErrorIs(t, mem.AddMessage(smBG, llms.HumanChatMessage{Content: "x"}), memories.ErrClosed)
	require.ErrorIs(t, mem.Clear(smBG), memories.ErrClosed)
	require.NoError(t, mem.Close(), "closing twice is a no-op")

	raw := smAudit(t, smLoad(t, mem, smBG), smIDs(smRange(1, 8)...))
	assert.Len(t, raw, 16, "loads still work; the abandoned batch stayed raw; turn 9 was not stored")
}

// ---------------------------------------------------------------------------
// failures

func TestSummary_FailingModelLosesNothing(t *testing.T) {
	errModel := errors.New("model overloaded")
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%t", background), func(t *testing.T) {
			model := &smModel{answer: func(call int, human string) (string, error) {
				if call%10 == 2 || call%10 == 5 || call%10 == 8 { // 30% of calls
					return "", errModel
				}
				return smCovers(human), nil
			}}
			var hookFailures atomic.Int64
			mem := smNew(t, model, memories.WithBackground(background),
				memories.WithMaxMessages(6), memories.WithBatchSize(2),
				memories.WithRetryBackoff(0, 0),
				memories.WithSummaryHook(func(e memories.SummaryEvent) {
					if e.Err != nil {
						hookFailures.Add(1)
					}
				}))

			// Loads running alongside never see a message lost or doubled.
			stop := make(chan struct{})
			var sent atomic.Int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					n := int(sent.Load())
					summary, lines := smSplit(smLoad(t, mem, smBG))
					shown := smIDPattern.FindAllString(summary+"\n"+strings.Join(lines, "\n"), -1)
					seen := map[string]int{}
					for _, id := range shown {
						seen[id]++
						if !assert.Equal(t, 1, seen[id], "id %s shown twice", id) {
							return
						}
					}
					for _, id := range smIDs(smRange(1, n)...) {
						if !assert.Contains(t, seen, id, "a load lost %s", id) {
							return
						}
					}
				}
			}()

			syncErrors := 0
			for i := 1; i <= 60; i++ {
				err := smSave(t, mem, smBG, i)
				sent.Store(int64(i))
				if err != nil {
					require.False(t, background, "a background save never reports summarization failures")
					require.ErrorIs(t, err, errModel)
					assert.Contains(t, err.Error(), "turn stored; summarization failed")
					syncErrors++
				}
				if background {
					// Let the worker catch up now and then, so that it
					// makes many calls rather than folding the whole
					// backlog at once.
					if i%2 == 0 {
						require.NoError(t, mem.Flush(smBG))
					}
				} else {
					smAudit(t, smLoad(t, mem, smBG), smIDs(smRange(1, i)...))
				}
			}
			require.NoError(t, mem.Flush(smBG))
			close(stop)
			wg.Wait()

			smAudit(t, smLoad(t, mem, smBG), smIDs(smRange(1, 60)...))
			st := mem.Stats()
			assert.Positive(t, st.Failures)
			assert.Greater(t, st.Calls, st.Failures)
			assert.Equal(t, st.Failures, hookFailures.Load())
			if !background {
				assert.Equal(t, int64(syncErrors), st.Failures)
			}
		})
	}
}

func TestSummary_RetryBackoff(t *testing.T) {
	errModel := errors.New("model down")
	model := &smModel{answer: func(call int, human string) (string, error) {
		if call < 2 {
			return "", errModel
		}
		return smCovers(human), nil
	}}
	mem := smNew(t, model, memories.WithRetryBackoff(300*time.Millisecond, 600*time.Millisecond))
	for i := 1; i <= 7; i++ {
		require.NoError(t, smSave(t, mem, smBG, i))
	}
	require.ErrorIs(t, smSave(t, mem, smBG, 8), errModel, "turn 8 triggers the first call, which fails")
	firstFailure := time.Now()
	require.Equal(t, 1, model.NumCalls())

	require.NoError(t, smSave(t, mem, smBG, 9), "within the backoff: no call, no error")
	require.Equal(t, 1, model.NumCalls())

	time.Sleep(time.Until(firstFailure.Add(350 * time.Millisecond)))
	require.ErrorIs(t, smSave(t, mem, smBG, 10), errModel, "after 300 ms the next turn retries")
	secondFailure := time.Now()
	require.Equal(t, 2, model.NumCalls())

	time.Sleep(time.Until(secondFailure.Add(350 * time.Millisecond)))
	require.NoError(t, smSave(t, mem, smBG, 11), "the backoff doubled to 600 ms")
	require.Equal(t, 2, model.NumCalls())

	time.Sleep(time.Until(secondFailure.Add(650 * time.Millisecond)))
	require.NoError(t, smSave(t, mem, smBG, 12))
	require.Equal(t, 3, model.NumCalls())
	assert.Len(t, model.Calls()[2].Lines, 10, "the retry folds the whole backlog down to 15 raw messages, at a turn boundary")
	raw := smAudit(t, smLoad(t, mem, smBG), smIDs(smRange(1, 12)...))
	assert.Len(t, raw, 14)
	assert.Equal(t, memories.SummaryStats{Calls: 3, Failures: 2, MessagesFolded: 10}, mem.Stats())
}

func TestSummary_LoadsNeverFailBecauseOfTheSummarizer(t *testing.T) {
	t.Run("failing model", func(t *testing.T) {
		model := &smModel{answer: func(int, string) (string, error) { return "", errors.New("down") }}
		mem := smNew(t, model, memories.WithMaxMessages(4), memories.WithBatchSize(2), memories.WithRetryBackoff(0, 0))
		for i := 1; i <= 20; i++ {
			err := smSave(t, mem, smBG, i)
			if i >= 3 {
				require.Error(t, err)
			}
			raw := smAudit(t, smLoad(t, mem, smBG), smIDs(smRange(1, i)...))
			require.Len(t, raw, 2*i)
		}
		assert.Equal(t, 18, model.NumCalls())
	})
	t.Run("blocked model", func(t *testing.T) {
		gate := make(chan struct{})
		model := &smModel{gate: gate}
		mem := smNew(t, model, memories.WithMaxMessages(4), memories.WithBatchSize(2))
		require.NoError(t, smSave(t, mem, smBG, 1))
		require.NoError(t, smSave(t, mem, smBG, 2))
		done := make(chan error, 1)
		go func() { done <- smSave(t, mem, smBG, 3) }()
		require.Eventually(t, func() bool { return model.NumCalls() == 1 }, 5*time.Second, time.Millisecond)
		start := time.Now()
		smAudit(t, smLoad(t, mem, smBG), smIDs(1, 2, 3))
		assert.Less(t, time.Since(start), time.Second, "a load does not wait for the model")
		close(gate)
		require.NoError(t, <-done)
		raw := smAudit(t, smLoad(t, mem, smBG), smIDs(1, 2, 3))
		assert.Len(t, raw, 4)
	})
}

// ---------------------------------------------------------------------------
// persistence

func TestSummary_RestartResumesWithoutSummarizing(t *testing.T) {
	st := store.NewInMemory()
	first := &smModel{}
	a := smNew(t, first, memories.WithStore(st))
	for i := 1; i <= 20; i++ {
		require.NoError(t, smSave(t, a, smBG, i))
	}
	require.Equal(t, 5, first.NumCalls(), "turns 8, 11, 14, 17, 20")
	loadedA := smLoad(t, a, smBG)
	require.NoError(t, a.Close())

	// A new process: a new memory over the same store.
	second := &smModel{}
	b := smNew(t, second, memories.WithStore(st))
	loadedB := smLoad(t, b, smBG)
	assert.Equal(t, loadedA, loadedB, "the summary and the raw messages are back")
	assert.Zero(t, second.NumCalls(), "a load makes no model call")
	summaryA, _ := smSplit(loadedA)
	require.NotEmpty(t, summaryA)

	for i := 21; i <= 22; i++ {
		require.NoError(t, smSave(t, b, smBG, i))
	}
	assert.Zero(t, second.NumCalls(), "10 raw + 4 new = 14: nothing to fold, nothing summarized again")
	require.NoError(t, smSave(t, b, smBG, 23))
	calls := second.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, summaryA, calls[0].Previous, "the new process builds on the stored summary")
	assert.Equal(t, "Human: "+smHuman(16), calls[0].Lines[0], "and folds only what it does not cover")
	smAudit(t, smLoad(t, b, smBG), smIDs(smRange(1, 23)...))
}

func TestSummary_CrashBetweenCommitAndRemove(t *testing.T) {
	st := &smStore{InMemory: store.NewInMemory()}
	st.failRemove.Store(true)
	keep0 := memories.WithRetention(memories.KeepLast(0))
	mem := smNew(t, &smModel{}, memories.WithStore(st), memories.WithMaxMessages(4), memories.WithBatchSize(2), keep0)
	for i := 1; i <= 3; i++ {
		require.NoError(t, smSave(t, mem, smBG, i), "a failed RemovePrefix after the commit is not an error")
	}
	assert.Len(t, ctStored(t, st, memstack.Identity{}), 6, "the folded messages are still in the store")
	raw := smAudit(t, smLoad(t, mem, smBG), smIDs(1, 2, 3))
	assert.Len(t, raw, 4, "but a load does not show them twice")

	// A restarted memory over the same store sees the same thing.
	other := smNew(t, &smModel{}, memories.WithStore(st), memories.WithMaxMessages(4), memories.WithBatchSize(2), keep0)
	smAudit(t, smLoad(t, other, smBG), smIDs(1, 2, 3))

	st.failRemove.Store(false)
	require.NoError(t, smSave(t, mem, smBG, 4))
	assert.Len(t, ctStored(t, st, memstack.Identity{}), 4, "the next fold removes the leftovers")
	smAudit(t, smLoad(t, mem, smBG), smIDs(1, 2, 3, 4))
}

func TestSummary_ConflictingWritersDoNotDoubleFold(t *testing.T) {
	st := store.NewInMemory()
	gateA, gateB := make(chan struct{}), make(chan struct{})
	modelA, modelB := &smModel{gate: gateA}, &smModel{gate: gateB}
	var conflicts atomic.Int64
	a := smNew(t, modelA, memories.WithStore(st), memories.WithSummaryHook(func(e memories.SummaryEvent) {
		if errors.Is(e.Err, store.ErrConflict) {
			conflicts.Add(1)
		}
	}))
	b := smNew(t, modelB, memories.WithStore(st))
	for i := 1; i <= 7; i++ {
		require.NoError(t, smSave(t, a, smBG, i))
	}
	doneA := make(chan error, 1)
	go func() { doneA <- smSave(t, a, smBG, 8) }()
	require.Eventually(t, func() bool { return modelA.NumCalls() == 1 }, 5*time.Second, time.Millisecond)
	doneB := make(chan error, 1)
	go func() { doneB <- smSave(t, b, smBG, 9) }()
	require.Eventually(t, func() bool { return modelB.NumCalls() == 1 }, 5*time.Second, time.Millisecond)

	close(gateB) // B commits first
	require.NoError(t, <-doneB)
	close(gateA) // A's commit conflicts and is dropped
	require.NoError(t, <-doneA, "a conflict is not a failure: the other writer's summary stands")

	assert.Equal(t, int64(1), conflicts.Load())
	assert.Equal(t, memories.SummaryStats{Calls: 1}, a.Stats(), "A folded nothing")
	assert.Equal(t, memories.SummaryStats{Calls: 1, MessagesFolded: 6}, b.Stats())
	raw := smAudit(t, smLoad(t, a, smBG), smIDs(smRange(1, 9)...))
	assert.Len(t, raw, 12)
	summary, _ := smSplit(smLoad(t, a, smBG))
	assert.Equal(t, "covers q1 a1 q2 a2 q3 a3", summary)

	// A carries on from B's summary: 12 raw + turns 10 and 11 = 16 > 15.
	require.NoError(t, smSave(t, a, smBG, 10))
	require.NoError(t, smSave(t, a, smBG, 11))
	calls := modelA.Calls()
	require.Len(t, calls, 2)
	assert.Equal(t, "covers q1 a1 q2 a2 q3 a3", calls[1].Previous)
	assert.Equal(t, "Human: "+smHuman(4), calls[1].Lines[0])
	smAudit(t, smLoad(t, b, smBG), smIDs(smRange(1, 11)...))
}

func TestSummary_IdentitiesAreIsolated(t *testing.T) {
	model := &smModel{}
	mem := smNew(t, model, memories.WithMaxMessages(4), memories.WithBatchSize(2))
	alice := memstack.WithIdentity(smBG, memstack.Identity{Tenant: "t", User: "alice"})
	bob := memstack.WithIdentity(smBG, memstack.Identity{Tenant: "t", User: "bob"})
	for i := 1; i <= 6; i++ {
		require.NoError(t, smSave(t, mem, alice, i))
		if i <= 3 {
			require.NoError(t, smSave(t, mem, bob, 100+i))
		}
	}
	for _, c := range model.Calls() {
		ids := smIDPattern.FindAllString(c.Human, -1)
		for _, id := range ids {
			isBob := strings.HasPrefix(id[1:], "10")
			assert.Equal(t, c.ID.User == "bob", isBob, "call for %s saw %s", c.ID.User, id)
		}
	}
	assert.Len(t, model.Calls(), 5, "alice: turns 3-6, bob: turn 3")
	smAudit(t, smLoad(t, mem, alice), smIDs(smRange(1, 6)...))
	smAudit(t, smLoad(t, mem, bob), smIDs(101, 102, 103))

	require.NoError(t, mem.Clear(alice))
	assert.Empty(t, smLoad(t, mem, alice), "Clear removes the summary too")
	smAudit(t, smLoad(t, mem, bob), smIDs(101, 102, 103))
}

func TestSummary_Hook(t *testing.T) {
	var events []memories.SummaryEvent
	model := &smModel{delay: 20 * time.Millisecond}
	mem := smNew(t, model, memories.WithSummaryHook(func(e memories.SummaryEvent) { events = append(events, e) }))
	id := memstack.Identity{Tenant: "acme", User: "u1"}
	ctx := memstack.WithIdentity(smBG, id)
	for i := 1; i <= 8; i++ {
		require.NoError(t, smSave(t, mem, ctx, i))
	}
	require.Len(t, events, 1)
	e := events[0]
	assert.Equal(t, id.Hash(), e.IdentityHash)
	assert.Equal(t, 6, e.Messages)
	assert.GreaterOrEqual(t, e.Duration, 20*time.Millisecond)
	assert.NoError(t, e.Err)
}

// ---------------------------------------------------------------------------
// bad input

// smSummarizerFunc adapts a function to summarizer.Summarizer.
type smSummarizerFunc func(ctx context.Context, previous string, msgs []llms.ChatMessage) (string, error)

func (f smSummarizerFunc) Summarize(ctx context.Context, previous string, msgs []llms.ChatMessage) (string, error) {
	return f(ctx, previous, msgs)
}

func TestNewSummary_RejectsBadInput(t *testing.T) {
	good := summarizer.New(&smModel{})
	var nilLLM *summarizer.LLM
	var nilExtractive *summarizer.Extractive
	tests := []struct {
		name string
		s    summarizer.Summarizer
		opts []memories.SummaryOption
		msg  []string
	}{
		{"nil summarizer", nil, nil, []string{"summarizer is nil"}},
		{"nil *summarizer.LLM", nilLLM, nil, []string{"nil *summarizer.LLM"}},
		{"nil *summarizer.Extractive", nilExtractive, nil, []string{"nil *summarizer.Extractive"}},
		{"nil model", summarizer.New(nil), nil, []string{"model is nil"}},
		{"summarizer max tokens < 1", summarizer.New(&smModel{}, summarizer.WithMaxTokens(0)), nil, []string{"WithMaxTokens(0)"}},
		{"extractive budget < 1", summarizer.NewExtractive(summarizer.WithBudget(0)), nil, []string{"WithBudget(0)"}},
		{"n < 1", good, []memories.SummaryOption{memories.WithMaxMessages(0)}, []string{"WithMaxMessages(0)"}},
		{"batch < 1", good, []memories.SummaryOption{memories.WithBatchSize(0)}, []string{"WithBatchSize(0)"}},
		{"batch > n", good, []memories.SummaryOption{memories.WithMaxMessages(5), memories.WithBatchSize(7)}, []string{"WithBatchSize(7)", "WithMaxMessages(5)"}},
		{"batch > default n", good, []memories.SummaryOption{memories.WithBatchSize(16)}, []string{"WithBatchSize(16)", "WithMaxMessages(15)"}},
		{"max tokens < 1", good, []memories.SummaryOption{memories.WithMaxTokens(0)}, []string{"WithMaxTokens(0)"}},
		{"max tokens with max messages", good, []memories.SummaryOption{memories.WithMaxTokens(100), memories.WithMaxMessages(10)}, []string{"WithMaxTokens(100)", "WithMaxMessages"}},
		{"max tokens with batch", good, []memories.SummaryOption{memories.WithMaxTokens(100), memories.WithBatchSize(3)}, []string{"WithMaxTokens(100)", "WithBatchSize"}},
		{"negative backoff", good, []memories.SummaryOption{memories.WithRetryBackoff(-time.Second, time.Second)}, []string{"WithRetryBackoff(-1s, 1s)"}},
		{"backoff max < min", good, []memories.SummaryOption{memories.WithRetryBackoff(2*time.Second, time.Second)}, []string{"WithRetryBackoff(2s, 1s)"}},
		{"nil hook", good, []memories.SummaryOption{memories.WithSummaryHook(nil)}, []string{"WithSummaryHook(nil)"}},
		{"nil store", good, []memories.SummaryOption{memories.WithStore(nil)}, []string{"WithStore(nil)"}},
		{"nil option", good, []memories.SummaryOption{nil}, []string{"option 1 of 1 is nil"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := memories.NewSummary(tt.s, tt.opts...)
			require.ErrorIs(t, err, memories.ErrInvalidOption)
			assert.Nil(t, m)
			for _, msg := range tt.msg {
				assert.Contains(t, err.Error(), msg)
			}
		})
	}

	for _, opts := range [][]memories.SummaryOption{
		{memories.WithMaxMessages(4)}, // the batch defaults to 4
		{memories.WithMaxMessages(1), memories.WithBatchSize(1)},
		{memories.WithBatchSize(15)},
		{memories.WithMaxTokens(1)},
		{memories.WithRetryBackoff(0, 0)},
	} {
		_, err := memories.NewSummary(good, opts...)
		assert.NoError(t, err)
	}
}

func TestSummary_BadSummariesKeepMessagesRaw(t *testing.T) {
	errModel := errors.New("model exploded")
	tests := []struct {
		name    string
		s       func(model *smModel) summarizer.Summarizer
		answer  func(int, string) (string, error)
		wantErr error
	}{
		{"empty summary", nil, func(int, string) (string, error) { return "", nil }, summarizer.ErrEmptySummary},
		{"whitespace summary", nil, func(int, string) (string, error) { return "\n \t", nil }, summarizer.ErrEmptySummary},
		{"over-long summary",
			func(model *smModel) summarizer.Summarizer { return summarizer.New(model, summarizer.WithMaxTokens(3)) },
			func(int, string) (string, error) { return "one two three four five six seven", nil }, summarizer.ErrSummaryTooLong},
		{"not shorter", nil, func(_ int, human string) (string, error) { return human + " and more", nil }, summarizer.ErrNotShorter},
		{"model error", nil, func(int, string) (string, error) { return "", errModel }, errModel},
		{"custom summarizer returns empty", func(*smModel) summarizer.Summarizer {
			return smSummarizerFunc(func(context.Context, string, []llms.ChatMessage) (string, error) { return " ", nil })
		}, nil, summarizer.ErrEmptySummary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := &smModel{answer: tt.answer}
			var s summarizer.Summarizer = summarizer.New(model)
			if tt.s != nil {
				s = tt.s(model)
			}
			mem, err := memories.NewSummary(s, memories.WithMaxMessages(4), memories.WithBatchSize(2))
			require.NoError(t, err)
			require.NoError(t, smSave(t, mem, smBG, 1))
			require.NoError(t, smSave(t, mem, smBG, 2))
			err = smSave(t, mem, smBG, 3)
			require.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), "turn stored; summarization failed")
			assert.NotContains(t, err.Error(), "item number", "errors never quote the conversation")
			summary, lines := smSplit(smLoad(t, mem, smBG))
			assert.Empty(t, summary)
			assert.Len(t, lines, 6, "the turn is stored and nothing was folded")
			assert.Equal(t, memories.SummaryStats{Calls: 1, Failures: 1}, mem.Stats())
		})
	}
}

func TestSummary_CancelledContextDuringSummarization(t *testing.T) {
	model := &smModel{gate: make(chan struct{})}
	mem := smNew(t, model, memories.WithMaxMessages(4), memories.WithBatchSize(2))
	require.NoError(t, smSave(t, mem, smBG, 1))
	require.NoError(t, smSave(t, mem, smBG, 2))
	ctx, cancel := context.WithCancel(smBG)
	done := make(chan error, 1)
	go func() { done <- smSave(t, mem, ctx, 3) }()
	require.Eventually(t, func() bool { return model.NumCalls() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "turn stored; summarization failed")
	raw := smAudit(t, smLoad(t, mem, smBG), smIDs(1, 2, 3))
	assert.Len(t, raw, 6, "the summarization was abandoned; the messages stay")

	// Cancellation is not the model's fault: no backoff, the next turn retries.
	model.gate = nil
	require.NoError(t, smSave(t, mem, smBG, 4))
	assert.Equal(t, 2, model.NumCalls())
	smAudit(t, smLoad(t, mem, smBG), smIDs(1, 2, 3, 4))
}

func TestSummary_FlushAfterClose(t *testing.T) {
	for _, background := range []bool{false, true} {
		mem := smNew(t, &smModel{}, memories.WithBackground(background))
		require.NoError(t, mem.Flush(smBG), "nothing pending")
		require.NoError(t, mem.Close())
		require.ErrorIs(t, mem.Flush(smBG), memories.ErrClosed)
	}
}

func TestSummary_BadCallsDoNotPanic(t *testing.T) {
	mem := smNew(t, &smModel{})
	//nolint:staticcheck // a nil context is the bad input under test
	require.Error(t, mem.Flush(nil))
	//nolint:staticcheck // a nil context is the bad input under test
	_, err := mem.LoadMemoryVariables(nil, nil)
	require.Error(t, err)
	require.Error(t, mem.SaveContext(smBG, map[string]any{}, map[string]any{"output": "x"}))
	require.Error(t, mem.AddMessage(smBG, nil))
	assert.Empty(t, smLoad(t, mem, smBG))

	ctx, cancel := context.WithCancel(smBG)
	cancel()
	require.ErrorIs(t, smSave(t, mem, ctx, 1), context.Canceled)
	_, err = mem.LoadMemoryVariables(ctx, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, mem.Clear(ctx), context.Canceled)

	req := smNew(t, &smModel{}, memories.WithRequireIdentity())
	require.ErrorIs(t, smSave(t, req, smBG, 1), memstack.ErrNoIdentity)
}

func TestSummary_CorruptStateIsReported(t *testing.T) {
	st := store.NewInMemory()
	_, err := st.PutState(smBG, memstack.Identity{}, memories.SummaryStateName, []byte("{not json"), 0)
	require.NoError(t, err)
	mem := smNew(t, &smModel{}, memories.WithStore(st))
	_, err = mem.LoadMemoryVariables(smBG, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `state "summary"`)
}

func TestSummary_String(t *testing.T) {
	mem := smNew(t, &smModel{}, memories.WithMemoryKey("chat"))
	assert.Equal(t, `Summary(max_messages=15, batch=6, background=false, summarizer=*summarizer.LLM, memory_key="chat", mode=string, store=*store.InMemory)`, mem.String())
	tok := smNew(t, &smModel{}, memories.WithMaxTokens(500), memories.WithBackground(true), memories.WithReturnMessages(true))
	assert.Equal(t, `Summary(max_tokens=500, background=true, summarizer=*summarizer.LLM, memory_key="history", mode=messages, store=*store.InMemory)`, tok.String())
}

func TestSummary_WithExtractiveSummarizer(t *testing.T) {
	mem, err := memories.NewSummary(summarizer.NewExtractive(summarizer.WithBudget(60)), memories.WithMaxMessages(4), memories.WithBatchSize(2))
	require.NoError(t, err)
	turns := [][2]string{
		{"Hi, I'm Ana Lopez from Porto.", "Hello Ana!"},
		{"I need 40 boxes of flour every Monday.", "Moinhos Lda charges 850 euros a month."},
		{"Book Moinhos then.", "Done: we agreed on Moinhos Lda, first delivery on 6 May."},
		{"What's the weather?", "Sunny."},
	}
	for _, tr := range turns {
		require.NoError(t, mem.SaveContext(smBG, map[string]any{"input": tr[0]}, map[string]any{"output": tr[1]}))
	}
	summary, lines := smSplit(smLoad(t, mem, smBG))
	assert.Equal(t, "Human: Hi, I'm Ana Lopez from Porto. AI: Hello Ana! Human: I need 40 boxes of flour every Monday. AI: Moinhos Lda charges 850 euros a month.", summary)
	assert.Equal(t, []string{"Human: Book Moinhos then.", "AI: Done: we agreed on Moinhos Lda, first delivery on 6 May.", "Human: What's the weather?", "AI: Sunny."}, lines)
}

func TestSummary_ClearCancelsSummarizationInFlight(t *testing.T) {
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%t", background), func(t *testing.T) {
			model := &smModel{gate: make(chan struct{})} // never opened
			mem := smNew(t, model, memories.WithBackground(background))
			for i := 1; i <= 7; i++ {
				require.NoError(t, smSave(t, mem, smBG, i))
			}
			saved := make(chan error, 1)
			go func() { saved <- smSave(t, mem, smBG, 8) }()
			require.Eventually(t, func() bool { return model.NumCalls() == 1 }, 5*time.Second, time.Millisecond)

			require.NoError(t, mem.Clear(smBG), "Clear cancels the blocked summarization and waits for it")
			err := <-saved
			if background {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, context.Canceled)
			}
			require.NoError(t, mem.Flush(smBG))
			assert.Empty(t, smLoad(t, mem, smBG), "nothing of the cleared conversation comes back")
			assert.Equal(t, memories.SummaryStats{Calls: 1, Failures: 1}, mem.Stats())

			require.NoError(t, smSave(t, mem, smBG, 1))
			smAudit(t, smLoad(t, mem, smBG), smIDs(1))
		})
	}
}
