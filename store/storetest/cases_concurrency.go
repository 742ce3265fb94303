package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

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
