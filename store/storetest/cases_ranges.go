package storetest

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// testReadRanges: a store.RangeReader's ReadRanges returns, for each range
// in order, exactly the messages All shows whose Seq lies in it — system
// messages included, across a removed prefix, open-ended, empty, of an
// identity never written, of the same identity twice, of adversarial
// identities, never a look-alike's in another namespace; no ranges is no
// answer, and a done context is an error.
func testReadRanges(t *testing.T, e *env) {
	s := e.store()
	rr := optional[store.RangeReader](t, s, "store.RangeReader")
	mustAppend(t, s, alice, system("sys"), human("h1"), ai("a1"))
	mustAppend(t, s, bob, human("b1"))
	mustAppend(t, s, alice, human("h2"), ai("a2"), human("h3"), ai("a3"))
	mustAppend(t, s, bob, human("b2"), ai("b3"))
	a := mustAll(t, s, alice)
	_, err := s.RemovePrefix(e.ctx, alice, a[2].Seq) // h1 and a1 go, sys stays
	require.NoError(t, err)
	a = mustAll(t, s, alice)
	require.Len(t, a, 5)
	b := mustAll(t, s, bob)
	if other, ok := e.secondNamespace(); ok {
		mustAppend(t, other, alice, human("alice in another namespace"))
	}
	ids := adversarialIdentities()
	for _, id := range ids {
		mustAppend(t, s, id, human("x"), ai("y"))
	}
	nobody := memstack.Identity{User: "nobody"}
	ranges := []store.SeqRange{
		{ID: alice, From: a[0].Seq, To: math.MaxInt64},    // everything
		{ID: alice, From: a[2].Seq, To: a[4].Seq},         // two, end excluded
		{ID: bob, From: b[1].Seq, To: b[1].Seq + 1},       // one
		{ID: alice, From: a[3].Seq, To: a[3].Seq},         // empty
		{ID: alice, From: a[4].Seq, To: a[1].Seq},         // backwards: empty
		{ID: nobody, From: 0, To: math.MaxInt64},          // never written
		{ID: bob, From: math.MinInt64, To: math.MaxInt64}, // all of bob's
	}
	for _, id := range ids {
		ranges = append(ranges, store.SeqRange{ID: id, From: 0, To: math.MaxInt64})
	}
	got, err := rr.ReadRanges(e.ctx, ranges)
	require.NoError(t, err)
	require.Len(t, got, len(ranges))
	for i, r := range ranges {
		var want []store.Record
		for _, rec := range mustAll(t, s, r.ID) {
			if rec.Seq >= r.From && rec.Seq < r.To {
				want = append(want, rec)
			}
		}
		assertSameRecords(t, want, got[i], "range %d: %q [%d, %d)", i, r.ID.Key(), r.From, r.To)
	}
	assert.Len(t, got[0], 5, "the system message and the four kept")
	assert.Len(t, got[1], 2)
	assert.Empty(t, got[3])
	assert.Empty(t, got[5])
	assert.Len(t, got[6], 3)

	none, err := rr.ReadRanges(e.ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, none)

	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err = rr.ReadRanges(ctx, ranges[:2])
	require.ErrorIs(t, err, context.Canceled)
}

// assertSameRecords checks that got holds the records of want (an empty
// answer may be nil or empty).
func assertSameRecords(t *testing.T, want, got []store.Record, msgAndArgs ...any) {
	t.Helper()
	if len(want) == 0 {
		assert.Empty(t, got, msgAndArgs...)
		return
	}
	assert.Equal(t, want, got, msgAndArgs...)
}
