package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
)

// TestRolledBackTransactionsRunAgain makes the server roll transactions
// back — a trigger raises the SQLSTATE of a serialization failure (40001)
// or a deadlock (40P01), or another one, for the first few rows written —
// and checks what the store does: a transaction rolled back for a
// serialization failure or a deadlock changed nothing and is run again, up
// to 4 times in all, and then the call fails (PutState with
// store.ErrConflict); any other error is not retried. Whatever happens,
// nothing is stored twice: a keyed Append run again stores its unit once,
// and the key is kept (an Append under it afterwards stores nothing).
func TestRolledBackTransactionsRunAgain(t *testing.T) {
	const maxAttempts = 4
	tests := []struct {
		name     string
		op       string // "Append", "AppendKeyed" or "PutState"
		code     string
		failures int
		// ok is whether the call succeeds; firings how often the trigger
		// ran: once per failed attempt, and once per INSERT statement of
		// the one that succeeds (two for an Append of two messages).
		ok       bool
		firings  int
		conflict bool
	}{
		{"Append serialization failure", "Append", "40001", maxAttempts - 1, true, maxAttempts - 1 + 2, false},
		{"Append deadlock", "Append", "40P01", 1, true, 1 + 2, false},
		{"Append serialization failure every time", "Append", "40001", 100, false, maxAttempts, false},
		{"Append other error", "Append", "23505", 100, false, 1, false},
		{"AppendKeyed serialization failure", "AppendKeyed", "40001", maxAttempts - 1, true, maxAttempts - 1 + 2, false},
		{"AppendKeyed deadlock every time", "AppendKeyed", "40P01", 100, false, maxAttempts, false},
		{"PutState serialization failure", "PutState", "40001", 2, true, 3, false},
		{"PutState deadlock every time", "PutState", "40P01", 100, false, maxAttempts, true},
		{"PutState other error", "PutState", "22000", 100, false, 1, false},
	}
	admin := adminConn(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			prefix := freshPrefix("retry")
			s := open(t, pgstore.WithTablePrefix(prefix))
			table := prefix + "messages"
			if tt.op == "PutState" {
				table = prefix + "state"
			}
			// nextval is not transactional: the sequence counts every
			// attempt, also those rolled back.
			for _, ddl := range []string{
				"CREATE SEQUENCE " + prefix + "attempts",
				fmt.Sprintf(`CREATE FUNCTION %[1]sfail() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF nextval('%[1]sattempts') <= %[2]d THEN
		RAISE EXCEPTION 'injected failure' USING ERRCODE = '%[3]s';
	END IF;
	RETURN NEW;
END $$`, prefix, tt.failures, tt.code),
				// Once per statement: a failure aborts the transaction at
				// its first INSERT.
				fmt.Sprintf("CREATE TRIGGER fail BEFORE INSERT ON %s FOR EACH STATEMENT EXECUTE FUNCTION %sfail()", table, prefix),
			} {
				_, err := admin.Exec(ctx, ddl)
				require.NoError(t, err)
			}
			id := memstack.Identity{Tenant: "acme", User: "retry", Conversation: tt.name}

			var err error
			keyed := store.WithAppendKey(ctx, "the-turn")
			switch tt.op {
			case "Append":
				err = s.Append(ctx, id, human("once"), ai("once"))
			case "AppendKeyed":
				err = s.Append(keyed, id, human("once"), ai("once"))
			default:
				_, err = s.PutState(ctx, id, "summary", []byte("once"), 0)
			}

			var firings int
			require.NoError(t, admin.QueryRow(ctx, "SELECT last_value FROM "+prefix+"attempts").Scan(&firings))
			assert.Equal(t, tt.firings, firings, "how often the transaction ran")
			rs, rerr := s.All(ctx, id)
			require.NoError(t, rerr)
			st, gerr := s.GetState(ctx, id, "summary")
			require.NoError(t, gerr)
			if tt.ok {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				var pe *pgconn.PgError
				require.True(t, errors.As(err, &pe), "the server's error is wrapped: %v", err)
				assert.Equal(t, tt.code, pe.Code)
				assert.Equal(t, tt.conflict, errors.Is(err, store.ErrConflict), "ErrConflict: %v", err)
				assert.ErrorContains(t, err, id.Key())
			}
			if tt.op == "AppendKeyed" {
				_, derr := admin.Exec(ctx, "DROP TRIGGER fail ON "+table)
				require.NoError(t, derr)
				require.NoError(t, s.Append(keyed, id, human("twice"), ai("twice")), "an Append under a stored key")
				rs, rerr = s.All(ctx, id)
				require.NoError(t, rerr)
			}
			switch {
			case tt.op == "AppendKeyed" && !tt.ok:
				assert.Equal(t, []string{"twice", "twice"}, contents(rs), "the failed Append stored nothing, and kept no key")
			case tt.op != "PutState" && tt.ok:
				assert.Equal(t, []string{"once", "once"}, contents(rs), "stored once")
			case tt.op == "PutState" && tt.ok:
				assert.Equal(t, []byte("once"), st.Value)
			default:
				assert.Empty(t, rs, "nothing stored")
				assert.False(t, st.Exists(), "nothing stored")
			}
		})
	}
}
