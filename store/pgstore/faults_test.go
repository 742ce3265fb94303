package pgstore_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/storetest"
)

// TestFaults loses replies between pgx and a real PostgreSQL server at
// every point of a write (storetest.RunFaults): the store runs nothing
// twice, so a write whose reply was lost is stored once or not at all, and
// PutState never reports its own write as a conflict.
func TestFaults(t *testing.T) {
	u, err := url.Parse(testsvc.Postgres(t))
	require.NoError(t, err)
	storetest.RunFaults(t, u.Host, func(tb testing.TB, ns, proxy string) (store.Store, error) {
		pu := *u
		pu.Host = proxy
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return pgstore.Open(ctx, pu.String(), pgstore.WithTablePrefix(kitPrefix(ns)))
	})
}
