package tinymodel_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/internal/tinymodel"
)

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestWriteIsStable(t *testing.T) {
	var a, b bytes.Buffer
	require.NoError(t, tinymodel.Write(&a))
	require.NoError(t, tinymodel.Write(&b))

	assert.Equal(t, tinymodel.Size, a.Len(), "size")
	assert.Equal(t, tinymodel.SHA256, digest(a.Bytes()), "sha256")
	assert.True(t, bytes.Equal(a.Bytes(), b.Bytes()), "two writes differ")
	assert.True(t, bytes.Equal(a.Bytes(), tinymodel.Bytes()), "Bytes differs from Write")

	// GGUF v3 header: magic, version, 21 tensors, 25 metadata entries.
	hdr := a.Bytes()[:24]
	assert.Equal(t, "GGUF", string(hdr[:4]))
	assert.Equal(t, uint32(3), binary.LittleEndian.Uint32(hdr[4:]))
	assert.Equal(t, uint64(21), binary.LittleEndian.Uint64(hdr[8:]))
	assert.Equal(t, uint64(25), binary.LittleEndian.Uint64(hdr[16:]))
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, os.WriteFile(path, []byte("stale content that must be replaced"), 0o644))
	require.NoError(t, tinymodel.WriteFile(path))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Len(t, data, tinymodel.Size)
	assert.Equal(t, tinymodel.SHA256, digest(data))
}

func TestWriteFileBadPath(t *testing.T) {
	err := tinymodel.WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir", "tiny.gguf"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tinymodel: creating model file")
}

// failAfter accepts n bytes, then fails every write.
type failAfter struct{ n int }

var errFull = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errFull
	}
	f.n -= len(p)
	return len(p), nil
}

func TestWriteReportsWriterErrors(t *testing.T) {
	for _, n := range []int{0, 3, 100, 20000, tinymodel.Size - 1} {
		err := tinymodel.Write(&failAfter{n: n})
		require.Error(t, err, "writer failing after %d bytes", n)
		assert.ErrorIs(t, err, errFull)
	}
}
