package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/storetest"
)

// BenchmarkRedis measures saves per second and Last(10) latency with 1 and
// 32 concurrent conversations (storetest.Bench). Run it with
//
//	go test -run '^$' -bench Redis -benchtime 20000x ./store/redisstore/
func BenchmarkRedis(b *testing.B) {
	addr := testsvc.Redis(b)
	storetest.Bench(b, func(_ testing.TB, ns string) (store.Store, error) {
		return redisstore.Open(context.Background(), addr, redisstore.WithKeyPrefix("b-"+ns))
	})
}

// BenchmarkRecentNOnRedis measures what a chain sees: a RecentN(10) memory
// over Redis, each turn a SaveContext followed by a LoadMemoryVariables,
// with 1 and 32 concurrent conversations. It reports saves/s and the load
// latency percentiles.
func BenchmarkRecentNOnRedis(b *testing.B) {
	addr := testsvc.Redis(b)
	for _, conversations := range []int{1, 32} {
		b.Run(fmt.Sprintf("conversations=%d", conversations), func(b *testing.B) {
			s, err := redisstore.Open(context.Background(), addr, redisstore.WithKeyPrefix("bn-"+randomHex(6)))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			mem, err := memories.NewRecentN(10, memories.WithStore(s))
			if err != nil {
				b.Fatal(err)
			}
			turns := max((b.N+conversations-1)/conversations, 1)
			lat := make([][]time.Duration, conversations)
			errs := make([]error, conversations)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for c := range conversations {
				wg.Go(func() {
					ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "bench", User: fmt.Sprint(c)})
					l := make([]time.Duration, 0, turns)
					for i := range turns {
						if err := mem.SaveContext(ctx,
							map[string]any{"input": fmt.Sprintf("turn %d: what did we decide about the launch date and the budget?", i)},
							map[string]any{"output": fmt.Sprintf("turn %d: launch on the 14th, budget capped at 20k, review on Friday.", i)}); err != nil {
							errs[c] = err
							return
						}
						t0 := time.Now()
						if _, err := mem.LoadMemoryVariables(ctx, nil); err != nil {
							errs[c] = err
							return
						}
						l = append(l, time.Since(t0))
					}
					lat[c] = l
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			for c, err := range errs {
				if err != nil {
					b.Fatalf("conversation %d: %v", c, err)
				}
				_ = s.Forget(context.Background(), memstack.Identity{Tenant: "bench", User: fmt.Sprint(c)})
			}
			all := slices.Concat(lat...)
			slices.Sort(all)
			pct := func(p float64) float64 {
				i := min(max(int(p*float64(len(all))+0.999999)-1, 0), len(all)-1)
				return float64(all[i].Nanoseconds()) / 1e3
			}
			b.ReportMetric(float64(conversations*turns)/elapsed.Seconds(), "saves/s")
			b.ReportMetric(pct(0.50), "load-p50-µs")
			b.ReportMetric(pct(0.99), "load-p99-µs")
		})
	}
}
