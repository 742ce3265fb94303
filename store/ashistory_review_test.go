package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

type noRewrite struct{ store.Store } // hides Rewriter

func msgOf(c byte) llms.ChatMessage {
	switch c {
	case 'S':
		return llms.SystemChatMessage{Content: "s"}
	case 'a', 'b':
		return llms.HumanChatMessage{Content: string(c)}
	default:
		return llms.AIChatMessage{Content: string(c)}
	}
}

// SetMessages makes the history exactly the list given, whatever the
// stored and given lists (repeats, system messages, empty), on a Rewriter
// and on a plain store.
func TestAsHistory_SetMessagesRandomLists(t *testing.T) {
	ctx := context.Background()
	id := memstack.Identity{}
	alpha := "Sabxy"
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 3000; iter++ {
		for _, wrap := range []bool{false, true} {
			mem := store.NewInMemory()
			var s store.Store = mem
			if wrap {
				s = noRewrite{mem}
			}
			var stored, target []llms.ChatMessage
			for range r.IntN(6) {
				stored = append(stored, msgOf(alpha[r.IntN(len(alpha))]))
			}
			if len(stored) > 0 {
				require.NoError(t, s.Append(ctx, id, stored...))
			}
			mode := r.IntN(2)
			if mode == 0 && len(stored) > 0 { // a trim plus appends
				cut := r.IntN(len(stored) + 1)
				target = append(target, stored[cut:]...)
			}
			for range r.IntN(4) {
				target = append(target, msgOf(alpha[r.IntN(len(alpha))]))
			}
			_, err := s.PutState(ctx, id, "x", []byte("v"), 0)
			require.NoError(t, err)
			h := store.AsHistory(s, id)
			require.NoError(t, h.SetMessages(ctx, target))
			got, err := h.Messages(ctx)
			require.NoError(t, err)
			st, err := s.GetState(ctx, id, "x")
			require.NoError(t, err)
			require.Equal(t, "v", string(st.Value), "SetMessages never touches state: stored %v target %v wrap %v", stored, target, wrap)
			if !wrap {
				if len(target) == 0 {
					require.Empty(t, got, "stored %v target %v", stored, target)
				} else {
					require.Equal(t, target, got, "stored %v target %v", stored, target)
				}
				continue
			}
			// Without a Rewriter, RemovePrefix keeps the system messages
			// it meets: they stay ahead of the list.
			require.GreaterOrEqual(t, len(got), len(target))
			lead := len(got) - len(target)
			if len(target) > 0 {
				require.Equal(t, target, got[lead:], "stored %v target %v", stored, target)
			}
			for _, m := range got[:lead] {
				require.Equal(t, llms.ChatMessageTypeSystem, m.GetType(), "only pinned system messages stay ahead: stored %v target %v got %v", stored, target, got)
			}
		}
	}
}

type allHook struct {
	*store.InMemory
	after func()
}

func (s *allHook) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	r, err := s.InMemory.All(ctx, id)
	if s.after != nil {
		f := s.after
		s.after = nil
		f()
	}
	return r, err
}

// A replacement removes what SetMessages read, not a turn another writer
// appended meanwhile (found in review).
func TestAsHistory_SetMessagesKeepsAConcurrentAppend(t *testing.T) {
	ctx := context.Background()
	id := memstack.Identity{}
	s := &allHook{InMemory: store.NewInMemory()}
	require.NoError(t, s.Append(ctx, id, msgOf('a'), msgOf('x')))
	s.after = func() {
		require.NoError(t, s.InMemory.Append(ctx, id, llms.HumanChatMessage{Content: "concurrent"}, llms.AIChatMessage{Content: "turn"}))
	}
	require.NoError(t, store.AsHistory(s, id).SetMessages(ctx, []llms.ChatMessage{msgOf('b')}))
	got, _ := s.InMemory.All(ctx, id)
	require.Len(t, got, 3, "the concurrently appended turn was lost: %v", got)
}

// Another replica's turn saved between a langchaingo window buffer's read
// (Messages) and its trim (SetMessages) stays, and so does the state in
// the namespace (issue 17, item 2).
func TestAsHistory_WindowBufferKeepsAnotherReplicasTurn(t *testing.T) {
	ctx := context.Background()
	id := memstack.Identity{User: "ana"}
	s := &allHook{InMemory: store.NewInMemory()}
	_, err := s.PutState(ctx, id, "summary", []byte("kept"), 0)
	require.NoError(t, err)
	mem := memory.NewConversationWindowBuffer(1, memory.WithChatHistory(store.AsHistory(s, id)))
	for i := range 3 {
		require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("A%d", i)}, map[string]any{"output": fmt.Sprintf("A%d reply", i)}))
	}
	s.after = func() { // replica B saves its turn right after A's window read the history
		require.NoError(t, s.InMemory.Append(ctx, id, llms.HumanChatMessage{Content: "B0"}, llms.AIChatMessage{Content: "B0 reply"}))
	}
	require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": "A3"}, map[string]any{"output": "A3 reply"}))
	got, err := s.InMemory.All(ctx, id)
	require.NoError(t, err)
	var contents []string
	for _, r := range got {
		contents = append(contents, r.Message.GetContent())
	}
	assert.Equal(t, []string{"A3", "A3 reply", "B0", "B0 reply"}, contents, "A's window trimmed what it read, and B's turn stays")
	st, err := s.GetState(ctx, id, "summary")
	require.NoError(t, err)
	assert.Equal(t, "kept", string(st.Value), "the state in the namespace survives")
}

// A Clear between a window buffer's read and its trim is not undone: the
// trim fails with ErrConflict and writes nothing back.
func TestAsHistory_ClearBetweenReadAndTrimIsNotUndone(t *testing.T) {
	ctx := context.Background()
	id := memstack.Identity{User: "ana"}
	s := &allHook{InMemory: store.NewInMemory()}
	mem := memory.NewConversationWindowBuffer(1, memory.WithChatHistory(store.AsHistory(s, id)))
	for i := range 3 {
		require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": fmt.Sprintf("secret %d", i)}, map[string]any{"output": "ok"}))
	}
	s.after = func() { require.NoError(t, s.InMemory.Clear(ctx, id)) } // another replica clears
	err := mem.SaveContext(ctx, map[string]any{"input": "secret 3"}, map[string]any{"output": "ok"})
	require.ErrorIs(t, err, store.ErrConflict)
	got, err := s.InMemory.All(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, got, "nothing cleared is written back")
}
