package proof_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/internal/benchcorpus"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/sqlitestore"
)

// Cold-load figures: a user with coldConvs conversations of coldMsgs
// messages of the benchmark corpus (100,000 messages, every turn sharing
// the query's words), whose first load in a new conversation is made by
// a stack that never saw the user (a fresh Recall: nothing cached in
// process), over a store that keeps the recall index.
const (
	coldConvs = 1000
	coldMsgs  = 100
)

// BenchmarkUserColdLoad times that first load (the agent stack:
// RecentN(6) and a user-scoped Recall under a 1,000-token budget), with
// its p95 (p95-ms: with -benchtime 30x, the second slowest), and, beside
// it, the store's search alone.
//
//	go test -run x -bench UserColdLoad ./internal/proof
func BenchmarkUserColdLoad(b *testing.B) {
	for _, be := range []struct {
		name string
		open func(b *testing.B) store.Store
		// settle, if not nil, brings the filled tables to the state a
		// deployment's are in.
		settle func(b *testing.B)
	}{
		{name: "sqlite", open: func(b *testing.B) store.Store {
			s, err := sqlitestore.Open(openCtx(b), filepath.Join(b.TempDir(), "cold.db"), sqlitestore.WithRecallIndex())
			return closeLater(b, "sqlitestore.Open", s, err)
		}},
		{name: "postgres", open: func(b *testing.B) store.Store {
			s, err := pgstore.Open(openCtx(b), testsvc.Postgres(b), pgstore.WithTablePrefix("cold_"+randomHex(4)+"_"), pgstore.WithRecallIndex())
			return closeLater(b, "pgstore.Open", s, err)
		}, settle: func(b *testing.B) {
			// The tables as autovacuum keeps them as they grow: the
			// planner's statistics (a table just filled has none until
			// its ANALYZE runs, and plans are guesses) and rows' old
			// versions pruned, as the scale benchmark after its
			// population.
			conn, err := pgx.Connect(openCtx(b), testsvc.Postgres(b))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(openCtx(b), "VACUUM (ANALYZE)"); err != nil {
				b.Fatal(err)
			}
		}},
	} {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b)
			tenant, user := "bench", "u"
			fillColdUser(b, st, tenant, user)
			if be.settle != nil {
				be.settle(b)
			}
			here := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: tenant, User: user, Conversation: "new"})
			query := func(i int) string { return benchcorpus.Human((i * 7919) % (coldConvs * coldMsgs / 2)) }
			b.Run("load", func(b *testing.B) {
				var took []time.Duration
				for i := 0; b.Loop(); i++ {
					start := time.Now()
					mem := coldStack(b, st)
					vars, err := mem.LoadMemoryVariables(here, map[string]any{"input": query(i)})
					if err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(start))
					if s, _ := vars[memories.RecallMemoryKey].(string); s == "" {
						b.Fatalf("nothing recalled: %v", vars)
					}
				}
				// The figure is a p95: reported beside the mean.
				slices.Sort(took)
				b.ReportMetric(float64(took[(len(took)*95+99)/100-1].Microseconds())/1000, "p95-ms")
			})
			b.Run("search", func(b *testing.B) {
				rs := st.(store.RecallSearcher)
				scope := store.RecallScope{Scope: store.UserScope(tenant, user)}
				for i := 0; b.Loop(); i++ {
					hits, err := rs.SearchRecall(context.Background(), scope, indexkit.Query{Terms: indexkit.QueryTerms(query(i)), Kind: indexkit.Exchanges, Near: [2]float64{0.5, 0.25}, K: 10})
					if err != nil || len(hits) == 0 {
						b.Fatalf("search: %d hits, %v", len(hits), err)
					}
				}
			})
		})
	}
}

// fillColdUser stores the cold-load user's conversations.
func fillColdUser(b testing.TB, st store.Store, tenant, user string) {
	b.Helper()
	ma := st.(store.MultiAppender)
	var batches []store.Batch
	for c := range coldConvs {
		id := memstack.Identity{Tenant: tenant, User: user, Conversation: fmt.Sprintf("conv-%d", c)}
		msgs := make([]llms.ChatMessage, 0, coldMsgs)
		for i := range coldMsgs / 2 {
			k := c*coldMsgs/2 + i
			msgs = append(msgs, llms.HumanChatMessage{Content: benchcorpus.Human(k)}, llms.AIChatMessage{Content: benchcorpus.AI(k)})
		}
		batches = append(batches, store.Batch{ID: id, Messages: msgs})
		if len(batches) == 50 || c == coldConvs-1 {
			if err := ma.AppendBatches(context.Background(), batches...); err != nil {
				b.Fatal(err)
			}
			batches = batches[:0]
		}
	}
}

// coldStack is the agent stack of the user-recall table, new.
func coldStack(b *testing.B, st store.Store) schema.Memory {
	b.Helper()
	recent, err := memories.NewRecentN(6, memories.WithStore(st))
	if err != nil {
		b.Fatal(err)
	}
	recall, err := memories.NewRecall(memories.WithStore(st), memories.WithExcludeRecent(6))
	if err != nil {
		b.Fatal(err)
	}
	mem, err := combined.New([]schema.Memory{recent, recall}, combined.WithTokenBudget(1000))
	if err != nil {
		b.Fatal(err)
	}
	return mem
}
