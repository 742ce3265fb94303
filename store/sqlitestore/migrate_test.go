package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/store/storekit"
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
		data, err := storekit.EncodeMessageAt(m, storekit.AppendTime(ctx))
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
		m, err := storekit.DecodeMessage(data)
		require.NoError(t, err)
		want[ns][key] = append(want[ns][key], m.GetContent())
	}
	require.NoError(t, rows.Err())
	require.Len(t, want["buffer"][alice.Key()], 9, "alice's two first turns are trimmed in buffer")
	require.Len(t, want["facts"][bob.Key()], 11, "a turn in the middle of bob's is trimmed in facts")
	require.Empty(t, want["facts"][carol.Key()])
	return want
}

// schemaV2 is what the build of schema version 2 added to a file of
// version 1, and its migration: memstack_stat, filled from the messages.
var schemaV2 = []string{
	`CREATE TABLE IF NOT EXISTS memstack_stat (
		ns        TEXT    NOT NULL,
		identity  TEXT    NOT NULL,
		count     INTEGER NOT NULL,
		first_seq INTEGER NOT NULL,
		last_seq  INTEGER NOT NULL,
		PRIMARY KEY (ns, identity)
	) WITHOUT ROWID`,
	`INSERT INTO memstack_stat (ns, identity, count, first_seq, last_seq)
		SELECT ns, identity, count(*), min(seq), max(seq) FROM memstack_messages GROUP BY ns, identity`,
	`UPDATE memstack_schema SET version = 2`,
}

// writeV2 writes a version 2 file at path as that build leaves one:
// writeV1's file — trimmed conversations, system messages, state, marks —
// migrated to version 2, and one more turn trimmed with memstack_stat kept
// in step, as RemovePrefix of version 2 does. It returns the file's
// messages as writeV1 does.
func writeV2(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	ctx := context.Background()
	want := writeV1(t, path)
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer db.Close()
	for _, q := range schemaV2 {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	// Trim bob's first turn in buffer, behind its system message.
	for _, q := range []string{
		`DELETE FROM memstack_messages WHERE seq IN
			(SELECT seq FROM memstack_messages WHERE ns = 'buffer' AND identity = ?1 AND system = 0 ORDER BY seq LIMIT 2)`,
		`UPDATE memstack_stat SET count = count - 2 WHERE ns = 'buffer' AND identity = ?1`,
	} {
		_, err := db.ExecContext(ctx, q, bob.Key())
		require.NoError(t, err, q)
	}
	want["buffer"][bob.Key()] = slices.Delete(want["buffer"][bob.Key()], 1, 3)
	require.Equal(t, statRows(t, db, countingQuery), statRows(t, db, countedQuery), "the version 2 file counts its messages")
	return want
}

// schemaOf reads the memstack objects of a file's schema: type, name and
// the SQL that creates them.
func schemaOf(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(),
		`SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_schema WHERE name LIKE '%memstack%' ORDER BY name`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		out = append(out, o)
	}
	require.NoError(t, rows.Err())
	return out
}

// schemaCookie reads SQLite's schema version of the file, which every
// change of its schema (any DDL that does something) increments.
func schemaCookie(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var v int64
	require.NoError(t, db.QueryRowContext(context.Background(), `PRAGMA schema_version`).Scan(&v))
	return v
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

// checkMigrated checks a file migrated from writeV1's or writeV2's:
// schema version 4 in one row, the schema a new file has, memstack_stat
// counting exactly the messages, every message and state value as it
// was, Stat agreeing with All, Tail reading through its indexes what All
// implies, and Seqs and versions going on from where the old version left
// them; append keys work.
func checkMigrated(t *testing.T, path string, want map[string]map[string][]string) {
	t.Helper()
	ctx := context.Background()
	db := rawDB(t, path)
	var rows, version int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*), max(version) FROM memstack_schema`).Scan(&rows, &version))
	assert.Equal(t, 1, rows)
	assert.Equal(t, sqlitestore.SchemaVersion, version)
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	require.NoError(t, open(t, fresh).Close())
	assert.Equal(t, schemaOf(t, rawDB(t, fresh)), schemaOf(t, db), "a migrated file has the schema of a new one")
	checkTailPlan(t, db)
	assert.Equal(t, statRows(t, db, countingQuery), statRows(t, db, countedQuery), "memstack_stat counts the messages of the old version")
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
			afters := []int64{0}
			if len(rs) > 4 {
				afters = append(afters, rs[len(rs)-4].Seq)
			}
			for _, n := range []int{1, 3, 100} {
				for _, after := range afters {
					tail, err := s.Tail(ctx, id, n, after)
					require.NoError(t, err)
					assert.Equal(t, storekit.TailOf(rs, n, after), tail, "Tail(%d, %d) of %s in %s", n, after, id.Key(), ns)
				}
			}
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

	// Append keys: carol's conversation in facts was trimmed to nothing.
	keyed := store.WithAppendKey(ctx, "migrated-turn")
	for _, s := range []*sqlitestore.Store{facts, open(t, path, sqlitestore.WithNamespace("facts"))} {
		require.NoError(t, s.Append(keyed, carol, llms.HumanChatMessage{Content: "k"}, llms.AIChatMessage{Content: "k"}))
	}
	rs, err = facts.All(ctx, carol)
	require.NoError(t, err)
	assert.Equal(t, []string{"k", "k"}, contents(rs), "a keyed turn appended twice is stored once")
	st, err = facts.Stat(ctx, carol)
	require.NoError(t, err)
	assert.Equal(t, statOf(rs), st)
}

// writers writes a file of an old schema version, by version.
var writers = []struct {
	name  string
	write func(t *testing.T, path string) map[string]map[string][]string
}{{"v1", writeV1}, {"v2", writeV2}}

// TestMigrateFromOlderVersions opens a version 1 file, and a version 2
// file, with several Stores at once — Open and New, each its own *sql.DB,
// as separate processes would — and checks that the one migration ran
// whole, once.
func TestMigrateFromOlderVersions(t *testing.T) {
	for _, w := range writers {
		for _, o := range openers() {
			t.Run(w.name+"/"+o.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "old.db")
				want := w.write(t, path)
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
}

// TestMigrateInProcesses has two child processes and this one open a
// version 1 file, and a version 2 file, at the same moment and append to
// it: the migration runs once, and the counts include every append of
// every process.
func TestMigrateInProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child process")
	}
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "old.db")
			want := w.write(t, path)
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
		})
	}
}

// TestMigrationIsOneTransaction: a migration that fails part-way changes
// nothing: the file stays at its version, byte for byte, and the error
// says what failed. From version 1 a table memstack_stat of another shape
// is in the way, so the backfill fails; from version 2 a table named like
// the unique index of append keys, so creating it fails after the column
// was added.
func TestMigrationIsOneTransaction(t *testing.T) {
	cases := []struct {
		from  string
		write func(t *testing.T, path string) map[string]map[string][]string
		block string
		want  string
	}{
		{"v1", writeV1, `CREATE TABLE memstack_stat (ns TEXT NOT NULL, identity TEXT NOT NULL, PRIMARY KEY (ns, identity))`,
			"migrating schema version 1 to 4: filling memstack_stat"},
		{"v2", writeV2, `CREATE TABLE memstack_messages_unit (x INTEGER)`,
			"migrating schema version 2 to 4: adding append keys"},
	}
	for _, c := range cases {
		for _, o := range openers() {
			t.Run(c.from+"/"+o.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "old.db")
				c.write(t, path)
				db := rawDB(t, path)
				_, err := db.ExecContext(context.Background(), c.block)
				require.NoError(t, err)
				before := dump(t, db)
				cookie := schemaCookie(t, db)
				_, err = o.open(t, path, "third")
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.want)
				assert.Contains(t, err.Error(), path)
				assert.Equal(t, before, dump(t, db), "a failed migration changes nothing")
				assert.Equal(t, cookie, schemaCookie(t, db), "not even the schema")
			})
		}
	}
}

// TestCurrentSchemaRunsNoDDL: Open and New of a file of version 3 change
// nothing in its schema (SQLite's schema cookie stays), where opening a
// file of version 2 migrates it.
func TestCurrentSchemaRunsNoDDL(t *testing.T) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			writeV2(t, path)
			db := rawDB(t, path)
			cookie := schemaCookie(t, db)
			s, err := o.open(t, path, "buffer")
			require.NoError(t, err)
			require.NoError(t, s.Close())
			migrated := schemaCookie(t, db)
			assert.Greater(t, migrated, cookie, "opening a version 2 file migrates it")
			for _, ns := range []string{"buffer", "facts", "new"} {
				s, err := o.open(t, path, ns)
				require.NoError(t, err)
				require.NoError(t, s.Close())
			}
			assert.Equal(t, migrated, schemaCookie(t, db), "opening a version 3 file changes no schema")
		})
	}
}

// TestNewerSchemaRefused: a file of a newer schema version is refused by
// Open and New, naming both versions and the file, and left exactly as it
// was — no table, column or index added, no namespace registered.
func TestNewerSchemaRefused(t *testing.T) {
	for _, o := range openers() {
		t.Run(o.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "v5.db")
			writeV1(t, path) // a version 5 without memstack_stat or unit: nothing may add them
			db := rawDB(t, path)
			_, err := db.ExecContext(ctx, `UPDATE memstack_schema SET version = 5`)
			require.NoError(t, err)
			before := dump(t, db)
			_, err = o.open(t, path, "newcomer")
			require.Error(t, err)
			assert.Contains(t, err.Error(), "schema version 5")
			assert.Contains(t, err.Error(), "knows up to 4")
			assert.Contains(t, err.Error(), path)
			assert.Equal(t, before, dump(t, db), "a refused file is unchanged")
		})
	}
}
