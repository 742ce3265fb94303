package sqlitestore_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/store/storekit"
)

// TestForgetScopeLeavesNoRow fills a file's three namespaces with the
// conversations of a user, of look-alikes (keys that share a prefix with
// hers, or hold her name in another part) and of other users, with every
// kind of row — messages (system ones too), state values, Clear marks,
// conversations trimmed and rewritten — then forgets the user (or her
// tenant): no row of any table holds anything of the scope any more, not
// even a mark or a count, and every other row of every table is the same
// byte for byte; only the file's version counter and forgotten version
// move.
func TestForgetScopeLeavesNoRow(t *testing.T) {
	ctx := context.Background()
	ana := []memstack.Identity{
		{Tenant: "acme", User: "ana"},
		{Tenant: "acme", User: "ana", Conversation: "c1"},
		{Tenant: "acme", User: "ana", Conversation: "c:2/*?[x]%_"},
		{Tenant: "acme", User: "ana", Conversation: "\x00memstack-user-facts"},
	}
	acme := []memstack.Identity{ // the rest of her tenant
		{Tenant: "acme", User: "anab", Conversation: "c1"},
		{Tenant: "acme", User: "an", Conversation: "ac1"},
		{Tenant: "acme", User: "ana:c1"},
		{Tenant: "acme", Conversation: "ana"},
		{Tenant: "acme", User: "bob", Conversation: "c1"},
	}
	elsewhere := []memstack.Identity{ // other tenants
		{Tenant: "acme:ana", User: "c1"},
		{Tenant: "acmeb", User: "ana", Conversation: "c1"},
		{User: "ana", Conversation: "c1"},
		{Tenant: "acm", User: "e:ana"},
	}
	cases := []struct {
		name       string
		scope      store.Scope
		in, others []memstack.Identity
	}{
		{"user", store.UserScope("acme", "ana"), ana, append(append([]memstack.Identity{}, acme...), elsewhere...)},
		{"tenant", store.TenantScope("acme"), append(append([]memstack.Identity{}, ana...), acme...), elsewhere},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.db")
			var ss []*sqlitestore.Store
			for _, ns := range []string{"buffer", "facts", "summary"} {
				ss = append(ss, open(t, path, sqlitestore.WithNamespace(ns)))
			}
			secret := func(id memstack.Identity) string { return "secret of " + id.Key() }
			for i, id := range append(append([]memstack.Identity{}, c.in...), c.others...) {
				for j, s := range ss {
					require.NoError(t, s.Append(ctx, id, llms.SystemChatMessage{Content: "sys " + secret(id)}))
					require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: "h1 " + secret(id)}, llms.AIChatMessage{Content: "a1"}))
					require.NoError(t, s.Append(ctx, id, llms.HumanChatMessage{Content: "h2 " + secret(id)}, llms.AIChatMessage{Content: "a2"}))
					create(t, s, id, "summary", "summary "+secret(id))
					create(t, s, id, "empty", "")
					switch (i + j) % 4 {
					case 1: // trimmed
						st, err := s.Stat(ctx, id)
						require.NoError(t, err)
						_, err = s.RemovePrefix(ctx, id, st.FirstSeq+2)
						require.NoError(t, err)
					case 2: // rewritten, state reset: a Clear mark and messages
						_, err := s.Rewrite(ctx, id, math.MaxInt64, true, llms.HumanChatMessage{Content: "rewritten " + secret(id)})
						require.NoError(t, err)
					case 3: // cleared: only a Clear mark
						require.NoError(t, s.Clear(ctx, id))
					}
				}
			}
			// A Forget of someone else: the file has a forgotten version.
			require.NoError(t, ss[0].Forget(ctx, memstack.Identity{Tenant: "gone"}))
			db := rawDB(t, path)
			before := dump(t, db)
			var exportBefore []store.Export
			for _, id := range c.others {
				ex, err := ss[0].Export(ctx, store.UserScope(id.Tenant, id.User))
				require.NoError(t, err)
				exportBefore = append(exportBefore, ex)
			}
			read := getState(t, ss[1], c.in[1], "summary")

			n, err := ss[2].ForgetScope(ctx, c.scope)
			require.NoError(t, err)
			assert.Equal(t, len(c.in), n, "every identity of the scope held something")
			after := dump(t, db)

			inScope := func(key string) bool { return strings.HasPrefix(key, c.scope.KeyPrefix()) }
			for table, rows := range after {
				for _, r := range rows {
					assert.False(t, inScope(r.Identity), "%s still has a row of %s: %v", table, r.Identity, r.Cells)
					for _, cell := range r.Cells {
						for _, id := range c.in {
							assert.NotContains(t, cell, secret(id), "%s still holds %s's data", table, id.Key())
							assert.NotContains(t, cell, strings.ToUpper(hex.EncodeToString([]byte(secret(id)))), "%s still holds %s's data", table, id.Key())
						}
					}
				}
			}
			var moved2 int
			for table, rows := range before {
				var kept []dumpRow
				for _, r := range rows {
					if !inScope(r.Identity) {
						kept = append(kept, r)
					}
				}
				want, got := kept, after[table]
				switch table {
				case "memstack_counter":
					// The counter drew the new forgotten version.
					require.Len(t, want, 1)
					require.Len(t, got, 1)
					assert.Equal(t, want[0].Cells[0], got[0].Cells[0])
					assert.Equal(t, parseInt(t, want[0].Cells[1])+1, parseInt(t, got[0].Cells[1]))
					continue
				case "memstack_state":
					// So did the reserved rows (empty ns) of the forgotten
					// versions it moved: the user's bucket, or, for a
					// tenant, every bucket and the file-wide row — all to
					// one fresh version. They sort first.
					fresh := after["memstack_counter"][0].Cells[1]
					reserved := func(rows []dumpRow) (res, rest []dumpRow) {
						for len(rows) > 0 && rows[0].Cells[0] == "''" {
							res, rows = append(res, rows[0]), rows[1:]
						}
						return res, rows
					}
					wantRes, wantRest := reserved(want)
					gotRes, gotRest := reserved(got)
					moved := map[string]bool{}
					for _, r := range gotRes {
						if r.Cells[3] == fresh {
							moved[r.Cells[1]] = true
						}
					}
					if c.scope.AllUsers {
						assert.Len(t, moved, storekit.ForgetBuckets+1, "a tenant's ForgetScope moves every bucket and the file-wide row")
					} else {
						b := fmt.Sprintf("'#%d'", storekit.ForgetBucket(c.scope.Tenant, c.scope.User))
						assert.Equal(t, map[string]bool{b: true}, moved, "a user's ForgetScope moves the user's bucket only")
						for _, r := range wantRes {
							if r.Cells[1] != b {
								assert.Contains(t, gotRes, r, "other buckets are unchanged")
							}
						}
					}
					want, got = wantRest, gotRest
					moved2++
				}
				assert.Equal(t, want, got, "%s: every row of every other identity is unchanged", table)
			}
			assert.Equal(t, 1, moved2)

			for _, s := range ss {
				for _, id := range c.in {
					rs, err := s.All(ctx, id)
					require.NoError(t, err)
					assert.Empty(t, rs)
					st, err := s.Stat(ctx, id)
					require.NoError(t, err)
					assert.Equal(t, store.Stat{}, st)
				}
			}
			ids, err := ss[0].Identities(ctx, c.scope)
			require.NoError(t, err)
			assert.Empty(t, ids)
			for i, id := range c.others {
				ex, err := ss[1].Export(ctx, store.UserScope(id.Tenant, id.User))
				require.NoError(t, err)
				assert.Equal(t, exportBefore[i], ex, "the export of %s is unchanged", id.Key())
			}
			_, err = ss[1].PutState(ctx, c.in[1], "summary", []byte("stale"), read.Version)
			assert.ErrorIs(t, err, store.ErrConflict, "a commit that read before ForgetScope conflicts")
		})
	}
}

func parseInt(t *testing.T, s string) int64 {
	t.Helper()
	var v int64
	_, err := fmt.Sscan(s, &v)
	require.NoError(t, err, "integer cell %q", s)
	return v
}

// TestUsersCalls checks the Users calls' arguments, their errors and that
// they reach namespaces whose Stores are closed.
func TestUsersCalls(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	a := open(t, path, sqlitestore.WithNamespace("a"))
	b, err := sqlitestore.Open(ctx, path, sqlitestore.WithNamespace("b"))
	require.NoError(t, err)
	require.NoError(t, b.Append(ctx, alice, llms.HumanChatMessage{Content: "in b"}))
	require.NoError(t, b.Close())

	ids, err := a.Identities(ctx, store.TenantScope("acme"))
	require.NoError(t, err)
	assert.Equal(t, []memstack.Identity{alice}, ids, "a closed Store's namespace is reached")
	ex, err := a.Export(ctx, store.UserScope("acme", "alice"))
	require.NoError(t, err)
	require.Len(t, ex.Identities, 1)
	require.Len(t, ex.Identities[0].Namespaces, 1)
	assert.Equal(t, "b", ex.Identities[0].Namespaces[0].Namespace)
	assert.Equal(t, []string{"in b"}, contents(ex.Identities[0].Namespaces[0].Messages))

	// A message that does not decode fails the export, naming it.
	db := rawDB(t, path)
	_, err = db.ExecContext(ctx, `UPDATE memstack_messages SET message = 'not json'`)
	require.NoError(t, err)
	_, err = a.Export(ctx, store.UserScope("acme", "alice"))
	assert.ErrorIs(t, err, store.ErrCorrupt)
	assert.Contains(t, err.Error(), alice.Key())

	bad := store.Scope{Tenant: "acme", User: "alice", AllUsers: true}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	calls := []struct {
		name string
		call func(context.Context, store.Scope) error
	}{
		{"Identities", func(ctx context.Context, sc store.Scope) error { _, err := a.Identities(ctx, sc); return err }},
		{"Export", func(ctx context.Context, sc store.Scope) error { _, err := a.Export(ctx, sc); return err }},
		{"ForgetScope", func(ctx context.Context, sc store.Scope) error { _, err := a.ForgetScope(ctx, sc); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(ctx, bad)
			assert.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Contains(t, err.Error(), c.name)
			assert.ErrorIs(t, c.call(cancelled, store.TenantScope("acme")), context.Canceled)
		})
	}
	n, err := a.ForgetScope(ctx, store.TenantScope("acme"))
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a message that does not decode is forgotten too")

	require.NoError(t, a.Close())
	for _, c := range calls {
		assert.ErrorIs(t, c.call(ctx, store.TenantScope("acme")), sqlitestore.ErrClosed, c.name)
	}
}
