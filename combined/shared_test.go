package combined_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// taggedStore is a store type that cannot be compared (it holds a slice).
type taggedStore struct {
	*store.InMemory
	tags []string
}

// wrapped is a comparable wrapper holding any store.
type wrapped struct{ store.Store }

func TestNewChecksLayersSharingAStore(t *testing.T) {
	id := memstack.Identity{User: "u"}
	for _, tc := range []struct {
		name   string
		layers func(st store.Store) []schema.Memory
		opts   []combined.Option
		want   string // "" means accepted
	}{
		{"one store, no retention", func(st store.Store) []schema.Memory {
			r, _ := memories.NewRecentN(6, memories.WithStore(st))
			rc, _ := memories.NewRecall(memories.WithStore(st))
			return []schema.Memory{r, rc, mustBuffer(memories.WithStore(st), memories.WithMemoryKey("all"))}
		}, nil, ""},
		{"a retention that keeps what the other reads", func(st store.Store) []schema.Memory {
			r, _ := memories.NewRecentN(3, memories.WithStore(st), memories.WithRetention(memories.KeepLast(8)))
			r8, _ := memories.NewRecentN(8, memories.WithStore(st), memories.WithMemoryKey("r8"))
			return []schema.Memory{r, r8}
		}, nil, ""},
		{"a retention under a wider window, with layer names", func(st store.Store) []schema.Memory {
			r, _ := memories.NewRecentN(3, memories.WithStore(st), memories.WithRetention(memories.KeepLast(3)))
			r5, _ := memories.NewRecentN(5, memories.WithStore(st), memories.WithMemoryKey("r5"))
			return []schema.Memory{r, r5}
		}, []combined.Option{combined.WithLayerNames("short", "wide")},
			`layer "short" (*memories.RecentN) removes messages from the store it shares with layer "wide" (*memories.RecentN) (*store.InMemory): its retention keeps the newest 3 non-system messages, and layer "wide" (*memories.RecentN) reads the newest 5 messages`},
		{"a Summary retention next to a Buffer", func(st store.Store) []schema.Memory {
			s, _ := memories.NewSummary(summarizerFunc(nil), memories.WithStore(st), memories.WithRetention(memories.KeepLast(0)))
			return []schema.Memory{mustBuffer(memories.WithStore(st), memories.WithMemoryKey("all")), s}
		}, nil, `layer "2:Summary" (*memories.Summary) removes messages from the store it shares with layer "1:Buffer" (*memories.Buffer)`},
		{"two Facts layers on one store", func(st store.Store) []schema.Memory {
			f1, _ := memories.NewFacts(noFacts, memories.WithStore(st))
			f2, _ := memories.NewFacts(noFacts, memories.WithStore(st), memories.WithMemoryKey("facts2"))
			return []schema.Memory{f1, f2}
		}, nil, `layer "1:Facts" (*memories.Facts) and layer "2:Facts" (*memories.Facts) both keep the state "facts" in one store`},
		{"a retention next to a nested stack on the same store", func(st store.Store) []schema.Memory {
			r, _ := memories.NewRecentN(3, memories.WithStore(st), memories.WithRetention(memories.KeepLast(3)))
			inner, err := combined.New([]schema.Memory{mustBuffer(memories.WithStore(st), memories.WithMemoryKey("all"))})
			require.NoError(t, err)
			return []schema.Memory{r, inner}
		}, nil, `layer "1:RecentN" (*memories.RecentN) removes messages from the store it shares with layer "2:Memory" (*combined.Memory)`},
		{"a langchaingo window over AsHistory of the same store", func(st store.Store) []schema.Memory {
			rc, _ := memories.NewRecall(memories.WithStore(st))
			lc := memory.NewConversationWindowBuffer(3, memory.WithChatHistory(store.AsHistory(st, id)))
			return []schema.Memory{rc, lc}
		}, nil, `layer "2:ConversationWindowBuffer" (*memory.ConversationWindowBuffer) keeps its messages in the store it shares with layer "1:Recall" (*memories.Recall) (*store.InMemory) through store.AsHistory`},
		{"a langchaingo buffer over AsHistory of another store", func(st store.Store) []schema.Memory {
			rc, _ := memories.NewRecall(memories.WithStore(st))
			lc := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(store.NewInMemory(), id)), memory.WithMemoryKey("lc"))
			return []schema.Memory{rc, lc}
		}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := combined.New(tc.layers(store.NewInMemory()), tc.opts...)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, combined.ErrInvalid)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestNewComparesStoresWithoutPanicking(t *testing.T) {
	inner := taggedStore{InMemory: store.NewInMemory()}
	a := mustBuffer(memories.WithStore(wrapped{inner}))
	b, err := memories.NewRecentN(3, memories.WithStore(wrapped{inner}), memories.WithMemoryKey("recent"), memories.WithRetention(memories.KeepLast(3)))
	require.NoError(t, err)
	require.NotPanics(t, func() {
		_, err = combined.New([]schema.Memory{a, b})
	})
	require.NoError(t, err, "stores that cannot be compared are not recognised as one (documented)")
}

// summarizerFunc is a summarizer.Summarizer test double.
type summarizerFunc func(prev string, msgs []llms.ChatMessage) (string, error)

func (f summarizerFunc) Summarize(_ context.Context, prev string, msgs []llms.ChatMessage) (string, error) {
	if f == nil {
		return "summary", nil
	}
	return f(prev, msgs)
}

// noFacts is an extractor that finds nothing.
var noFacts = extract.ExtractorFunc(func(context.Context, []llms.ChatMessage) ([]extract.Candidate, error) { return nil, nil })
