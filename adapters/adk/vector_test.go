package adk_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/embeddings"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/session"

	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
)

// conceptEmbedder is a test double for an embedding model's answers: one
// dimension per concept, so "retreat" and "offsite" are near and share
// no word.
func conceptEmbedder(t *testing.T) embeddings.Embedder {
	concepts := [][]string{{"offsite", "retreat"}, {"lisbon", "portugal"}, {"budget", "money", "cost"}, {"logo", "brand"}}
	e, err := embeddings.NewEmbedder(embeddings.EmbedderClientFunc(func(_ context.Context, texts []string) ([][]float32, error) {
		out := make([][]float32, len(texts))
		for i, text := range texts {
			v := make([]float32, len(concepts)+1)
			v[len(concepts)] = 0.05
			for _, w := range strings.Fields(strings.ToLower(strings.Trim(text, ".?!"))) {
				w = strings.Trim(w, ".,?!")
				for d, c := range concepts {
					for _, word := range c {
						if w == word {
							v[d]++
						}
					}
				}
			}
			out[i] = v
		}
		return out, nil
	}))
	require.NoError(t, err)
	return e
}

// With WithRecallOptions(memories.WithVector(...)) SearchMemory finds by
// meaning; ForgetUser removes the user's vectors too.
func TestSearchMemoryWithVectors(t *testing.T) {
	ctx := context.Background()
	st := store.NewInMemory()
	emb := conceptEmbedder(t)
	vs, err := retrieval.NewChromem(nil, "adk", emb)
	require.NoError(t, err)
	sessions, err := adk.NewSessionService(st)
	require.NoError(t, err)
	mem, err := adk.NewMemoryService(st, adk.WithRecallOptions(memories.WithVector(emb, vs, retrieval.WithEmbedderName("concepts"))))
	require.NoError(t, err)
	created, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
	require.NoError(t, err)
	day := time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)
	for _, ev := range []*session.Event{
		text("e1", "user", day, "The offsite goes to Lisbon."),
		text("e2", "planner", day.Add(time.Minute), "The logo stays blue."),
	} {
		require.NoError(t, sessions.AppendEvent(ctx, created.Session, ev))
	}
	require.NoError(t, mem.AddSessionToMemory(ctx, created.Session))

	resp, err := mem.SearchMemory(ctx, &memory.SearchRequest{AppName: "travel", UserID: "ana", Query: "where is the retreat in portugal"})
	require.NoError(t, err)
	require.NotEmpty(t, resp.Memories)
	assert.Equal(t, "The offsite goes to Lisbon.", resp.Memories[0].Content.Parts[0].Text, "found by meaning: no word in common")

	before, err := vs.SimilaritySearch(ctx, "offsite lisbon", 10)
	require.NoError(t, err)
	require.NotEmpty(t, before, "the vector store holds the user's turns")
	_, err = mem.ForgetUser(ctx, "travel", "ana")
	require.NoError(t, err)
	after, err := vs.SimilaritySearch(ctx, "offsite lisbon", 10)
	require.NoError(t, err)
	assert.Empty(t, after, "ForgetUser removes the user's vectors")
	resp, err = mem.SearchMemory(ctx, &memory.SearchRequest{AppName: "travel", UserID: "ana", Query: "where is the retreat in portugal"})
	require.NoError(t, err)
	assert.Empty(t, resp.Memories)
}
