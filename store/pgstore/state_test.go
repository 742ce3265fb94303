package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/storekit"
)

// stateRow is one row of a state table, as the reserved-row checks read it.
type stateRow struct {
	hashLen       int
	ns, name, key string
	version       int64
	valueLen      int
}

// TestReservedRows checks the layout the package documentation gives for
// absent versions: a Clear mark is one state row named "" per identity and
// namespace, set even when the identity has no rows; the forgotten version
// of a bucket of users (storekit.ForgetBucket) is one row with an empty
// id_hash and ns named '#' and the bucket, which a Forget of a user of the
// bucket moves and none removes, and which leaves the absent versions of
// other buckets' users alone; the store-wide row of older builds (name
// "") still counts, the greater of it and the bucket's winning; callers
// can reach none of them; and Forget leaves no row of the identity in any
// table, marks included.
func TestReservedRows(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("reserved")
	one := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithNamespace("one"))
	two := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithNamespace("two"))
	pool, err := pgxpool.New(ctx, testsvc.Postgres(t))
	require.NoError(t, err)
	defer pool.Close()

	stateRows := func() []stateRow {
		t.Helper()
		rows, err := pool.Query(ctx, "SELECT length(id_hash), ns, name, id_key, version, length(value) FROM "+prefix+"state ORDER BY id_key, ns, name")
		require.NoError(t, err)
		defer rows.Close()
		var out []stateRow
		for rows.Next() {
			var r stateRow
			require.NoError(t, rows.Scan(&r.hashLen, &r.ns, &r.name, &r.key, &r.version, &r.valueLen))
			out = append(out, r)
		}
		require.NoError(t, rows.Err())
		return out
	}
	countRows := func(id memstack.Identity) int {
		t.Helper()
		n := 0
		for _, table := range []string{"messages", "conversations", "state"} {
			var c int
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+prefix+table+" WHERE id_key = $1", id.Key()).Scan(&c))
			n += c
		}
		return n
	}
	get := func(s *pgstore.Store, id memstack.Identity, name string) store.State {
		t.Helper()
		st, err := s.GetState(ctx, id, name)
		require.NoError(t, err)
		return st
	}

	// A Clear of an identity with no rows leaves its mark, in its own
	// namespace only.
	require.NoError(t, one.Clear(ctx, alice))
	mark := get(one, alice, "summary")
	assert.Nil(t, mark.Value)
	assert.Positive(t, mark.Version)
	assert.Equal(t, store.State{}, get(two, alice, "summary"), "the mark is one namespace's")
	assert.Equal(t, store.State{}, get(one, bob, "summary"), "the mark is one identity's")
	assert.Equal(t, []stateRow{{hashLen: 32, ns: "one", name: "", key: alice.Key(), version: mark.Version}}, stateRows())
	require.NoError(t, one.Clear(ctx, alice))
	again := get(one, alice, "summary")
	assert.Greater(t, again.Version, mark.Version, "every Clear draws a fresh mark")
	assert.Len(t, stateRows(), 1, "a Clear moves the mark; it does not add one")

	// Callers can reach no reserved row.
	_, err = one.GetState(ctx, alice, "")
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = one.PutState(ctx, alice, "", []byte("x"), again.Version)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
	_, err = one.PutState(ctx, alice, "", nil, again.Version)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)

	// Messages, values and marks of alice in both namespaces, and bob's.
	for _, s := range []*pgstore.Store{one, two} {
		require.NoError(t, s.Append(ctx, alice, human("a")))
		require.NoError(t, s.Append(ctx, bob, human("b")))
		mustCreate(t, s, alice, "summary", []byte("alice"))
		mustCreate(t, s, bob, "summary", []byte("bob"))
	}
	require.NoError(t, two.Clear(ctx, alice))
	require.NoError(t, two.Append(ctx, alice, human("after Clear")))
	mustCreate(t, two, alice, "facts", []byte("f"))
	st, err := one.Stat(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Count, "a mark is no message")

	// Forget leaves nothing of alice, marks included, and one forgotten
	// row, of alice's bucket: the absent version of every identity of
	// alice's user without a mark, and of no other user's.
	bucket := func(id memstack.Identity) string {
		return fmt.Sprintf("#%d", storekit.ForgetBucket(id.Tenant, id.User))
	}
	require.NotEqual(t, bucket(alice), bucket(bob), "the test needs alice and bob in different buckets")
	alice2 := memstack.Identity{Tenant: alice.Tenant, User: alice.User, Conversation: "c2"}
	carol := memstack.Identity{Tenant: "acme", User: "carol"}
	require.NotContains(t, []string{bucket(alice), bucket(bob)}, bucket(carol))
	reserved := func() []stateRow {
		t.Helper()
		var out []stateRow
		for _, r := range stateRows() {
			if r.hashLen == 0 {
				out = append(out, r)
			}
		}
		return out
	}
	require.NoError(t, two.Forget(ctx, alice))
	assert.Zero(t, countRows(alice), "Forget leaves no row of the identity in any table")
	forgotten := get(one, alice, "summary")
	assert.Nil(t, forgotten.Value)
	assert.Greater(t, forgotten.Version, again.Version)
	assert.Equal(t, forgotten, get(two, alice, "summary"))
	assert.Equal(t, forgotten, get(one, alice2, "never_set"), "alice's other conversation shares her bucket's forgotten version")
	assert.Equal(t, store.State{}, get(one, bob, "never_set"), "bob's bucket did not move: his absent version is still 0")
	assert.Equal(t, []byte("bob"), get(two, bob, "summary").Value, "Forget of alice keeps bob's state")
	assert.Equal(t, []stateRow{{name: bucket(alice), version: forgotten.Version}}, reserved(), "one forgotten row, alice's bucket's")

	// A Forget of bob moves bob's bucket only: a first commit of alice's
	// user that read before it lands, one of bob's conflicts.
	require.NoError(t, one.Forget(ctx, bob))
	assert.Zero(t, countRows(bob))
	bobForgotten := get(two, bob, "summary")
	assert.Greater(t, bobForgotten.Version, forgotten.Version)
	assert.Equal(t, forgotten, get(two, alice, "summary"), "alice's absent version stays")
	assert.ElementsMatch(t, []stateRow{{name: bucket(alice), version: forgotten.Version}, {name: bucket(bob), version: bobForgotten.Version}},
		stateRows(), "only the forgotten rows of the two buckets are left")
	_, err = one.PutState(ctx, bob, "summary", []byte("stale"), 0)
	assert.ErrorIs(t, err, store.ErrConflict, "a first commit of bob that read before his Forget conflicts")
	_, err = one.PutState(ctx, alice2, "summary", []byte("spared"), forgotten.Version)
	require.NoError(t, err, "a first commit of alice's user that read before bob's Forget lands")

	// Another Forget of alice moves her bucket again.
	require.NoError(t, one.Forget(ctx, alice2))
	_, err = one.PutState(ctx, alice, "summary", []byte("stale"), forgotten.Version)
	assert.ErrorIs(t, err, store.ErrConflict, "a first commit that read before the user's Forget conflicts")
	mustCreate(t, one, alice, "summary", []byte("new"))
	aliceForgotten := get(two, alice2, "summary")
	assert.Greater(t, aliceForgotten.Version, bobForgotten.Version)

	// Tables an older build forgot in: its Forget moved the store-wide row
	// (name ""), with this statement. Every identity without a mark then
	// reads it, as the older build does, until its bucket moves past it.
	var legacy int64
	require.NoError(t, pool.QueryRow(ctx, "INSERT INTO "+prefix+"state AS s (id_hash, ns, name, id_key, version, value)"+
		" VALUES (''::bytea, '', '', '', nextval('"+prefix+"seq'), ''::bytea)"+
		" ON CONFLICT (id_hash, ns, name) DO UPDATE SET version = nextval('"+prefix+"seq') RETURNING version").Scan(&legacy))
	assert.Greater(t, legacy, aliceForgotten.Version)
	for _, id := range []memstack.Identity{alice2, bob, carol} {
		assert.Equal(t, store.State{Version: legacy}, get(one, id, "never_set"), "%s: the store-wide forgotten version is greater than the bucket's", id.Key())
	}
	assert.Equal(t, []byte("new"), get(one, alice, "summary").Value, "a value is a value")
	_, err = one.PutState(ctx, carol, "summary", []byte("stale"), 0)
	assert.ErrorIs(t, err, store.ErrConflict, "a first commit that read before the older build's Forget conflicts")
	require.NoError(t, two.Forget(ctx, carol))
	carolForgotten := get(one, carol, "summary")
	assert.Greater(t, carolForgotten.Version, legacy, "carol's bucket moved past the store-wide row")
	assert.Equal(t, store.State{Version: legacy}, get(one, bob, "never_set"), "bob still reads the store-wide row")
	mustCreate(t, one, carol, "summary", []byte("c"))
	mustCreate(t, two, bob, "summary", []byte("b"))
	assert.ElementsMatch(t, []stateRow{
		{name: "", version: legacy},
		{name: bucket(alice), version: aliceForgotten.Version},
		{name: bucket(bob), version: bobForgotten.Version},
		{name: bucket(carol), version: carolForgotten.Version},
	}, reserved(), "the store-wide row and one per bucket forgotten in")
}

// TestClearRacingPutStateAcrossPools races, round after round, a
// compare-and-set from one pool against a Clear or Forget of the same
// identity from another pool, both released at once after the state was
// read. Whichever wins, the Clear happened after the read, so nothing the
// commit wrote may be left: either it conflicted, or it landed before the
// Clear (its version is older than the absent version afterwards) and the
// Clear removed it.
func TestClearRacingPutStateAcrossPools(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("race")
	writer := open(t, pgstore.WithTablePrefix(prefix))
	clearer := open(t, pgstore.WithTablePrefix(prefix))
	for _, op := range []string{"Clear", "Forget"} {
		for _, existed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/existed=%t", op, existed), func(t *testing.T) {
				landed, conflicted := 0, 0
				for round := range 60 {
					id := memstack.Identity{User: "racer", Conversation: fmt.Sprint(op, existed, round%3)}
					if existed {
						mustCreate(t, writer, id, "race", []byte("before"))
					}
					read, err := writer.GetState(ctx, id, "race")
					require.NoError(t, err)
					require.Equal(t, existed, read.Exists())

					var (
						wg       sync.WaitGroup
						start    = make(chan struct{})
						put      int64
						putErr   error
						clearErr error
					)
					wg.Go(func() {
						<-start
						put, putErr = writer.PutState(ctx, id, "race", []byte("read before the "+op), read.Version)
					})
					wg.Go(func() {
						<-start
						if op == "Clear" {
							clearErr = clearer.Clear(ctx, id)
						} else {
							clearErr = clearer.Forget(ctx, id)
						}
					})
					close(start)
					wg.Wait()
					require.NoError(t, clearErr)

					for name, s := range map[string]*pgstore.Store{"writer": writer, "clearer": clearer} {
						after, err := s.GetState(ctx, id, "race")
						require.NoError(t, err)
						require.Nil(t, after.Value, "round %d (%s's pool): a commit that read before the %s outlived it", round, name, op)
						require.NotEqual(t, read.Version, after.Version, "round %d: the %s gave a fresh absent version", round, op)
						if putErr == nil {
							require.Less(t, put, after.Version, "round %d: a commit that succeeded landed before the %s", round, op)
						}
					}
					if putErr == nil {
						landed++
					} else {
						require.True(t, errors.Is(putErr, store.ErrConflict), "round %d: %v", round, putErr)
						conflicted++
					}
				}
				t.Logf("%d commits landed before the %s (and were removed), %d conflicted", landed, op, conflicted)
			})
		}
	}
}
