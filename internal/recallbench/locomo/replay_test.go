package locomo

import (
	"context"
	"fmt"
	"io"
	"log"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	lcmemory "github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/tokens"
)

// words counts whitespace-separated words: easy to check by hand.
var words = tokens.CounterFunc(func(s string) int { return len(strings.Fields(s)) })

func TestExchanges(t *testing.T) {
	c := parseFixture(t)
	s1 := c.Sessions[0].Time
	s2 := c.Sessions[1].Time
	s10 := c.Sessions[2].Time
	want := []Exchange{
		{Input: "Morning Ben, the kiln is finally fixed.", Output: "Great news, what broke?", InputID: "D1:1", OutputID: "D1:2", Session: 1, Time: s1},
		{Input: "A relay in the controller; I swapped it myself.", Output: "Impressive. Bowls next?", InputID: "D1:3", OutputID: "D1:4", Session: 1, Time: s1.Add(time.Second)},
		// The session ends on speaker_a: no output.
		{Input: "Bowls next.", InputID: "D1:5", Session: 1, Time: s1.Add(2 * time.Second)},
		// The session opens with speaker_b: no input.
		{Output: "I signed up for the pottery market in June.", OutputID: "D2:1", Session: 2, Time: s2},
		{Input: "Then we need forty bowls.", Output: "Thirty might do.", InputID: "D2:2", OutputID: "D2:3", Session: 2, Time: s2.Add(time.Second)},
		{Input: "Late night glazing.", Output: "Celadon again?", InputID: "D10:1", OutputID: "D10:2", Session: 10, Time: s10},
	}
	assert.Equal(t, want, c.Exchanges())
}

func TestExchangesPairing(t *testing.T) {
	at := time.Date(2023, 1, 1, 10, 0, 0, 0, time.UTC)
	turn := func(speaker, id string) Turn { return Turn{ID: id, Speaker: speaker, Text: "text " + id} }
	tests := []struct {
		name  string
		turns []Turn
		want  []string // input id + "/" + output id
	}{
		{"alternating", []Turn{turn("A", "1"), turn("B", "2"), turn("A", "3"), turn("B", "4")}, []string{"1/2", "3/4"}},
		{"opens with B", []Turn{turn("B", "1"), turn("A", "2"), turn("B", "3")}, []string{"/1", "2/3"}},
		{"two A in a row", []Turn{turn("A", "1"), turn("A", "2"), turn("B", "3")}, []string{"1/", "2/3"}},
		{"two B in a row", []Turn{turn("A", "1"), turn("B", "2"), turn("B", "3")}, []string{"1/2", "/3"}},
		{"ends with A", []Turn{turn("A", "1"), turn("B", "2"), turn("A", "3")}, []string{"1/2", "3/"}},
		{"one B", []Turn{turn("B", "1")}, []string{"/1"}},
		{"empty", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Conversation{SpeakerA: "A", SpeakerB: "B", Sessions: []Session{{Number: 1, Time: at, Turns: tt.turns}}}
			var got []string
			for i, e := range c.Exchanges() {
				got = append(got, e.InputID+"/"+e.OutputID)
				assert.Equal(t, at.Add(time.Duration(i)*time.Second), e.Time)
				if e.InputID != "" {
					assert.Equal(t, "text "+e.InputID, e.Input)
				} else {
					assert.Empty(t, e.Input)
				}
				if e.OutputID != "" {
					assert.Equal(t, "text "+e.OutputID, e.Output)
				} else {
					assert.Empty(t, e.Output)
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// conversation builds a conversation of n sessions of k alternating turns
// each, a day apart, with texts naming the conversation, and a question
// whose evidence is the last turn.
func conversation(id string, sessions, k int, start time.Time) Conversation {
	c := Conversation{ID: id, SpeakerA: "A", SpeakerB: "B"}
	var last string
	for s := 1; s <= sessions; s++ {
		sess := Session{Number: s, Time: start.Add(time.Duration(s-1) * 24 * time.Hour)}
		for i := 1; i <= k; i++ {
			speaker := "A"
			if i%2 == 0 {
				speaker = "B"
			}
			last = fmt.Sprintf("D%d:%d", s, i)
			sess.Turns = append(sess.Turns, Turn{ID: last, Speaker: speaker, Text: fmt.Sprintf("%s says %s.", id, last)})
		}
		c.Sessions = append(c.Sessions, sess)
	}
	c.Questions = []Question{{Text: "what was said last?", Category: CategorySingleHop, Evidence: []string{last}}}
	return c
}

func TestRepeat(t *testing.T) {
	start := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	// 3 and 2 exchanges per session: 6 and 4 exchanges.
	convs := []Conversation{conversation("x", 2, 6, start), conversation("y", 2, 4, start)}
	tests := []struct {
		messages int
		want     []string // conversation of each exchange, oldest first
	}{
		{8, []string{"y", "y", "y", "y"}},
		{9, []string{"x", "y", "y", "y", "y"}},
		{20, []string{"x", "x", "x", "x", "x", "x", "y", "y", "y", "y"}},
		{24, []string{"x", "x", "y", "y", "y", "y", "x", "x", "x", "x", "x", "x", "y", "y", "y", "y"}[4:]},
		{42, append([]string{"y"}, strings.Split("x x x x x x y y y y x x x x x x y y y y", " ")...)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.messages), func(t *testing.T) {
			h, err := Repeat(convs, tt.messages)
			require.NoError(t, err)
			var got []string
			for i, e := range h {
				got = append(got, strings.SplitN(e.Input, " ", 2)[0])
				if i > 0 {
					assert.True(t, e.Time.After(h[i-1].Time), "exchange %d is later than the one before", i)
				}
			}
			assert.Equal(t, tt.want, got)
			assert.Equal(t, convs[1].Exchanges()[len(convs[1].Exchanges())-1].Input, h[len(h)-1].Input, "ends with the last conversation")
		})
	}

	_, err := Repeat(convs, 6)
	assert.ErrorContains(t, err, "the last conversation alone has 8 messages")
	_, err = Repeat(nil, 10)
	assert.Error(t, err)
	_, err = Repeat([]Conversation{{ID: "empty"}}, 10)
	assert.ErrorContains(t, err, "no turns")
}

func TestScore(t *testing.T) {
	const a, b, c = "I moved to Porto.", "My sister is Lina.", "We agreed on 4,200 euros."
	tests := []struct {
		name   string
		vars   map[string]any
		texts  []string
		found  []bool
		tokens int
	}{
		{"verbatim in a string", map[string]any{"history": "Human: " + a + "\nAI: nice"}, []string{a}, []bool{true}, 7},
		{"partial evidence", map[string]any{"history": "Human: " + a}, []string{a, b}, []bool{true, false}, 5},
		{"not verbatim", map[string]any{"history": strings.ToLower(a)}, []string{a}, []bool{false}, 4},
		{"across variables", map[string]any{"history": a, "relevant_history": "AI: " + c}, []string{c, a}, []bool{true, true}, 4 + 6},
		{"messages match on contents", map[string]any{"history": []llms.ChatMessage{
			llms.HumanChatMessage{Content: b}, llms.AIChatMessage{Content: c},
		}}, []string{b, c, "Lina.\nAI: We"}, []bool{true, true, false}, 11},
		{"nothing loaded", map[string]any{"history": "", "other": nil}, []string{a}, []bool{false}, 0},
		{"other types as printed", map[string]any{"n": 42}, []string{"42"}, []bool{true}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			found, n, err := Score(tt.vars, tt.texts, words)
			require.NoError(t, err)
			assert.Equal(t, tt.found, found)
			assert.Equal(t, tt.tokens, n)
		})
	}
}

// recorder is a memory that records what it is given.
type recorder struct {
	saves [][2]string
	times []time.Time
	loads []string
	vars  map[string]any
}

func (r *recorder) GetMemoryKey(context.Context) string      { return "history" }
func (r *recorder) MemoryVariables(context.Context) []string { return []string{"history"} }
func (r *recorder) Clear(context.Context) error              { return nil }
func (r *recorder) SaveContext(ctx context.Context, in, out map[string]any) error {
	r.saves = append(r.saves, [2]string{in["input"].(string), out["output"].(string)})
	at, _ := memstack.TimeFrom(ctx)
	r.times = append(r.times, at)
	return nil
}

func (r *recorder) LoadMemoryVariables(_ context.Context, in map[string]any) (map[string]any, error) {
	r.loads = append(r.loads, in["input"].(string))
	return r.vars, nil
}

func TestReplay(t *testing.T) {
	c := parseFixture(t)
	r := &recorder{vars: map[string]any{"history": "Human: A relay in the controller; I swapped it myself.\nAI: ok"}}
	run, err := Replay(context.Background(), r, &c, words)
	require.NoError(t, err)

	exs := c.Exchanges()
	require.Len(t, r.saves, len(exs))
	for i, e := range exs {
		assert.Equal(t, [2]string{e.Input, e.Output}, r.saves[i])
		assert.Equal(t, e.Time, r.times[i], "exchange %d is saved at its time (memstack.WithTime)", i)
	}
	assert.Len(t, run.Saves, len(exs))
	// The question without evidence is not asked.
	assert.Equal(t, []string{c.Questions[0].Text, c.Questions[1].Text, c.Questions[2].Text, c.Questions[4].Text}, r.loads)
	require.Len(t, run.Answers, 4)
	assert.Equal(t, Answer{Conversation: "t-1", Question: 0, Category: 1, Evidence: 2, Found: 1, Tokens: 12, Load: run.Answers[0].Load, Alloc: run.Answers[0].Alloc}, run.Answers[0])
	assert.InDelta(t, 0.5, run.Answers[0].Recall(), 1e-9)
	assert.Equal(t, 1, run.Answers[1].Found)
	assert.Equal(t, 0, run.Answers[2].Found)
	assert.Equal(t, 4, run.Answers[3].Question)
}

func TestReplayErrors(t *testing.T) {
	c := parseFixture(t)
	ctx := context.Background()
	_, err := Save(ctx, nil, c.Exchanges())
	assert.ErrorContains(t, err, "memory is nil")
	_, err = Ask(ctx, &recorder{}, &c, nil)
	assert.ErrorContains(t, err, "must not be nil")

	bad := mustBuffer(memories.WithInputKey("question"))
	_, err = Replay(ctx, bad, &c, words)
	assert.ErrorContains(t, err, "conversation t-1: locomo: saving exchange 1 (D1:1+D1:2)")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = Replay(cancelled, mustBuffer(), &c, words)
	assert.ErrorIs(t, err, context.Canceled)

	hand := conversation("h", 1, 2, time.Now())
	hand.Questions[0].Evidence = []string{"D7:7"}
	_, err = Ask(ctx, &recorder{}, &hand, words)
	assert.ErrorContains(t, err, `evidence "D7:7" names no turn of conversation h`)
}

// Every memory the benchmark runs accepts an exchange with an empty side
// and keeps the other side verbatim, and shows it whole when its window
// holds everything.
func TestEmptySidesAreStoredVerbatim(t *testing.T) {
	// langchaingo's ConversationTokenBuffer logs on every save.
	prev := log.Writer()
	log.SetOutput(io.Discard)
	t.Cleanup(func() { log.SetOutput(prev) })
	c := parseFixture(t)
	recent, err := memories.NewRecentN(100)
	require.NoError(t, err)
	window, err := memories.NewTokenWindow(10000)
	require.NoError(t, err)
	recall, err := memories.NewRecall(memories.WithK(100))
	require.NoError(t, err)
	tests := []struct {
		name  string
		mem   schema.Memory
		query string
	}{
		{"langchaingo ConversationBuffer", lcmemory.NewConversationBuffer(), ""},
		{"langchaingo ConversationTokenBuffer", lcmemory.NewConversationTokenBuffer(nil, 10000), ""},
		{"memstack Buffer", mustBuffer(), ""},
		{"memstack RecentN", recent, ""},
		{"memstack TokenWindow", window, ""},
		// Recall shows what matches the query: every turn of the fixture
		// has one of these words.
		{"memstack Recall", recall, "kiln broke relay bowls pottery forty thirty glazing celadon ben"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			_, err := Save(ctx, tt.mem, c.Exchanges())
			require.NoError(t, err)
			vars, err := tt.mem.LoadMemoryVariables(ctx, map[string]any{"input": tt.query})
			require.NoError(t, err)
			var texts []string
			for _, s := range c.Sessions {
				for _, turn := range s.Turns {
					texts = append(texts, turn.Text)
				}
			}
			found, _, err := Score(vars, texts, words)
			require.NoError(t, err)
			for i, f := range found {
				assert.True(t, f, "turn %q is shown verbatim: %v", texts[i], vars)
			}
		})
	}
}

func TestSummarise(t *testing.T) {
	ms := time.Millisecond
	answers := []Answer{
		{Evidence: 2, Found: 1, Tokens: 10, Load: 4 * ms, Alloc: 4000},
		{Evidence: 1, Found: 1, Tokens: 30, Load: 1 * ms, Alloc: 1000},
		{Evidence: 4, Found: 0, Tokens: 20, Load: 2 * ms, Alloc: 3000},
		{Evidence: 1, Found: 1, Tokens: 40, Load: 3 * ms, Alloc: 2000},
	}
	s := Summarise(answers)
	assert.Equal(t, 4, s.Questions)
	assert.InDelta(t, (0.5+1+0+1)/4, s.Recall, 1e-9, "averaged over questions, not over evidence turns")
	assert.InDelta(t, 25, s.MeanTokens, 1e-9)
	assert.Equal(t, 40, s.MaxTokens)
	assert.Equal(t, 2*ms, s.LoadP50)
	assert.Equal(t, 4*ms, s.LoadP95)
	assert.EqualValues(t, 2000, s.AllocP50)
	assert.EqualValues(t, 4000, s.AllocP95)
	assert.Equal(t, Summary{}, Summarise(nil))
	assert.Zero(t, Answer{}.Recall())
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	tests := []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {95, 95}, {100, 100}, {1, 1}, {0.1, 1}}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Percentile(ds, tt.p), "p%v", tt.p)
	}
	assert.Equal(t, time.Duration(100), ds[0], "the input is not sorted in place")
	assert.Zero(t, Percentile(nil, 50))
	assert.Equal(t, time.Duration(7), Percentile([]time.Duration{7}, 95))
}

// mustBuffer is memories.NewBuffer for options that cannot fail: a test
// that gives a bad option calls NewBuffer itself.
func mustBuffer(opts ...memories.BufferOption) *memories.Buffer {
	b, err := memories.NewBuffer(opts...)
	if err != nil {
		panic(err)
	}
	return b
}
