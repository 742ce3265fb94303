package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

func newHistory(t *testing.T, id memstack.Identity) (*store.History, *memory.ChatMessageHistory) {
	t.Helper()
	h := memory.NewChatMessageHistory()
	s, err := store.FromHistory(h, id)
	require.NoError(t, err)
	return s, h
}

func historyContents(t *testing.T, h schema.ChatMessageHistory) []string {
	t.Helper()
	msgs, err := h.Messages(context.Background())
	require.NoError(t, err)
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.GetContent()
	}
	return out
}

func TestHistoryContract(t *testing.T) {
	ids := []memstack.Identity{
		{},
		{Tenant: "acme", User: "u42", Conversation: "c7"},
		{Tenant: "a:b", User: "{*}", Conversation: "\x00 ü"},
	}
	for _, tc := range singleIdentityContract {
		for _, id := range ids {
			t.Run(tc.name+"/"+id.Key(), func(t *testing.T) {
				s, _ := newHistory(t, id)
				tc.run(t, s, id)
			})
		}
	}
}

func TestFromHistoryNil(t *testing.T) {
	s, err := store.FromHistory(nil, memstack.Identity{})
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	assert.Nil(t, s)
}

func TestHistoryWritesThroughToUnderlyingHistory(t *testing.T) {
	ctx := context.Background()
	id := memstack.Identity{User: "u"}
	s, h := newHistory(t, id)

	require.NoError(t, s.Append(ctx, id, system("s"), human("h1"), ai("a1")))
	assert.Equal(t, []string{"s", "h1", "a1"}, historyContents(t, h))

	n, err := s.RemovePrefix(ctx, id, 3)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, []string{"s"}, historyContents(t, h), "RemovePrefix rewrites the history, keeping system messages")

	require.NoError(t, s.Clear(ctx, id))
	assert.Empty(t, historyContents(t, h))
}

func TestHistoryNumbersExistingMessages(t *testing.T) {
	ctx := context.Background()
	h := memory.NewChatMessageHistory(memory.WithPreviousMessages([]llms.ChatMessage{human("old1"), ai("old2")}))
	id := memstack.Identity{User: "u"}
	s, err := store.FromHistory(h, id)
	require.NoError(t, err)

	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{"old1", "old2"}, contents(rs))
	requireStrictlyIncreasing(t, seqsOf(rs))
	assert.Positive(t, rs[0].Seq)

	require.NoError(t, s.Append(ctx, id, human("new")))
	rs2, err := s.All(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, seqsOf(rs), seqsOf(rs2[:2]), "Seqs are stable while the history is unchanged")
	assert.Greater(t, rs2[2].Seq, rs[1].Seq)
}

func TestHistoryWrongIdentity(t *testing.T) {
	ctx := context.Background()
	served := memstack.Identity{Tenant: "t", User: "u", Conversation: "c"}
	s, h := newHistory(t, served)
	require.NoError(t, s.Append(ctx, served, human("mine")))

	for _, other := range []memstack.Identity{
		{},
		{Tenant: "t", User: "u"},
		{Tenant: "t", User: "u", Conversation: "c2"},
		{Tenant: "t:u", User: "c"},
	} {
		t.Run(other.Key(), func(t *testing.T) {
			require.ErrorIs(t, s.Append(ctx, other, human("theirs")), store.ErrWrongIdentity)
			_, err := s.Last(ctx, other, 1)
			require.ErrorIs(t, err, store.ErrWrongIdentity)
			rs, err := s.All(ctx, other)
			require.ErrorIs(t, err, store.ErrWrongIdentity)
			assert.Nil(t, rs)
			st, err := s.Stat(ctx, other)
			require.ErrorIs(t, err, store.ErrWrongIdentity)
			assert.Equal(t, store.Stat{}, st)
			n, err := s.RemovePrefix(ctx, other, 1<<62)
			require.ErrorIs(t, err, store.ErrWrongIdentity)
			assert.Zero(t, n)
			require.ErrorIs(t, s.Clear(ctx, other), store.ErrWrongIdentity)

			assert.Equal(t, []string{"mine"}, historyContents(t, h), "the served conversation is untouched")
		})
	}
}

func TestHistoryExternalChangeRenumbers(t *testing.T) {
	ctx := context.Background()
	id := memstack.Identity{User: "u"}
	s, h := newHistory(t, id)
	require.NoError(t, s.Append(ctx, id, human("h1"), ai("a1")))
	before, err := s.Stat(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 2, before.Count)

	// Someone else appends to the history behind the store's back.
	require.NoError(t, h.AddUserMessage(ctx, "external"))
	after, err := s.Stat(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 3, after.Count)
	assert.NotEqual(t, before.FirstSeq, after.FirstSeq, "a length change renumbers every message")
	assert.Greater(t, after.FirstSeq, before.LastSeq, "new numbers are never old ones")
	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{"h1", "a1", "external"}, contents(rs))
	requireStrictlyIncreasing(t, seqsOf(rs))

	// Shrinking it behind the store's back renumbers too.
	require.NoError(t, h.SetMessages(ctx, []llms.ChatMessage{human("only")}))
	shrunk, err := s.Stat(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 1, shrunk.Count)
	assert.Greater(t, shrunk.FirstSeq, after.LastSeq)

	// Without further external changes the numbering is stable again.
	again, err := s.Stat(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, shrunk, again)
}

// failingHistory is a schema.ChatMessageHistory that delegates to a real
// langchaingo history but fails the failAt-th AddMessage call (1-based,
// counted over its whole life) and, when failSet is set, every SetMessages.
type failingHistory struct {
	*memory.ChatMessageHistory
	adds    int
	failAt  int
	failSet bool
}

var errBackend = errors.New("backend unavailable")

func (f *failingHistory) AddMessage(ctx context.Context, m llms.ChatMessage) error {
	f.adds++
	if f.adds == f.failAt {
		return fmt.Errorf("add #%d: %w", f.adds, errBackend)
	}
	return f.ChatMessageHistory.AddMessage(ctx, m)
}

func (f *failingHistory) SetMessages(ctx context.Context, msgs []llms.ChatMessage) error {
	if f.failSet {
		return fmt.Errorf("set: %w", errBackend)
	}
	return f.ChatMessageHistory.SetMessages(ctx, msgs)
}

var _ schema.ChatMessageHistory = (*failingHistory)(nil)

func TestHistoryAppendRollsBack(t *testing.T) {
	ctx := context.Background()
	id := memstack.Identity{User: "u"}
	for _, tc := range []struct {
		name   string
		failAt int // counted from the first AddMessage of the failing Append
	}{
		{"first message fails", 1},
		{"second message fails", 2},
		{"third message fails", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &failingHistory{ChatMessageHistory: memory.NewChatMessageHistory()}
			s, err := store.FromHistory(f, id)
			require.NoError(t, err)
			require.NoError(t, s.Append(ctx, id, system("s"), human("h0"), ai("a0")))
			before, err := s.All(ctx, id)
			require.NoError(t, err)
			beforeStat, err := s.Stat(ctx, id)
			require.NoError(t, err)

			f.failAt = f.adds + tc.failAt
			err = s.Append(ctx, id, human("h1"), ai("a1"), llms.ToolChatMessage{ID: "t", Content: "t1"})
			require.ErrorIs(t, err, errBackend)
			assert.Contains(t, err.Error(), fmt.Sprintf("message %d of 3", tc.failAt))

			assert.Equal(t, []string{"s", "h0", "a0"}, historyContents(t, f), "the history is restored")
			after, err := s.All(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, before, after, "records and Seqs are unchanged")
			afterStat, err := s.Stat(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, beforeStat, afterStat)

			// The store keeps working after the failure.
			require.NoError(t, s.Append(ctx, id, human("h2"), ai("a2")))
			rs, err := s.All(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, []string{"s", "h0", "a0", "h2", "a2"}, contents(rs))
			requireStrictlyIncreasing(t, seqsOf(rs))
			assert.Greater(t, rs[3].Seq, beforeStat.LastSeq)
		})
	}
}

func TestHistoryAppendRollbackFailureIsReported(t *testing.T) {
	ctx := context.Background()
	id := memstack.Identity{User: "u"}
	f := &failingHistory{ChatMessageHistory: memory.NewChatMessageHistory(), failAt: 2, failSet: true}
	s, err := store.FromHistory(f, id)
	require.NoError(t, err)

	err = s.Append(ctx, id, human("h"), ai("a"))
	require.ErrorIs(t, err, errBackend)
	assert.Contains(t, err.Error(), "restoring the history failed")

	// The store reads whatever the history now holds, consistently numbered.
	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, historyContents(t, f), contents(rs))
	requireStrictlyIncreasing(t, seqsOf(rs))
}

func TestHistoryConcurrentTurns(t *testing.T) {
	const writers, turns = 32, 5
	ctx := context.Background()
	id := memstack.Identity{Conversation: "busy"}
	s, h := newHistory(t, id)

	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range turns {
				assert.NoError(t, s.Append(ctx, id,
					human(fmt.Sprintf("w%02d-t%02d-q", w, i)),
					ai(fmt.Sprintf("w%02d-t%02d-a", w, i))))
				_, err := s.Last(ctx, id, 2)
				assert.NoError(t, err)
			}
		}()
	}
	close(start)
	wg.Wait()

	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	requireStrictlyIncreasing(t, seqsOf(rs))
	assertTurnsAdjacentAndOrdered(t, rs, writers, turns)
	assert.Len(t, historyContents(t, h), writers*turns*2)
}
