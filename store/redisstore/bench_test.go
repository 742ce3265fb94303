package redisstore_test

import (
	"context"
	"testing"

	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/storetest"
)

func BenchmarkRedis(b *testing.B) {
	addr := testsvc.Redis(b)
	storetest.Bench(b, func(tb testing.TB, ns string) (store.Store, error) {
		return redisstore.Open(context.Background(), addr, redisstore.WithKeyPrefix("b-"+ns))
	})
}
