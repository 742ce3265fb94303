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
// is one row with an empty id_hash that every Forget moves and none
// removes; callers can reach neither; and Forget leaves no row of the
// identity in any table, marks included.
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
	// row that is the absent version of everyone without a mark.
	require.NoError(t, two.Forget(ctx, alice))
	assert.Zero(t, countRows(alice), "Forget leaves no row of the identity in any table")
	forgotten := get(one, alice, "summary")
	assert.Nil(t, forgotten.Value)
	assert.Greater(t, forgotten.Version, again.Version)
	assert.Equal(t, forgotten, get(two, alice, "summary"))
	assert.Equal(t, forgotten, get(one, bob, "never_set"), "bob has no mark: his absent version is the forgotten one")
	assert.Equal(t, []byte("bob"), get(two, bob, "summary").Value, "Forget of alice keeps bob's state")
	var reserved []stateRow
	for _, r := range stateRows() {
		if r.hashLen == 0 {
			reserved = append(reserved, r)
		}
	}
	assert.Equal(t, []stateRow{{version: forgotten.Version}}, reserved, "one forgotten row")

	// Another Forget moves it and keeps it.
	require.NoError(t, one.Forget(ctx, bob))
	assert.Zero(t, countRows(bob))
	later := get(two, alice, "summary")
	assert.Greater(t, later.Version, forgotten.Version)
	assert.Equal(t, []stateRow{{version: later.Version}}, stateRows(), "only the forgotten row is left")
	_, err = one.PutState(ctx, alice, "summary", []byte("stale"), forgotten.Version)
	assert.ErrorIs(t, err, store.ErrConflict, "a first commit that read before any Forget conflicts")
	mustCreate(t, one, alice, "summary", []byte("new"))
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
