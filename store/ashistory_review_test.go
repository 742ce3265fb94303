package store_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

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
			if len(target) == 0 {
				require.Empty(t, got, "stored %v target %v wrap %v", stored, target, wrap)
			} else {
				require.Equal(t, target, got, "stored %v target %v wrap %v", stored, target, wrap)
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
