package storetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/store"
)

func testStateAbsent(t *testing.T, e *env) {
	s := e.store()
	assertAbsent(t, mustGet(t, s, alice, "summary"), "unknown identity")
	mustAppend(t, s, alice, human("h"))
	mustCreate(t, s, alice, "facts", []byte("x"))
	assertAbsent(t, mustGet(t, s, alice, "summary"), "known identity, unknown name")
}

func testStateCAS(t *testing.T, e *env) {
	s := e.store()
	v1 := mustCreate(t, s, alice, "summary", []byte("one"))
	assert.Positive(t, v1)
	assert.Equal(t, store.State{Value: []byte("one"), Version: v1}, mustGet(t, s, alice, "summary"))

	conflicts := []struct {
		name   string
		expect int64
	}{
		{"expect 0 for an existing value", 0},
		{"a version never handed out", v1 + 1000},
		{"a negative version", -1},
	}
	for _, c := range conflicts {
		_, err := s.PutState(e.ctx, alice, "summary", []byte("lost"), c.expect)
		require.Error(t, err, c.name)
		assert.ErrorIs(t, err, store.ErrConflict, c.name)
		assert.Equal(t, store.State{Value: []byte("one"), Version: v1}, mustGet(t, s, alice, "summary"), "a conflict stores nothing (%s)", c.name)
	}

	v2 := mustPut(t, s, alice, "summary", []byte("two"), v1)
	assert.NotEqual(t, v1, v2)
	assert.Positive(t, v2)
	assert.Equal(t, store.State{Value: []byte("two"), Version: v2}, mustGet(t, s, alice, "summary"))

	_, err := s.PutState(e.ctx, alice, "summary", []byte("stale"), v1)
	assert.ErrorIs(t, err, store.ErrConflict, "the previous version is stale")
	assert.Equal(t, store.State{Value: []byte("two"), Version: v2}, mustGet(t, s, alice, "summary"))

	_, err = s.PutState(e.ctx, alice, "absent", []byte("x"), v2)
	assert.ErrorIs(t, err, store.ErrConflict, "a non-zero expect for an absent value")
	assertAbsent(t, mustGet(t, s, alice, "absent"))

	// An empty, non-nil value is a value, not a delete.
	v3 := mustPut(t, s, alice, "summary", []byte{}, v2)
	st := mustGet(t, s, alice, "summary")
	assert.Equal(t, v3, st.Version)
	assert.Empty(t, st.Value)
}

func testStateDelete(t *testing.T, e *env) {
	s := e.store()
	v1 := mustCreate(t, s, alice, "summary", []byte("one"))

	_, err := s.PutState(e.ctx, alice, "summary", nil, v1+1000)
	assert.ErrorIs(t, err, store.ErrConflict, "a delete is a compare-and-set too")
	assert.Equal(t, store.State{Value: []byte("one"), Version: v1}, mustGet(t, s, alice, "summary"))

	absent, err := s.PutState(e.ctx, alice, "summary", nil, v1)
	require.NoError(t, err)
	gone := mustGet(t, s, alice, "summary")
	assertAbsent(t, gone, "a nil value deletes")
	assert.Equal(t, gone.Version, absent, "a delete returns the absent version the name has afterwards")

	_, err = s.PutState(e.ctx, alice, "summary", []byte("stale"), v1)
	assert.ErrorIs(t, err, store.ErrConflict, "a version from before the delete must conflict")
	assertAbsent(t, mustGet(t, s, alice, "summary"))

	v2 := mustCreate(t, s, alice, "summary", []byte("again"))
	assert.NotEqual(t, v1, v2)
	assert.Equal(t, store.State{Value: []byte("again"), Version: v2}, mustGet(t, s, alice, "summary"))
}

func testStateVersionsNeverReused(t *testing.T, e *env) {
	s := e.store()
	seen := map[int64]string{}
	record := func(v int64, what string) {
		t.Helper()
		if prev, ok := seen[v]; ok {
			assert.Failf(t, "state version reused", "version %d handed out for %q and again for %q", v, prev, what)
		}
		seen[v] = what
	}
	v := mustCreate(t, s, alice, "summary", []byte("1"))
	record(v, "create")
	v = mustPut(t, s, alice, "summary", []byte("2"), v)
	record(v, "update")
	_, err := s.PutState(e.ctx, alice, "summary", nil, v)
	require.NoError(t, err)
	v = mustCreate(t, s, alice, "summary", []byte("3"))
	record(v, "create after delete")
	record(mustCreate(t, s, alice, "other", []byte("x")), "another name")
	record(mustCreate(t, s, bob, "summary", []byte("x")), "another identity")
	require.NoError(t, s.Clear(e.ctx, alice))
	v = mustCreate(t, s, alice, "summary", []byte("4"))
	record(v, "create after Clear")
	require.NoError(t, s.Forget(e.ctx, alice))
	for _, old := range []int64{v} {
		_, err := s.PutState(e.ctx, alice, "summary", []byte("stale"), old)
		assert.ErrorIs(t, err, store.ErrConflict)
	}
	record(mustCreate(t, s, alice, "summary", []byte("5")), "create after Forget")
}

func testStateBytes(t *testing.T, e *env) {
	s := e.store()
	values := map[string][]byte{
		"binary":       {0x00, 0xff, 0xfe, 0x80, 0x00, '\n', '\'', '"', '\\'},
		"invalid-utf8": []byte("a\xc0\xafb"),
		"json":         []byte(`{"summary":"…","covers":42}`),
		"large":        []byte(strings.Repeat("0123456789abcdef\x00", 64<<10)),
		"one-nul":      {0},
	}
	versions := map[string]int64{}
	for name, v := range values {
		versions[name] = mustCreate(t, s, alice, name, v)
	}
	for name, v := range values {
		got := mustGet(t, s, alice, name)
		assert.Equal(t, versions[name], got.Version, name)
		assert.True(t, string(v) == string(got.Value), "state %q: %d bytes stored, %d read back or content differs", name, len(v), len(got.Value))
	}
	// The caller's slices are not kept, and the returned ones are copies.
	buf := []byte("original")
	v := mustCreate(t, s, alice, "copy", buf)
	copy(buf, "CHANGED!")
	got := mustGet(t, s, alice, "copy")
	assert.Equal(t, store.State{Value: []byte("original"), Version: v}, got)
	got.Value[0] = 'X'
	assert.Equal(t, store.State{Value: []byte("original"), Version: v}, mustGet(t, s, alice, "copy"))
}

func testStateNames(t *testing.T, e *env) {
	s := e.store()
	bad := []string{"", " ", "a b", "tab\t", "new\nline", "nul\x00", "é", "\x7f", strings.Repeat("n", 201)}
	for _, name := range bad {
		_, err := s.GetState(e.ctx, alice, name)
		assert.ErrorIs(t, err, store.ErrInvalidArgument, "GetState(%q)", name)
		_, err = s.PutState(e.ctx, alice, name, []byte("x"), 0)
		assert.ErrorIs(t, err, store.ErrInvalidArgument, "PutState(%q)", name)
	}
	good := []string{"a", "summary", "!", "~", "a:b", "*", "{x}", "%", "_", "a/b", strings.Repeat("n", 200), "';DROP-TABLE-x;--"}
	versions := map[string]int64{}
	for _, name := range good {
		versions[name] = mustCreate(t, s, alice, name, []byte("value of "+name))
	}
	for _, name := range good {
		assert.Equal(t, store.State{Value: []byte("value of " + name), Version: versions[name]}, mustGet(t, s, alice, name), "state %q", name)
	}
	assertAbsent(t, mustGet(t, s, alice, "a%"), "names are not patterns")
	assertAbsent(t, mustGet(t, s, alice, "A"), "names are case-sensitive")
}

func testStateIsolated(t *testing.T, e *env) {
	s := e.store()
	va := mustCreate(t, s, alice, "summary", []byte("alice"))
	assertAbsent(t, mustGet(t, s, bob, "summary"))
	_, err := s.PutState(e.ctx, bob, "summary", []byte("bob"), va)
	assert.ErrorIs(t, err, store.ErrConflict, "another identity's version is not this one's")
	vb := mustCreate(t, s, bob, "summary", []byte("bob"))
	assert.Equal(t, store.State{Value: []byte("alice"), Version: va}, mustGet(t, s, alice, "summary"))
	assert.Equal(t, store.State{Value: []byte("bob"), Version: vb}, mustGet(t, s, bob, "summary"))

	_, err = s.PutState(e.ctx, alice, "summary", nil, va)
	require.NoError(t, err)
	assert.Equal(t, store.State{Value: []byte("bob"), Version: vb}, mustGet(t, s, bob, "summary"))
}
