package pgstore_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
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

// TestFaultsKeyedAppendRetried loses one reply of a keyed Append at every
// point in turn, as TestFaults does, and then retries the Append under
// the same key, as a caller does after an error, until it returns nil:
// whether the lost reply's transaction committed or not, the turn is
// stored exactly once. An Append that failed although it committed says
// its outcome is unknown (store.ErrOutcomeUnknown).
func TestFaultsKeyedAppendRetried(t *testing.T) {
	u, err := url.Parse(testsvc.Postgres(t))
	require.NoError(t, err)
	p := storetest.NewFaultProxy(t, u.Host)
	pu := *u
	pu.Host = p.Addr()
	ctx := context.Background()
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := pgstore.Open(octx, pu.String(), pgstore.WithTablePrefix(freshPrefix("faultkey")))
	require.NoError(t, err)
	defer s.Close()

	id := memstack.Identity{Tenant: "acme", User: "faults", Conversation: "keyed"}
	// A keyed turn first, so the statements the loop's Appends run are
	// prepared on the connection and the replies it loses are theirs.
	require.NoError(t, s.Append(store.WithAppendKey(ctx, "warm-up"), id, human("warm up"), ai("ok")), "the proxy passes traffic")
	fired, failed, landed := 0, 0, 0
	for n := 1; n <= 8; n++ {
		w := fmt.Sprintf("turn %d", n)
		kctx := store.WithAppendKey(ctx, fmt.Sprint("turn-", n))
		cctx, cancel := context.WithTimeout(kctx, 20*time.Second)
		p.DropReply(n)
		err := s.Append(cctx, id, human(w), ai(w))
		if p.Disarm() {
			fired++
		}
		cancel()
		if err != nil {
			failed++
			if count(t, s, id, w) == 2 {
				landed++ // committed, though the call failed
				assert.ErrorIs(t, err, store.ErrOutcomeUnknown, "lost reply %d: the Append failed although it committed", n)
			}
			require.Eventually(t, func() bool { return s.Append(kctx, id, human(w), ai(w)) == nil },
				10*time.Second, 10*time.Millisecond, "lost reply %d: the retry under the same key succeeds", n)
		}
		got := count(t, s, id, w)
		assert.Equal(t, 2, got, "lost reply %d (the Append returned %v): the turn is stored once, found %d of its messages", n, err, got)
	}
	t.Logf("%d replies lost, %d Appends failed, %d of them had committed", fired, failed, landed)
	assert.Positive(t, fired, "no reply was lost: the proxy is not in the client's path")
	assert.Positive(t, landed, "no failed Append had committed: the retry of a stored key was never tested")
	st, err := s.Stat(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 2+2*8, st.Count, "the conversations row counts each turn once")
}

// count returns how many of id's messages say w, once the store answers
// again after a lost reply.
func count(t *testing.T, s *pgstore.Store, id memstack.Identity, w string) int {
	t.Helper()
	var rs []store.Record
	require.Eventually(t, func() bool {
		var err error
		rs, err = s.All(context.Background(), id)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the store recovers from a lost reply")
	n := 0
	for _, r := range rs {
		if r.Message.GetContent() == w {
			n++
		}
	}
	return n
}
