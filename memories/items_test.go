package memories_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

// itemizerCase builds one memory over st that loads as items.
type itemizerCase struct {
	name string
	make func(t *testing.T, st store.Store, opts ...memories.Option) itemMemory
}

type itemMemory interface {
	schema.Memory
	combined.Itemizer
	AddMessage(context.Context, llms.ChatMessage) error
}

func itemizerCases() []itemizerCase {
	return []itemizerCase{
		{"Buffer", func(t *testing.T, st store.Store, opts ...memories.Option) itemMemory {
			return mustBuffer(append(ctAs[memories.BufferOption](opts), memories.WithStore(st))...)
		}},
		{"RecentN", func(t *testing.T, st store.Store, opts ...memories.Option) itemMemory {
			m, err := memories.NewRecentN(4, append(ctAs[memories.RecentNOption](opts), memories.WithStore(st))...)
			require.NoError(t, err)
			return m
		}},
		{"TokenWindow", func(t *testing.T, st store.Store, opts ...memories.Option) itemMemory {
			m, err := memories.NewTokenWindow(60, append(ctAs[memories.TokenWindowOption](opts), memories.WithStore(st))...)
			require.NoError(t, err)
			return m
		}},
		{"Summary", func(t *testing.T, st store.Store, opts ...memories.Option) itemMemory {
			m, err := memories.NewSummary(summarizer.NewExtractive(), append(ctAs[memories.SummaryOption](opts), memories.WithStore(st), memories.WithMaxMessages(3), memories.WithBatchSize(2))...)
			require.NoError(t, err)
			return m
		}},
	}
}

// itemsConversation mixes a system message, a tool call with its result and
// messages that span several lines.
func itemsConversation() []llms.ChatMessage {
	return append(ctConversation(),
		llms.HumanChatMessage{Content: "Plan my week\nin three steps"},
		llms.AIChatMessage{Content: "1. Code\n2. Walk\n3. Read"},
		llms.HumanChatMessage{Content: "Great."},
	)
}

func TestItems_RenderAllIsTheLoadedVariable(t *testing.T) {
	for _, c := range itemizerCases() {
		for _, messages := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/messages=%t", c.name, messages), func(t *testing.T) {
				ctx := context.Background()
				st := store.NewInMemory()
				m := c.make(t, st, memories.WithReturnMessages(messages), memories.WithMemoryKey("k"))
				for _, msg := range itemsConversation() {
					require.NoError(t, m.AddMessage(ctx, msg))
				}
				items, err := m.LoadItems(ctx, nil)
				require.NoError(t, err)
				assert.Equal(t, "k", items.Key)
				if c.name == "Summary" {
					require.Equal(t, "summary", items.List[0].Kind, "the conversation is long enough to be summarized")
				}
				want := ctLoad(t, m, ctx, "k")

				all := make([]bool, len(items.List))
				for i := range all {
					all[i] = true
				}
				got, err := items.Render(all)
				require.NoError(t, err)
				assert.Equal(t, want, got, "rendering every item gives the loaded variable")

				none, err := items.Render(make([]bool, len(items.List)))
				require.NoError(t, err)
				if messages {
					assert.Empty(t, none)
					assert.IsType(t, []llms.ChatMessage{}, none)
				} else {
					assert.Equal(t, "", none)
				}

				_, err = items.Render(all[1:])
				assert.Error(t, err, "keep flags must match the items")

				// Items name the stored messages and carry their lines.
				recs, err := st.All(ctx, memstack.Identity{})
				require.NoError(t, err)
				bySeq := map[string]store.Record{}
				for _, r := range recs {
					bySeq[fmt.Sprint(r.Seq)] = r
				}
				var texts []string
				for _, it := range items.List {
					texts = append(texts, it.Text)
					if it.Kind == "summary" {
						assert.True(t, strings.HasPrefix(it.Text, memories.SummaryPrefix))
						assert.Equal(t, 1.0, it.Priority, "the summary goes after raw messages, before system ones")
						continue
					}
					require.Equal(t, "message", it.Kind)
					r, ok := bySeq[it.ID]
					require.Truef(t, ok, "item %s is a stored message", it.ID)
					line, err := llms.GetBufferString([]llms.ChatMessage{r.Message}, "Human", "AI")
					require.NoError(t, err)
					assert.Equal(t, line, it.Text)
					if r.Message.GetType() == llms.ChatMessageTypeSystem {
						assert.Equal(t, 2.0, it.Priority, "system messages go last")
					} else {
						assert.Zero(t, it.Priority)
					}
				}
				if !messages {
					assert.Equal(t, want, strings.Join(texts, "\n"))
				}
			})
		}
	}
}

func TestItems_ToolCallsShareAGroup(t *testing.T) {
	ctx := context.Background()
	m := mustBuffer()
	for _, msg := range itemsConversation() {
		require.NoError(t, m.AddMessage(ctx, msg))
	}
	items, err := m.LoadItems(ctx, nil)
	require.NoError(t, err)
	require.Len(t, items.List, len(itemsConversation()))
	groups := map[int]int{}
	for _, it := range items.List {
		require.NotZero(t, it.Group)
		groups[it.Group]++
	}
	// Messages 3 and 4 (the tool call and its result) share a group; every
	// other message is alone in its own.
	assert.Equal(t, items.List[2].Group, items.List[3].Group)
	assert.Equal(t, len(items.List)-1, len(groups))
}

func TestItems_RenderKeepsWholeMessages(t *testing.T) {
	ctx := context.Background()
	r, err := memories.NewRecentN(10)
	require.NoError(t, err)
	conv := itemsConversation()
	for _, msg := range conv {
		require.NoError(t, r.AddMessage(ctx, msg))
	}
	items, err := r.LoadItems(ctx, nil)
	require.NoError(t, err)
	keep := make([]bool, len(items.List))
	keep[0], keep[len(keep)-2], keep[len(keep)-1] = true, true, true
	got, err := items.Render(keep)
	require.NoError(t, err)
	assert.Equal(t, ctRender(t, []llms.ChatMessage{conv[0], conv[len(conv)-2], conv[len(conv)-1]}, "Human", "AI"), got)
}

func TestItems_WindowReportsOnlyTheWindow(t *testing.T) {
	ctx := context.Background()
	r, err := memories.NewRecentN(2)
	require.NoError(t, err)
	for _, msg := range itemsConversation() {
		require.NoError(t, r.AddMessage(ctx, msg))
	}
	items, err := r.LoadItems(ctx, nil)
	require.NoError(t, err)
	require.Len(t, items.List, 3, "the system message and the last two")
	assert.Equal(t, 2.0, items.List[0].Priority)
}

func TestItems_Errors(t *testing.T) {
	for _, c := range itemizerCases() {
		t.Run(c.name, func(t *testing.T) {
			m := c.make(t, store.NewInMemory(), memories.WithRequireIdentity())
			_, err := m.LoadItems(context.Background(), nil)
			assert.ErrorIs(t, err, memstack.ErrNoIdentity)

			cancelled, cancel := context.WithCancel(memstack.WithIdentity(context.Background(), memstack.Identity{User: "u"}))
			cancel()
			_, err = m.LoadItems(cancelled, nil)
			assert.ErrorIs(t, err, context.Canceled)

			//nolint:staticcheck // a nil context is bad input that must not panic
			_, err = m.LoadItems(nil, nil)
			assert.Error(t, err)
		})
	}
}

func TestItems_IdentitiesAreIsolated(t *testing.T) {
	for _, c := range itemizerCases() {
		t.Run(c.name, func(t *testing.T) {
			m := c.make(t, store.NewInMemory())
			a := memstack.WithIdentity(context.Background(), memstack.Identity{User: "a"})
			b := memstack.WithIdentity(context.Background(), memstack.Identity{User: "b"})
			require.NoError(t, m.AddMessage(a, llms.HumanChatMessage{Content: "secret of a"}))
			items, err := m.LoadItems(b, nil)
			require.NoError(t, err)
			assert.Empty(t, items.List)
			items, err = m.LoadItems(a, nil)
			require.NoError(t, err)
			require.Len(t, items.List, 1)
			assert.Equal(t, "Human: secret of a", items.List[0].Text)
		})
	}
}
