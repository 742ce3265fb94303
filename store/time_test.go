package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

func TestAppendTime(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2023, 5, 8, 12, 30, 0, 7, plus2)
	cases := []struct {
		name string
		ctx  context.Context
		want time.Time // zero: now
	}{
		{"from the context", memstack.WithTime(ctx, at), at},
		{"from the context, monotonic reading dropped", memstack.WithTime(ctx, at.Add(0)), at},
		{"no time: now", ctx, time.Time{}},
		{"a zero time: now", memstack.WithTime(ctx, time.Time{}), time.Time{}},
		{"a nil context: now", nil, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now().Round(0)
			got := storekit.AppendTime(tc.ctx)
			after := time.Now().Round(0)
			assert.Equal(t, got, got.Round(0), "no monotonic clock reading")
			if !tc.want.IsZero() {
				assert.Equal(t, tc.want, got)
				return
			}
			assert.False(t, got.Before(before) || got.After(after), "%v is not between %v and %v", got, before, after)
		})
	}
}

func TestInMemoryKeepsTheTimeAsGiven(t *testing.T) {
	ctx := context.Background()
	s := store.NewInMemory()
	id := memstack.Identity{User: "u"}
	at := time.Date(2023, 5, 8, 12, 30, 0, 7, plus2)
	require.NoError(t, s.Append(memstack.WithTime(ctx, at), id, human("h"), ai("a")))
	before := time.Now().Round(0)
	require.NoError(t, s.Append(ctx, id, human("now")))
	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	require.Len(t, rs, 3)
	assert.Equal(t, at, rs[0].Time, "the location, CEST, is kept")
	assert.Equal(t, at, rs[1].Time)
	assert.Equal(t, "CEST", rs[1].Time.Location().String())
	assert.False(t, rs[2].Time.Before(before))

	// A time the encoding backends cannot store fails here too, storing
	// nothing.
	err = s.Append(memstack.WithTime(ctx, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), id, human("x"), ai("y"))
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "year 10000")
	after, err := s.All(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, rs, after)
}

func TestFromHistoryKeepsNoTimes(t *testing.T) {
	ctx := context.Background()
	id := memstack.Identity{User: "u"}
	s, _ := newHistory(t, id)
	require.NoError(t, s.Append(memstack.WithTime(ctx, time.Date(2023, 5, 8, 0, 0, 0, 0, time.UTC)), id, human("h"), ai("a")))
	require.NoError(t, s.Append(ctx, id, human("h2")))
	all, err := s.All(ctx, id)
	require.NoError(t, err)
	last, err := s.Last(ctx, id, 2)
	require.NoError(t, err)
	require.Len(t, all, 3)
	for _, r := range append(all, last...) {
		assert.Equal(t, time.Time{}, r.Time, "a langchaingo history has no times")
	}
}

func TestAsHistoryDatesWithTheCallersContext(t *testing.T) {
	ctx := context.Background()
	s := store.NewInMemory()
	id := memstack.Identity{User: "u"}
	h := store.AsHistory(s, id)
	t1 := time.Date(2023, 5, 8, 9, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	require.NoError(t, h.AddMessage(memstack.WithTime(ctx, t1), llms.SystemChatMessage{Content: "sys"}))
	require.NoError(t, h.AddUserMessage(memstack.WithTime(ctx, t2), "q"))
	before := time.Now().Round(0)
	require.NoError(t, h.AddAIMessage(ctx, "a"))
	rs, err := s.All(ctx, id)
	require.NoError(t, err)
	require.Len(t, rs, 3)
	assert.Equal(t, t1, rs[0].Time)
	assert.Equal(t, t2, rs[1].Time)
	assert.False(t, rs[2].Time.Before(before), "added without a time: dated now")

	// SetMessages stores every message with the one time of its Append.
	t3 := t1.Add(time.Hour)
	require.NoError(t, h.SetMessages(memstack.WithTime(ctx, t3), []llms.ChatMessage{
		llms.HumanChatMessage{Content: "q1"}, llms.AIChatMessage{Content: "a1"},
	}))
	rs, err = s.All(ctx, id)
	require.NoError(t, err)
	require.Len(t, rs, 2)
	assert.Equal(t, t3, rs[0].Time)
	assert.Equal(t, t3, rs[1].Time)

	// A time the store refuses is the caller's error.
	err = h.AddUserMessage(memstack.WithTime(ctx, time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC)), "x")
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
}
