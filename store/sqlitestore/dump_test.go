package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// dumpRow is one row of a table as SQLite's quote() writes each column:
// type and bytes exactly ('text', X'blob', integers), so two dumps are
// equal only if the rows are byte for byte.
type dumpRow struct {
	// Identity is the row's identity column, unquoted ("" for a table
	// without one).
	Identity string
	Cells    []string
}

// dump reads every table of the file — sqlite_schema, sqlite_sequence and
// whatever tables a build created, not only the ones this test knows —
// each ordered by all its columns.
func dump(t *testing.T, db *sql.DB) map[string][]dumpRow {
	t.Helper()
	ctx := context.Background()
	out := map[string][]dumpRow{"sqlite_schema": nil}
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	for _, table := range append(tables, "sqlite_schema") {
		cols := columns(t, db, table)
		quoted := make([]string, len(cols))
		identity := "''"
		for i, c := range cols {
			quoted[i] = fmt.Sprintf("quote(%q)", c)
			if c == "identity" {
				identity = `"identity"`
			}
		}
		q := fmt.Sprintf(`SELECT CAST(%s AS TEXT), %s FROM %q ORDER BY %s`,
			identity, strings.Join(quoted, ", "), table, strings.Join(quoted, ", "))
		rows, err := db.QueryContext(ctx, q)
		require.NoError(t, err, q)
		for rows.Next() {
			r := dumpRow{Cells: make([]string, len(cols))}
			dst := []any{&r.Identity}
			for i := range r.Cells {
				dst = append(dst, &r.Cells[i])
			}
			require.NoError(t, rows.Scan(dst...))
			out[table] = append(out[table], r)
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
	}
	return out
}

func columns(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
	require.NoError(t, err)
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		cols = append(cols, c)
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, cols, "table %s has columns", table)
	return cols
}
