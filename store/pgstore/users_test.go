package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
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

// TestForgetScopeLeavesNothing fills two namespaces of one table prefix
// (and another prefix) with identities inside and outside a scope —
// messages with a pinned system prompt, state values, a Clear mark, a
// conversations row that RemovePrefix emptied, a 10 kB conversation name, and
// look-alike keys — then forgets the scope and reads the tables
// themselves: not one row of an identity within the scope is left in any
// table, and every other row, of every other identity and of the other
// prefix, is byte for byte what it was. Only the forgotten version's row
// moves.
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
					if r.key == "" { // the forgotten version's row
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
			var forgottenBefore int64
			require.NoError(t, admin.QueryRow(ctx, "SELECT coalesce((SELECT version FROM "+prefix+"state WHERE id_key = ''), 0)").Scan(&forgottenBefore))

			n, err := two.ForgetScope(ctx, tt.scope)
			require.NoError(t, err)
			assert.Equal(t, held, n, "the identities forgotten")

			in, kept := split(tableRows(t, admin, prefix))
			assert.Empty(t, in, "rows of the scope left behind")
			assert.Equal(t, keep, kept, "every other identity's rows, byte for byte")
			assert.Equal(t, otherBefore, tableRows(t, admin, otherPrefix), "another table prefix is another store")
			var forgottenAfter int64
			require.NoError(t, admin.QueryRow(ctx, "SELECT coalesce((SELECT version FROM "+prefix+"state WHERE id_key = ''), 0)").Scan(&forgottenAfter))
			assert.Greater(t, forgottenAfter, forgottenBefore, "ForgetScope draws a fresh forgotten version")
		})
	}
}
