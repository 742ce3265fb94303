package sqlitestore_test

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
)

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return sha256.Sum256(raw)
}

// TestReadOnly: WithReadOnly reads a file of the current schema and
// writes nothing to it — no namespace is registered, every write fails —
// and refuses, leaving them as they were, a missing file, a file without
// memstack's tables and one of an older schema version.
func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	path := filepath.Join(dir, "memory.db")
	w, err := sqlitestore.Open(ctx, path, sqlitestore.WithNamespace("buffer"))
	require.NoError(t, err)
	require.NoError(t, w.Append(ctx, alice, llms.HumanChatMessage{Content: "hello"}))
	require.NoError(t, w.Close())
	before := fileHash(t, path)

	s, err := sqlitestore.Open(ctx, path, sqlitestore.WithReadOnly(), sqlitestore.WithNamespace("buffer"))
	require.NoError(t, err)
	recs, err := s.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"hello"}, contents(recs))
	ids, err := s.Identities(ctx, store.TenantScope("acme"))
	require.NoError(t, err)
	assert.Len(t, ids, 1)
	ex, err := s.Export(ctx, store.UserScope("acme", "alice"))
	require.NoError(t, err)
	assert.Len(t, ex.Identities, 1)
	assert.ErrorContains(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: "more"}), "readonly")
	_, err = s.ForgetScope(ctx, store.TenantScope("acme"))
	assert.ErrorContains(t, err, "readonly")
	require.NoError(t, s.Close())
	d, err := sqlitestore.Open(ctx, path, sqlitestore.WithReadOnly()) // namespace "default": not registered
	require.NoError(t, err)
	require.NoError(t, d.Close())
	assert.Equal(t, before, fileHash(t, path), "the database file is unchanged")
	var nss string
	require.NoError(t, rawDB(t, path).QueryRowContext(ctx, `SELECT group_concat(ns) FROM memstack_namespaces`).Scan(&nss))
	assert.Equal(t, "buffer", nss)

	missing := filepath.Join(dir, "missing.db")
	_, err = sqlitestore.Open(ctx, missing, sqlitestore.WithReadOnly())
	require.Error(t, err)
	_, statErr := os.Stat(missing)
	assert.True(t, os.IsNotExist(statErr), "the file is not created")

	foreign := filepath.Join(dir, "app.db")
	db := rawDB(t, foreign)
	_, err = db.ExecContext(ctx, `CREATE TABLE notes (body TEXT)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	before = fileHash(t, foreign)
	_, err = sqlitestore.Open(ctx, foreign, sqlitestore.WithReadOnly())
	assert.ErrorContains(t, err, "no memstack tables in the file")
	assert.Equal(t, before, fileHash(t, foreign))

	old := filepath.Join(dir, "v1.db")
	writeV1(t, old)
	before = fileHash(t, old)
	_, err = sqlitestore.Open(ctx, old, sqlitestore.WithReadOnly())
	assert.ErrorContains(t, err, "schema version 1, and a read-only Store reads only version 4")
	assert.Equal(t, before, fileHash(t, old), "an old file is not migrated")

	_, err = sqlitestore.New(rawDB(t, path), sqlitestore.WithReadOnly())
	assert.ErrorIs(t, err, store.ErrInvalidArgument, "WithReadOnly is for Open")
}
