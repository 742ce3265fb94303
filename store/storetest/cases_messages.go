package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

func testAppendKeepsOrder(t *testing.T, e *env) {
	s := e.store()
	mustAppend(t, s, alice, system("sys"))
	mustAppend(t, s, alice, human("h1"), ai("a1"))
	mustAppend(t, s, alice, human("h2"), ai("a2"), human("h3"))
	rs := mustAll(t, s, alice)
	assert.Equal(t, []string{"sys", "h1", "a1", "h2", "a2", "h3"}, contentsOf(rs))
	assert.Equal(t, []llms.ChatMessage{system("sys"), human("h1"), ai("a1"), human("h2"), ai("a2"), human("h3")}, messagesOf(rs))
	requireIncreasing(t, seqsOf(rs))
}

func testAppendNothing(t *testing.T, e *env) {
	s := e.store()
	require.NoError(t, s.Append(e.ctx, alice))
	assert.Equal(t, store.Stat{}, mustStat(t, s, alice))
	mustAppend(t, s, alice, human("h"))
	before := mustAll(t, s, alice)
	require.NoError(t, s.Append(e.ctx, alice))
	assert.Equal(t, before, mustAll(t, s, alice))
}

func testAppendTurnIsAtomic(t *testing.T, e *env) {
	s := e.store()
	var nilAI *llms.AIChatMessage
	bad := []struct {
		name string
		msgs []llms.ChatMessage
	}{
		{"nil in the middle", []llms.ChatMessage{human("x1"), nil, ai("x2")}},
		{"nil last", []llms.ChatMessage{human("x1"), ai("x2"), nil}},
		{"nil first", []llms.ChatMessage{nil, human("x1")}},
		{"typed nil pointer in the middle", []llms.ChatMessage{human("x1"), nilAI, ai("x2")}},
	}
	for _, b := range bad {
		t.Run("empty conversation/"+b.name, func(t *testing.T) {
			err := s.Append(e.ctx, bob, b.msgs...)
			require.Error(t, err)
			assert.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Empty(t, mustAll(t, s, bob), "a failed Append must store nothing")
			assert.Equal(t, store.Stat{}, mustStat(t, s, bob))
		})
	}
	mustAppend(t, s, alice, human("h1"), ai("a1"))
	before := mustAll(t, s, alice)
	for _, b := range bad {
		t.Run("after a turn/"+b.name, func(t *testing.T) {
			err := s.Append(e.ctx, alice, b.msgs...)
			require.Error(t, err)
			assert.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Equal(t, before, mustAll(t, s, alice), "a failed Append must store nothing")
			assert.Equal(t, statOf(before), mustStat(t, s, alice))
		})
	}
	// The store still works afterwards.
	mustAppend(t, s, alice, human("h2"), ai("a2"))
	assert.Equal(t, []string{"h1", "a1", "h2", "a2"}, contentsOf(mustAll(t, s, alice)))
}

func testSeqStrictlyIncreasing(t *testing.T, e *env) {
	s := e.store()
	for i := range 10 {
		mustAppend(t, s, alice, human(fmt.Sprint("h", i)), ai(fmt.Sprint("a", i)))
		mustAppend(t, s, bob, human(fmt.Sprint("b", i)))
	}
	rs := mustAll(t, s, alice)
	require.Len(t, rs, 20)
	requireIncreasing(t, seqsOf(rs))
	for _, r := range rs {
		assert.Positive(t, r.Seq, "Seqs are positive (0 means none in Stat)")
	}
	requireIncreasing(t, seqsOf(mustAll(t, s, bob)))
}

func testLast(t *testing.T, e *env) {
	s := e.store()
	rs, err := s.Last(e.ctx, alice, 3)
	require.NoError(t, err)
	assert.Empty(t, rs, "Last of an unknown identity")

	mustAppend(t, s, alice, system("sys"), human("h1"), ai("a1"))
	mustAppend(t, s, alice, human("h2"), ai("a2"))
	all := mustAll(t, s, alice)
	require.Len(t, all, 5)
	for _, n := range []int{1, 2, 4, 5, 6, 1000} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			got, err := s.Last(e.ctx, alice, n)
			require.NoError(t, err)
			want := all[max(len(all)-n, 0):]
			assert.Equal(t, want, got, "Last(%d) is the newest %d of All, oldest first", n, n)
		})
	}
}

func testLastRejectsN(t *testing.T, e *env) {
	s := e.store()
	mustAppend(t, s, alice, human("h"))
	for _, n := range []int{0, -1, -1 << 31} {
		rs, err := s.Last(e.ctx, alice, n)
		require.Error(t, err, "Last(n=%d)", n)
		assert.ErrorIs(t, err, store.ErrInvalidArgument, "Last(n=%d)", n)
		assert.Empty(t, rs)
	}
}

func testAll(t *testing.T, e *env) {
	s := e.store()
	assert.Empty(t, mustAll(t, s, alice), "All of an unknown identity")
	want := []llms.ChatMessage{system("sys")}
	mustAppend(t, s, alice, want...)
	for i := range 25 {
		turn := []llms.ChatMessage{human(fmt.Sprint("h", i)), ai(fmt.Sprint("a", i))}
		mustAppend(t, s, alice, turn...)
		want = append(want, turn...)
	}
	rs := mustAll(t, s, alice)
	assert.Equal(t, want, messagesOf(rs))
	requireIncreasing(t, seqsOf(rs))
}

func testStat(t *testing.T, e *env) {
	s := e.store()
	assert.Equal(t, store.Stat{}, mustStat(t, s, alice), "Stat of an unknown identity")
	mustAppend(t, s, alice, human("h1"))
	rs := mustAll(t, s, alice)
	assert.Equal(t, store.Stat{Count: 1, FirstSeq: rs[0].Seq, LastSeq: rs[0].Seq}, mustStat(t, s, alice))
	mustAppend(t, s, alice, ai("a1"), human("h2"))
	mustAppend(t, s, bob, human("other"))
	rs = mustAll(t, s, alice)
	st := mustStat(t, s, alice)
	assert.Equal(t, statOf(rs), st)
	assert.Equal(t, 3, st.Count)
	assert.Equal(t, store.Stat{}, mustStat(t, s, memstack.Identity{User: "nobody"}))
}

func testRemovePrefix(t *testing.T, e *env) {
	s := e.store()
	n, err := s.RemovePrefix(e.ctx, alice, 1<<40)
	require.NoError(t, err, "RemovePrefix of an unknown identity")
	assert.Zero(t, n)

	mustAppend(t, s, alice, human("h1"), ai("a1"))
	mustAppend(t, s, alice, human("h2"), ai("a2"))
	mustAppend(t, s, alice, human("h3"), ai("a3"))
	mustAppend(t, s, bob, human("b1"), ai("b2"))
	all := mustAll(t, s, alice)
	bobBefore := mustAll(t, s, bob)

	n, err = s.RemovePrefix(e.ctx, alice, all[0].Seq-1)
	require.NoError(t, err)
	assert.Zero(t, n, "through below the first Seq removes nothing")
	assert.Equal(t, all, mustAll(t, s, alice))

	n, err = s.RemovePrefix(e.ctx, alice, all[1].Seq)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, all[2:], mustAll(t, s, alice), "the kept messages keep their Seqs")
	assert.Equal(t, statOf(all[2:]), mustStat(t, s, alice))

	// A through between two Seqs removes the messages at or below it.
	n, err = s.RemovePrefix(e.ctx, alice, all[3].Seq)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, all[4:], mustAll(t, s, alice))

	n, err = s.RemovePrefix(e.ctx, alice, all[3].Seq)
	require.NoError(t, err)
	assert.Zero(t, n, "repeating a RemovePrefix removes nothing")

	n, err = s.RemovePrefix(e.ctx, alice, all[5].Seq+1000)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Empty(t, mustAll(t, s, alice))
	assert.Equal(t, store.Stat{}, mustStat(t, s, alice))

	assert.Equal(t, bobBefore, mustAll(t, s, bob), "RemovePrefix touches one identity only")
}

func testRemovePrefixPinsSystem(t *testing.T, e *env) {
	s := e.store()
	mustAppend(t, s, alice, system("sys1"))
	mustAppend(t, s, alice, human("h1"), ai("a1"))
	mustAppend(t, s, alice, system("sys2"), human("h2"), ai("a2"))
	mustAppend(t, s, alice, human("h3"), ai("a3"))
	all := mustAll(t, s, alice)
	require.Len(t, all, 8)

	n, err := s.RemovePrefix(e.ctx, alice, all[5].Seq) // through a2
	require.NoError(t, err)
	assert.Equal(t, 4, n, "h1, a1, h2 and a2 go; sys1 and sys2 stay")
	want := []store.Record{all[0], all[3], all[6], all[7]}
	assert.Equal(t, want, mustAll(t, s, alice))
	assert.Equal(t, statOf(want), mustStat(t, s, alice))
	last, err := s.Last(e.ctx, alice, 3)
	require.NoError(t, err)
	assert.Equal(t, want[1:], last)

	n, err = s.RemovePrefix(e.ctx, alice, 1<<62)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, []store.Record{all[0], all[3]}, mustAll(t, s, alice), "system messages are pinned")

	n, err = s.RemovePrefix(e.ctx, alice, 1<<62)
	require.NoError(t, err)
	assert.Zero(t, n)
}

func testSeqsNeverReused(t *testing.T, e *env) {
	s := e.store()
	seen := map[int64]bool{}
	var last int64
	appendAndCheck := func(what string) {
		t.Helper()
		mustAppend(t, s, alice, human(what), ai(what))
		rs, err := s.Last(e.ctx, alice, 2)
		require.NoError(t, err)
		require.Len(t, rs, 2)
		for _, r := range rs {
			assert.False(t, seen[r.Seq], "Seq %d handed out twice (%s)", r.Seq, what)
			assert.Greater(t, r.Seq, last, "Seqs increase in append order (%s)", what)
			seen[r.Seq] = true
			last = r.Seq
		}
	}
	appendAndCheck("first")
	_, err := s.RemovePrefix(e.ctx, alice, last)
	require.NoError(t, err)
	appendAndCheck("after RemovePrefix")
	require.NoError(t, s.Clear(e.ctx, alice))
	appendAndCheck("after Clear")
	require.NoError(t, s.Forget(e.ctx, alice))
	appendAndCheck("after Forget")
	require.NoError(t, s.Forget(e.ctx, alice))
	appendAndCheck("after a second Forget")
}
