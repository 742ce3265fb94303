package memories_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/vectorstores"
)

// gatedChromem is a Chromem whose DeleteDocuments blocks, once armed,
// until the gate opens (it ignores ctx, like a hung store; or honours it).
type gatedChromem struct {
	*retrieval.Chromem
	armed   atomic.Bool
	honour  bool
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func newGated(c *retrieval.Chromem) *gatedChromem {
	return &gatedChromem{Chromem: c, entered: make(chan struct{}, 100), gate: make(chan struct{})}
}

func (g *gatedChromem) open() { g.once.Do(func() { close(g.gate) }) }

func (g *gatedChromem) DeleteDocuments(ctx context.Context, filter any) error {
	if g.armed.Load() {
		g.entered <- struct{}{}
		if g.honour {
			select {
			case <-g.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else {
			<-g.gate
		}
	}
	return g.Chromem.DeleteDocuments(ctx, filter)
}

func vsHolds(t *testing.T, vs vectorstores.VectorStore, query, word string) bool {
	t.Helper()
	docs, err := vs.SimilaritySearch(context.Background(), query, 100, vectorstores.WithEmbedder(newRCEmbedder()))
	require.NoError(t, err)
	for _, d := range docs {
		if strings.Contains(d.PageContent, word) {
			return true
		}
	}
	return false
}

// 1. Vectors indexed under the conversation's namespace (an earlier
// version forced the conversation scope with a durable index, or a
// conversation-scoped Recall over the same vector store) survive a Clear
// by a user-scoped Recall: before a3c2280 the same Clear removed them.
func TestRecallDurable_ClearLeavesConversationScopedVectors(t *testing.T) {
	mem := store.NewInMemory()
	vs := rcChromemAt(t, t.TempDir())
	old, err := memories.NewRecall(memories.WithStore(mem), memories.WithVector(newRCEmbedder(), vs),
		memories.WithRecallScope(memories.RecallScopeConversation))
	require.NoError(t, err)
	rsSave(t, old, rsWeek1, rsMay8, "Which database for the billing service?", "We settled on PostgreSQL for billing.")
	require.True(t, vsHolds(t, vs, "PostgreSQL billing", "PostgreSQL"))

	upgraded, err := memories.NewRecall(memories.WithStore(mem), memories.WithVector(newRCEmbedder(), vs))
	require.NoError(t, err)
	require.Contains(t, upgraded.String(), "scope=user")
	require.NoError(t, upgraded.Clear(ctIDCtx(rsWeek1)))
	assert.False(t, vsHolds(t, vs, "PostgreSQL billing", "PostgreSQL"),
		"after Clear the vector store still holds the cleared conversation's text (under its conversation namespace)")
}

// afterClear runs hook once, right after a Clear of the messages.
type afterClear struct {
	*store.InMemory
	once sync.Once
	hook func()
}

func (s *afterClear) Clear(ctx context.Context, id memstack.Identity) error {
	err := s.InMemory.Clear(ctx, id)
	s.once.Do(s.hook)
	return err
}

// A Clear on replica A and a turn replica B saves to the same
// conversation just after the messages are cleared, while A still takes
// the cleared turns' vectors out: B's turn keeps its vector (A removes by
// source before the messages go, and afterwards only the units it read),
// and a cold replica recalls it.
func TestRecallDurable_ClearKeepsATurnSavedJustAfterIt(t *testing.T) {
	mem := store.NewInMemory()
	ch := rcChromemAt(t, t.TempDir())
	b, err := memories.NewRecall(memories.WithStore(mem), memories.WithVector(newRCEmbedder(), ch))
	require.NoError(t, err)
	hooked := &afterClear{InMemory: mem, hook: func() {
		rsSave(t, b, rsWeek1, rsMay8, "What is the team mascot?", "The mascot is a quokka.")
		require.True(t, vsHolds(t, ch, "mascot quokka", "quokka"), "B indexed the new turn")
	}}
	a, err := memories.NewRecall(memories.WithStore(hooked), memories.WithVector(newRCEmbedder(), ch))
	require.NoError(t, err)
	rsSave(t, a, rsWeek1, rsMay8, "Which database for the billing service?", "We settled on PostgreSQL for billing.")
	require.NoError(t, a.Clear(ctIDCtx(rsWeek1)))

	assert.True(t, vsHolds(t, ch, "mascot quokka", "quokka"), "the turn saved after the Clear keeps its vector")
	assert.False(t, vsHolds(t, ch, "billing database PostgreSQL", "PostgreSQL"), "the cleared turn's vector is gone")
	cold, err := memories.NewRecall(memories.WithStore(mem), memories.WithVector(newRCEmbedder(), ch))
	require.NoError(t, err)
	got := rcAsk(t, cold, ctIDCtx(rsWeek2), "what is the team mascot quokka?")
	assert.Contains(t, got, "quokka", "a cold replica recalls the stored turn")
}

// 3. A load that finds units gone (cleared by another writer) removes
// them from the durable index with context.WithoutCancel and no timeout:
// a vector store that does not answer holds the load past
// WithRecallTimeout and past the caller's own deadline.
func TestRecallDurable_LoadRemovalIsNotBounded(t *testing.T) {
	mem := store.NewInMemory()
	gated := newGated(rcChromemAt(t, t.TempDir()))
	gated.honour = true // even a store that honours its context
	defer gated.open()
	r, err := memories.NewRecall(memories.WithStore(mem), memories.WithVector(newRCEmbedder(), gated),
		memories.WithRecallTimeout(100*time.Millisecond))
	require.NoError(t, err)
	rsSave(t, r, rsWeek1, rsMay8, "Which database for the billing service?", "We settled on PostgreSQL for billing.")
	rsSave(t, r, rsWeek2, rsMay8, "Hello", "Hi")
	require.NoError(t, mem.Clear(context.Background(), rsWeek1)) // another writer clears
	gated.armed.Store(true)

	ctx, cancel := context.WithTimeout(ctIDCtx(rsWeek2), time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = r.LoadMemoryVariables(ctx, map[string]any{"input": "which database for billing?"})
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the load did not return 3s after WithRecallTimeout(100ms) and a 1s caller deadline: blocked in removeUnits")
	}
}

// 4. Docs no process knows (units trimmed or forgotten at the store, or
// cleared over a vector store that cannot delete) count as crowding on
// every load of every replica, forever: each load searches (and embeds
// the query) again and again, asking 4x more each time.
func TestRecallDurable_UnknownDocsCrowdEveryLoad(t *testing.T) {
	mem := store.NewInMemory()
	vs := rcChromemAt(t, t.TempDir())
	r1, err := memories.NewRecall(memories.WithStore(mem), memories.WithVector(newRCEmbedder(), vs))
	require.NoError(t, err)
	for i := range 60 {
		rsSave(t, r1, rsWeek1, rsMay8, fmt.Sprintf("Question %d about billing database topic%d?", i, i), fmt.Sprintf("Answer %d: topic%d settled.", i, i))
	}
	rsSave(t, r1, rsWeek2, rsMay8, "Hello", "Hi")
	// A retention (another memory over the store) trims week1's oldest
	// exchanges: their vectors stay (a store-level removal).
	recs, err := mem.All(context.Background(), rsWeek1)
	require.NoError(t, err)
	_, err = mem.RemovePrefix(context.Background(), rsWeek1, recs[19].Seq)
	require.NoError(t, err)

	emb := newRCEmbedder()
	cold, err := memories.NewRecall(memories.WithStore(mem), memories.WithVector(emb, vs))
	require.NoError(t, err)
	for load := range 3 {
		before := emb.queryCalls.Load()
		_ = rcAsk(t, cold, ctIDCtx(rsWeek2), fmt.Sprintf("Question %d about billing database topic%d", load+3, load+3))
		assert.EqualValues(t, 1, emb.queryCalls.Load()-before, "load %d: the query is embedded once, however many searches", load)
	}
}
