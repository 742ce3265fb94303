package memories_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
)

// "Cleared means gone" across replicas: two memory values on one store
// stand in for two replicas. A model call of one replica is held while the
// other clears the conversation (or store.Forget runs); once released, the
// held call's commit must not bring the cleared text back.

const card = "4111 1111 1111 1111"

// gate holds calls while armed: each call announces itself on entered and
// waits for release.
type gate struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gate) pass() {
	if !g.armed.Load() {
		return
	}
	g.entered <- struct{}{}
	<-g.release
}

func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the model call was never made")
	}
}

// clearers are the ways a conversation is cleared under a held call: by
// another replica's Clear, or by store.Forget.
func clearers(other interface{ Clear(context.Context) error }, st store.Store, id memstack.Identity) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"another replica's Clear": other.Clear,
		"store.Forget":            func(ctx context.Context) error { return st.Forget(ctx, id) },
	}
}

type gatedSummarizer struct{ g *gate }

func (s gatedSummarizer) Summarize(_ context.Context, prev string, msgs []llms.ChatMessage) (string, error) {
	s.g.pass()
	var b strings.Builder
	b.WriteString(prev)
	for _, m := range msgs {
		b.WriteString(" " + m.GetContent())
	}
	return strings.TrimSpace(b.String()), nil
}

func TestSummary_ClearDefeatsAFoldInFlight(t *testing.T) {
	for _, first := range []bool{true, false} {
		for _, how := range []string{"another replica's Clear", "store.Forget"} {
			t.Run(fmt.Sprintf("first fold=%t/%s", first, how), func(t *testing.T) {
				ctx := context.Background()
				st := store.NewInMemory()
				g := newGate()
				opts := []memories.SummaryOption{memories.WithStore(st), memories.WithMaxMessages(4), memories.WithBatchSize(2), memories.WithRetryBackoff(0, 0)}
				a, err := memories.NewSummary(gatedSummarizer{g}, append(opts, memories.WithBackground(true))...)
				require.NoError(t, err)
				defer a.Close()
				b, err := memories.NewSummary(gatedSummarizer{g}, opts...)
				require.NoError(t, err)
				defer b.Close()
				if !first {
					for i := range 3 {
						ctSaveTurn(t, a, ctx, fmt.Sprintf("hello %d", i), "hi")
					}
					require.NoError(t, a.Flush(ctx))
					require.Positive(t, a.Stats().MessagesFolded, "an earlier fold committed")
				}
				g.armed.Store(true)
				for i := range 3 {
					ctSaveTurn(t, a, ctx, fmt.Sprintf("my card is %s (%d)", card, i), "noted")
				}
				g.waitEntered(t)
				require.NoError(t, clearers(b, st, memstack.Identity{})[how](ctx))
				g.armed.Store(false)
				close(g.release)
				fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				require.NoError(t, a.Flush(fctx))

				sum, err := st.GetState(ctx, memstack.Identity{}, memories.SummaryStateName)
				require.NoError(t, err)
				assert.False(t, sum.Exists(), "the fold that read before the clear committed a summary: %q", sum.Value)
				assert.NotContains(t, ctLoadString(t, a, ctx), "4111", "cleared text is shown again")
				assert.NotContains(t, ctLoadString(t, b, ctx), "4111", "cleared text is shown again (other replica)")
				assert.Empty(t, ctStored(t, st, memstack.Identity{}))
			})
		}
	}
}

func gatedExtractor(g *gate) extract.Extractor {
	return extract.ExtractorFunc(func(_ context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
		g.pass()
		for _, m := range msgs {
			if strings.Contains(m.GetContent(), "4111") {
				return []extract.Candidate{{Subject: "user", Attribute: "card", Value: card}}, nil
			}
			if strings.Contains(m.GetContent(), "Lisbon") {
				return []extract.Candidate{{Subject: "user", Attribute: "location", Value: "Lisbon"}}, nil
			}
		}
		return nil, nil
	})
}

func TestFacts_ClearDefeatsAnExtractionInFlight(t *testing.T) {
	for _, first := range []bool{true, false} {
		for _, how := range []string{"another replica's Clear", "store.Forget"} {
			t.Run(fmt.Sprintf("first commit=%t/%s", first, how), func(t *testing.T) {
				ctx := context.Background()
				st := store.NewInMemory()
				g := newGate()
				a := fcNew(t, gatedExtractor(g), memories.WithStore(st), memories.WithBackground(true))
				b := fcNew(t, gatedExtractor(g), memories.WithStore(st))
				if !first {
					fcSave(t, a, ctx, "I live in Lisbon", "nice")
					require.NoError(t, a.Flush(ctx))
					require.Contains(t, fcLoad(t, a, ctx), "Lisbon", "an earlier extraction committed")
				}
				g.armed.Store(true)
				fcSave(t, a, ctx, "my card is "+card, "noted")
				g.waitEntered(t)
				require.NoError(t, clearers(b, st, memstack.Identity{})[how](ctx))
				g.armed.Store(false)
				close(g.release)
				fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				require.NoError(t, a.Flush(fctx))

				for name, m := range map[string]*memories.Facts{"the extracting replica": a, "the clearing replica": b} {
					got := fcLoad(t, m, ctx)
					assert.NotContains(t, got, "4111", "%s shows a cleared fact", name)
					assert.NotContains(t, got, "Lisbon", "%s shows a cleared fact", name)
				}
				raw, err := st.GetState(ctx, memstack.Identity{}, memories.FactsStateName)
				require.NoError(t, err)
				assert.NotContains(t, string(raw.Value), "4111", "the cleared fact is stored again")
			})
		}
	}
}

// With WithFactsPerUser, clearing the conversation "" (the default one)
// must not wipe what extraction covered in the user's other
// conversations: their old turns are not extracted again, so facts the
// Clear removed do not come back.
func TestFacts_PerUserClearOfDefaultConversationKeepsOtherCursors(t *testing.T) {
	st := store.NewInMemory()
	var calls atomic.Int64
	seen := &fcCounting{ext: extract.ExtractorFunc(func(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
		calls.Add(1)
		return gatedExtractor(newGate()).Extract(ctx, msgs)
	})}
	m := fcNew(t, seen, memories.WithStore(st), memories.WithFactsPerUser(true))
	c2 := fcID("ana", "c2")
	def := fcID("ana", "")
	fcSave(t, m, c2, "I live in Lisbon", "nice")
	fcSave(t, m, def, "hello", "hi")
	require.Contains(t, fcLoad(t, m, c2), "Lisbon")
	before := calls.Load()

	require.NoError(t, m.Clear(def))
	assert.NotContains(t, fcLoad(t, m, c2), "Lisbon", "Clear removes the user's facts")
	fcSave(t, m, c2, "what is new?", "not much")
	assert.Equal(t, before+1, calls.Load(), "only the new turn of c2 is extracted: %v", seen.Seen())
	assert.NotContains(t, fcLoad(t, m, c2), "Lisbon", "a cleared fact came back from c2's old turns")
}

// gatedEmbedder holds EmbedDocuments while its gate is armed.
type gatedEmbedder struct {
	*rcEmbedder
	g *gate
}

func (e gatedEmbedder) EmbedDocuments(ctx context.Context, texts []string) ([][]float32, error) {
	e.g.pass()
	return e.rcEmbedder.EmbedDocuments(ctx, texts)
}

// A replica indexing a turn into a shared vector store while another
// clears the conversation must not leave the cleared turn's text there.
func TestRecall_ClearDefeatsIndexingInFlight(t *testing.T) {
	for _, how := range []string{"another replica's Clear", "store.Forget"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			st := store.NewInMemory()
			ch, err := retrieval.NewChromem(nil, "shared", nil)
			require.NoError(t, err)
			g := newGate()
			newReplica := func() *memories.Recall {
				m, err := memories.NewRecall(memories.WithStore(st), memories.WithK(1), memories.WithRecallDates(false),
					memories.WithVector(gatedEmbedder{newRCEmbedder(), g}, ch, retrieval.WithEmbedderName("hash")))
				require.NoError(t, err)
				return m
			}
			a, b := newReplica(), newReplica()
			ctSaveTurn(t, a, ctx, "hello", "hi")
			g.armed.Store(true)
			var wg sync.WaitGroup
			wg.Go(func() {
				// The save may fail or not; what matters is what is left.
				_ = a.SaveContext(ctx, map[string]any{"input": "my card is " + card}, map[string]any{"output": "noted"})
			})
			g.waitEntered(t)
			clear := clearers(b, st, memstack.Identity{})[how]
			require.NoError(t, clear(ctx))
			if how == "store.Forget" {
				// Forget does not reach a vector store; the memory's own
				// Clear does. Stand for a forget request that does both.
				require.NoError(t, b.Clear(ctx))
			}
			g.armed.Store(false)
			close(g.release)
			wg.Wait()

			assert.Zero(t, ch.Count(), "the cleared turns' text is stored again in the vector store")
		})
	}
}

// A per-user Facts keeps the user's facts under a reserved conversation
// name; a call that uses it is refused, naming it, and stores nothing.
func TestFacts_PerUserRefusesTheReservedConversation(t *testing.T) {
	st := store.NewInMemory()
	m := fcNew(t, gatedExtractor(newGate()), memories.WithStore(st), memories.WithFactsPerUser(true))
	id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: memories.UserFactsConversation}
	ctx := memstack.WithIdentity(context.Background(), id)
	err := m.SaveContext(ctx, map[string]any{"input": "I live in Lisbon"}, map[string]any{"output": "ok"})
	require.ErrorIs(t, err, memories.ErrInvalidIdentity)
	assert.Contains(t, err.Error(), "reserved")
	assert.Empty(t, ctStored(t, st, id))
	_, err = m.LoadMemoryVariables(ctx, nil)
	assert.ErrorIs(t, err, memories.ErrInvalidIdentity)

	plain := fcNew(t, gatedExtractor(newGate()), memories.WithStore(store.NewInMemory()))
	fcSave(t, plain, ctx, "I live in Lisbon", "ok")
	assert.Contains(t, fcLoad(t, plain, ctx), "Lisbon", "without WithFactsPerUser the name is an ordinary conversation")
}
