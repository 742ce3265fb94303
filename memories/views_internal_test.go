package memories

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/tokens"
)

// vwRandomConversation is n or so messages of every kind: system prompts,
// tool calls with 0 to 11 results, results with no call, plain messages,
// now and then a long one.
func vwRandomConversation(r *rand.Rand, n int) []llms.ChatMessage {
	var out []llms.ChatMessage
	for len(out) < n {
		words := strings.Repeat("w ", 1+r.Intn(3))
		if r.Intn(10) == 0 {
			words = strings.Repeat("big ", 50+r.Intn(200))
		}
		switch r.Intn(7) {
		case 0:
			out = append(out, llms.SystemChatMessage{Content: "sys " + words})
		case 1:
			out = append(out, llms.AIChatMessage{Content: words, ToolCalls: []llms.ToolCall{{ID: "c", Type: "function", FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"}}}})
			for k := r.Intn(12); k > 0; k-- {
				out = append(out, llms.ToolChatMessage{ID: "c", Content: words})
			}
		case 2:
			out = append(out, llms.ToolChatMessage{ID: "c", Content: words}) // joins a call, or has none
		case 3:
			out = append(out, llms.AIChatMessage{Content: words})
		default:
			out = append(out, llms.HumanChatMessage{Content: words})
		}
	}
	return out
}

var vwWords = tokens.CounterFunc(func(s string) int { return len(strings.Fields(s)) })

// TestLoadWindow_EqualsChooseOverAll: the window a load reads from the
// tail is the one chosen from every stored message, for random
// conversations, RecentN sizes and TokenWindow budgets.
func TestLoadWindow_EqualsChooseOverAll(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	ctx := context.Background()
	id := memstack.Identity{User: "u"}
	for iter := range 600 {
		st := store.NewInMemory()
		for _, m := range vwRandomConversation(r, r.Intn(300)) {
			require.NoError(t, st.Append(ctx, id, m))
		}
		all, err := st.All(ctx, id)
		require.NoError(t, err)
		rn, err := NewRecentN(1+r.Intn(12), WithStore(st))
		require.NoError(t, err)
		got, err := rn.load(ctx, id)
		require.NoError(t, err)
		require.Equal(t, rn.window(all).messages(), got.messages(), "RecentN(%d), conversation %d", rn.n, iter)
		tw, err := NewTokenWindow(1+r.Intn(400), WithStore(st), WithTokenCounter(vwWords))
		require.NoError(t, err)
		gotT, err := tw.load(ctx, id)
		require.NoError(t, err)
		require.Equal(t, tw.window(&counting{m: tw, id: id}, all).messages(), gotT.messages(), "TokenWindow(%d), conversation %d", tw.maxTokens, iter)
	}
}

// TestRetention_NeverChangesTheWindow: a RecentN with KeepLast(k >= n)
// shows after every message what one without a retention shows.
func TestRetention_NeverChangesTheWindow(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: "u"})
	for iter := range 60 {
		n := 1 + r.Intn(8)
		keep := n + r.Intn(4)
		a, err := NewRecentN(n, WithStore(store.NewInMemory()))
		require.NoError(t, err)
		b, err := NewRecentN(n, WithStore(store.NewInMemory()), WithRetention(KeepLast(keep)))
		require.NoError(t, err)
		for i, m := range vwRandomConversation(r, 200) {
			require.NoError(t, a.AddMessage(ctx, m))
			require.NoError(t, b.AddMessage(ctx, m))
			va, err := a.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			vb, err := b.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			require.Equal(t, va, vb, "conversation %d, message %d, RecentN(%d), KeepLast(%d)", iter, i, n, keep)
		}
	}
}

type vwConcat struct{}

func (vwConcat) Summarize(_ context.Context, prev string, msgs []llms.ChatMessage) (string, error) {
	var b strings.Builder
	b.WriteString(prev)
	for _, m := range msgs {
		b.WriteString("|" + m.GetContent())
	}
	return b.String(), nil
}

// TestRetention_SummaryShowsTheSame: a Summary under KeepLast(k) shows
// after every message what one without a retention shows: it never
// removes a message its summary does not cover.
func TestRetention_SummaryShowsTheSame(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: "u"})
	for iter := range 60 {
		keep := r.Intn(6)
		a, err := NewSummary(vwConcat{}, WithStore(store.NewInMemory()), WithMaxMessages(4), WithBatchSize(2))
		require.NoError(t, err)
		b, err := NewSummary(vwConcat{}, WithStore(store.NewInMemory()), WithMaxMessages(4), WithBatchSize(2), WithRetention(KeepLast(keep)))
		require.NoError(t, err)
		for i, m := range vwRandomConversation(r, 150) {
			if m.GetType() == llms.ChatMessageTypeSystem {
				continue
			}
			require.NoError(t, a.AddMessage(ctx, m))
			require.NoError(t, b.AddMessage(ctx, m))
			va, err := a.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			vb, err := b.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			require.Equal(t, va, vb, "conversation %d, message %d, KeepLast(%d)", iter, i, keep)
		}
	}
}

// TestRetention_KeepsTurnsWhole: a retention never keeps a turn's answer
// without its question, so the append key a store keeps with a turn's
// first message stays as long as the turn: a second layer saving the same
// turn on the same store (what combined does) never stores it again.
func TestRetention_KeepsTurnsWhole(t *testing.T) {
	base := memstack.WithIdentity(context.Background(), memstack.Identity{User: "u"})
	id := memstack.Identity{User: "u"}
	st := store.NewInMemory()
	tw, err := NewTokenWindow(100, WithStore(st), WithTokenCounter(vwWords), WithRetention(KeepLast(1)))
	require.NoError(t, err)
	rn, err := NewRecentN(1, WithStore(st))
	require.NoError(t, err)
	for i := range 40 {
		ctx := memstack.WithSaveKey(base, fmt.Sprintf("turn-%d", i))
		in, out := map[string]any{"input": fmt.Sprintf("q%d", i)}, map[string]any{"output": fmt.Sprintf("a%d", i)}
		require.NoError(t, tw.SaveContext(ctx, in, out))
		require.NoError(t, rn.SaveContext(ctx, in, out), "the same save, by a second layer")
		all, err := st.All(base, id)
		require.NoError(t, err)
		seen := map[string]bool{}
		for j, r := range all {
			c := r.Message.GetContent()
			require.False(t, seen[c], "after turn %d: %q stored twice", i, c)
			seen[c] = true
			if j == 0 {
				assert.Equal(t, llms.ChatMessageTypeHuman, r.Message.GetType(), "after turn %d the oldest message kept starts a turn", i)
			}
		}
	}
}

// vwRemoveCounter counts RemovePrefix calls.
type vwRemoveCounter struct {
	*store.InMemory
	removes int
}

func (s *vwRemoveCounter) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	s.removes++
	return s.InMemory.RemovePrefix(ctx, id, through)
}

// TestRetention_BatchesWithManySystemMessages: system messages, which a
// retention never removes, do not make it remove on every save.
func TestRetention_BatchesWithManySystemMessages(t *testing.T) {
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: "u"})
	st := &vwRemoveCounter{InMemory: store.NewInMemory()}
	m, err := NewRecentN(6, WithStore(st), WithRetention(KeepLast(6)))
	require.NoError(t, err)
	for i := range 30 {
		require.NoError(t, m.AddMessage(ctx, llms.SystemChatMessage{Content: fmt.Sprintf("rule %d", i)}))
	}
	for range 40 {
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "q"}, map[string]any{"output": "a"}))
	}
	assert.LessOrEqual(t, st.removes, 6, "80 messages beyond KeepLast(6), removed in batches of about 16")
	assert.Positive(t, st.removes)
}

// vwClearBeforeTail lets another replica Clear the identity and save a
// new turn just before the next Tail: a load racing a Clear.
type vwClearBeforeTail struct {
	*store.InMemory
	armed bool
}

func (s *vwClearBeforeTail) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	if s.armed {
		s.armed = false
		if err := s.InMemory.Clear(ctx, id); err != nil {
			return nil, err
		}
		if err := s.InMemory.Append(ctx, id, llms.HumanChatMessage{Content: "after clear"}); err != nil {
			return nil, err
		}
	}
	return s.InMemory.Tail(ctx, id, n, after)
}

type vwSecret struct{}

func (vwSecret) Summarize(context.Context, string, []llms.ChatMessage) (string, error) {
	return "SECRET summary", nil
}

// TestSummary_LoadRacingClearShowsNoClearedSummary: a Clear between a
// load's read of the summary and its read of the messages never pairs
// the cleared summary with messages saved after the Clear.
func TestSummary_LoadRacingClearShowsNoClearedSummary(t *testing.T) {
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: "u"})
	st := &vwClearBeforeTail{InMemory: store.NewInMemory()}
	m, err := NewSummary(vwSecret{}, WithStore(st), WithMaxMessages(2), WithBatchSize(2))
	require.NoError(t, err)
	for i := range 4 {
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("q%d", i)}, map[string]any{"output": fmt.Sprintf("a%d", i)}))
	}
	st.armed = true
	v, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "Human: after clear", v["history"])
}
