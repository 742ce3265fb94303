package memories_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
)

// jsonMetaStore keeps metadata as JSON and returns it decoded into
// map[string]any, numbers as float64 — as langchaingo's pgvector (a json
// column scanned by pgx), chroma, qdrant and others do. Filters compare
// the text of a value (pgvector: cmetadata ->> 'key' = 'value').
type jsonMetaStore struct {
	mu   sync.Mutex
	docs []jsonDoc
}

type jsonDoc struct {
	content string
	meta    []byte
	vec     []float32
}

func (s *jsonMetaStore) AddDocuments(ctx context.Context, docs []schema.Document, options ...vectorstores.Option) ([]string, error) {
	var o vectorstores.Options
	for _, opt := range options {
		opt(&o)
	}
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = d.PageContent
	}
	vecs, err := o.Embedder.EmbedDocuments(ctx, texts)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range docs {
		b, err := json.Marshal(d.Metadata)
		if err != nil {
			return nil, err
		}
		s.docs = append(s.docs, jsonDoc{d.PageContent, b, vecs[i]})
	}
	return nil, nil
}

func (s *jsonMetaStore) SimilaritySearch(ctx context.Context, query string, n int, options ...vectorstores.Option) ([]schema.Document, error) {
	var o vectorstores.Options
	for _, opt := range options {
		opt(&o)
	}
	q, err := o.Embedder.EmbedQuery(ctx, query)
	if err != nil {
		return nil, err
	}
	filter, _ := o.Filters.(map[string]any)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []schema.Document
	for _, d := range s.docs {
		var md map[string]any
		if err := json.Unmarshal(d.meta, &md); err != nil {
			return nil, err
		}
		ok := true
		for k, v := range filter {
			if fmt.Sprint(md[k]) != fmt.Sprint(v) {
				ok = false
			}
		}
		if ok {
			out = append(out, schema.Document{PageContent: d.content, Metadata: md, Score: cosine(q, d.vec)})
		}
	}
	slices.SortFunc(out, func(a, b schema.Document) int { return -cmpF(a.Score, b.Score) })
	return out[:min(n, len(out))], nil
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cosine(a, b []float32) float32 {
	var d, na, nb float64
	for i := range a {
		d += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return float32(d / math.Sqrt(na*nb))
}

// With a store that returns numbers as JSON numbers (float64), a user-
// scoped Recall finds nothing: stableDocID's 62-bit IDs exceed 2^53, and
// metaInt drops them (and float64 could not hold them anyway). The
// conversation scope (Seqs as doc IDs) over the same store works.
func TestRecallDurable_StableIDsLostInJSONMetadata(t *testing.T) {
	for _, scope := range []memories.RecallScope{memories.RecallScopeConversation, memories.RecallScopeUser} {
		t.Run(fmt.Sprint(scope), func(t *testing.T) {
			mem := store.NewInMemory()
			r, err := memories.NewRecall(memories.WithStore(mem), memories.WithVector(newRCEmbedder(), &jsonMetaStore{}),
				memories.WithRecallScope(scope))
			require.NoError(t, err)
			rsSave(t, r, rsWeek1, rsMay8, "Which database for the billing service?", "We settled on PostgreSQL for billing.")
			for i := range 6 {
				rsSave(t, r, rsWeek1, rsMay8, fmt.Sprintf("Unrelated %d", i), fmt.Sprintf("Filler %d", i))
			}
			assert.Contains(t, rcAsk(t, r, ctIDCtx(rsWeek1), "which database did we pick for billing?"), "PostgreSQL")
		})
	}
}
