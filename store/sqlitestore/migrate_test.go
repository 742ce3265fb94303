package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
)

// schemaV1 is schema version 1 exactly as the build before memstack_stat
// created it.
var schemaV1 = []string{
	`CREATE TABLE IF NOT EXISTS memstack_schema (version INTEGER NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS memstack_messages (
		seq      INTEGER PRIMARY KEY AUTOINCREMENT,
		ns       TEXT    NOT NULL,
		identity TEXT    NOT NULL,
		system   INTEGER NOT NULL,
		message  BLOB    NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS memstack_messages_conv ON memstack_messages (ns, identity, seq)`,
	`CREATE TABLE IF NOT EXISTS memstack_state (
		ns       TEXT    NOT NULL,
		identity TEXT    NOT NULL,
		name     TEXT    NOT NULL,
		version  INTEGER NOT NULL,
		value    BLOB    NOT NULL,
		PRIMARY KEY (ns, identity, name)
	) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS memstack_namespaces (ns TEXT PRIMARY KEY) WITHOUT ROWID`,
	`CREATE TABLE IF NOT EXISTS memstack_counter (
		id    INTEGER PRIMARY KEY CHECK (id = 1),
		value INTEGER NOT NULL
	)`,
	`INSERT OR IGNORE INTO memstack_counter (id, value) VALUES (1, 0)`,
	`INSERT INTO memstack_schema (version) VALUES (1)`,
}

var carol = memstack.Identity{Tenant: "acme", User: "carol", Conversation: "c:1/*"}

// writeV1 writes a version 1 file at path as that build leaves one: two
// namespaces, conversations appended to, trimmed (gaps before and among
// the Seqs, a pinned system message first), one trimmed to nothing that
// keeps its state, state values, a Clear mark and the forgotten version.
// It returns the file's messages by namespace and identity key.
func writeV1(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	for _, q := range schemaV1 {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	want := map[string]map[string][]string{}
	insert := func(ns string, id memstack.Identity, m llms.ChatMessage) int64 {
		data, err := store.EncodeMessageAt(m, store.AppendTime(ctx))
		require.NoError(t, err)
		res, err := db.ExecContext(ctx, `INSERT INTO memstack_messages (ns, identity, system, message) VALUES (?, ?, ?, ?)`,
			ns, id.Key(), m.GetType() == llms.ChatMessageTypeSystem, data)
		require.NoError(t, err)
		seq, err := res.LastInsertId()
		require.NoError(t, err)
		return seq
	}
	for _, ns := range []string{"buffer", "facts"} {
		_, err := db.ExecContext(ctx, `INSERT INTO memstack_namespaces (ns) VALUES (?)`, ns)
		require.NoError(t, err)
		want[ns] = map[string][]string{}
		for _, id := range []memstack.Identity{alice, bob, carol} {
			insert(ns, id, llms.SystemChatMessage{Content: ns + " sys"})
			for i := range 6 {
				insert(ns, id, llms.HumanChatMessage{Content: fmt.Sprint(ns, " h", i)})
				insert(ns, id, llms.AIChatMessage{Content: fmt.Sprint(ns, " a", i)})
			}
		}
	}
	// Trims: alice's first two turns in buffer (the system message
	// stays), one turn in the middle of bob's in facts, all of carol's in
	// facts.
	_, err = db.ExecContext(ctx, `DELETE FROM memstack_messages WHERE seq IN
		(SELECT seq FROM memstack_messages WHERE ns = 'buffer' AND identity = ? AND system = 0 ORDER BY seq LIMIT 4)`, alice.Key())
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `DELETE FROM memstack_messages WHERE seq IN
		(SELECT seq FROM memstack_messages WHERE ns = 'facts' AND identity = ? ORDER BY seq LIMIT 2 OFFSET 7)`, bob.Key())
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `DELETE FROM memstack_messages WHERE ns = 'facts' AND identity = ?`, carol.Key())
	require.NoError(t, err)
	for _, q := range []string{
		`INSERT INTO memstack_state VALUES ('buffer', '` + alice.Key() + `', 'summary', 40, 'alice in buffer')`,
		`INSERT INTO memstack_state VALUES ('facts', '` + carol.Key() + `', 'facts', 41, 'carol in facts')`,
		`INSERT INTO memstack_state VALUES ('facts', '` + bob.Key() + `', '', 42, X'')`,
		`INSERT INTO memstack_state VALUES ('', '', '', 43, X'')`,
		`UPDATE memstack_counter SET value = 43`,
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	rows, err := db.QueryContext(ctx, `SELECT ns, identity, message FROM memstack_messages ORDER BY seq`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var ns, key string
		var data []byte
		require.NoError(t, rows.Scan(&ns, &key, &data))
		m, err := store.DecodeMessage(data)
		require.NoError(t, err)
		want[ns][key] = append(want[ns][key], m.GetContent())
	}
	require.NoError(t, rows.Err())
	require.Len(t, want["buffer"][alice.Key()], 9, "alice's two first turns are trimmed in buffer")
	require.Len(t, want["facts"][bob.Key()], 11, "a turn in the middle of bob's is trimmed in facts")
	require.Empty(t, want["facts"][carol.Key()])
	return want
}

// opener opens a Store over a file, through Open or New.
type opener struct {
	name string
	open func(t *testing.T, path, ns string) (*sqlitestore.Store, error)
}

func openers() []opener {
	return []opener{
		{"Open", func(t *testing.T, path, ns string) (*sqlitestore.Store, error) {
			return sqlitestore.Open(context.Background(), path, sqlitestore.WithNamespace(ns))
		}},
		{"New", func(t *testing.T, path, ns string) (*sqlitestore.Store, error) {
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { _ = db.Close() })
			return sqlitestore.New(db, sqlitestore.WithNamespace(ns))
		}},
	}
}

// checkMigrated checks a file migrated from writeV1's: schema version 2
// in one row, memstack_stat counting exactly the messages, every message
// and state value as it was, Stat agreeing with All, and Seqs and versions
// going on from where version 1 left them.
func checkMigrated(t *testing.T, path string, want map[string]map[string][]string) {
	t.Helper()
	ctx := context.Background()
	db := rawDB(t, path)
	var rows, version int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*), max(version) FROM memstack_schema`).Scan(&rows, &version))
	assert.Equal(t, 1, rows)
	assert.Equal(t, 2, version)
	assert.Equal(t, statRows(t, db, countingQuery), statRows(t, db, countedQuery), "memstack_stat counts the messages of version 1")
	var maxSeq int64
	require.NoError(t, db.QueryRowContext(ctx, `SELECT max(seq) FROM memstack_messages`).Scan(&maxSeq))
	for ns, convs := range want {
		s := open(t, path, sqlitestore.WithNamespace(ns))
		for _, id := range []memstack.Identity{alice, bob, carol} {
			rs, err := s.All(ctx, id)
			require.NoError(t, err)
			if convs[id.Key()] == nil {
				assert.Empty(t, rs, "%s in %s", id.Key(), ns)
			} else {
				assert.Equal(t, convs[id.Key()], contents(rs), "%s in %s", id.Key(), ns)
			}
			st, err := s.Stat(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, statOf(rs), st, "Stat of %s in %s", id.Key(), ns)
		}
	}
	buffer := open(t, path, sqlitestore.WithNamespace("buffer"))
	facts := open(t, path, sqlitestore.WithNamespace("facts"))
	assert.Equal(t, store.State{Value: []byte("alice in buffer"), Version: 40}, getState(t, buffer, alice, "summary"))
	assert.Equal(t, store.State{Value: []byte("carol in facts"), Version: 41}, getState(t, facts, carol, "facts"))
	assert.Equal(t, store.State{Version: 42}, getState(t, facts, bob, "summary"), "bob's Clear mark")
	assert.Equal(t, store.State{Version: 43}, getState(t, buffer, bob, "summary"), "the forgotten version")

	require.NoError(t, buffer.Append(ctx, alice, llms.HumanChatMessage{Content: "after"}))
	rs, err := buffer.Last(ctx, alice, 1)
	require.NoError(t, err)
	assert.Greater(t, rs[0].Seq, maxSeq, "Seqs go on after version 1's")
	st, err := buffer.Stat(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, len(want["buffer"][alice.Key()])+1, st.Count)
	assert.Equal(t, rs[0].Seq, st.LastSeq)
	v := create(t, facts, alice, "new", "x")
	assert.Greater(t, v, int64(43), "versions go on after version 1's")
}

// TestMigrateFromVersion1 opens a version 1 file with several Stores at
// once — Open and New, each its own *sql.DB, as separate processes would
// — and checks that the one migration ran whole, once.
func TestMigrateFromVersion1(t *testing.T) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v1.db")
			want := writeV1(t, path)
			var wg sync.WaitGroup
			stores := make([]*sqlitestore.Store, 6)
			errs := make([]error, len(stores))
			for i := range stores {
				wg.Go(func() {
					stores[i], errs[i] = openers()[i%2].open(t, path, []string{"buffer", "facts"}[i%2])
				})
			}
			wg.Wait()
			for i, s := range stores {
				require.NoError(t, errs[i], "store %d", i)
				require.NoError(t, s.Close())
			}
			s, err := o.open(t, path, "buffer")
			require.NoError(t, err)
			require.NoError(t, s.Close())
			checkMigrated(t, path, want)
		})
	}
}

// TestMigrateFromVersion1InProcesses has two child processes and this one
// open a version 1 file at the same moment and append to it: the
// migration runs once, and the counts include every append of every
// process.
func TestMigrateFromVersion1InProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child process")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	want := writeV1(t, path)
	const turns = 10
	wait := startChildWriters(path, turns)
	s := open(t, path) // the children write in the default namespace
	for i := range turns {
		require.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: fmt.Sprint("p0 ", i)}))
	}
	wait(t)
	st, err := s.Stat(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, turns+2*4*turns*2, st.Count, "every process's appends are counted")
	checkMigrated(t, path, want)
}

// TestMigrationIsOneTransaction: a migration that fails part-way — here
// a table memstack_stat of another shape is in the way, so the backfill
// fails — changes nothing: the file stays version 1, byte for byte, and
// the error says what failed.
func TestMigrationIsOneTransaction(t *testing.T) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "v1.db")
			writeV1(t, path)
			db := rawDB(t, path)
			_, err := db.ExecContext(context.Background(), `CREATE TABLE memstack_stat (ns TEXT NOT NULL, identity TEXT NOT NULL, PRIMARY KEY (ns, identity))`)
			require.NoError(t, err)
			before := dump(t, db)
			_, err = o.open(t, path, "third")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "migrating schema version 1 to 2")
			assert.Contains(t, err.Error(), path)
			assert.Equal(t, before, dump(t, db), "a failed migration changes nothing")
		})
	}
}

// TestNewerSchemaRefused: a file of a newer schema version is refused by
// Open and New, naming both versions and the file, and left exactly as it
// was — no table added, no namespace registered.
func TestNewerSchemaRefused(t *testing.T) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "v3.db")
			writeV1(t, path) // a version 3 without memstack_stat: nothing may add it
			db := rawDB(t, path)
			_, err := db.ExecContext(ctx, `UPDATE memstack_schema SET version = 3`)
			require.NoError(t, err)
			before := dump(t, db)
			_, err = o.open(t, path, "newcomer")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "schema version 3")
			assert.Contains(t, err.Error(), "knows up to 2")
			assert.Contains(t, err.Error(), path)
			assert.Equal(t, before, dump(t, db), "a refused file is unchanged")
		})
	}
}
