package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// ---------------------------------------------------------------------------
// Times.
// ---------------------------------------------------------------------------

// kitTimes are the times the time subtests date Appends with: different
// offsets (a named zone, a half-hour one, UTC), nanoseconds, and the ends
// of what RFC 3339 holds.
var kitTimes = []struct {
	name string
	at   time.Time
}{
	{"UTC", time.Date(2023, 5, 8, 10, 30, 0, 0, time.UTC)},
	{"east of UTC with nanoseconds", time.Date(2023, 5, 8, 12, 30, 0, 123456789, time.FixedZone("CEST", 2*3600))},
	{"west of UTC by 7h30", time.Date(2019, 12, 31, 23, 59, 59, 1000, time.FixedZone("", -(7*3600+1800)))},
	{"year 1", time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)},
	{"year 9999", time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", 14*3600))},
}

// requireTime fails unless got is the instant of want with its UTC offset.
func requireTime(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	_, wantOff := want.Zone()
	_, gotOff := got.Zone()
	if !got.Equal(want) || gotOff != wantOff {
		require.Failf(t, "the stored time is not the Append's",
			"want %s (UTC offset %ds), got %s (UTC offset %ds); %s",
			want.Format(time.RFC3339Nano), wantOff, got.Format(time.RFC3339Nano), gotOff, fmt.Sprint(msgAndArgs...))
	}
}

// requireTimes fails unless every record has the time want.
func requireTimes(t *testing.T, want time.Time, rs []store.Record, what string) {
	t.Helper()
	for i, r := range rs {
		requireTime(t, want, r.Time, what, ", record ", i, " (Seq ", r.Seq, ")")
	}
}

func testTimeFromContext(t *testing.T, e *env) {
	s, other := e.store(), e.store()
	for i, tc := range kitTimes {
		t.Run(tc.name, func(t *testing.T) {
			id := memstack.Identity{Tenant: "time", User: fmt.Sprint("u", i)}
			ctx := memstack.WithTime(e.ctx, tc.at)
			require.NoError(t, s.Append(ctx, id, system("sys")))
			require.NoError(t, s.Append(ctx, id, human("h"), ai("a")))
			all := mustAll(t, s, id)
			require.Len(t, all, 3)
			requireTimes(t, tc.at, all, "All")
			last, err := s.Last(e.ctx, id, 2)
			require.NoError(t, err)
			require.Len(t, last, 2)
			requireTimes(t, tc.at, last, "Last(2)")
			one, err := s.Last(e.ctx, id, 1)
			require.NoError(t, err)
			require.Len(t, one, 1)
			requireTimes(t, tc.at, one, "Last(1)")
			assert.Equal(t, all, mustAll(t, s, id), "two reads return the same records, times included")

			// Another client over the same data reads the same times.
			requireTimes(t, tc.at, mustAll(t, other, id), "All by a second client")
		})
	}
}

func testTimeDefaultsToNow(t *testing.T, e *env) {
	s := e.store()
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no time in the context", e.ctx},
		{"a zero time in the context", memstack.WithTime(e.ctx, time.Time{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := memstack.Identity{Tenant: "now", User: tc.name}
			before := time.Now().Round(0)
			require.NoError(t, s.Append(tc.ctx, id, human("h"), ai("a")))
			after := time.Now().Round(0)
			rs := mustAll(t, s, id)
			require.Len(t, rs, 2)
			for _, r := range rs {
				assert.False(t, r.Time.IsZero(), "a message appended without a time is dated now")
				assert.False(t, r.Time.Before(before), "dated %s, before the Append started at %s",
					r.Time.Format(time.RFC3339Nano), before.Format(time.RFC3339Nano))
				assert.False(t, r.Time.After(after), "dated %s, after the Append returned at %s",
					r.Time.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
			}
		})
	}
}

func testTimeSharedByTurn(t *testing.T, e *env) {
	s := e.store()
	// Without a time in the context: one clock reading per Append.
	mustAppend(t, s, alice, system("sys"), human("h1"), ai("a1"), llms.ToolChatMessage{ID: "1", Content: "r"})
	rs := mustAll(t, s, alice)
	require.Len(t, rs, 4)
	requireTimes(t, rs[0].Time, rs, "every message of one Append has its time")

	// With one: every message, each Append its own time.
	t1 := time.Date(2023, 5, 8, 10, 0, 0, 0, time.UTC)
	t2 := t1.Add(90 * time.Second)
	require.NoError(t, s.Append(memstack.WithTime(e.ctx, t1), bob, human("q1"), ai("r1")))
	require.NoError(t, s.Append(memstack.WithTime(e.ctx, t2), bob, human("q2"), ai("r2"), human("q3")))
	rs = mustAll(t, s, bob)
	require.Len(t, rs, 5)
	requireTimes(t, t1, rs[:2], "first Append")
	requireTimes(t, t2, rs[2:], "second Append")
}

func testTimeSurvivesRemovePrefix(t *testing.T, e *env) {
	s := e.store()
	t0 := time.Date(2022, 1, 1, 9, 0, 0, 0, time.FixedZone("", -5*3600))
	at := func(i int) context.Context { return memstack.WithTime(e.ctx, t0.Add(time.Duration(i)*time.Hour)) }
	require.NoError(t, s.Append(at(0), alice, system("sys")))
	for i := 1; i <= 4; i++ {
		require.NoError(t, s.Append(at(i), alice, human(fmt.Sprint("h", i)), ai(fmt.Sprint("a", i))))
	}
	require.NoError(t, s.Append(at(9), bob, human("b")))
	all := mustAll(t, s, alice)
	require.Len(t, all, 9)

	n, err := s.RemovePrefix(e.ctx, alice, all[4].Seq) // h1, a1, h2, a2
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	kept := mustAll(t, s, alice)
	require.Len(t, kept, 5)
	requireTime(t, t0, kept[0].Time, "the pinned system message")
	for i, r := range kept[1:] {
		requireTime(t, t0.Add(time.Duration(3+i/2)*time.Hour), r.Time, "kept message ", r.Message.GetContent())
	}
	assert.Equal(t, append([]store.Record{all[0]}, all[5:]...), kept, "the kept records are unchanged, times included")
	last, err := s.Last(e.ctx, alice, 2)
	require.NoError(t, err)
	assert.Equal(t, all[7:], last)
	requireTimes(t, t0.Add(9*time.Hour), mustAll(t, s, bob), "another identity")

	// Appends after the removal are dated as usual.
	require.NoError(t, s.Append(at(5), alice, human("h5")))
	rs := mustAll(t, s, alice)
	requireTime(t, t0.Add(5*time.Hour), rs[len(rs)-1].Time, "an Append after RemovePrefix")
	assert.Equal(t, kept, rs[:len(rs)-1])
}

func testTimeUnstorable(t *testing.T, e *env) {
	s := e.store()
	mustAppend(t, s, alice, human("before"))
	before := mustAll(t, s, alice)
	for _, at := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", 19*60+32)),
	} {
		t.Run(at.String(), func(t *testing.T) {
			id := memstack.Identity{Tenant: "unstorable", User: at.String()}
			err := s.Append(memstack.WithTime(e.ctx, at), id, human("h"), ai("a"))
			if err != nil {
				// A store that cannot keep the time refuses the whole
				// Append, clearly.
				assert.ErrorIs(t, err, store.ErrInvalidArgument)
				assert.Empty(t, mustAll(t, s, id), "a refused Append stores nothing")
				return
			}
			// A store that keeps it gives it back exactly.
			rs := mustAll(t, s, id)
			require.Len(t, rs, 2)
			requireTimes(t, at, rs, "a time outside RFC 3339")
		})
	}
	assert.Equal(t, before, mustAll(t, s, alice))
	mustAppend(t, s, alice, human("after"))
	assert.Len(t, mustAll(t, s, alice), 2, "the store works afterwards")
}
