package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/store/storetest"
)

// Rows written before memstack recorded times (a message column without
// "at") still read, with a zero Time, next to dated ones.
func TestRowsWithoutTimes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path)
	db := rawDB(t, path)
	storetest.RunUndated(t, s, func(t *testing.T, _ memstack.Identity, seq int64, value []byte) {
		res, err := db.ExecContext(context.Background(), `UPDATE memstack_messages SET message = ? WHERE seq = ?`, value, seq)
		require.NoError(t, err)
		n, err := res.RowsAffected()
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	})
}

// The time lives in the message column's JSON: the schema is unchanged
// and the row holds exactly what storekit.EncodeMessageAt writes.
func TestRowCarriesTheTime(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	s := open(t, path)
	at := time.Date(2023, 5, 8, 12, 30, 0, 5, time.FixedZone("CEST", 2*3600))
	msg := llms.HumanChatMessage{Content: "dated"}
	require.NoError(t, s.Append(memstack.WithTime(ctx, at), alice, msg))

	var body []byte
	require.NoError(t, rawDB(t, path).QueryRowContext(ctx, `SELECT message FROM memstack_messages`).Scan(&body))
	want, err := storekit.EncodeMessageAt(msg, at)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(body))
	assert.Contains(t, string(body), `"at":"2023-05-08T12:30:00.000000005+02:00"`)

	// A reopened store reads it back.
	require.NoError(t, s.Close())
	rs, err := open(t, path).All(ctx, alice)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.True(t, rs[0].Time.Equal(at))
	assert.Equal(t, "2023-05-08T12:30:00.000000005+02:00", rs[0].Time.Format(time.RFC3339Nano))
}
