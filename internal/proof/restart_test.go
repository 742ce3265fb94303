package proof_test

import (
	"context"
	"hash/fnv"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	chromem "github.com/philippgille/chromem-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store/sqlitestore"
)

// A restart over a real SQLite file: a new Facts over the same file shows
// the same facts without extracting again, and extracts only new turns.
func TestRestart_FactsOverSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "facts.db")
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"})
	var seen atomic.Int64
	open := func() (*memories.Facts, *sqlitestore.Store) {
		s, err := sqlitestore.Open(context.Background(), path)
		require.NoError(t, err)
		p, err := extract.NewPatterns()
		require.NoError(t, err)
		counting := extract.ExtractorFunc(func(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
			seen.Add(int64(len(msgs)))
			return p.Extract(ctx, msgs)
		})
		m, err := memories.NewFacts(counting, memories.WithStore(s))
		require.NoError(t, err)
		return m, s
	}
	m, s := open()
	require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "I'm Ana and I live in Lisbon"}, map[string]any{"output": "hi"}))
	vars, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	want := vars[m.GetMemoryKey(ctx)]
	require.Contains(t, want, "Lisbon")
	require.NoError(t, m.Close())
	require.NoError(t, s.Close())
	before := seen.Load()

	m, s = open()
	defer s.Close()
	defer m.Close()
	vars, err = m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, want, vars[m.GetMemoryKey(ctx)], "the facts come back from the file")
	assert.Equal(t, before, seen.Load(), "nothing extracted again")
	require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "I love jazz"}, map[string]any{"output": "ok"}))
	assert.Equal(t, before+2, seen.Load(), "only the new turn is extracted")
}

// hashEmbedder is a deterministic bag-of-words embedder (the test double
// for a model's answers), counting the texts it embeds.
type hashEmbedder struct{ texts atomic.Int64 }

func (e *hashEmbedder) vec(s string) []float32 {
	v := make([]float32, 128)
	for _, w := range strings.Fields(strings.ToLower(s)) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(strings.Trim(w, ".,?!")))
		v[h.Sum32()%128]++
	}
	v[0] += 0.01
	return v
}

func (e *hashEmbedder) EmbedDocuments(_ context.Context, texts []string) ([][]float32, error) {
	e.texts.Add(int64(len(texts)))
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = e.vec(t)
	}
	return out, nil
}

func (e *hashEmbedder) EmbedQuery(_ context.Context, text string) ([]float32, error) {
	return e.vec(text), nil
}

// A restart over SQLite and a persistent chromem-go directory: the hybrid
// Recall rebuilds its lexical part from SQLite, takes its vectors from
// disk, and embeds only new exchanges.
func TestRestart_RecallOverSQLiteAndPersistentChromem(t *testing.T) {
	dir := t.TempDir()
	dbPath, vecDir := filepath.Join(dir, "memory.db"), filepath.Join(dir, "vectors")
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c7"})
	e := &hashEmbedder{}
	open := func() (*memories.Recall, *sqlitestore.Store) {
		st, err := sqlitestore.Open(context.Background(), dbPath)
		require.NoError(t, err)
		db, err := chromem.NewPersistentDB(vecDir, false)
		require.NoError(t, err)
		vs, err := retrieval.NewChromem(db, "recall", nil)
		require.NoError(t, err)
		m, err := memories.NewRecall(memories.WithStore(st), memories.WithK(1), memories.WithRecallDates(false),
			memories.WithHybrid(e, vs, retrieval.WithEmbedderName("hash")))
		require.NoError(t, err)
		return m, st
	}
	turns := [][2]string{
		{"What did we settle on for the database?", "PostgreSQL, with nightly backups."},
		{"And the budget?", "Forty thousand euros."},
		{"Where is the offsite?", "Lisbon, in May."},
	}
	m, st := open()
	for _, tu := range turns {
		require.NoError(t, m.SaveContext(ctx, map[string]any{"input": tu[0]}, map[string]any{"output": tu[1]}))
	}
	require.NoError(t, st.Close())
	embedded := e.texts.Load()
	require.Positive(t, embedded)

	m, st = open()
	defer st.Close()
	ask := func(q string) string {
		vars, err := m.LoadMemoryVariables(ctx, map[string]any{"input": q})
		require.NoError(t, err)
		return vars["relevant_history"].(string)
	}
	assert.Contains(t, ask("offsite"), "Lisbon, in May.")
	assert.Equal(t, embedded, e.texts.Load(), "the lexical part is rebuilt from SQLite, the vectors come from disk")
	require.NoError(t, m.SaveContext(ctx, map[string]any{"input": "And the wiki?"}, map[string]any{"output": "Confluence."}))
	assert.Greater(t, e.texts.Load(), embedded, "the new exchange is embedded")
	assert.Less(t, e.texts.Load(), embedded+3, "only the new exchange is embedded")
	assert.Contains(t, ask("wiki"), "Confluence.")
}
