package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// ---------------------------------------------------------------------------
// Helpers shared with history_test.go.
// ---------------------------------------------------------------------------

func human(s string) llms.ChatMessage  { return llms.HumanChatMessage{Content: s} }
func ai(s string) llms.ChatMessage     { return llms.AIChatMessage{Content: s} }
func system(s string) llms.ChatMessage { return llms.SystemChatMessage{Content: s} }

func contents(rs []store.Record) []string {
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

func requireStrictlyIncreasing(t *testing.T, seqs []int64) {
	t.Helper()
	for i := 1; i < len(seqs); i++ {
		require.Greater(t, seqs[i], seqs[i-1], "Seqs must increase strictly: %v", seqs)
	}
}

func cancelledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// aiWithCalls is an AI message with every pointer and slice field set.
func aiWithCalls() llms.AIChatMessage {
	return llms.AIChatMessage{
		Content:      "calling tools",
		FunctionCall: &llms.FunctionCall{Name: "legacy", Arguments: `{"x":1}`},
		ToolCalls: []llms.ToolCall{
			{ID: "call_1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "search", Arguments: `{"q":"go"}`}},
			{ID: "call_2", Type: "function", FunctionCall: &llms.FunctionCall{Name: "calc", Arguments: `{"e":"1+1"}`}},
		},
	}
}

// contractCase is a behaviour every Store has for a single identity. Each
// case gets a fresh, empty store that serves id.
type contractCase struct {
	name string
	run  func(t *testing.T, s store.Store, id memstack.Identity)
}

// singleIdentityContract is run against InMemory here and against History in
// history_test.go.
var singleIdentityContract = []contractCase{
	{"AppendKeepsOrder", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		require.NoError(t, s.Append(ctx, id, system("sys")))
		require.NoError(t, s.Append(ctx, id, human("h1"), ai("a1")))
		require.NoError(t, s.Append(ctx, id, human("h2")))
		require.NoError(t, s.Append(ctx, id, ai("a2"), human("h3"), ai("a3")))
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, []string{"sys", "h1", "a1", "h2", "a2", "h3", "a3"}, contents(rs))
		assert.Equal(t, llms.ChatMessageTypeSystem, rs[0].Message.GetType())
		assert.Equal(t, llms.ChatMessageTypeHuman, rs[1].Message.GetType())
		assert.Equal(t, llms.ChatMessageTypeAI, rs[2].Message.GetType())
		requireStrictlyIncreasing(t, seqsOf(rs))
	}},
	{"AppendUnitGetsConsecutiveSeqs", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		require.NoError(t, s.Append(ctx, id, human("first")))
		require.NoError(t, s.Append(ctx, id, human("h"), ai("a"), llms.ToolChatMessage{ID: "t", Content: "tool"}))
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, rs, 4)
		unit := rs[1:]
		assert.Greater(t, unit[0].Seq, rs[0].Seq)
		for i := 1; i < len(unit); i++ {
			assert.Equal(t, unit[i-1].Seq+1, unit[i].Seq, "a unit's Seqs are consecutive: %v", seqsOf(rs))
		}
	}},
	{"AppendNothingIsNoOp", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		require.NoError(t, s.Append(ctx, id, human("h")))
		before, err := s.Stat(ctx, id)
		require.NoError(t, err)
		require.NoError(t, s.Append(ctx, id))
		after, err := s.Stat(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, before, after)
	}},
	{"SeqNeverReusedAfterRemovePrefixAndClear", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		require.NoError(t, s.Append(ctx, id, human("h1"), ai("a1"), human("h2"), ai("a2")))
		st, err := s.Stat(ctx, id)
		require.NoError(t, err)
		last := st.LastSeq
		require.Positive(t, last)

		// Remove everything: the next Seq must still be above the old ones.
		n, err := s.RemovePrefix(ctx, id, st.LastSeq)
		require.NoError(t, err)
		assert.Equal(t, 4, n)
		require.NoError(t, s.Append(ctx, id, human("h3")))
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, rs, 1)
		assert.Greater(t, rs[0].Seq, last, "Seq reused after RemovePrefix")
		last = rs[0].Seq

		require.NoError(t, s.Clear(ctx, id))
		require.NoError(t, s.Append(ctx, id, human("h4"), ai("a4")))
		rs, err = s.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, rs, 2)
		assert.Greater(t, rs[0].Seq, last, "Seq reused after Clear")
		requireStrictlyIncreasing(t, seqsOf(rs))
	}},
	{"Last", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		rs, err := s.Last(ctx, id, 3)
		require.NoError(t, err)
		assert.Empty(t, rs, "Last of an empty conversation")

		require.NoError(t, s.Append(ctx, id, system("s"), human("h1"), ai("a1"), human("h2"), ai("a2")))
		all, err := s.All(ctx, id)
		require.NoError(t, err)
		for _, tc := range []struct {
			n    int
			want []string
		}{
			{1, []string{"a2"}},
			{2, []string{"h2", "a2"}},
			{4, []string{"h1", "a1", "h2", "a2"}},
			{5, []string{"s", "h1", "a1", "h2", "a2"}},
			{6, []string{"s", "h1", "a1", "h2", "a2"}},
			{1000, []string{"s", "h1", "a1", "h2", "a2"}},
		} {
			rs, err := s.Last(ctx, id, tc.n)
			require.NoError(t, err, "n=%d", tc.n)
			assert.Equal(t, tc.want, contents(rs), "n=%d", tc.n)
			assert.Equal(t, seqsOf(all[len(all)-len(tc.want):]), seqsOf(rs), "n=%d: Last and All agree on Seqs", tc.n)
		}
		for _, n := range []int{0, -1, -1 << 31} {
			rs, err := s.Last(ctx, id, n)
			require.ErrorIs(t, err, store.ErrInvalidArgument, "n=%d", n)
			assert.Nil(t, rs)
		}
	}},
	{"All", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Empty(t, rs)
		msgs := []llms.ChatMessage{
			system("s"), human("h"), aiWithCalls(),
			llms.ToolChatMessage{ID: "call_1", Content: "42"},
			llms.FunctionChatMessage{Name: "legacy", Content: "ok"},
			llms.GenericChatMessage{Role: "narrator", Content: "g", Name: "n"},
		}
		require.NoError(t, s.Append(ctx, id, msgs...))
		rs, err = s.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, rs, len(msgs))
		for i, r := range rs {
			assert.Equal(t, msgs[i], r.Message, "message %d is stored unchanged", i)
		}
	}},
	{"Stat", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		st, err := s.Stat(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, store.Stat{}, st, "empty conversation")

		require.NoError(t, s.Append(ctx, id, human("h1"), ai("a1"), human("h2")))
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		st, err = s.Stat(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, store.Stat{Count: 3, FirstSeq: rs[0].Seq, LastSeq: rs[2].Seq}, st)

		_, err = s.RemovePrefix(ctx, id, rs[0].Seq)
		require.NoError(t, err)
		st, err = s.Stat(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, store.Stat{Count: 2, FirstSeq: rs[1].Seq, LastSeq: rs[2].Seq}, st)

		require.NoError(t, s.Clear(ctx, id))
		st, err = s.Stat(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, store.Stat{}, st, "cleared conversation")
	}},
	{"RemovePrefix", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		n, err := s.RemovePrefix(ctx, id, 100)
		require.NoError(t, err)
		assert.Zero(t, n, "nothing to remove in an empty conversation")

		require.NoError(t, s.Append(ctx, id, system("s1"), human("h1"), ai("a1"), system("s2"), human("h2"), ai("a2")))
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		seq := func(content string) int64 {
			for _, r := range rs {
				if r.Message.GetContent() == content {
					return r.Seq
				}
			}
			t.Fatalf("no message %q", content)
			return 0
		}

		n, err = s.RemovePrefix(ctx, id, seq("s1")-1)
		require.NoError(t, err)
		assert.Zero(t, n, "through below the first Seq")

		n, err = s.RemovePrefix(ctx, id, seq("s1"))
		require.NoError(t, err)
		assert.Zero(t, n, "a system message is never removed")

		n, err = s.RemovePrefix(ctx, id, seq("a1"))
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		got, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, []string{"s1", "s2", "h2", "a2"}, contents(got))
		assert.Equal(t, []int64{seq("s1"), seq("s2"), seq("h2"), seq("a2")}, seqsOf(got), "kept messages keep their Seqs")

		n, err = s.RemovePrefix(ctx, id, seq("a1"))
		require.NoError(t, err)
		assert.Zero(t, n, "repeating the call removes nothing more")

		n, err = s.RemovePrefix(ctx, id, seq("h2"))
		require.NoError(t, err)
		assert.Equal(t, 1, n)

		n, err = s.RemovePrefix(ctx, id, 1<<62)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		got, err = s.All(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, []string{"s1", "s2"}, contents(got), "only system messages remain")
		st, err := s.Stat(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, store.Stat{Count: 2, FirstSeq: seq("s1"), LastSeq: seq("s2")}, st)
	}},
	{"ClearRemovesSystemMessages", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		require.NoError(t, s.Append(ctx, id, system("s"), human("h")))
		require.NoError(t, s.Clear(ctx, id))
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Empty(t, rs)
		require.NoError(t, s.Clear(ctx, id), "clearing an empty conversation")
	}},
	{"NilMessageIsAtomic", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		require.NoError(t, s.Append(ctx, id, human("kept")))
		before, err := s.All(ctx, id)
		require.NoError(t, err)
		for _, msgs := range [][]llms.ChatMessage{
			{nil},
			{human("h"), nil},
			{human("h"), ai("a"), nil},
			{nil, ai("a")},
		} {
			err := s.Append(ctx, id, msgs...)
			require.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Contains(t, err.Error(), "nil")
			after, err := s.All(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, before, after, "a failed Append stores nothing")
		}
		// The next successful Append continues the sequence normally.
		require.NoError(t, s.Append(ctx, id, human("next")))
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, []string{"kept", "next"}, contents(rs))
	}},
	{"DoneContextChangesNothing", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		require.NoError(t, s.Append(ctx, id, system("s"), human("h"), ai("a")))
		before, err := s.All(ctx, id)
		require.NoError(t, err)
		st := before[len(before)-1].Seq

		deadline, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel()
		for _, done := range []struct {
			ctx  context.Context
			want error
		}{{cancelledCtx(), context.Canceled}, {deadline, context.DeadlineExceeded}} {
			c := done.ctx
			require.ErrorIs(t, s.Append(c, id, human("x")), done.want)
			_, err = s.Last(c, id, 1)
			require.ErrorIs(t, err, done.want)
			_, err = s.All(c, id)
			require.ErrorIs(t, err, done.want)
			_, err = s.Stat(c, id)
			require.ErrorIs(t, err, done.want)
			n, err := s.RemovePrefix(c, id, st)
			require.ErrorIs(t, err, done.want)
			assert.Zero(t, n)
			require.ErrorIs(t, s.Clear(c, id), done.want)

			after, err := s.All(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, before, after, "a call with a done context changes nothing")
		}
	}},
	{"ReturnsCopies", func(t *testing.T, s store.Store, id memstack.Identity) {
		ctx := context.Background()
		in := aiWithCalls()
		require.NoError(t, s.Append(ctx, id, in))
		want := aiWithCalls()

		// Mutating the appended message afterwards does not reach the store.
		in.FunctionCall.Name = "changed"
		in.FunctionCall.Arguments = "changed"
		in.ToolCalls[0].ID = "changed"
		in.ToolCalls[0].FunctionCall.Name = "changed"
		in.ToolCalls[1].FunctionCall.Arguments = "changed"

		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, rs, 1)
		assert.Equal(t, want, rs[0].Message)

		// Mutating a returned message does not reach the store either.
		got, ok := rs[0].Message.(llms.AIChatMessage)
		require.True(t, ok, "got %T", rs[0].Message)
		got.FunctionCall.Name = "mutated"
		got.ToolCalls[0].ID = "mutated"
		got.ToolCalls[0].FunctionCall.Name = "mutated"
		got.ToolCalls[1].FunctionCall.Arguments = "mutated"
		rs[0] = store.Record{Seq: -1, Message: human("replaced")}

		for _, read := range []func() ([]store.Record, error){
			func() ([]store.Record, error) { return s.All(ctx, id) },
			func() ([]store.Record, error) { return s.Last(ctx, id, 1) },
		} {
			again, err := read()
			require.NoError(t, err)
			require.Len(t, again, 1)
			assert.Equal(t, want, again[0].Message)
			assert.Positive(t, again[0].Seq)
		}

		// Last's result is a copy too.
		last, err := s.Last(ctx, id, 1)
		require.NoError(t, err)
		lm := last[0].Message.(llms.AIChatMessage)
		lm.ToolCalls[1].FunctionCall.Name = "mutated via Last"
		again, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, want, again[0].Message)
	}},
}

// ---------------------------------------------------------------------------
// InMemory.
// ---------------------------------------------------------------------------

func TestInMemoryContract(t *testing.T) {
	ids := []memstack.Identity{
		{},
		{Tenant: "acme", User: "u42", Conversation: "c7"},
		{Tenant: "a:b", User: "{*}", Conversation: "\x00 ü"},
	}
	for _, tc := range singleIdentityContract {
		for _, id := range ids {
			t.Run(tc.name+"/"+id.Key(), func(t *testing.T) {
				s := store.NewInMemory()
				tc.run(t, s, id)
			})
		}
	}
}

func TestInMemoryUnknownIdentityIsEmpty(t *testing.T) {
	ctx := context.Background()
	s := store.NewInMemory()
	require.NoError(t, s.Append(ctx, memstack.Identity{User: "known"}, human("h")))
	unknown := memstack.Identity{User: "unknown"}

	st, err := s.Stat(ctx, unknown)
	require.NoError(t, err)
	assert.Equal(t, store.Stat{}, st)
	rs, err := s.All(ctx, unknown)
	require.NoError(t, err)
	assert.Empty(t, rs)
	rs, err = s.Last(ctx, unknown, 5)
	require.NoError(t, err)
	assert.Empty(t, rs)
	n, err := s.RemovePrefix(ctx, unknown, 1<<62)
	require.NoError(t, err)
	assert.Zero(t, n)
	require.NoError(t, s.Clear(ctx, unknown))
	_, err = s.Last(ctx, unknown, 0)
	require.ErrorIs(t, err, store.ErrInvalidArgument, "n is checked even for an unknown identity")
}

// adversarialIdentities differ only in how separators fall between parts, so
// a store that joins parts naively would mix them up.
var adversarialIdentities = []memstack.Identity{
	{},
	{Tenant: "a/b", User: "c"},
	{Tenant: "a", User: "b/c"},
	{Tenant: "a:b", User: "c"},
	{Tenant: "a", User: "b:c"},
	{Tenant: "a%3Ab", User: "c"},
	{Tenant: "a", User: "", Conversation: "b"},
	{Tenant: "a", User: "b", Conversation: ""},
	{Tenant: "", User: "a", Conversation: "b"},
	{Tenant: "*", User: "*", Conversation: "*"},
	{Tenant: "{t}", User: "u", Conversation: "c"},
	{Tenant: "t\x00", User: "u"},
	{Tenant: "t", User: "\x00u"},
	{Tenant: "ü", User: "u\u00a0", Conversation: " "},
}

func TestInMemoryIdentityIsolation(t *testing.T) {
	ctx := context.Background()
	s := store.NewInMemory()
	for i, id := range adversarialIdentities {
		for j := 0; j <= i; j++ {
			require.NoError(t, s.Append(ctx, id, human(fmt.Sprintf("%d-h%d", i, j)), ai(fmt.Sprintf("%d-a%d", i, j))))
		}
	}
	for i, id := range adversarialIdentities {
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, rs, 2*(i+1), "identity %#v", id)
		for _, c := range contents(rs) {
			assert.True(t, strings.HasPrefix(c, fmt.Sprintf("%d-", i)), "identity %#v sees %q", id, c)
		}
		st, err := s.Stat(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, 2*(i+1), st.Count)
	}

	// Clear and RemovePrefix touch only their own identity.
	target := adversarialIdentities[1] // {"a/b","c",""}
	require.NoError(t, s.Clear(ctx, target))
	n, err := s.RemovePrefix(ctx, adversarialIdentities[2], 1<<62)
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	for i, id := range adversarialIdentities {
		st, err := s.Stat(ctx, id)
		require.NoError(t, err)
		switch i {
		case 1, 2:
			assert.Zero(t, st.Count, "identity %#v", id)
		default:
			assert.Equal(t, 2*(i+1), st.Count, "identity %#v", id)
		}
	}
}

func TestInMemorySeqIsStoreWide(t *testing.T) {
	ctx := context.Background()
	s := store.NewInMemory()
	a, b := memstack.Identity{User: "a"}, memstack.Identity{User: "b"}
	require.NoError(t, s.Append(ctx, a, human("a1"), ai("a2")))
	require.NoError(t, s.Append(ctx, b, human("b1")))
	require.NoError(t, s.Append(ctx, a, human("a3")))
	ra, err := s.All(ctx, a)
	require.NoError(t, err)
	rb, err := s.All(ctx, b)
	require.NoError(t, err)
	requireStrictlyIncreasing(t, seqsOf(ra))
	require.Len(t, rb, 1)
	// Seqs come from one store-wide counter: b's append in between took a
	// number between a's, so no Seq is shared by two identities, and a Seq
	// cannot come back after Forget.
	assert.Less(t, ra[1].Seq, rb[0].Seq)
	assert.Less(t, rb[0].Seq, ra[2].Seq)
	require.NoError(t, s.Forget(ctx, a))
	require.NoError(t, s.Append(ctx, a, human("a4")))
	ra2, err := s.All(ctx, a)
	require.NoError(t, err)
	require.Len(t, ra2, 1)
	assert.Greater(t, ra2[0].Seq, ra[2].Seq, "a Seq is never reused after Forget")
}

func TestInMemoryConcurrentTurnsOneConversation(t *testing.T) {
	const writers, turns = 32, 20
	ctx := context.Background()
	s := store.NewInMemory()
	id := memstack.Identity{Tenant: "t", User: "u", Conversation: "busy"}

	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range turns {
				err := s.Append(ctx, id,
					human(fmt.Sprintf("w%02d-t%02d-q", w, i)),
					ai(fmt.Sprintf("w%02d-t%02d-a", w, i)))
				assert.NoError(t, err)
			}
		}()
	}
	// Readers run alongside the writers so the race detector sees both.
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range turns {
				rs, err := s.Last(ctx, id, 4)
				assert.NoError(t, err)
				assert.LessOrEqual(t, len(rs), 4)
				_, err = s.Stat(ctx, id)
				assert.NoError(t, err)
			}
		}()
	}
	close(start)
	wg.Wait()

	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	require.Len(t, rs, writers*turns*2, "nothing lost")
	requireStrictlyIncreasing(t, seqsOf(rs))
	assertTurnsAdjacentAndOrdered(t, rs, writers, turns)

	st, err := s.Stat(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, store.Stat{Count: len(rs), FirstSeq: rs[0].Seq, LastSeq: rs[len(rs)-1].Seq}, st)
}

// assertTurnsAdjacentAndOrdered checks that rs holds writers*turns turns
// written as "wWW-tTT-q" / "wWW-tTT-a", each turn's two messages next to each
// other, and each writer's turns in the order it wrote them.
func assertTurnsAdjacentAndOrdered(t *testing.T, rs []store.Record, writers, turns int) {
	t.Helper()
	require.Len(t, rs, writers*turns*2)
	next := make([]int, writers)
	for k := 0; k < len(rs); k += 2 {
		q, a := rs[k].Message, rs[k+1].Message
		require.Equal(t, llms.ChatMessageTypeHuman, q.GetType(), "record %d", k)
		require.Equal(t, llms.ChatMessageTypeAI, a.GetType(), "record %d", k+1)
		var w, i int
		_, err := fmt.Sscanf(q.GetContent(), "w%02d-t%02d-q", &w, &i)
		require.NoError(t, err, "record %d: %q", k, q.GetContent())
		require.Equal(t, strings.TrimSuffix(q.GetContent(), "q")+"a", a.GetContent(), "a turn's messages are adjacent")
		require.Equal(t, rs[k].Seq+1, rs[k+1].Seq, "a turn's Seqs are consecutive")
		require.Equal(t, next[w], i, "writer %d's turns out of order", w)
		next[w]++
	}
	for w, n := range next {
		assert.Equal(t, turns, n, "writer %d", w)
	}
}

func TestInMemoryConcurrentIdentities(t *testing.T) {
	const users, turns = 16, 25
	ctx := context.Background()
	s := store.NewInMemory()

	var wg sync.WaitGroup
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := memstack.Identity{Tenant: "t", User: fmt.Sprintf("u%d", u)}
			for i := range turns {
				assert.NoError(t, s.Append(ctx, id, human(fmt.Sprintf("u%d-%d", u, i)), ai(fmt.Sprintf("u%d-%d", u, i))))
				if i%5 == 4 {
					// Remove the first turn (by its second message's Seq).
					first, err := s.All(ctx, id)
					assert.NoError(t, err)
					if first[0].Message.GetContent() == fmt.Sprintf("u%d-0", u) {
						_, err = s.RemovePrefix(ctx, id, first[1].Seq)
						assert.NoError(t, err)
					}
				}
				_, err := s.Last(ctx, id, 3)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()

	for u := range users {
		id := memstack.Identity{Tenant: "t", User: fmt.Sprintf("u%d", u)}
		rs, err := s.All(ctx, id)
		require.NoError(t, err)
		// The first turn was removed; the rest are intact.
		require.Len(t, rs, 2*(turns-1), "user %d", u)
		requireStrictlyIncreasing(t, seqsOf(rs))
		for k, c := range contents(rs) {
			assert.Equal(t, fmt.Sprintf("u%d-%d", u, k/2+1), c)
		}
	}
}

// ---------------------------------------------------------------------------
// CloneMessage.
// ---------------------------------------------------------------------------

type customMessage struct{ text string }

func (m *customMessage) GetType() llms.ChatMessageType { return "custom" }
func (m *customMessage) GetContent() string            { return m.text }

func TestCloneMessageDeepCopiesAI(t *testing.T) {
	orig := aiWithCalls()
	want := aiWithCalls()
	c := storekit.CloneMessage(orig)
	got, ok := c.(llms.AIChatMessage)
	require.True(t, ok, "got %T", c)
	require.Equal(t, want, got)

	// No pointer or slice is shared.
	assert.NotSame(t, orig.FunctionCall, got.FunctionCall)
	assert.NotSame(t, &orig.ToolCalls[0], &got.ToolCalls[0])
	for i := range orig.ToolCalls {
		assert.NotSame(t, orig.ToolCalls[i].FunctionCall, got.ToolCalls[i].FunctionCall)
	}
	orig.FunctionCall.Name = "x"
	orig.ToolCalls[0].ID = "x"
	orig.ToolCalls[1].FunctionCall.Arguments = "x"
	assert.Equal(t, want, got, "changing the original does not change the clone")
	got.ToolCalls[0].FunctionCall.Name = "y"
	assert.Equal(t, "search", orig.ToolCalls[0].FunctionCall.Name, "changing the clone does not change the original")
}

func TestCloneMessageAIEdgeCases(t *testing.T) {
	for _, m := range []llms.AIChatMessage{
		{},
		{Content: "plain"},
		{Content: "empty calls", ToolCalls: []llms.ToolCall{}},
		{ToolCalls: []llms.ToolCall{{ID: "no-func"}}},
		{ReasoningContent: "thinking", Content: "answer"},
	} {
		assert.Equal(t, m, storekit.CloneMessage(m))
	}

	// A pointer to an AI message is copied too.
	p := &llms.AIChatMessage{Content: "p", FunctionCall: &llms.FunctionCall{Name: "f"}}
	c := storekit.CloneMessage(p)
	p.FunctionCall.Name = "changed"
	p.Content = "changed"
	assert.Equal(t, "p", c.GetContent())
	assert.Equal(t, llms.ChatMessageTypeAI, c.GetType())
	switch v := c.(type) {
	case llms.AIChatMessage:
		assert.Equal(t, "f", v.FunctionCall.Name)
	case *llms.AIChatMessage:
		assert.NotSame(t, p, v)
		assert.Equal(t, "f", v.FunctionCall.Name)
	default:
		t.Fatalf("clone of *AIChatMessage has type %T", c)
	}

	var nilAI *llms.AIChatMessage
	assert.Equal(t, llms.ChatMessage(nilAI), storekit.CloneMessage(nilAI))
	assert.Nil(t, storekit.CloneMessage(nil))
}

func TestCloneMessageOtherTypesAsIs(t *testing.T) {
	custom := &customMessage{text: "c"}
	for _, m := range []llms.ChatMessage{
		llms.HumanChatMessage{Content: "h"},
		llms.SystemChatMessage{Content: "s"},
		llms.GenericChatMessage{Content: "g", Role: "r", Name: "n"},
		llms.FunctionChatMessage{Name: "f", Content: "out"},
		llms.ToolChatMessage{ID: "id", Content: "out"},
	} {
		assert.Equal(t, m, storekit.CloneMessage(m), "%T", m)
	}
	got := storekit.CloneMessage(custom)
	assert.Same(t, custom, got, "unknown message types are returned as they are")
}

// A nil context is an error, never a panic.
func TestInMemoryNilContext(t *testing.T) {
	s := store.NewInMemory()
	//nolint:staticcheck // a nil context on purpose
	err := s.Append(nil, memstack.Identity{}, human("x")) //lint:ignore SA1012 on purpose
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	//nolint:staticcheck
	_, err = s.All(nil, memstack.Identity{}) //lint:ignore SA1012 on purpose
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	recs, err := s.All(context.Background(), memstack.Identity{})
	require.NoError(t, err)
	assert.Empty(t, recs)
}
