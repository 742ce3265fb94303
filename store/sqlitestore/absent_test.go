package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/store/storetest"
)

// stateRow is one row of memstack_state as the file holds it.
type stateRow struct {
	NS, Identity, Name string
	Version            int64
	Value              string
}

func stateRows(t *testing.T, db *sql.DB) []stateRow {
	t.Helper()
	rows, err := db.QueryContext(context.Background(),
		`SELECT ns, identity, name, version, value FROM memstack_state ORDER BY ns, identity, name`)
	require.NoError(t, err)
	defer rows.Close()
	var out []stateRow
	for rows.Next() {
		var r stateRow
		var v []byte
		require.NoError(t, rows.Scan(&r.NS, &r.Identity, &r.Name, &r.Version, &v))
		r.Value = string(v)
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

func getState(t *testing.T, s store.Store, id memstack.Identity, name string) store.State {
	t.Helper()
	st, err := s.GetState(context.Background(), id, name)
	require.NoError(t, err)
	return st
}

// create stores a new value, expecting the absent version GetState reports.
func create(t *testing.T, s store.Store, id memstack.Identity, name, value string) int64 {
	t.Helper()
	st := getState(t, s, id, name)
	require.False(t, st.Exists())
	v, err := s.PutState(context.Background(), id, name, []byte(value), st.Version)
	require.NoError(t, err)
	return v
}

// TestReservedRows checks the layout of Clear marks and the forgotten
// version (rows under the empty name, see the package documentation) and
// that they never leak: no caller can read or write them, they survive a
// reopen, the interop test passes on a file that has them, and a file
// without them — as a build from before absent versions leaves it — reads
// as it always did.
func TestReservedRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	a := open(t, path, sqlitestore.WithNamespace("a"))
	b := open(t, path, sqlitestore.WithNamespace("b"))
	db := rawDB(t, path)
	carol := memstack.Identity{Tenant: "acme", User: "carol"}

	for _, s := range []*sqlitestore.Store{a, b} {
		for _, id := range []memstack.Identity{alice, bob} {
			require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: "h"}))
			create(t, s, id, "summary", s.Namespace())
		}
	}
	aliceInB := getState(t, b, alice, "summary")
	require.NoError(t, a.Clear(ctx, alice))
	mark := getState(t, a, alice, "summary").Version
	require.NoError(t, a.Clear(ctx, carol)) // an identity with no rows is marked too
	carolMark := getState(t, a, carol, "summary").Version
	require.NoError(t, b.Forget(ctx, bob))
	forgotten := getState(t, a, bob, "summary").Version

	bucketOf := func(id memstack.Identity) string {
		return fmt.Sprintf("#%d", storekit.ForgetBucket(id.Tenant, id.User))
	}
	assert.Equal(t, []stateRow{
		{"", bucketOf(bob), "", forgotten, ""},
		{"a", alice.Key(), "", mark, ""},
		{"a", carol.Key(), "", carolMark, ""},
		{"b", alice.Key(), "summary", aliceInB.Version, "b"},
	}, stateRows(t, db), "a Clear leaves one mark; Forget leaves nothing of bob but the forgotten version of bob's user bucket")
	var counter int64
	require.NoError(t, db.QueryRowContext(ctx, `SELECT value FROM memstack_counter`).Scan(&counter))
	assert.Less(t, aliceInB.Version, mark)
	assert.Less(t, mark, carolMark)
	assert.Less(t, carolMark, forgotten)
	assert.Equal(t, counter, forgotten, "marks and the forgotten version come from the version counter")

	// What a caller sees: the absent version, never a reserved row.
	want := map[string]struct {
		s    *sqlitestore.Store
		id   memstack.Identity
		want store.State
	}{
		"cleared in a":      {a, alice, store.State{Version: mark}},
		"cleared elsewhere": {b, alice, aliceInB},
		"cleared, no rows":  {a, carol, store.State{Version: carolMark}},
		"forgotten":         {a, bob, store.State{Version: forgotten}},
		"forgotten in b":    {b, bob, store.State{Version: forgotten}},
		// Other users' absent versions stay: a Forget moves its user's
		// bucket only (issue 17, item 5).
		"never seen, not in a":  {b, carol, store.State{Version: sameBucket(carol, bob, forgotten)}},
		"never seen, any store": {a, memstack.Identity{User: "dave"}, store.State{Version: sameBucket(memstack.Identity{User: "dave"}, bob, forgotten)}},
	}
	checkSeen := func(what string, reopened map[string]*sqlitestore.Store) {
		t.Helper()
		for name, c := range want {
			s := c.s
			if reopened != nil {
				s = reopened[s.Namespace()]
			}
			assert.Equal(t, c.want, getState(t, s, c.id, "summary"), "%s: %s", what, name)
		}
	}
	checkSeen("open", nil)
	for _, s := range []*sqlitestore.Store{a, b} {
		_, err := s.GetState(ctx, alice, "")
		assert.ErrorIs(t, err, store.ErrInvalidArgument, "the reserved name cannot be read")
		_, err = s.PutState(ctx, alice, "", []byte("x"), mark)
		assert.ErrorIs(t, err, store.ErrInvalidArgument, "the reserved name cannot be written")
		_, err = s.PutState(ctx, alice, "", nil, mark)
		assert.ErrorIs(t, err, store.ErrInvalidArgument, "the reserved name cannot be deleted")
	}
	rowsBefore := stateRows(t, db)

	// The marks are in the file: a reopened Store reads them.
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	a = open(t, path, sqlitestore.WithNamespace("a"))
	b = open(t, path, sqlitestore.WithNamespace("b"))
	checkSeen("reopened", map[string]*sqlitestore.Store{"a": a, "b": b})

	// The interop test passes on a file with reserved rows, and leaves
	// them as they were.
	storetest.RunUndated(t, a, func(t *testing.T, _ memstack.Identity, seq int64, value []byte) {
		_, err := db.ExecContext(ctx, `UPDATE memstack_messages SET message = ? WHERE seq = ?`, value, seq)
		require.NoError(t, err)
	})
	assert.Equal(t, rowsBefore, stateRows(t, db), "the interop test changed no state row")

	// A file as a build from before absent versions leaves it: plain state
	// rows and no reserved ones. Absent names read version 0, as they
	// always did, and every call works on it.
	_, err := db.ExecContext(ctx, `DELETE FROM memstack_state`)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO memstack_state (ns, identity, name, version, value) VALUES ('a', ?, 'summary', ?, 'old')`,
		bob.Key(), counter)
	require.NoError(t, err)
	assert.Equal(t, store.State{Value: []byte("old"), Version: counter}, getState(t, a, bob, "summary"))
	assert.Equal(t, store.State{}, getState(t, a, bob, "facts"))
	assert.Equal(t, store.State{}, getState(t, b, bob, "summary"))
	v, err := a.PutState(ctx, bob, "facts", []byte("new"), 0)
	require.NoError(t, err, "a first commit expects 0 in a file that never ran Forget")
	v2, err := a.PutState(ctx, bob, "summary", []byte("newer"), counter)
	require.NoError(t, err)
	assert.Greater(t, v2, v)
	require.NoError(t, a.Clear(ctx, bob))
	assert.Equal(t, store.State{Version: v2 + 1}, getState(t, a, bob, "summary"), "Clear marks bob with the next version")
	assert.Equal(t, store.State{}, getState(t, b, bob, "summary"), "in its namespace only")
}

// TestTwoHandlesSeeAbsentVersions: two Stores — two *sql.DB — on one file
// see each other's Clear marks and the file's forgotten version, so a
// commit on one that read before a Clear or Forget on the other
// conflicts; a Clear in another namespace does not, a Forget there does.
func TestTwoHandlesSeeAbsentVersions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	a, b := open(t, path), open(t, path)
	other := open(t, path, sqlitestore.WithNamespace("other"))
	require.NoError(t, a.Append(ctx, alice, llms.HumanChatMessage{Content: "card 4111"}))

	conflictsAfter := func(what string, op func() error, existed bool) {
		t.Helper()
		if existed {
			create(t, a, alice, "summary", "before")
		}
		read := getState(t, a, alice, "summary")
		require.NoError(t, op(), what)
		_, err := a.PutState(ctx, alice, "summary", []byte("card 4111"), read.Version)
		assert.ErrorIs(t, err, store.ErrConflict, "%s: a commit that read before it conflicts (existed=%t)", what, existed)
		st := getState(t, b, alice, "summary")
		assert.False(t, st.Exists(), "%s: nothing stored", what)
		assert.Equal(t, st, getState(t, a, alice, "summary"), "%s: both handles see one absent version", what)
	}
	for _, existed := range []bool{false, true} {
		conflictsAfter("Clear on the other handle", func() error { return b.Clear(ctx, alice) }, existed)
		conflictsAfter("Forget on the other handle", func() error { return b.Forget(ctx, alice) }, existed)
		conflictsAfter("Forget in another namespace", func() error { return other.Forget(ctx, alice) }, existed)
	}

	// A Clear in another namespace marks alice there, not here.
	read := getState(t, a, alice, "summary")
	require.NoError(t, other.Clear(ctx, alice))
	_, err := a.PutState(ctx, alice, "summary", []byte("kept"), read.Version)
	require.NoError(t, err, "a Clear in another namespace does not fail this one's commit")
	assert.Equal(t, []byte("kept"), getState(t, b, alice, "summary").Value)
}

// sameBucket is v when a and b share a forget bucket, else 0.
func sameBucket(a, b memstack.Identity, v int64) int64 {
	if storekit.ForgetBucket(a.Tenant, a.User) == storekit.ForgetBucket(b.Tenant, b.User) {
		return v
	}
	return 0
}
