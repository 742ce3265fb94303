package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/storekit"
)

// tableRow is one row of a store's table as PostgreSQL prints it (bytea
// in hex), with the identity it belongs to.
type tableRow struct {
	table, key, text string
}

// tableRows reads every row of the three tables under prefix.
func tableRows(t *testing.T, c *pgx.Conn, prefix string) []tableRow {
	t.Helper()
	var out []tableRow
	for _, table := range []string{"messages", "conversations", "state"} {
		rows, err := c.Query(context.Background(), "SELECT id_key, r::text FROM "+prefix+table+" AS r")
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (tableRow, error) {
			tr := tableRow{table: table}
			return tr, r.Scan(&tr.key, &tr.text)
		})
		require.NoError(t, err)
		out = append(out, got...)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.table+"\x00"+a.text < b.table+"\x00"+b.text
	})
	return out
}

// forgottenRows reads the rows of the forgotten versions under prefix
// (empty id_hash and ns), by name: "" is the store-wide one, "#<b>" that
// of bucket b.
func forgottenRows(t *testing.T, c *pgx.Conn, prefix string) map[string]int64 {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT name, version, id_key, length(value) FROM "+prefix+"state WHERE id_hash = ''::bytea")
	require.NoError(t, err)
	out := map[string]int64{}
	var (
		name, key   string
		version     int64
		valueLength int
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &version, &key, &valueLength}, func() error {
		assert.Empty(t, key)
		assert.Zero(t, valueLength)
		out[name] = version
		return nil
	})
	require.NoError(t, err)
	var stray int
	require.NoError(t, c.QueryRow(context.Background(), "SELECT count(*) FROM "+prefix+"state WHERE id_hash = ''::bytea AND ns <> ''").Scan(&stray))
	require.Zero(t, stray, "every forgotten version's row has an empty ns")
	return out
}

// TestForgetScopeLeavesNothing fills two namespaces of one table prefix
// (and another prefix) with identities inside and outside a scope —
// messages with a pinned system prompt, state values, a Clear mark, a
// conversations row that RemovePrefix emptied, a 10 kB conversation name, and
// look-alike keys — then forgets the scope and reads the tables
// themselves: not one row of an identity within the scope is left in any
// table, and every other row, of every other identity and of the other
// prefix, is byte for byte what it was. Only the forgotten versions' rows
// move: the user's bucket's (storekit.ForgetBucket), or, for a tenant, every
// bucket's and the store-wide one.
func TestForgetScopeLeavesNothing(t *testing.T) {
	admin := adminConn(t)
	tests := []struct {
		name  string
		scope store.Scope
	}{
		{"user", store.UserScope("acme", "ana")},
		{"tenant", store.TenantScope("acme")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			prefix := freshPrefix("forget_scope")
			one := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithNamespace("one"))
			two := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithNamespace("two"))
			otherPrefix := freshPrefix("forget_other")
			other := open(t, pgstore.WithTablePrefix(otherPrefix))

			ids := []memstack.Identity{
				{Tenant: "acme", User: "ana", Conversation: "c1"},
				{Tenant: "acme", User: "ana", Conversation: ""},
				{Tenant: "acme", User: "ana", Conversation: strings.Repeat("long ∑ conversation ", 500)},
				{Tenant: "acme", User: "ana", Conversation: "emptied"},
				{Tenant: "acme", User: "ana", Conversation: "cleared"},
				{Tenant: "acme", User: "anab", Conversation: "c1"},
				{Tenant: "acme", User: "ana:c1"},
				{Tenant: "acme", User: "", Conversation: "ana"},
				{Tenant: "acme:ana", User: "c1"},
				{Tenant: "acmeb", User: "ana", Conversation: "c1"},
				{Tenant: "", User: "ana", Conversation: "c1"},
				{Tenant: "acme", User: "bob", Conversation: "c1"},
			}
			// held counts the identities of the scope that hold
			// something: "emptied" keeps only a conversations row with no
			// message left, which ForgetScope removes but does not count.
			held := 0
			for _, id := range ids {
				if tt.scope.Contains(id) && id.Conversation != "emptied" {
					held++
				}
			}
			for si, s := range []*pgstore.Store{one, two, other} {
				for i, id := range ids {
					if id.Conversation == "emptied" {
						require.NoError(t, s.Append(ctx, id, human("gone soon"), ai("a")))
						_, err := s.RemovePrefix(ctx, id, 1<<62)
						require.NoError(t, err)
						continue
					}
					require.NoError(t, s.Append(ctx, id, llms.SystemChatMessage{Content: "terse"}, human(fmt.Sprint("h", si, i)), ai("a")))
					mustCreate(t, s, id, "summary", []byte{0, byte(i), 0xff})
					if id.Conversation == "cleared" { // only a Clear mark
						require.NoError(t, s.Clear(ctx, id))
					}
				}
			}
			split := func(rows []tableRow) (in, out []tableRow) {
				for _, r := range rows {
					if r.key == "" { // a forgotten version's row
						continue
					}
					id, err := memstack.ParseKey(r.key)
					require.NoError(t, err)
					if tt.scope.Contains(id) {
						in = append(in, r)
					} else {
						out = append(out, r)
					}
				}
				return in, out
			}
			in, keep := split(tableRows(t, admin, prefix))
			require.NotEmpty(t, in)
			for _, table := range []string{"messages", "conversations", "state"} {
				assert.True(t, slices.ContainsFunc(in, func(r tableRow) bool { return r.table == table }), "the scope has rows in %s", table)
			}
			otherBefore := tableRows(t, admin, otherPrefix)
			// Forgets of other users left rows of their buckets, and an
			// older build the store-wide one.
			require.NoError(t, one.Forget(ctx, memstack.Identity{Tenant: "acme", User: "carl"}))
			require.NoError(t, two.Forget(ctx, memstack.Identity{Tenant: "acme", User: "dora"}))
			_, err := admin.Exec(ctx, "INSERT INTO "+prefix+"state (id_hash, ns, name, id_key, version, value) VALUES (''::bytea, '', '', '', nextval('"+prefix+"seq'), ''::bytea)")
			require.NoError(t, err)
			forgottenBefore := forgottenRows(t, admin, prefix)
			require.Len(t, forgottenBefore, 3)
			var drawn int64
			require.NoError(t, admin.QueryRow(ctx, "SELECT last_value FROM "+prefix+"seq").Scan(&drawn))

			n, err := two.ForgetScope(ctx, tt.scope)
			require.NoError(t, err)
			assert.Equal(t, held, n, "the identities forgotten")

			in, kept := split(tableRows(t, admin, prefix))
			assert.Empty(t, in, "rows of the scope left behind")
			assert.Equal(t, keep, kept, "every other identity's rows, byte for byte")
			assert.Equal(t, otherBefore, tableRows(t, admin, otherPrefix), "another table prefix is another store")
			forgottenAfter := forgottenRows(t, admin, prefix)
			moved := map[string]bool{}
			for name, v := range forgottenAfter {
				if v > drawn {
					moved[name] = true
				} else {
					assert.Equal(t, forgottenBefore[name], v, "the forgotten version of %q did not move", name)
				}
			}
			if tt.scope.AllUsers {
				assert.Len(t, forgottenAfter, storekit.ForgetBuckets+1, "every bucket's row and the store-wide one")
				assert.Len(t, moved, storekit.ForgetBuckets+1, "a tenant's ForgetScope moves every bucket and the store-wide row to fresh versions")
			} else {
				ana := fmt.Sprintf("#%d", storekit.ForgetBucket("acme", "ana"))
				require.NotContains(t, forgottenBefore, ana, "the test needs ana's bucket apart from carl's and dora's")
				assert.Equal(t, map[string]bool{ana: true}, moved, "a user's ForgetScope moves the user's bucket only")
				assert.Len(t, forgottenAfter, 4)
			}
		})
	}
}

// TestForgetScopeRacingDerivedCommits races, round after round, a user's
// ForgetScope against a writer that derives state from one of the user's
// conversations into the user's derived identity (storekit.DerivedOf), as a
// per-user Facts extraction does: it reads the derived state, checks its
// source conversation still holds messages, and commits with the version
// it read (after a pause of up to 3 ms), again and again, until the source
// is gone. Every other round
// its first commit lands before ForgetScope starts; in the others
// ForgetScope may list the user before the derived identity exists.
// Whatever it committed — before the scope was listed, or after — nothing of the user is left when
// ForgetScope returns and the writer has stopped (issue 17, item 1).
func TestForgetScopeRacingDerivedCommits(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("forget_derived")
	writer := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithNamespace("facts"))
	forgetter := open(t, pgstore.WithTablePrefix(prefix), pgstore.WithNamespace("facts"))
	landed, late := 0, 0
	for round := range 24 {
		tenant := fmt.Sprintf("acme%d", round)
		var source memstack.Identity
		for i := range 100 {
			source = memstack.Identity{Tenant: tenant, User: "ana", Conversation: fmt.Sprintf("c%03d", i)}
			require.NoError(t, writer.Append(ctx, source, human("my card is 4111"), ai("noted")))
		}
		facts := storekit.DerivedOf(tenant, "ana")[0]
		var (
			wg        sync.WaitGroup
			commits   int
			committed = make(chan struct{})
			forgotten int
			forgetErr error
		)
		wg.Go(func() {
			for {
				st, err := writer.GetState(ctx, facts, "facts")
				if !assert.NoError(t, err) {
					return
				}
				stat, err := writer.Stat(ctx, source)
				if !assert.NoError(t, err) || stat.Count == 0 {
					return // forgotten: nothing to derive from
				}
				// A pause between the check and the commit (a slow
				// network, a scheduler), up to 3 ms, which ForgetScope's
				// last steps may run in.
				time.Sleep(time.Duration(rand.N(4)) * time.Millisecond)
				_, err = writer.PutState(ctx, facts, "facts", []byte("the card 4111"), st.Version)
				if err == nil {
					commits++
					if commits == 1 {
						close(committed)
					}
				} else if !assert.ErrorIs(t, err, store.ErrConflict) {
					return
				}
			}
		})
		wg.Go(func() {
			if round%2 == 0 { // the derived identity is there to be listed
				select {
				case <-committed:
				case <-time.After(5 * time.Second):
				}
			}
			time.Sleep(time.Duration(round%3) * time.Millisecond)
			forgotten, forgetErr = forgetter.ForgetScope(ctx, store.UserScope(tenant, "ana"))
		})
		wg.Wait()
		require.NoError(t, forgetErr)
		left, err := writer.Identities(ctx, store.UserScope(tenant, "ana"))
		require.NoError(t, err)
		require.Empty(t, left, "round %d: nothing of the user is left (%d commits)", round, commits)
		st, err := writer.GetState(ctx, facts, "facts")
		require.NoError(t, err)
		require.False(t, st.Exists(), "round %d: the derived state is gone", round)
		landed += commits
		if forgotten == 101 {
			late++
		}
		assert.Contains(t, []int{100, 101}, forgotten, "round %d: the conversations, and the derived identity when it held something", round)
	}
	t.Logf("%d commits of derived state, all forgotten; %d rounds counted the derived identity", landed, late)
}
