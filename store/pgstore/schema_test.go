package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/storekit"
)

// version1DDL is the schema the builds before the schema table created
// (schema version 1), statement for statement.
func version1DDL(prefix string) []string {
	return []string{
		"CREATE SEQUENCE IF NOT EXISTS " + prefix + "seq AS bigint",
		"CREATE TABLE IF NOT EXISTS " + prefix + `messages (
	id_hash bytea   NOT NULL,
	ns      text    NOT NULL,
	seq     bigint  NOT NULL,
	id_key  text    NOT NULL,
	system  boolean NOT NULL,
	body    bytea   NOT NULL,
	PRIMARY KEY (id_hash, ns, seq))`,
		"CREATE TABLE IF NOT EXISTS " + prefix + `conversations (
	id_hash   bytea  NOT NULL,
	ns        text   NOT NULL,
	id_key    text   NOT NULL,
	count     bigint NOT NULL,
	first_seq bigint NOT NULL,
	last_seq  bigint NOT NULL,
	PRIMARY KEY (id_hash, ns))`,
		"CREATE TABLE IF NOT EXISTS " + prefix + `state (
	id_hash bytea  NOT NULL,
	ns      text   NOT NULL,
	name    text   NOT NULL,
	id_key  text   NOT NULL,
	version bigint NOT NULL,
	value   bytea  NOT NULL,
	PRIMARY KEY (id_hash, ns, name))`,
	}
}

// version2DDL is the schema version 2 created (version 1's tables, the
// schema table and the scope indexes), statement for statement, with its
// version stored.
func version2DDL(prefix string) []string {
	hash := func(name, table, expr string) string {
		return "CREATE INDEX IF NOT EXISTS " + prefix + name + " ON " + prefix + table + " USING hash (" + expr + ")"
	}
	const (
		tenant = "(split_part(id_key, ':', 1) || ':')"
		user   = "(split_part(id_key, ':', 1) || ':' || split_part(id_key, ':', 2) || ':')"
	)
	return append(version1DDL(prefix),
		"CREATE TABLE IF NOT EXISTS "+prefix+`schema (
	id      integer NOT NULL PRIMARY KEY CHECK (id = 1),
	version integer NOT NULL)`,
		hash("conversations_tenant", "conversations", tenant),
		hash("conversations_user", "conversations", user),
		hash("state_tenant", "state", tenant),
		hash("state_user", "state", user),
		"INSERT INTO "+prefix+"schema (id, version) VALUES (1, 2)")
}

// copyRows copies every row of the tables under prefix src into those
// under dst, which may be of an older schema version (the columns every
// version has), and the sequence's position.
func copyRows(t *testing.T, c *pgx.Conn, src, dst string) {
	t.Helper()
	execAll(t, c,
		"INSERT INTO "+dst+"messages (id_hash, ns, seq, id_key, system, body) SELECT id_hash, ns, seq, id_key, system, body FROM "+src+"messages",
		"INSERT INTO "+dst+"conversations SELECT * FROM "+src+"conversations",
		"INSERT INTO "+dst+"state SELECT * FROM "+src+"state",
		"SELECT setval('"+dst+"seq', (SELECT last_value FROM "+src+"seq))")
}

func execAll(t *testing.T, c *pgx.Conn, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		_, err := c.Exec(context.Background(), q)
		require.NoError(t, err, "%s", q)
	}
}

// schemaVersion reads the version the schema table holds (0: no table).
func schemaVersion(t *testing.T, c *pgx.Conn, prefix string) int {
	t.Helper()
	var exists bool
	require.NoError(t, c.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL", prefix+"schema").Scan(&exists))
	if !exists {
		return 0
	}
	var v int
	require.NoError(t, c.QueryRow(context.Background(), "SELECT version FROM "+prefix+"schema").Scan(&v))
	return v
}

// tablesOf lists the relations (tables, indexes, sequences) whose names
// start with prefix.
func tablesOf(t *testing.T, c *pgx.Conn, prefix string) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT relname FROM pg_class WHERE starts_with(relname, $1) ORDER BY relname", prefix)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

// recallTableNames are the recall index's tables (schema version 5),
// without the prefix.
var recallTableNames = []string{"recall_conv", "recall_units", "recall_posts", "recall_days", "recall_meta"}

// currentRelations is what schema version SchemaVersion (5) holds under
// prefix.
func currentRelations(prefix string) []string {
	out := []string{}
	for _, n := range []string{
		"conversations", "conversations_pkey", "conversations_tenant", "conversations_user",
		"messages", "messages_pkey", "messages_system", "messages_unit", "schema", "schema_pkey", "seq",
		"state", "state_pkey", "state_tenant", "state_user",
		// Version 4: the recall index.
		"recall_conv", "recall_conv_pkey", "recall_conv_scope", "recall_days", "recall_days_conv", "recall_days_pkey",
		"recall_meta", "recall_meta_pkey", "recall_units", "recall_units_pkey",
		// Version 5: postings by groups of a user's conversations.
		"recall_posts", "recall_posts_group", "recall_posts_pkey",
	} {
		out = append(out, prefix+n)
	}
	sort.Strings(out)
	return out
}

// populate writes, through s, what a store holds for two identities in
// two namespaces (one of them s's): messages with a system prompt, state
// values, a Clear mark, and a forgotten version.
func populate(t *testing.T, s, other *pgstore.Store) []memstack.Identity {
	t.Helper()
	ctx := context.Background()
	ana := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}
	bob := memstack.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	gone := memstack.Identity{Tenant: "acme", User: "gone"}
	for _, st := range []*pgstore.Store{s, other} {
		require.NoError(t, st.Append(ctx, ana, llms.SystemChatMessage{Content: "terse"}, human("h1"), ai("a1")))
		require.NoError(t, st.Append(ctx, ana, human("h2"), ai("a2")))
		require.NoError(t, st.Append(ctx, bob, human("b1")))
		mustCreate(t, st, ana, "summary", []byte("ana's summary"))
		require.NoError(t, st.Append(ctx, gone, human("forget me")))
	}
	_, err := s.RemovePrefix(ctx, ana, 0)
	require.NoError(t, err)
	require.NoError(t, other.Clear(ctx, bob))
	require.NoError(t, s.Forget(ctx, gone))
	return []memstack.Identity{ana, bob}
}

// snapshot is what two namespaces of a store show for ids.
func snapshot(t *testing.T, ss []*pgstore.Store, ids []memstack.Identity) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	for _, s := range ss {
		for _, id := range ids {
			k := s.Namespace() + " " + id.Key()
			rs, err := s.All(ctx, id)
			require.NoError(t, err)
			out[k+" all"] = rs
			st, err := s.Stat(ctx, id)
			require.NoError(t, err)
			out[k+" stat"] = st
			v, err := s.GetState(ctx, id, "summary")
			require.NoError(t, err)
			out[k+" summary"] = v
		}
	}
	return out
}

// TestMigratesVersion1 copies what a store wrote into tables made by the
// version-1 DDL (no schema table, no scope indexes), as a database
// written by an older build, and opens them: Open migrates them to
// SchemaVersion in place, and everything reads back as it was written, the Users
// methods find it, and Seqs and versions go on without reuse.
func TestMigratesVersion1(t *testing.T) {
	ctx := context.Background()
	admin := adminConn(t)
	src := freshPrefix("mig_src")
	srcDefault := open(t, pgstore.WithTablePrefix(src))
	srcLayer := open(t, pgstore.WithTablePrefix(src), pgstore.WithNamespace("layer"))
	ids := populate(t, srcDefault, srcLayer)
	want := snapshot(t, []*pgstore.Store{srcDefault, srcLayer}, ids)

	old := freshPrefix("mig_v1")
	execAll(t, admin, version1DDL(old)...)
	copyRows(t, admin, src, old)
	require.Zero(t, schemaVersion(t, admin, old), "version 1 has no schema table")

	oldDefault := open(t, pgstore.WithTablePrefix(old))
	assert.Equal(t, pgstore.SchemaVersion, schemaVersion(t, admin, old))
	assert.Equal(t, currentRelations(old), tablesOf(t, admin, old))
	oldLayer := open(t, pgstore.WithTablePrefix(old), pgstore.WithNamespace("layer"))
	assert.Equal(t, want, snapshot(t, []*pgstore.Store{oldDefault, oldLayer}, ids), "the migrated tables hold what was written")

	got, err := oldDefault.Identities(ctx, store.TenantScope("acme"))
	require.NoError(t, err)
	assert.Equal(t, ids, got, "the scope indexes cover the rows written before them")
	before, err := oldDefault.Stat(ctx, ids[0])
	require.NoError(t, err)
	require.NoError(t, oldDefault.Append(ctx, ids[0], human("after the migration")))
	after, err := oldDefault.Stat(ctx, ids[0])
	require.NoError(t, err)
	assert.Greater(t, after.LastSeq, before.LastSeq)
	n, err := oldLayer.ForgetScope(ctx, store.UserScope("acme", "ana"))
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	// Opening again changes nothing.
	open(t, pgstore.WithTablePrefix(old))
	assert.Equal(t, currentRelations(old), tablesOf(t, admin, old))
}

// TestMigratesVersion2 copies what a store wrote into tables made by the
// version-2 DDL, as a database written by the build before Tail and
// append keys, and opens them: Open migrates them to SchemaVersion in
// place (the unit column and the indexes of system messages and append
// keys), everything reads back as it was written, Tail reads the pinned
// system prompt and the newest messages of rows written before the
// migration, a keyed turn is stored once per namespace — appended again,
// from another pool, or by Appends racing from two pools — and the
// migrated tables open with WithoutDDL.
func TestMigratesVersion2(t *testing.T) {
	ctx := context.Background()
	admin := adminConn(t)
	src := freshPrefix("mig2_src")
	srcDefault := open(t, pgstore.WithTablePrefix(src))
	srcLayer := open(t, pgstore.WithTablePrefix(src), pgstore.WithNamespace("layer"))
	ids := populate(t, srcDefault, srcLayer)
	want := snapshot(t, []*pgstore.Store{srcDefault, srcLayer}, ids)

	old := freshPrefix("mig_v2")
	execAll(t, admin, version2DDL(old)...)
	copyRows(t, admin, src, old)
	require.Equal(t, 2, schemaVersion(t, admin, old))

	oldDefault := open(t, pgstore.WithTablePrefix(old))
	assert.Equal(t, pgstore.SchemaVersion, schemaVersion(t, admin, old))
	assert.Equal(t, currentRelations(old), tablesOf(t, admin, old))
	oldLayer := open(t, pgstore.WithTablePrefix(old), pgstore.WithNamespace("layer"))
	other := open(t, pgstore.WithTablePrefix(old), pgstore.WithoutDDL())
	assert.Equal(t, want, snapshot(t, []*pgstore.Store{oldDefault, oldLayer}, ids), "the migrated tables hold what was written")

	ana := ids[0]
	before, err := oldDefault.All(ctx, ana)
	require.NoError(t, err)
	require.Equal(t, []string{"terse", "h1", "a1", "h2", "a2"}, contents(before))
	for _, n := range []int{1, 2, 3, 10} {
		for _, after := range []int64{0, before[2].Seq} {
			got, err := oldDefault.Tail(ctx, ana, n, after)
			require.NoError(t, err)
			assert.Equal(t, storekit.TailOf(before, n, after), got, "Tail(%d, after %d) of rows written before the migration", n, after)
		}
	}

	keyed := store.WithAppendKey(ctx, "turn-after-migration")
	for _, s := range []*pgstore.Store{oldDefault, oldDefault, other, oldLayer} {
		require.NoError(t, s.Append(keyed, ana, human("h3"), ai("a3")))
	}
	var wg sync.WaitGroup
	raced := store.WithAppendKey(ctx, "raced")
	for i := range 8 {
		s := []*pgstore.Store{oldDefault, other}[i%2]
		wg.Go(func() { assert.NoError(t, s.Append(raced, ana, human("h4"), ai("a4"))) })
	}
	wg.Wait()
	wantAll := append(contents(before), "h3", "a3", "h4", "a4")
	for _, s := range []*pgstore.Store{oldDefault, oldLayer} {
		rs, err := s.All(ctx, ana)
		require.NoError(t, err)
		if s == oldLayer {
			assert.Equal(t, []string{"terse", "h1", "a1", "h2", "a2", "h3", "a3"}, contents(rs), "another namespace keeps its own keys")
			continue
		}
		assert.Equal(t, wantAll, contents(rs), "each keyed turn stored once")
		st, err := s.Stat(ctx, ana)
		require.NoError(t, err)
		assert.Equal(t, statOf(rs), st)
		tail, err := s.Tail(ctx, ana, 2, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"terse", "h4", "a4"}, contents(tail))
	}

	// Opening again changes nothing.
	open(t, pgstore.WithTablePrefix(old))
	assert.Equal(t, currentRelations(old), tablesOf(t, admin, old))
}

// TestSchemaVersions: a fresh prefix gets the current schema; tables of
// a newer version are refused, with or without WithoutDDL, and left
// alone; WithoutDDL never creates or migrates.
func TestSchemaVersions(t *testing.T) {
	ctx := context.Background()
	admin := adminConn(t)
	dsn := testsvc.Postgres(t)

	t.Run("fresh", func(t *testing.T) {
		prefix := freshPrefix("fresh")
		open(t, pgstore.WithTablePrefix(prefix))
		assert.Equal(t, pgstore.SchemaVersion, schemaVersion(t, admin, prefix))
		assert.Equal(t, currentRelations(prefix), tablesOf(t, admin, prefix))
	})

	t.Run("newer", func(t *testing.T) {
		prefix := freshPrefix("newer")
		open(t, pgstore.WithTablePrefix(prefix))
		// A newer build's schema, with a column this build would not
		// fill.
		newer := pgstore.SchemaVersion + 1
		execAll(t, admin,
			fmt.Sprintf("UPDATE %sschema SET version = %d", prefix, newer),
			"ALTER TABLE "+prefix+"messages ADD COLUMN tokens integer NOT NULL DEFAULT 0")
		for _, opts := range [][]pgstore.Option{{}, {pgstore.WithoutDDL()}} {
			s, err := pgstore.Open(ctx, dsn, append(opts, pgstore.WithTablePrefix(prefix))...)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.ErrorIs(t, err, pgstore.ErrSchemaVersion)
			for _, part := range []string{prefix, fmt.Sprint("version ", newer), fmt.Sprint(pgstore.SchemaVersion), "newer build"} {
				assert.ErrorContains(t, err, part)
			}
		}
		assert.Equal(t, newer, schemaVersion(t, admin, prefix), "a refused schema is left alone")
	})

	t.Run("WithoutDDL", func(t *testing.T) {
		absent := freshPrefix("absent")
		_, err := pgstore.Open(ctx, dsn, pgstore.WithTablePrefix(absent), pgstore.WithoutDDL())
		require.ErrorIs(t, err, pgstore.ErrSchemaVersion)
		assert.ErrorContains(t, err, "do not exist")
		assert.ErrorContains(t, err, "WithoutDDL")
		assert.Empty(t, tablesOf(t, admin, absent), "WithoutDDL creates nothing")

		old := freshPrefix("old")
		execAll(t, admin, version1DDL(old)...)
		_, err = pgstore.Open(ctx, dsn, pgstore.WithTablePrefix(old), pgstore.WithoutDDL())
		require.ErrorIs(t, err, pgstore.ErrSchemaVersion)
		assert.ErrorContains(t, err, "schema version 1")
		assert.Zero(t, schemaVersion(t, admin, old), "WithoutDDL migrates nothing")

		v2 := freshPrefix("v2")
		execAll(t, admin, version2DDL(v2)...)
		_, err = pgstore.Open(ctx, dsn, pgstore.WithTablePrefix(v2), pgstore.WithoutDDL())
		require.ErrorIs(t, err, pgstore.ErrSchemaVersion)
		assert.ErrorContains(t, err, "schema version 2")
		assert.Equal(t, 2, schemaVersion(t, admin, v2), "WithoutDDL migrates nothing")

		current := freshPrefix("current")
		open(t, pgstore.WithTablePrefix(current))
		s := open(t, pgstore.WithTablePrefix(current), pgstore.WithoutDDL())
		require.NoError(t, s.Append(ctx, alice, human("hi")))
	})
}

// TestLeastPrivilegeRole opens tables with a role that has only DML
// grants — SELECT, INSERT, UPDATE and DELETE on the tables and USAGE on
// the sequence — and no CREATE anywhere (PostgreSQL 15 grants PUBLIC no
// CREATE on schema public). Tables at the current version open without
// any option, and every call works; absent or older tables fail at Open
// with an error that says what the role lacks (or, with WithoutDDL, which
// version was found), until a role that may migrates them.
func TestLeastPrivilegeRole(t *testing.T) {
	ctx := context.Background()
	admin := adminConn(t)
	role := freshRole(t, "app")
	var serverVersion int
	require.NoError(t, admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&serverVersion))
	if serverVersion < 150000 {
		execAll(t, admin, "REVOKE CREATE ON SCHEMA public FROM PUBLIC")
		t.Cleanup(func() { execAll(t, admin, "GRANT CREATE ON SCHEMA public TO PUBLIC") })
	}
	grant := func(prefix string, tables ...string) {
		t.Helper()
		for _, table := range tables {
			execAll(t, admin, "GRANT SELECT, INSERT, UPDATE, DELETE ON "+prefix+table+" TO "+role)
		}
	}
	grantAll := func(prefix string) {
		t.Helper()
		grant(prefix, "messages", "conversations", "state", "schema")
		execAll(t, admin, "GRANT USAGE ON SEQUENCE "+prefix+"seq TO "+role)
	}
	dsn := withDSN(t, testsvc.Postgres(t), role, "postgres")
	openAs := func(prefix string, opts ...pgstore.Option) (*pgstore.Store, error) {
		s, err := pgstore.Open(ctx, dsn, append(opts, pgstore.WithTablePrefix(prefix))...)
		if err == nil {
			t.Cleanup(func() { _ = s.Close() })
		}
		return s, err
	}
	requireNoPrivilege := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		var pe *pgconn.PgError
		require.True(t, errors.As(err, &pe), "the server's error is wrapped: %v", err)
		assert.Equal(t, "42501", pe.Code, "insufficient_privilege")
		assert.ErrorContains(t, err, "Roles")
		assert.ErrorContains(t, err, "DML grants")
	}

	t.Run("current tables", func(t *testing.T) {
		prefix := freshPrefix("lp_current")
		open(t, pgstore.WithTablePrefix(prefix))
		grantAll(prefix)
		grant(prefix, recallTableNames...)
		for _, opts := range [][]pgstore.Option{{}, {pgstore.WithoutDDL()}} {
			s, err := openAs(prefix, opts...)
			require.NoError(t, err)
			layer, err := openAs(prefix, append(opts, pgstore.WithNamespace("layer"))...)
			require.NoError(t, err)
			everyCall(t, s, layer)
		}
	})

	t.Run("no tables", func(t *testing.T) {
		prefix := freshPrefix("lp_none")
		_, err := openAs(prefix)
		requireNoPrivilege(t, err)
		assert.ErrorContains(t, err, "creating the tables")
		_, err = openAs(prefix, pgstore.WithoutDDL())
		assert.ErrorIs(t, err, pgstore.ErrSchemaVersion)
		assert.Empty(t, tablesOf(t, admin, prefix))
	})

	t.Run("version 1 tables", func(t *testing.T) {
		prefix := freshPrefix("lp_v1")
		execAll(t, admin, version1DDL(prefix)...)
		grant(prefix, "messages", "conversations", "state")
		execAll(t, admin, "GRANT USAGE ON SEQUENCE "+prefix+"seq TO "+role)
		_, err := openAs(prefix)
		requireNoPrivilege(t, err)
		assert.ErrorContains(t, err, fmt.Sprintf("from schema version 1 to %d", pgstore.SchemaVersion))
		_, err = openAs(prefix, pgstore.WithoutDDL())
		assert.ErrorIs(t, err, pgstore.ErrSchemaVersion)
		assert.ErrorContains(t, err, "schema version 1")
		assert.Zero(t, schemaVersion(t, admin, prefix))

		// The owner migrates; the new tables need their grants too.
		open(t, pgstore.WithTablePrefix(prefix))
		grant(prefix, "schema")
		grant(prefix, recallTableNames...)
		s, err := openAs(prefix, pgstore.WithoutDDL())
		require.NoError(t, err)
		require.NoError(t, s.Append(ctx, alice, human("after the owner migrated")))
	})

	t.Run("version 2 tables", func(t *testing.T) {
		prefix := freshPrefix("lp_v2")
		execAll(t, admin, version2DDL(prefix)...)
		grantAll(prefix)
		_, err := openAs(prefix)
		requireNoPrivilege(t, err)
		assert.ErrorContains(t, err, fmt.Sprintf("from schema version 2 to %d", pgstore.SchemaVersion))
		_, err = openAs(prefix, pgstore.WithoutDDL())
		assert.ErrorIs(t, err, pgstore.ErrSchemaVersion)
		assert.ErrorContains(t, err, "schema version 2")
		assert.Equal(t, 2, schemaVersion(t, admin, prefix))

		// The owner migrates; the grants on the tables cover the new
		// column and indexes, and the recall index's tables (version 4)
		// need theirs.
		open(t, pgstore.WithTablePrefix(prefix))
		grant(prefix, recallTableNames...)
		s, err := openAs(prefix, pgstore.WithoutDDL())
		require.NoError(t, err)
		layer, err := openAs(prefix, pgstore.WithoutDDL(), pgstore.WithNamespace("layer"))
		require.NoError(t, err)
		everyCall(t, s, layer)
	})
}

// everyCall runs every method of the store through s (and layer, a second
// namespace of its tables) and checks that each works.
func everyCall(t *testing.T, s, layer *pgstore.Store) {
	t.Helper()
	ctx := context.Background()
	id := memstack.Identity{Tenant: "lp", User: "ana", Conversation: fmt.Sprint(prefixCounter.Add(1))}
	keyed := store.WithAppendKey(ctx, "the-turn")
	require.NoError(t, s.Append(keyed, id, llms.SystemChatMessage{Content: "terse"}, human("h1"), ai("a1")))
	require.NoError(t, s.Append(keyed, id, llms.SystemChatMessage{Content: "terse"}, human("h1"), ai("a1")))
	require.NoError(t, layer.Append(ctx, id, human("layer")))
	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	require.Len(t, rs, 3, "the keyed turn is stored once")
	tail, err := s.Tail(ctx, id, 1, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"terse", "a1"}, contents(tail))
	_, err = s.Last(ctx, id, 1)
	require.NoError(t, err)
	_, err = s.Stat(ctx, id)
	require.NoError(t, err)
	n, err := s.RemovePrefix(ctx, id, rs[1].Seq)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	v := mustCreate(t, s, id, "summary", []byte("s"))
	_, err = s.PutState(ctx, id, "summary", nil, v)
	require.NoError(t, err)
	n, err = s.Rewrite(ctx, id, math.MaxInt64, true, human("rewritten"))
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	require.NoError(t, s.Clear(ctx, id))
	got, err := s.Identities(ctx, store.UserScope("lp", "ana"))
	require.NoError(t, err)
	assert.Contains(t, got, id)
	ex, err := s.Export(ctx, store.UserScope("lp", "ana"))
	require.NoError(t, err)
	assert.NotEmpty(t, ex.Identities)
	require.NoError(t, s.Forget(ctx, id))
	require.NoError(t, layer.Append(ctx, id, human("again")))
	n, err = s.ForgetScope(ctx, store.UserScope("lp", "ana"))
	require.NoError(t, err)
	assert.Positive(t, n)
}
