package storetest

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// wantTail is Tail's answer computed from All: every system message and
// the newest n others with a Seq after after, in Seq order.
func wantTail(all []store.Record, n int, after int64) []store.Record {
	var sys, rest []store.Record
	for _, r := range all {
		if r.Message.GetType() == llms.ChatMessageTypeSystem {
			sys = append(sys, r)
		} else if r.Seq > after {
			rest = append(rest, r)
		}
	}
	rest = rest[max(len(rest)-n, 0):]
	return storekit.MergeBySeq(sys, rest)
}

func testTail(t *testing.T, e *env) {
	s := e.store()
	rs, err := s.Tail(e.ctx, alice, 3, 0)
	require.NoError(t, err)
	assert.Empty(t, rs, "Tail of an unknown identity")

	mustAppend(t, s, alice, system("sys1"), human("h1"), ai("a1"))
	mustAppend(t, s, alice, human("h2"), ai("a2"))
	mustAppend(t, s, alice, system("sys2"))
	for i := 3; i <= 12; i++ {
		mustAppend(t, s, alice, human(fmt.Sprintf("h%d", i)), ai(fmt.Sprintf("a%d", i)))
	}
	mustAppend(t, s, alice, system("sys3"), human("h13"))
	mustAppend(t, s, bob, system("bob sys"), human("bob"))
	all := mustAll(t, s, alice)
	require.Len(t, all, 28)
	afters := []int64{0, all[3].Seq, all[len(all)-5].Seq, all[len(all)-1].Seq, all[len(all)-1].Seq + 1000}
	for _, n := range []int{1, 2, 3, 7, 24, 25, 100, math.MaxInt} {
		for ai, after := range afters {
			t.Run(fmt.Sprintf("n=%d/after=%d", n, ai), func(t *testing.T) {
				got, err := s.Tail(e.ctx, alice, n, after)
				require.NoError(t, err)
				assert.Equal(t, wantTail(all, n, after), got,
					"Tail(%d, after Seq %d) is every system message and the newest %d others after it, in Seq order", n, after, n)
			})
		}
	}
	got, err := s.Tail(e.ctx, bob, 5, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"bob sys", "bob"}, contentsOf(got), "Tail reads one identity only")
}

func testTailAfterRemovePrefix(t *testing.T, e *env) {
	s := e.store()
	mustAppend(t, s, alice, human("h1"), ai("a1"))
	mustAppend(t, s, alice, system("sys"))
	mustAppend(t, s, alice, human("h2"), ai("a2"))
	mustAppend(t, s, alice, human("h3"), ai("a3"))
	all := mustAll(t, s, alice)
	_, err := s.RemovePrefix(e.ctx, alice, all[4].Seq)
	require.NoError(t, err)
	after := mustAll(t, s, alice)
	require.Equal(t, []string{"sys", "h3", "a3"}, contentsOf(after))
	for _, n := range []int{1, 2, 5} {
		got, err := s.Tail(e.ctx, alice, n, 0)
		require.NoError(t, err)
		assert.Equal(t, wantTail(after, n, 0), got, "Tail(%d) after RemovePrefix", n)
	}
	require.NoError(t, s.Clear(e.ctx, alice))
	got, err := s.Tail(e.ctx, alice, 5, 0)
	require.NoError(t, err)
	assert.Empty(t, got, "Tail after Clear: system messages are gone too")
}

func testTailRejectsN(t *testing.T, e *env) {
	s := e.store()
	mustAppend(t, s, alice, system("s"), human("h"))
	for _, n := range []int{0, -1, -1 << 31} {
		rs, err := s.Tail(e.ctx, alice, n, 0)
		require.Error(t, err, "Tail(n=%d)", n)
		assert.ErrorIs(t, err, store.ErrInvalidArgument, "Tail(n=%d)", n)
		assert.Empty(t, rs)
	}
}

// testTailWholeTurns reads Tail(2) while writers append two-message turns:
// the newest two messages are always one whole turn.
func testTailWholeTurns(t *testing.T, e *env) {
	s, reader := e.store(), e.store()
	mustAppend(t, s, alice, system("sys"))
	// The writers go on until the reader has seen turns many times (or a
	// few seconds have passed), so its reads always race with appends,
	// however the scheduler runs them: on a loaded machine writers that
	// stop after a fixed number of turns may be done before the first
	// read.
	const writers, minTurns, wantReads = 4, 25, 200
	var (
		wg       sync.WaitGroup
		appended atomic.Int64
	)
	stop := make(chan struct{})
	halt := sync.OnceFunc(func() { close(stop) })
	defer func() { halt(); wg.Wait() }() // also when an assertion ends the test early
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					if i >= minTurns {
						return
					}
				default:
				}
				msg := turnText(fmt.Sprintf("w%d", w), i)
				if err := s.Append(e.ctx, alice, human(msg), ai(msg)); err != nil {
					errs <- err
					return
				}
				appended.Add(1)
			}
		})
	}
	seen := 0
	for deadline := time.Now().Add(5 * time.Second); seen < wantReads && time.Now().Before(deadline); {
		rs, err := reader.Tail(e.ctx, alice, 2, 0)
		require.NoError(t, err)
		if len(rs) == 1 {
			continue // no turn yet
		}
		seen++
		require.Len(t, rs, 3, "the system message and the newest two")
		assert.Equal(t, "sys", rs[0].Message.GetContent())
		require.Equal(t, rs[1].Message.GetContent(), rs[2].Message.GetContent(), "Tail(2) showed half of one turn and half of another")
		assert.Equal(t, rs[1].Seq+1, rs[2].Seq)
	}
	halt()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Positive(t, seen)
	assert.Equal(t, 1+2*int(appended.Load()), mustStat(t, s, alice).Count)
}

func testAppendKeyOnce(t *testing.T, e *env) {
	s, other := e.store(), e.store()
	k1 := store.WithAppendKey(e.ctx, "turn-1")
	require.NoError(t, s.Append(k1, alice, human("h1"), ai("a1")))
	require.NoError(t, s.Append(k1, alice, human("h1"), ai("a1")), "an Append under a stored key returns nil")
	require.NoError(t, other.Append(k1, alice, human("h1"), ai("a1")), "another client, same key")
	assert.Equal(t, []string{"h1", "a1"}, contentsOf(mustAll(t, s, alice)), "a unit appended three times under one key is stored once")

	require.NoError(t, s.Append(store.WithAppendKey(e.ctx, "turn-2"), alice, human("h1"), ai("a1")))
	require.NoError(t, s.Append(e.ctx, alice, human("h1"), ai("a1")))
	assert.Equal(t, []string{"h1", "a1", "h1", "a1", "h1", "a1"}, contentsOf(mustAll(t, s, alice)),
		"another key, or none, stores the same messages again")

	require.NoError(t, s.Append(k1, bob, human("b1")))
	assert.Equal(t, []string{"b1"}, contentsOf(mustAll(t, s, bob)), "keys are per identity")

	// A system message as a unit of its own, keyed: stored once, and the
	// key stays with it after RemovePrefix (system messages are pinned).
	ks := store.WithAppendKey(e.ctx, "sys-1")
	require.NoError(t, s.Append(ks, alice, system("prompt")))
	all := mustAll(t, s, alice)
	_, err := s.RemovePrefix(e.ctx, alice, all[len(all)-1].Seq)
	require.NoError(t, err)
	require.NoError(t, s.Append(ks, alice, system("prompt")))
	assert.Equal(t, []string{"prompt"}, contentsOf(mustAll(t, s, alice)), "a pinned system message keeps its key")
}

func testAppendKeyRacing(t *testing.T, e *env) {
	clients := []store.Store{e.store(), e.store()}
	const rounds, perClient = 10, 4
	for round := range rounds {
		ctx := store.WithAppendKey(e.ctx, fmt.Sprintf("race-%d", round))
		msg := fmt.Sprintf("turn %d", round)
		var wg sync.WaitGroup
		errs := make(chan error, 2*perClient)
		for _, c := range clients {
			for range perClient {
				wg.Go(func() {
					if err := c.Append(ctx, alice, human(msg), ai(msg)); err != nil {
						errs <- err
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	all := mustAll(t, clients[0], alice)
	require.Len(t, all, 2*rounds, "each keyed turn stored once, however many Appends raced")
	for round := range rounds {
		msg := fmt.Sprintf("turn %d", round)
		assert.Equal(t, []string{msg, msg}, contentsOf(all[2*round:2*round+2]))
		assert.Equal(t, llms.ChatMessageTypeHuman, all[2*round].Message.GetType())
	}
}

func testAppendKeyValidated(t *testing.T, e *env) {
	s := e.store()
	for _, key := range []string{"has space", "tab\there", string(make([]byte, 201)), "ünïcode"} {
		err := s.Append(store.WithAppendKey(e.ctx, key), alice, human("h"))
		require.Error(t, err, "key %q", key)
		assert.ErrorIs(t, err, store.ErrInvalidArgument, "key %q", key)
	}
	assert.Empty(t, mustAll(t, s, alice), "an Append with an invalid key stores nothing")
	require.NoError(t, s.Append(store.WithAppendKey(e.ctx, ""), alice, human("h")), "an empty key is no key")
	require.NoError(t, s.Append(store.WithAppendKey(e.ctx, ""), alice, human("h")))
	assert.Len(t, mustAll(t, s, alice), 2)
}
