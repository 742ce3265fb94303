package memories_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
	"github.com/memstack/memstack/tokens"
)

// vwReadCounter is a store that counts the records its reads return and
// the calls that remove messages, and refuses All: a view must read only
// what it shows.
type vwReadCounter struct {
	*store.InMemory
	read, removes atomic.Int64
	forbidAll     atomic.Bool
}

func (s *vwReadCounter) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	if s.forbidAll.Load() {
		return nil, fmt.Errorf("test store: All called: a view reads the whole conversation")
	}
	rs, err := s.InMemory.All(ctx, id)
	s.read.Add(int64(len(rs)))
	return rs, err
}

func (s *vwReadCounter) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	rs, err := s.InMemory.Last(ctx, id, n)
	s.read.Add(int64(len(rs)))
	return rs, err
}

func (s *vwReadCounter) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	rs, err := s.InMemory.Tail(ctx, id, n, after)
	s.read.Add(int64(len(rs)))
	return rs, err
}

func (s *vwReadCounter) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	s.removes.Add(1)
	return s.InMemory.RemovePrefix(ctx, id, through)
}

// TestViews_NeverRemoveAndReadWhatTheyShow: without a retention RecentN,
// TokenWindow and Summary remove no message, however long the
// conversation, and a load reads a bounded number of records however many
// the store holds.
func TestViews_NeverRemoveAndReadWhatTheyShow(t *testing.T) {
	counter := func(s string) int { return len(strings.Fields(s)) }
	for _, tc := range []struct {
		name     string
		make     func(st store.Store) (schema.Memory, error)
		maxReads int64 // records a load may read
	}{
		{"RecentN", func(st store.Store) (schema.Memory, error) { return memories.NewRecentN(6, memories.WithStore(st)) }, 1 + 6 + 8},
		{"TokenWindow", func(st store.Store) (schema.Memory, error) {
			return memories.NewTokenWindow(60, memories.WithStore(st), memories.WithTokenCounter(tokens.CounterFunc(counter)))
		}, 1 + 60 + 8},
		{"Summary", func(st store.Store) (schema.Memory, error) {
			return memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(st), memories.WithMaxMessages(6), memories.WithBatchSize(2))
		}, 1 + 6 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &vwReadCounter{InMemory: store.NewInMemory()}
			m, err := tc.make(st)
			require.NoError(t, err)
			id := memstack.Identity{User: "u"}
			ctx := memstack.WithIdentity(context.Background(), id)
			require.NoError(t, m.(interface {
				AddMessage(context.Context, llms.ChatMessage) error
			}).AddMessage(ctx, llms.SystemChatMessage{Content: "be brief"}))
			const turns = 500
			for i := range turns {
				ctSaveTurn(t, m, ctx, fmt.Sprintf("question %d", i), fmt.Sprintf("answer %d", i))
			}
			assert.Zero(t, st.removes.Load(), "no RemovePrefix without a retention")
			stat, err := st.Stat(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, 1+2*turns, stat.Count, "the store keeps the whole transcript")

			st.forbidAll.Store(true)
			st.read.Store(0)
			got := ctLoadString(t, m, ctx)
			assert.Contains(t, got, fmt.Sprintf("answer %d", turns-1))
			assert.Contains(t, got, "be brief", "system messages stay pinned")
			assert.LessOrEqual(t, st.read.Load(), tc.maxReads, "a load reads what it shows, not the %d messages stored", stat.Count)
			assert.Positive(t, st.read.Load())
		})
	}
}

// TestViews_WindowFromTailIsTheWindowOfAll: a window read from the tail
// is the one chosen from every message, tool groups straddling the first
// read included.
func TestViews_WindowFromTailIsTheWindowOfAll(t *testing.T) {
	ctx := context.Background()
	for history := range 24 {
		for _, results := range []int{1, 3, 12, 20} {
			t.Run(fmt.Sprintf("history=%d/results=%d", history, results), func(t *testing.T) {
				st := store.NewInMemory()
				m, err := memories.NewRecentN(6, memories.WithStore(st), memories.WithReturnMessages(true))
				require.NoError(t, err)
				ref := mustBuffer(memories.WithStore(st), memories.WithReturnMessages(true))
				for i := range history {
					ctSaveTurn(t, m, ctx, fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
				}
				ids := make([]string, results)
				for i := range ids {
					ids[i] = fmt.Sprintf("c%d", i)
				}
				require.NoError(t, m.AddMessage(ctx, rnToolCall("", ids...)))
				for _, id := range ids {
					require.NoError(t, m.AddMessage(ctx, rnToolResult(id)))
				}
				for i := range history % 5 {
					ctSaveTurn(t, m, ctx, fmt.Sprintf("late q%d", i), fmt.Sprintf("late a%d", i))
				}
				got := ctLoadMessages(t, m, ctx)
				assertNoSplitGroup(t, got)
				all := ctLoadMessages(t, ref, ctx)
				assert.Equal(t, rnExpectWindow(all, 6), got)
			})
		}
	}
}

// rnExpectWindow is RecentN's rule applied to every message: the newest
// whole groups within n messages.
func rnExpectWindow(all []llms.ChatMessage, n int) []llms.ChatMessage {
	type group struct{ msgs []llms.ChatMessage }
	var groups []group
	for _, m := range all {
		isResult := m.GetType() == llms.ChatMessageTypeTool
		if isResult && len(groups) > 0 {
			last := &groups[len(groups)-1]
			if first, ok := last.msgs[0].(llms.AIChatMessage); ok && len(first.ToolCalls) > 0 {
				last.msgs = append(last.msgs, m)
				continue
			}
		}
		groups = append(groups, group{[]llms.ChatMessage{m}})
	}
	var out []llms.ChatMessage
	used := 0
	for i := len(groups) - 1; i >= 0; i-- {
		if used+len(groups[i].msgs) > n {
			break
		}
		used += len(groups[i].msgs)
		out = append(append([]llms.ChatMessage{}, groups[i].msgs...), out...)
	}
	if out == nil {
		out = []llms.ChatMessage{}
	}
	return out
}

// TestRetention_Validated: bad retentions are errors. (WithRetention given
// to a Buffer, Facts or Recall does not compile: see
// TestOptions_OfAnotherTypeDoNotCompile.)
func TestRetention_Validated(t *testing.T) {
	st := store.NewInMemory()
	for _, tc := range []struct {
		name string
		make func() error
		want string
	}{
		{"RecentN keeps fewer than it shows", func() error {
			_, err := memories.NewRecentN(6, memories.WithRetention(memories.KeepLast(5)))
			return err
		}, "WithRetention(KeepLast(5)) keeps fewer messages than the window shows"},
		{"TokenWindow keeps nothing", func() error {
			_, err := memories.NewTokenWindow(100, memories.WithRetention(memories.KeepLast(0)))
			return err
		}, "WithRetention(KeepLast(0)) keeps no message to show"},
		{"negative", func() error {
			_, err := memories.NewRecentN(6, memories.WithRetention(memories.KeepLast(-1)))
			return err
		}, "WithRetention(KeepLast(-1)): the messages kept must not be negative"},
		{"Summary, negative", func() error {
			_, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(st), memories.WithRetention(memories.KeepLast(-2)))
			return err
		}, "WithRetention(KeepLast(-2)): the messages kept must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.make()
			require.ErrorIs(t, err, memories.ErrInvalidOption)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	all, err := st.All(context.Background(), memstack.Identity{})
	require.NoError(t, err)
	assert.Empty(t, all, "a memory with a bad option stores nothing")
}

// TestRetention_SummaryRemovesOnlyWhatItFolded: under KeepLast(k) a
// Summary removes folded messages older than the newest k, never one it
// has not folded, and its loads show the same as without a retention.
func TestRetention_SummaryRemovesOnlyWhatItFolded(t *testing.T) {
	ctx := context.Background()
	for _, keep := range []int{0, 3, 10, 40} {
		t.Run(fmt.Sprintf("KeepLast(%d)", keep), func(t *testing.T) {
			st, plain := store.NewInMemory(), store.NewInMemory()
			m, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(st), memories.WithMaxMessages(6), memories.WithBatchSize(2),
				memories.WithRetention(memories.KeepLast(keep)))
			require.NoError(t, err)
			ref, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(plain), memories.WithMaxMessages(6), memories.WithBatchSize(2))
			require.NoError(t, err)
			for i := range 60 {
				for _, mem := range []schema.Memory{m, ref} {
					ctSaveTurn(t, mem, ctx, fmt.Sprintf("question %d about rivers", i), fmt.Sprintf("answer %d about lakes", i))
				}
				assert.Equal(t, ctLoadString(t, ref, ctx), ctLoadString(t, m, ctx), "turn %d", i)
			}
			stored := ctStored(t, st, memstack.Identity{})
			assert.Less(t, len(stored), 120, "the retention removed folded messages")
			assert.GreaterOrEqual(t, len(stored), min(keep, 120), "and kept the newest %d", keep)
			assert.Len(t, ctStored(t, plain, memstack.Identity{}), 120, "without one, nothing is removed")
		})
	}
}
