package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// testCase is one expectation of the contract.
type testCase struct {
	name string
	run  func(t *testing.T, e *env)
}

// cases is the suite, in the order Run runs it.
var cases = []testCase{
	{"AppendKeepsOrder", testAppendKeepsOrder},
	{"AppendNothingIsNoop", testAppendNothing},
	{"AppendTurnIsAtomic", testAppendTurnIsAtomic},
	{"SeqStrictlyIncreasing", testSeqStrictlyIncreasing},
	{"Last", testLast},
	{"LastRejectsNBelowOne", testLastRejectsN},
	{"TailIsSystemPlusNewest", testTail},
	{"TailAfterRemovePrefix", testTailAfterRemovePrefix},
	{"TailRejectsNBelowOne", testTailRejectsN},
	{"TailNeverShowsHalfATurn", testTailWholeTurns},
	{"AppendKeyStoresOnce", testAppendKeyOnce},
	{"AppendKeyRacingStoresOnce", testAppendKeyRacing},
	{"AppendKeyValidated", testAppendKeyValidated},
	{"All", testAll},
	{"Stat", testStat},
	{"RemovePrefix", testRemovePrefix},
	{"RemovePrefixPinsSystemMessages", testRemovePrefixPinsSystem},
	{"Clear", testClear},
	{"Forget", testForget},
	{"ClearVersusForgetAcrossNamespaces", testClearVersusForget},
	{"SeqsNeverReused", testSeqsNeverReused},
	{"StateAbsentIsZero", testStateAbsent},
	{"StateCompareAndSet", testStateCAS},
	{"StateDelete", testStateDelete},
	{"StateVersionsNeverReused", testStateVersionsNeverReused},
	{"ClearDefeatsEarlierCommits", testClearDefeatsCommits},
	{"ClearMarksOneIdentity", testClearMarksOneIdentity},
	{"ClearRacingCommitsLeavesNothingOlder", testClearRacingCommits},
	{"ForgetSparesOtherUsersCommits", testForgetSparesOthers},
	{"StateValuesAreBytes", testStateBytes},
	{"StateNamesValidated", testStateNames},
	{"StateIsolated", testStateIsolated},
	{"IdentitiesIsolated", testIdentitiesIsolated},
	{"ForgetAdversarialIdentities", testForgetAdversarial},
	{"MessageTypesRoundTrip", testMessageTypesRoundTrip},
	{"TextRoundTripsByteForByte", testTextRoundTrip},
	{"OneMegabyteMessage", testOneMegabyte},
	{"ReturnedMessagesAreCopies", testCopies},
	{"TimeFromContext", testTimeFromContext},
	{"TimeDefaultsToNow", testTimeDefaultsToNow},
	{"TimeSharedByTurn", testTimeSharedByTurn},
	{"TimeSurvivesRemovePrefix", testTimeSurvivesRemovePrefix},
	{"TimeUnstorable", testTimeUnstorable},
	{"ConcurrentWritersLoseNothing", testConcurrentWriters},
	{"TwoClientsLoseNothing", testTwoClients},
	{"TwoClientsStateCompareAndSet", testTwoClientsState},
	{"CancelledContext", testCancelledContext},
	{"CancelWhileInFlight", testCancelInFlight},
	{"Rewrite", testRewrite},
	{"RewriteIsAtomic", testRewriteAtomic},
	{"UsersIdentities", testUsersIdentities},
	{"UsersExport", testUsersExport},
	{"UsersForget", testUsersForget},
	{"SurvivesReopen", testSurvivesReopen},
	{"ClosedStoreReturnsErrors", testClosedStore},
}

// ---------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------

var (
	alice = memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob   = memstack.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
)

func human(s string) llms.ChatMessage  { return llms.HumanChatMessage{Content: s} }
func ai(s string) llms.ChatMessage     { return llms.AIChatMessage{Content: s} }
func system(s string) llms.ChatMessage { return llms.SystemChatMessage{Content: s} }

func messagesOf(rs []store.Record) []llms.ChatMessage {
	out := make([]llms.ChatMessage, len(rs))
	for i, r := range rs {
		out[i] = r.Message
	}
	return out
}

func contentsOf(rs []store.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Message.GetContent()
	}
	return out
}

func seqsOf(rs []store.Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

func requireIncreasing(t *testing.T, seqs []int64) {
	t.Helper()
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			require.Failf(t, "Seqs must increase strictly", "Seq %d at index %d follows Seq %d", seqs[i], i, seqs[i-1])
		}
	}
}

func mustAppend(t *testing.T, s store.Store, id memstack.Identity, msgs ...llms.ChatMessage) {
	t.Helper()
	require.NoError(t, s.Append(context.Background(), id, msgs...), "Append to %s", id)
}

func mustAll(t *testing.T, s store.Store, id memstack.Identity) []store.Record {
	t.Helper()
	rs, err := s.All(context.Background(), id)
	require.NoError(t, err, "All of %s", id)
	return rs
}

func mustStat(t *testing.T, s store.Store, id memstack.Identity) store.Stat {
	t.Helper()
	st, err := s.Stat(context.Background(), id)
	require.NoError(t, err, "Stat of %s", id)
	return st
}

func mustGet(t *testing.T, s store.Store, id memstack.Identity, name string) store.State {
	t.Helper()
	st, err := s.GetState(context.Background(), id, name)
	require.NoError(t, err, "GetState(%s, %q)", id, name)
	return st
}

// mustCreate stores value under a name that has none, expecting the
// absent version GetState reports, and returns the new version.
func mustCreate(t *testing.T, s store.Store, id memstack.Identity, name string, value []byte) int64 {
	t.Helper()
	st := mustGet(t, s, id, name)
	require.False(t, st.Exists(), "state %q of %s exists already", name, id)
	return mustPut(t, s, id, name, value, st.Version)
}

// assertAbsent checks that st holds no value.
func assertAbsent(t *testing.T, st store.State, msgAndArgs ...any) bool {
	t.Helper()
	return assert.Nil(t, st.Value, msgAndArgs...) && assert.False(t, st.Exists(), msgAndArgs...)
}

func mustPut(t *testing.T, s store.Store, id memstack.Identity, name string, value []byte, expect int64) int64 {
	t.Helper()
	v, err := s.PutState(context.Background(), id, name, value, expect)
	require.NoError(t, err, "PutState(%s, %q, expect %d)", id, name, expect)
	return v
}

// statOf is the Stat that All's records imply.
func statOf(rs []store.Record) store.Stat {
	if len(rs) == 0 {
		return store.Stat{}
	}
	return store.Stat{Count: len(rs), FirstSeq: rs[0].Seq, LastSeq: rs[len(rs)-1].Seq}
}

// requireSameString compares two long strings without printing them.
func requireSameString(t *testing.T, want, got, what string) {
	t.Helper()
	if want == got {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	require.Failf(t, what+" differs", "want %d bytes, got %d bytes; first difference at byte %d", len(want), len(got), i)
}

// ---------------------------------------------------------------------------
// Messages.
// ---------------------------------------------------------------------------

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

func testClear(t *testing.T, e *env) {
	s := e.store()
	require.NoError(t, s.Clear(e.ctx, alice), "Clear of an unknown identity")

	mustAppend(t, s, alice, system("sys"), human("h1"), ai("a1"))
	mustAppend(t, s, bob, system("bsys"), human("b1"))
	va := mustCreate(t, s, alice, "summary", []byte("alice summary"))
	vb := mustCreate(t, s, bob, "summary", []byte("bob summary"))
	bobAll := mustAll(t, s, bob)
	last := mustStat(t, s, alice).LastSeq

	require.NoError(t, s.Clear(e.ctx, alice))
	assert.Empty(t, mustAll(t, s, alice), "Clear removes every message, system ones included")
	assert.Equal(t, store.Stat{}, mustStat(t, s, alice))
	assertAbsent(t, mustGet(t, s, alice, "summary"), "Clear removes the identity's state")

	assert.Equal(t, bobAll, mustAll(t, s, bob), "Clear touches one identity only")
	assert.Equal(t, store.State{Value: []byte("bob summary"), Version: vb}, mustGet(t, s, bob, "summary"))

	_, err := s.PutState(e.ctx, alice, "summary", []byte("stale"), va)
	assert.ErrorIs(t, err, store.ErrConflict, "a version from before Clear must conflict")

	mustAppend(t, s, alice, human("h2"))
	rs := mustAll(t, s, alice)
	require.Len(t, rs, 1)
	assert.Greater(t, rs[0].Seq, last, "an append after Clear gets a Seq greater than any before")
}

func testForget(t *testing.T, e *env) {
	s := e.store()
	require.NoError(t, s.Forget(e.ctx, alice), "Forget of an unknown identity")

	other := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	mustAppend(t, s, alice, system("sys"), human("h1"), ai("a1"))
	mustAppend(t, s, bob, human("b1"), ai("b2"))
	mustAppend(t, s, other, human("o1"))
	va := mustCreate(t, s, alice, "summary", []byte("a"))
	mustCreate(t, s, alice, "facts", []byte("f"))
	vb := mustCreate(t, s, bob, "summary", []byte("b"))
	vo := mustCreate(t, s, other, "summary", []byte("o"))
	bobAll, otherAll := mustAll(t, s, bob), mustAll(t, s, other)
	last := mustStat(t, s, alice).LastSeq

	require.NoError(t, s.Forget(e.ctx, alice))
	assert.Empty(t, mustAll(t, s, alice))
	assert.Equal(t, store.Stat{}, mustStat(t, s, alice))
	assertAbsent(t, mustGet(t, s, alice, "summary"))
	assertAbsent(t, mustGet(t, s, alice, "facts"))

	assert.Equal(t, bobAll, mustAll(t, s, bob), "Forget touches one identity only")
	assert.Equal(t, otherAll, mustAll(t, s, other), "Forget touches one conversation only")
	assert.Equal(t, store.State{Value: []byte("b"), Version: vb}, mustGet(t, s, bob, "summary"))
	assert.Equal(t, store.State{Value: []byte("o"), Version: vo}, mustGet(t, s, other, "summary"))

	_, err := s.PutState(e.ctx, alice, "summary", []byte("stale"), va)
	assert.ErrorIs(t, err, store.ErrConflict, "a version from before Forget must conflict")
	assertAbsent(t, mustGet(t, s, alice, "summary"))

	mustAppend(t, s, alice, human("again"))
	rs := mustAll(t, s, alice)
	require.Len(t, rs, 1)
	assert.Greater(t, rs[0].Seq, last, "an append after Forget gets a Seq greater than any before")
	v := mustCreate(t, s, alice, "summary", []byte("new"))
	assert.NotEqual(t, va, v, "a version from before Forget is not handed out again")
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

// ---------------------------------------------------------------------------
// State.
// ---------------------------------------------------------------------------

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

// testClearDefeatsCommits is "cleared means gone": a compare-and-set that
// read the state before a Clear or Forget — on this client or another —
// conflicts after it, whether the value existed then or not (a first
// commit read the absent version).
func testClearDefeatsCommits(t *testing.T, e *env) {
	a, b := e.store(), e.store()
	ops := []struct {
		name string
		run  func(s store.Store, id memstack.Identity) error
	}{
		{"Clear", func(s store.Store, id memstack.Identity) error { return s.Clear(e.ctx, id) }},
		{"Forget", func(s store.Store, id memstack.Identity) error { return s.Forget(e.ctx, id) }},
	}
	n := 0
	for _, op := range ops {
		for _, existed := range []bool{false, true} {
			for _, other := range []bool{false, true} {
				name := fmt.Sprintf("%s/existed=%t/other client=%t", op.name, existed, other)
				n++
				// A fresh identity per case: one that no Clear has marked,
				// so a Forget that does not move the store-wide absent
				// version is caught.
				alice := memstack.Identity{Tenant: "acme", User: "alice", Conversation: fmt.Sprintf("defeat%d", n)}
				t.Run(name, func(t *testing.T) {
					state := "summary"
					mustAppend(t, a, alice, human("card 4111 1111 1111 1111"), ai("noted"))
					if existed {
						mustCreate(t, a, alice, state, []byte("before"))
					}
					read := mustGet(t, a, alice, state)
					require.Equal(t, existed, read.Exists())
					clearer := a
					if other {
						clearer = b
					}
					require.NoError(t, op.run(clearer, alice))

					after := mustGet(t, a, alice, state)
					assertAbsent(t, after, "%s removes the value", op.name)
					assert.NotEqual(t, read.Version, after.Version, "%s gives the absent value a version no reader had before", op.name)
					_, err := a.PutState(e.ctx, alice, state, []byte("the card 4111"), read.Version)
					assert.ErrorIs(t, err, store.ErrConflict, "a commit that read before %s must conflict after it", op.name)
					assertAbsent(t, mustGet(t, a, alice, state), "the conflicting commit stored nothing")
					assertAbsent(t, mustGet(t, b, alice, state), "the conflicting commit stored nothing (second client)")

					v := mustCreate(t, b, alice, state, []byte("after"))
					assert.Equal(t, store.State{Value: []byte("after"), Version: v}, mustGet(t, a, alice, state), "a commit that read after %s lands", op.name)
					require.NoError(t, a.Clear(e.ctx, alice))
				})
			}
		}
	}
}

// testClearMarksOneIdentity checks that a Clear does not fail another
// identity's commits: its absent version is its own.
func testClearMarksOneIdentity(t *testing.T, e *env) {
	s := e.store()
	mustAppend(t, s, alice, human("a"))
	mustAppend(t, s, bob, human("b"))
	bobRead := mustGet(t, s, bob, "summary")
	aliceRead := mustGet(t, s, alice, "summary")
	require.NoError(t, s.Clear(e.ctx, alice))
	v, err := s.PutState(e.ctx, bob, "summary", []byte("bob"), bobRead.Version)
	require.NoError(t, err, "Clear of one identity must not fail another identity's first commit")
	assert.Equal(t, store.State{Value: []byte("bob"), Version: v}, mustGet(t, s, bob, "summary"))
	_, err = s.PutState(e.ctx, alice, "summary", []byte("alice"), aliceRead.Version)
	assert.ErrorIs(t, err, store.ErrConflict)
}

// testForgetSparesOthers checks that a Forget of one user does not fail
// the first commits of other users (issue 17, item 5: with a forget every
// 100 ms, a new conversation's Summary never committed a fold): of eight
// first commits, each racing with a Forget of another user, at least
// seven land. (A backend may share an absent version among a few users,
// as memstack's do per storekit.ForgetBucket or per Redis Cluster slot; one
// that moves a store-wide version fails all eight.)
func testForgetSparesOthers(t *testing.T, e *env) {
	s := e.store()
	landed := 0
	for i := range 8 {
		id := memstack.Identity{Tenant: "acme", User: fmt.Sprintf("keeper%d", i), Conversation: "c"}
		other := memstack.Identity{Tenant: "acme", User: fmt.Sprintf("leaver%d", i), Conversation: "c"}
		mustAppend(t, s, other, human("forget me"))
		read := mustGet(t, s, id, "summary")
		require.NoError(t, s.Forget(e.ctx, other))
		if _, err := s.PutState(e.ctx, id, "summary", []byte("folded"), read.Version); err == nil {
			landed++
		} else {
			require.ErrorIs(t, err, store.ErrConflict)
		}
	}
	assert.GreaterOrEqual(t, landed, 7, "first commits racing with Forgets of other users land")
}

// testClearRacingCommits runs writers that read and commit in a loop,
// from two clients, while Clears (then Forgets) run: no commit whose read finished before
// a Clear began may succeed when it started after that Clear returned.
// Each writer has a state name of its own and every other commit waits
// for a Clear between its read and its write, so a store that lets a
// commit through a Clear (its absent version does not move, or Clear
// removes the state and moves it in two steps) fails it.
func testClearRacingCommits(t *testing.T, e *env) {
	for _, op := range []string{"Clear", "Forget"} {
		t.Run(op, func(t *testing.T) { racingCommits(t, e, op) })
	}
}

func racingCommits(t *testing.T, e *env, op string) {
	alice := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "race-" + op}
	clients := []store.Store{e.store(), e.store()}
	base := time.Now()
	now := func() int64 { return time.Since(base).Nanoseconds() }
	type commit struct{ readDone, putStart int64 }
	type span struct{ start, end int64 }
	var mu sync.Mutex
	var commits []commit
	var clearsDone atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		c := clients[w%2]
		name := fmt.Sprintf("race%d", w)
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				st, err := c.GetState(e.ctx, alice, name)
				if !assert.NoError(t, err) {
					return
				}
				done, seen := now(), clearsDone.Load()
				if i%2 == 0 {
					// A commit that spans a Clear.
					for clearsDone.Load() == seen {
						select {
						case <-stop:
							return
						case <-time.After(50 * time.Microsecond):
						}
					}
				}
				start := now()
				_, err = c.PutState(e.ctx, alice, name, []byte("v"), st.Version)
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				commits = append(commits, commit{done, start})
				mu.Unlock()
			}
		})
	}
	var clears []span
	for round := range 40 {
		time.Sleep(time.Millisecond)
		sp := span{start: now()}
		if op == "Clear" {
			require.NoError(t, clients[round%2].Clear(e.ctx, alice))
		} else {
			require.NoError(t, clients[round%2].Forget(e.ctx, alice))
		}
		sp.end = now()
		clearsDone.Add(1)
		clears = append(clears, sp)
	}
	close(stop)
	wg.Wait()
	require.NotEmpty(t, commits, "no commit succeeded: the test proves nothing")
	bad := 0
	for _, c := range commits {
		for _, sp := range clears {
			if c.readDone < sp.start && c.putStart > sp.end {
				bad++
				break
			}
		}
	}
	assert.Zero(t, bad, "%d of %d commits read before a Clear began, started after it returned, and still landed", bad, len(commits))
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

// ---------------------------------------------------------------------------
// Isolation.
// ---------------------------------------------------------------------------

// longPart is 10 KB of varied text (ASCII and multibyte), so it neither
// compresses away nor fits a size-limited index.
func longPart() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:/*{}%_ éß中🙂"
	runes := []rune(alphabet)
	var b strings.Builder
	x := uint32(2463534242)
	for b.Len() < 10<<10 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteRune(runes[x%uint32(len(runes))])
	}
	return b.String()
}

// adversarialIdentities are identities a naive key scheme confuses.
func adversarialIdentities() []memstack.Identity {
	long := longPart()
	return []memstack.Identity{
		{},
		{Tenant: "a:b"},
		{Tenant: "a", User: "b"},
		{Tenant: "a:", User: "b"},
		{Tenant: "a", User: "", Conversation: "b"},
		{Tenant: "", User: "a", Conversation: "b"},
		{Tenant: "a:b:c"},
		{Tenant: "a", User: "b", Conversation: "c"},
		{Tenant: "a/b", User: "c"},
		{Tenant: "a", User: "b/c"},
		{Tenant: "a%3Ab"},
		{Tenant: "%"},
		{Tenant: "%%"},
		{Tenant: "*"},
		{Tenant: "?"},
		{Tenant: "[a]"},
		{Tenant: "{x}"},
		{Tenant: "{x"},
		{Tenant: "_"},
		{Tenant: "\\"},
		{Tenant: "a"},
		{Tenant: "ab"},
		{Tenant: "A"},
		{User: "a"},
		{User: "ab"},
		{User: "a\x00b"},
		{User: "a\nb"},
		{User: " "},
		{User: "'; DROP TABLE messages; --"},
		{User: "用户", Conversation: "会话"},
		{User: "é"},
		{User: "e\u0301"},
		{Conversation: "🙂"},
		{Tenant: long},
		{Tenant: long[:len(long)-1] + "!"},
		{User: long, Conversation: long},
	}
}

func testIdentitiesIsolated(t *testing.T, e *env) {
	s := e.store()
	ids := adversarialIdentities()
	seen := map[memstack.Identity]int{}
	for i, id := range ids {
		j, dup := seen[id]
		require.False(t, dup, "kit bug: identities %d and %d are the same", j, i)
		seen[id] = i
	}
	for i, id := range ids {
		mustAppend(t, s, id, human(fmt.Sprintf("human %d", i)), ai(fmt.Sprintf("ai %d", i)))
		mustCreate(t, s, id, "summary", []byte(fmt.Sprint("state ", i)))
	}
	check := func(when string, gone map[int]bool) {
		t.Helper()
		for i, id := range ids {
			rs := mustAll(t, s, id)
			st := mustGet(t, s, id, "summary")
			if gone[i] {
				assert.Empty(t, rs, "%s: identity %d (%.60s)", when, i, id.Key())
				assertAbsent(t, st, "%s: identity %d (%.60s)", when, i, id.Key())
				continue
			}
			assert.Equal(t, []string{fmt.Sprintf("human %d", i), fmt.Sprintf("ai %d", i)}, contentsOf(rs),
				"%s: identity %d (%.60s) sees only its own messages", when, i, id.Key())
			assert.Equal(t, fmt.Sprint("state ", i), string(st.Value), "%s: identity %d (%.60s) state", when, i, id.Key())
			assert.Equal(t, 2, mustStat(t, s, id).Count, "%s: identity %d (%.60s)", when, i, id.Key())
		}
	}
	check("after appending", nil)

	// Clear, RemovePrefix and Forget of one identity touch no other.
	gone := map[int]bool{}
	for _, i := range []int{1, 13, 20, 23} { // "a:b", "*", "a", User "a"
		require.NoError(t, s.Clear(e.ctx, ids[i]))
		gone[i] = true
		check(fmt.Sprintf("after Clear of identity %d", i), gone)
	}
	for _, i := range []int{0, 11, 18, 33} { // zero, "%", "_", long
		rs := mustAll(t, s, ids[i])
		n, err := s.RemovePrefix(e.ctx, ids[i], rs[len(rs)-1].Seq)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		mustAppend(t, s, ids[i], human(fmt.Sprintf("human %d", i)), ai(fmt.Sprintf("ai %d", i)))
		check(fmt.Sprintf("after RemovePrefix of identity %d", i), gone)
	}
}

func testForgetAdversarial(t *testing.T, e *env) {
	s := e.store()
	ids := adversarialIdentities()
	for i, id := range ids {
		mustAppend(t, s, id, human(fmt.Sprint("m", i)))
		mustCreate(t, s, id, "summary", []byte(fmt.Sprint("s", i)))
	}
	gone := map[int]bool{}
	// Identities whose key looks like a pattern or a prefix of another's
	// go first: "*", "?", "[a]", "%", "_", "\\", "a", User "a", zero.
	for _, i := range []int{13, 14, 15, 11, 18, 19, 20, 23, 0, 1, 33} {
		require.NoError(t, s.Forget(e.ctx, ids[i]))
		gone[i] = true
		for j, id := range ids {
			rs := mustAll(t, s, id)
			st := mustGet(t, s, id, "summary")
			if gone[j] {
				assert.Empty(t, rs, "identity %d after Forget of %d", j, i)
				assertAbsent(t, st, "identity %d after Forget of %d", j, i)
			} else {
				assert.Equal(t, []string{fmt.Sprint("m", j)}, contentsOf(rs), "Forget of identity %d (%.60s) touched identity %d (%.60s)", i, ids[i].Key(), j, id.Key())
				assert.Equal(t, fmt.Sprint("s", j), string(st.Value), "Forget of identity %d touched the state of identity %d", i, j)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Round trips.
// ---------------------------------------------------------------------------

func testMessageTypesRoundTrip(t *testing.T, e *env) {
	s := e.store()
	msgs := []llms.ChatMessage{
		llms.SystemChatMessage{Content: "You are terse."},
		llms.HumanChatMessage{Content: "What is 6*7? Look it up."},
		llms.AIChatMessage{
			Content:      "Let me check.",
			FunctionCall: &llms.FunctionCall{Name: "legacy_calc", Arguments: `{"e":"6*7"}`},
			ToolCalls: []llms.ToolCall{
				{ID: "call_1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "calc", Arguments: `{"e":"6*7"}`}},
				{ID: "call_2", Type: "function", FunctionCall: &llms.FunctionCall{Name: "search", Arguments: `{"q":"42"}`}},
				{ID: "call_3", Type: "function"},
			},
			ReasoningContent: "The user wants arithmetic.",
		},
		llms.ToolChatMessage{ID: "call_1", Content: "42"},
		llms.FunctionChatMessage{Name: "legacy_calc", Content: `{"result":42}`},
		llms.GenericChatMessage{Role: "critic", Name: "reviewer-1", Content: "Looks right."},
		llms.AIChatMessage{Content: "42."},
		llms.AIChatMessage{Content: "empty calls", ToolCalls: []llms.ToolCall{}},
		llms.AIChatMessage{FunctionCall: &llms.FunctionCall{}},
		llms.HumanChatMessage{},
		llms.GenericChatMessage{},
		llms.ToolChatMessage{},
		llms.FunctionChatMessage{},
	}
	mustAppend(t, s, alice, msgs...)
	rs := mustAll(t, s, alice)
	assert.Equal(t, msgs, messagesOf(rs))
	last, err := s.Last(e.ctx, alice, 4)
	require.NoError(t, err)
	assert.Equal(t, msgs[len(msgs)-4:], messagesOf(last))

	// A pointer to a message is stored as the message it points to.
	p := &llms.AIChatMessage{Content: "via pointer", ToolCalls: []llms.ToolCall{{ID: "x", Type: "function"}}}
	mustAppend(t, s, bob, p)
	assert.Equal(t, []llms.ChatMessage{*p}, messagesOf(mustAll(t, s, bob)))
}

func testTextRoundTrip(t *testing.T, e *env) {
	s := e.store()
	texts := []string{
		"",
		"a\x00b",
		"\x00",
		"\x00\x00trailing\x00",
		"controls \x01\x02\x1f\x7f \t\r\n",
		"\u2028\u2029",
		`quotes " ' `,
		`back\slash \u0000 \n`,
		"'; DROP TABLE messages; --",
		"<script>&amp;</script>",
		"ünïcödé 中文 🙂 e\u0301",
		"\ufeffBOM",
		"\U0010FFFF",
		"  leading and trailing spaces  ",
	}
	for i, text := range texts {
		mustAppend(t, s, alice,
			llms.HumanChatMessage{Content: text},
			llms.AIChatMessage{Content: text, ReasoningContent: text, ToolCalls: []llms.ToolCall{{ID: text, Type: text,
				FunctionCall: &llms.FunctionCall{Name: text, Arguments: text}}}},
			llms.GenericChatMessage{Content: text, Role: text, Name: text},
			llms.ToolChatMessage{Content: text, ID: text},
		)
		rs, err := s.Last(e.ctx, alice, 4)
		require.NoError(t, err)
		want := []llms.ChatMessage{
			llms.HumanChatMessage{Content: text},
			llms.AIChatMessage{Content: text, ReasoningContent: text, ToolCalls: []llms.ToolCall{{ID: text, Type: text,
				FunctionCall: &llms.FunctionCall{Name: text, Arguments: text}}}},
			llms.GenericChatMessage{Content: text, Role: text, Name: text},
			llms.ToolChatMessage{Content: text, ID: text},
		}
		assert.Equal(t, want, messagesOf(rs), "text %d (%q)", i, text)
	}
	assert.Len(t, mustAll(t, s, alice), 4*len(texts))
}

func testOneMegabyte(t *testing.T, e *env) {
	s := e.store()
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "line %d: ünïcödé 中文 🙂 \x00 \"q\" \\ \n", i)
	}
	big := b.String()
	mustAppend(t, s, alice, human("before"))
	mustAppend(t, s, alice, human(big), llms.AIChatMessage{Content: big, ToolCalls: []llms.ToolCall{{ID: "c", Type: "function",
		FunctionCall: &llms.FunctionCall{Name: "f", Arguments: big}}}})
	mustAppend(t, s, alice, human("after"))

	rs := mustAll(t, s, alice)
	require.Len(t, rs, 4)
	requireSameString(t, big, rs[1].Message.GetContent(), "the 1 MB human message read by All")
	requireSameString(t, big, rs[2].Message.GetContent(), "the 1 MB AI message read by All")
	aiMsg, ok := rs[2].Message.(llms.AIChatMessage)
	require.True(t, ok, "AI message comes back as llms.AIChatMessage, got %T", rs[2].Message)
	require.Len(t, aiMsg.ToolCalls, 1)
	require.NotNil(t, aiMsg.ToolCalls[0].FunctionCall)
	requireSameString(t, big, aiMsg.ToolCalls[0].FunctionCall.Arguments, "the 1 MB tool call arguments")

	last, err := s.Last(e.ctx, alice, 3)
	require.NoError(t, err)
	require.Len(t, last, 3)
	requireSameString(t, big, last[0].Message.GetContent(), "the 1 MB message read by Last")
	assert.Equal(t, "after", last[2].Message.GetContent())
}

func testCopies(t *testing.T, e *env) {
	s := e.store()
	m := llms.AIChatMessage{Content: "a", FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"},
		ToolCalls: []llms.ToolCall{{ID: "1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "g", Arguments: "{}"}}}}
	want := llms.AIChatMessage{Content: "a", FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"},
		ToolCalls: []llms.ToolCall{{ID: "1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "g", Arguments: "{}"}}}}
	mustAppend(t, s, alice, m)
	// Change the appended value.
	m.FunctionCall.Name = "changed"
	m.ToolCalls[0].ID = "changed"
	m.ToolCalls[0].FunctionCall.Arguments = "changed"

	rs := mustAll(t, s, alice)
	require.Len(t, rs, 1)
	assert.Equal(t, want, rs[0].Message, "changing the appended message changes nothing stored")

	// Change the returned values.
	got := rs[0].Message.(llms.AIChatMessage)
	got.FunctionCall.Name = "changed"
	got.ToolCalls[0].FunctionCall.Name = "changed"
	got.ToolCalls[0].Type = "changed"
	rs[0] = store.Record{}
	last, err := s.Last(e.ctx, alice, 1)
	require.NoError(t, err)
	require.Len(t, last, 1)
	assert.Equal(t, want, last[0].Message, "changing a returned message changes nothing stored")
	assert.Equal(t, want, mustAll(t, s, alice)[0].Message)
}

// ---------------------------------------------------------------------------
// Concurrency.
// ---------------------------------------------------------------------------

// turnText is the content of both messages of writer w's turn n.
func turnText(w string, n int) string { return fmt.Sprintf("%s t%03d", w, n) }

// writeTurns appends turns turns of writer w to id.
func writeTurns(ctx context.Context, s store.Store, id memstack.Identity, w string, turns int) error {
	for n := range turns {
		text := turnText(w, n)
		if err := s.Append(ctx, id, human(text), ai(text)); err != nil {
			return fmt.Errorf("writer %s, turn %d: %w", w, n, err)
		}
	}
	return nil
}

// checkTurns checks that rs holds exactly turns turns of each writer, each
// turn's two messages adjacent, each writer's turns in order, and Seqs
// strictly increasing.
func checkTurns(t *testing.T, rs []store.Record, writers []string, turns int) {
	t.Helper()
	require.Len(t, rs, 2*turns*len(writers), "every message of every writer is stored")
	requireIncreasing(t, seqsOf(rs))
	next := map[string]int{}
	for i := 0; i < len(rs); i += 2 {
		h, a := rs[i].Message, rs[i+1].Message
		require.Equal(t, llms.ChatMessageTypeHuman, h.GetType(), "message %d starts a turn", i)
		require.Equal(t, llms.ChatMessageTypeAI, a.GetType(), "message %d ends the turn of message %d", i+1, i)
		require.Equal(t, h.GetContent(), a.GetContent(), "a turn's messages are adjacent (messages %d and %d)", i, i+1)
		w, nStr, ok := strings.Cut(h.GetContent(), " t")
		require.True(t, ok, "unexpected message %q", h.GetContent())
		n, err := strconv.Atoi(nStr)
		require.NoError(t, err)
		require.Equal(t, next[w], n, "writer %s's turns are stored in its order", w)
		next[w]++
	}
	for _, w := range writers {
		assert.Equal(t, turns, next[w], "turns of writer %s", w)
	}
}

// watchTurns reads id until stop is closed and reports any read that shows
// half a turn.
func watchTurns(t *testing.T, s store.Store, id memstack.Identity, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		st, err := s.Stat(context.Background(), id)
		if !assert.NoError(t, err) {
			return
		}
		assert.Zero(t, st.Count%2, "Stat saw half a turn: %d messages", st.Count)
		rs, err := s.Last(context.Background(), id, 2)
		if !assert.NoError(t, err) {
			return
		}
		if len(rs) == 2 {
			assert.Equal(t, llms.ChatMessageTypeHuman, rs[0].Message.GetType(), "Last(2) saw half a turn")
			assert.Equal(t, rs[0].Message.GetContent(), rs[1].Message.GetContent(), "Last(2) saw half a turn")
		}
		time.Sleep(time.Millisecond)
	}
}

func testConcurrentWriters(t *testing.T, e *env) {
	s := e.store()
	const writers, turns = 32, 20
	names := make([]string, writers)
	for i := range names {
		names[i] = fmt.Sprintf("w%02d", i)
	}
	stop := make(chan struct{})
	var watchers sync.WaitGroup
	watchers.Go(func() { watchTurns(t, s, alice, stop) })

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for _, w := range names {
		wg.Go(func() {
			if err := writeTurns(e.ctx, s, alice, w, turns); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(stop)
	watchers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkTurns(t, mustAll(t, s, alice), names, turns)
	assert.Equal(t, 2*writers*turns, mustStat(t, s, alice).Count)
}

func testTwoClients(t *testing.T, e *env) {
	c1, c2 := e.store(), e.store()
	const perClient, turns = 8, 10
	var names []string
	var wg sync.WaitGroup
	errs := make(chan error, 2*perClient)
	for ci, c := range []store.Store{c1, c2} {
		for i := range perClient {
			w := fmt.Sprintf("c%dw%d", ci+1, i)
			names = append(names, w)
			wg.Go(func() {
				if err := writeTurns(e.ctx, c, alice, w, turns); err != nil {
					errs <- err
				}
			})
		}
	}
	stop := make(chan struct{})
	var watchers sync.WaitGroup
	watchers.Go(func() { watchTurns(t, c2, alice, stop) })
	wg.Wait()
	close(stop)
	watchers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	all1, all2 := mustAll(t, c1, alice), mustAll(t, c2, alice)
	checkTurns(t, all1, names, turns)
	assert.Equal(t, all1, all2, "both clients read the same messages with the same Seqs")
	assert.Equal(t, mustStat(t, c1, alice), mustStat(t, c2, alice))
}

func testTwoClientsState(t *testing.T, e *env) {
	c1, c2 := e.store(), e.store()
	const perClient, increments = 4, 10
	var mu sync.Mutex
	versions := map[int64]bool{}
	var wg sync.WaitGroup
	for _, c := range []store.Store{c1, c2} {
		for range perClient {
			wg.Go(func() {
				for range increments {
					for attempt := 0; ; attempt++ {
						if attempt > 10000 {
							t.Error("an increment did not succeed after 10000 attempts")
							return
						}
						st, err := c.GetState(e.ctx, alice, "counter")
						if !assert.NoError(t, err) {
							return
						}
						n := 0
						if st.Exists() {
							if n, err = strconv.Atoi(string(st.Value)); !assert.NoError(t, err) {
								return
							}
						}
						v, err := c.PutState(e.ctx, alice, "counter", []byte(strconv.Itoa(n+1)), st.Version)
						if errors.Is(err, store.ErrConflict) {
							continue
						}
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						assert.False(t, versions[v], "version %d handed out twice", v)
						versions[v] = true
						mu.Unlock()
						break
					}
				}
			})
		}
	}
	wg.Wait()
	want := strconv.Itoa(2 * perClient * increments)
	st1, st2 := mustGet(t, c1, alice, "counter"), mustGet(t, c2, alice, "counter")
	assert.Equal(t, want, string(st1.Value), "compare-and-set loses no increment")
	assert.Equal(t, st1, st2, "both clients read the same state")
	assert.Len(t, versions, 2*perClient*increments)
}

// ---------------------------------------------------------------------------
// Context, reopening, closing.
// ---------------------------------------------------------------------------

func testCancelledContext(t *testing.T, e *env) {
	s := e.store()
	mustAppend(t, s, alice, system("sys"), human("h1"), ai("a1"))
	mustAppend(t, s, alice, human("h2"), ai("a2"))
	v := mustCreate(t, s, alice, "summary", []byte("kept"))
	before := mustAll(t, s, alice)
	stateBefore := mustGet(t, s, alice, "summary")

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()

	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Append", func(ctx context.Context) error { return s.Append(ctx, alice, human("x"), ai("y")) }},
		{"AppendNewIdentity", func(ctx context.Context) error { return s.Append(ctx, bob, human("x")) }},
		{"Last", func(ctx context.Context) error { _, err := s.Last(ctx, alice, 2); return err }},
		{"All", func(ctx context.Context) error { _, err := s.All(ctx, alice); return err }},
		{"Tail", func(ctx context.Context) error { _, err := s.Tail(ctx, alice, 2, 0); return err }},
		{"AppendKeyed", func(ctx context.Context) error {
			return s.Append(store.WithAppendKey(ctx, "cancelled-key"), alice, human("x"), ai("y"))
		}},
		{"Stat", func(ctx context.Context) error { _, err := s.Stat(ctx, alice); return err }},
		{"RemovePrefix", func(ctx context.Context) error {
			_, err := s.RemovePrefix(ctx, alice, before[len(before)-1].Seq)
			return err
		}},
		{"Clear", func(ctx context.Context) error { return s.Clear(ctx, alice) }},
		{"Forget", func(ctx context.Context) error { return s.Forget(ctx, alice) }},
		{"GetState", func(ctx context.Context) error { _, err := s.GetState(ctx, alice, "summary"); return err }},
		{"PutState", func(ctx context.Context) error {
			_, err := s.PutState(ctx, alice, "summary", []byte("lost"), v)
			return err
		}},
		{"PutStateDelete", func(ctx context.Context) error {
			_, err := s.PutState(ctx, alice, "summary", nil, v)
			return err
		}},
		{"PutStateNew", func(ctx context.Context) error {
			_, err := s.PutState(ctx, bob, "summary", []byte("lost"), 0)
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(cancelled)
			require.Error(t, err, "a cancelled context must fail the call")
			assert.ErrorIs(t, err, context.Canceled)
			err = c.call(expired)
			require.Error(t, err, "an expired context must fail the call")
			assert.ErrorIs(t, err, context.DeadlineExceeded)

			assert.Equal(t, before, mustAll(t, s, alice), "a cancelled call changes nothing")
			assert.Equal(t, stateBefore, mustGet(t, s, alice, "summary"), "a cancelled call changes no state")
			assert.Empty(t, mustAll(t, s, bob))
			assertAbsent(t, mustGet(t, s, bob, "summary"))
		})
	}
}

func testSurvivesReopen(t *testing.T, e *env) {
	c1 := e.client()
	mustAppend(t, c1, alice, system("sys"))
	mustAppend(t, c1, alice, human("h1"), ai("a1"))
	mustAppend(t, c1, alice, human("h2"), llms.AIChatMessage{Content: "a2", ToolCalls: []llms.ToolCall{{ID: "1", Type: "function",
		FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"}}}}, llms.ToolChatMessage{ID: "1", Content: "r"})
	mustAppend(t, c1, bob, human("b1"), ai("b2"))
	all := mustAll(t, c1, alice)
	_, err := c1.RemovePrefix(e.ctx, alice, all[2].Seq)
	require.NoError(t, err)
	va := mustCreate(t, c1, alice, "summary", []byte("alice \x00 summary"))
	va = mustPut(t, c1, alice, "summary", []byte("alice \x00 summary v2"), va)
	vb := mustCreate(t, c1, bob, "facts", []byte{0xff, 0x00})

	wantAlice, wantBob := mustAll(t, c1, alice), mustAll(t, c1, bob)
	wantStat := mustStat(t, c1, alice)
	e.close(c1)

	c2 := e.store()
	assert.Equal(t, wantAlice, mustAll(t, c2, alice), "messages and Seqs survive reopening")
	assert.Equal(t, wantBob, mustAll(t, c2, bob))
	assert.Equal(t, wantStat, mustStat(t, c2, alice))
	assert.Equal(t, store.State{Value: []byte("alice \x00 summary v2"), Version: va}, mustGet(t, c2, alice, "summary"), "state survives reopening")
	assert.Equal(t, store.State{Value: []byte{0xff, 0x00}, Version: vb}, mustGet(t, c2, bob, "facts"))

	// The counters continue: no Seq or version is handed out again.
	mustAppend(t, c2, alice, human("h3"))
	rs := mustAll(t, c2, alice)
	assert.Greater(t, rs[len(rs)-1].Seq, wantStat.LastSeq)
	_, err = c2.PutState(e.ctx, alice, "summary", []byte("stale"), 0)
	assert.ErrorIs(t, err, store.ErrConflict)
	v := mustPut(t, c2, alice, "summary", []byte("v3"), va)
	assert.NotEqual(t, va, v)
	assert.NotEqual(t, vb, v)
}

func testClosedStore(t *testing.T, e *env) {
	c := e.client()
	mustAppend(t, c, alice, human("h"))
	if !e.close(c) {
		t.Skip("the store does not implement io.Closer")
	}
	var s store.Store = c.Store
	calls := []struct {
		name string
		call func() error
	}{
		{"Append", func() error { return s.Append(e.ctx, alice, human("x")) }},
		{"Last", func() error { _, err := s.Last(e.ctx, alice, 1); return err }},
		{"All", func() error { _, err := s.All(e.ctx, alice); return err }},
		{"Tail", func() error { _, err := s.Tail(e.ctx, alice, 1, 0); return err }},
		{"Stat", func() error { _, err := s.Stat(e.ctx, alice); return err }},
		{"RemovePrefix", func() error { _, err := s.RemovePrefix(e.ctx, alice, 1<<40); return err }},
		{"Clear", func() error { return s.Clear(e.ctx, alice) }},
		{"Forget", func() error { return s.Forget(e.ctx, alice) }},
		{"GetState", func() error { _, err := s.GetState(e.ctx, alice, "x"); return err }},
		{"PutState", func() error { _, err := s.PutState(e.ctx, alice, "x", []byte("v"), 0); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("%s on a closed store panicked: %v", c.name, p)
					}
				}()
				err = c.call()
			}()
			assert.Error(t, err, "%s on a closed store must return an error", c.name)
		})
	}
	// The data is still there for a new client.
	assert.Equal(t, []string{"h"}, contentsOf(mustAll(t, e.store(), alice)))
}
