package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// plainStore hides the InMemory's Rewrite: a third-party store that only
// has the Store methods.
type plainStore struct{ store.Store }

// seqsByContent maps each stored message's content to its Seq.
func seqsByContent(t *testing.T, s store.Store, id memstack.Identity) map[string]int64 {
	t.Helper()
	recs, err := s.All(context.Background(), id)
	require.NoError(t, err)
	out := make(map[string]int64, len(recs))
	for _, r := range recs {
		out[r.Message.GetContent()] = r.Seq
	}
	return out
}

// langchaingo's window memories call SetMessages on every turn once full.
// Over AsHistory that must keep the conversation's state (a summary a
// memstack memory keeps in the same store) and the Seqs of the messages
// that stay, on a Rewriter and on a plain store alike.
func TestAsHistory_LangchaingoWindowsKeepStateAndSeqs(t *testing.T) {
	windows := map[string]func(h schema.ChatMessageHistory) schema.Memory{
		"ConversationWindowBuffer(2)": func(h schema.ChatMessageHistory) schema.Memory {
			return memory.NewConversationWindowBuffer(2, memory.WithChatHistory(h))
		},
		"ConversationTokenBuffer(30)": func(h schema.ChatMessageHistory) schema.Memory {
			return memory.NewConversationTokenBuffer(&echoLLM{}, 30, memory.WithChatHistory(h))
		},
	}
	stores := map[string]func() store.Store{
		"Rewriter (InMemory)": func() store.Store { return store.NewInMemory() },
		"plain Store":         func() store.Store { return plainStore{store.NewInMemory()} },
	}
	for wname, window := range windows {
		for sname, newStore := range stores {
			t.Run(wname+"/"+sname, func(t *testing.T) {
				ctx := context.Background()
				s := newStore()
				id := memstack.Identity{User: "ana"}
				mem := window(store.AsHistory(s, id))
				absent, err := s.GetState(ctx, id, "summary")
				require.NoError(t, err)
				v, err := s.PutState(ctx, id, "summary", []byte("kept"), absent.Version)
				require.NoError(t, err)
				firstSeq := map[string]int64{}
				for i := range 8 {
					require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("question %d", i)}, map[string]any{"output": fmt.Sprintf("answer %d", i)}))
					for content, seq := range seqsByContent(t, s, id) {
						if first, ok := firstSeq[content]; ok {
							assert.Equal(t, first, seq, "turn %d: %q kept its Seq", i, content)
						} else {
							firstSeq[content] = seq
						}
					}
				}
				recs, err := s.All(ctx, id)
				require.NoError(t, err)
				require.NotEmpty(t, recs)
				assert.Less(t, len(recs), 16, "the window trimmed the history")
				assert.Equal(t, "answer 7", recs[len(recs)-1].Message.GetContent())
				st, err := s.GetState(ctx, id, "summary")
				require.NoError(t, err)
				assert.Equal(t, store.State{Value: []byte("kept"), Version: v}, st, "the trims kept the state")
			})
		}
	}
}

func TestAsHistory_SetMessagesCases(t *testing.T) {
	sys := llms.SystemChatMessage{Content: "sys"}
	h := func(s string) llms.ChatMessage { return llms.HumanChatMessage{Content: s} }
	a := func(s string) llms.ChatMessage { return llms.AIChatMessage{Content: s} }
	stored := []llms.ChatMessage{sys, h("h1"), a("a1"), h("h2"), a("a2")}
	// State is never touched (issue 17, item 2), whatever the list. A plain
	// store (no Rewriter) removes with RemovePrefix, which keeps the
	// system message when the removed prefix holds it (plainKeepsSys).
	cases := []struct {
		name          string
		set           []llms.ChatMessage
		keptSeqsOf    []string // contents whose Seqs must not change
		plainKeepsSys bool
	}{
		{"a suffix", []llms.ChatMessage{h("h2"), a("a2")}, []string{"h2", "a2"}, true},
		{"a suffix after the system prompt", []llms.ChatMessage{a("a1"), h("h2"), a("a2")}, []string{"a1", "h2", "a2"}, true},
		{"a suffix with the system prompt kept", []llms.ChatMessage{sys, h("h1"), a("a1"), h("h2"), a("a2")}[0:5], []string{"sys", "h1", "a1", "h2", "a2"}, false},
		{"the same list", stored, []string{"sys", "h1", "a1", "h2", "a2"}, false},
		{"the list and new messages", append(append([]llms.ChatMessage{}, stored...), h("h3"), a("a3")), []string{"sys", "h1", "a1", "h2", "a2"}, false},
		{"a suffix and new messages", []llms.ChatMessage{h("h2"), a("a2"), h("h3")}, []string{"h2", "a2"}, true},
		{"empty: every message goes", nil, nil, true},
		{"other messages", []llms.ChatMessage{h("x"), a("y")}, nil, true},
		{"a suffix and the system prompt again", []llms.ChatMessage{h("h2"), a("a2"), sys}, []string{"h2", "a2"}, true},
		{"a reordering", []llms.ChatMessage{h("h2"), h("h1")}, nil, true},
	}
	for _, c := range cases {
		for _, plain := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/plain=%t", c.name, plain), func(t *testing.T) {
				ctx := context.Background()
				var s store.Store = store.NewInMemory()
				if plain {
					s = plainStore{s}
				}
				id := memstack.Identity{User: "ana"}
				require.NoError(t, s.Append(ctx, id, stored...))
				before := seqsByContent(t, s, id)
				absent, err := s.GetState(ctx, id, "summary")
				require.NoError(t, err)
				_, err = s.PutState(ctx, id, "summary", []byte("S"), absent.Version)
				require.NoError(t, err)

				hist := store.AsHistory(s, id)
				require.NoError(t, hist.SetMessages(ctx, c.set))
				got, err := hist.Messages(ctx)
				require.NoError(t, err)
				want := append([]llms.ChatMessage{}, c.set...)
				if plain && c.plainKeepsSys {
					want = append([]llms.ChatMessage{sys}, want...)
				}
				assert.Equal(t, want, got, "the history is exactly the list given")
				st, err := s.GetState(ctx, id, "summary")
				require.NoError(t, err)
				assert.Equal(t, "S", string(st.Value), "state is never touched")
				after := seqsByContent(t, s, id)
				for _, content := range c.keptSeqsOf {
					assert.Equal(t, before[content], after[content], "%q keeps its Seq", content)
				}
				recs, err := s.All(ctx, id)
				require.NoError(t, err)
				for _, r := range recs {
					if _, old := before[r.Message.GetContent()]; !old {
						assert.Greater(t, r.Seq, before["a2"], "a new message gets a new Seq")
					}
				}
			})
		}
	}
}

// A failing rewrite changes nothing: a cancelled context, a nil message.
func TestAsHistory_SetMessagesFailsWhole(t *testing.T) {
	s := store.NewInMemory()
	id := memstack.Identity{User: "ana"}
	ctx := context.Background()
	msgs := []llms.ChatMessage{llms.HumanChatMessage{Content: "h1"}, llms.AIChatMessage{Content: "a1"}}
	require.NoError(t, s.Append(ctx, id, msgs...))
	before, err := s.All(ctx, id)
	require.NoError(t, err)
	hist := store.AsHistory(s, id)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, hist.SetMessages(cctx, msgs[1:]), context.Canceled)
	err = hist.SetMessages(ctx, []llms.ChatMessage{msgs[1], nil})
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "message 2 of 2 is nil")

	after, err := s.All(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, before, after, "nothing changed")
}
