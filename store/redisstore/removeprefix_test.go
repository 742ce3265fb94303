package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store/redisstore"
)

// fill appends n messages to id in turns of 1,000, a system message
// first and another in the middle.
func fill(tb testing.TB, s *redisstore.Store, id memstack.Identity, n int) {
	tb.Helper()
	ctx := context.Background()
	batch := make([]llms.ChatMessage, 0, 1000)
	for i := range n {
		var m llms.ChatMessage = human(fmt.Sprintf("message %d: what did we decide about the launch date and the budget?", i))
		if i == 0 || i == n/2 {
			m = system(fmt.Sprint("rules ", i))
		}
		batch = append(batch, m)
		if len(batch) == cap(batch) || i == n-1 {
			if err := s.Append(ctx, id, batch...); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// pinger measures how long PINGs from another client wait while fn runs:
// a script holds the server for as long as it runs, so the longest PING
// is about the longest time the call blocked every other client.
func pinger(tb testing.TB, raw *redis.Client, fn func()) (longest time.Duration, pings int) {
	tb.Helper()
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			if err := raw.Ping(ctx).Err(); err != nil {
				tb.Error(err)
				return
			}
			longest = max(longest, time.Since(t0))
			pings++
		}
	})
	time.Sleep(10 * time.Millisecond)
	fn()
	close(stop)
	wg.Wait()
	return longest, pings
}

// longestScript runs fn with the server logging every command (SLOWLOG,
// threshold 0) and returns the longest time a script whose KEYS included
// key held the server: what every other client waited at worst, measured
// by the server itself.
func longestScript(tb testing.TB, raw *redis.Client, key string, fn func()) (longest time.Duration, scripts int) {
	tb.Helper()
	ctx := context.Background()
	old, err := raw.ConfigGet(ctx, "slowlog-*").Result()
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range map[string]string{"slowlog-log-slower-than": "0", "slowlog-max-len": "100000"} {
		if err := raw.ConfigSet(ctx, k, v).Err(); err != nil {
			tb.Fatal(err)
		}
	}
	defer func() {
		for _, k := range []string{"slowlog-log-slower-than", "slowlog-max-len"} {
			_ = raw.ConfigSet(ctx, k, old[k]).Err()
		}
	}()
	if err := raw.Do(ctx, "SLOWLOG", "RESET").Err(); err != nil {
		tb.Fatal(err)
	}
	fn()
	logs, err := raw.SlowLogGet(ctx, -1).Result()
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range logs {
		if len(l.Args) > 3 && strings.HasPrefix(strings.ToLower(l.Args[0]), "eval") && slices.Contains(l.Args[3:], key) {
			longest = max(longest, l.Duration)
			scripts++
		}
	}
	return longest, scripts
}

// TestRemovePrefixDoesNotBlockTheServer removes 100,000 messages: the
// removal runs in chunks, so no script of it holds the server for long
// (one script removing all of them held it for 0.2 to 1.2 s on the machine
// this was written on; a chunk takes 1 to 2 ms), as the server's SLOWLOG
// shows, while another client's PINGs are answered throughout; and the
// contract holds: only non-system messages up to through go, the count is
// right, the kept messages keep their Seqs and order.
func TestRemovePrefixDoesNotBlockTheServer(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	raw := rawClient(t, addr)
	prefix := uniquePrefix()
	s := open(t, addr, redisstore.WithKeyPrefix(prefix))
	const n = 100_000
	fill(t, s, alice, n)
	require.NoError(t, s.Append(ctx, alice, human("newest")))
	st, err := s.Stat(ctx, alice)
	require.NoError(t, err)
	require.Equal(t, n+1, st.Count)
	// The Seqs of the middle system message and of the last message to
	// remove, read without decoding 100,000 messages.
	seqAt := func(i int64) int64 {
		v, err := raw.LIndex(ctx, keysOf(prefix, "default", alice).msgs, i).Result()
		require.NoError(t, err)
		var seq int64
		_, err = fmt.Sscanf(v, "%d|", &seq)
		require.NoError(t, err)
		return seq
	}
	middle, through := seqAt(n/2), seqAt(n-1)
	var removed int
	var ping time.Duration
	var pings int
	longest, scripts := longestScript(t, raw, keysOf(prefix, "default", alice).msgs, func() {
		ping, pings = pinger(t, raw, func() {
			removed, err = s.RemovePrefix(ctx, alice, through)
		})
	})
	require.NoError(t, err)
	t.Logf("RemovePrefix of %d messages: %d scripts, the longest %v; longest PING %v (%d PINGs)", n-2, scripts, longest, ping, pings)
	assert.Equal(t, n-2, removed, "every non-system message up to through")
	after, err := s.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"rules 0", fmt.Sprint("rules ", n/2), "newest"}, contents(after))
	assert.Equal(t, []int64{st.FirstSeq, middle, st.LastSeq}, []int64{after[0].Seq, after[1].Seq, after[2].Seq}, "Seqs are kept")
	assert.GreaterOrEqual(t, scripts, n/1000, "removed in chunks")
	assert.Less(t, longest, 100*time.Millisecond, "no script holds the server for the whole removal")

	// Nothing more to remove: the system messages stay.
	removed, err = s.RemovePrefix(ctx, alice, math.MaxInt64)
	require.NoError(t, err)
	assert.Equal(t, 1, removed)
	after, err = s.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"rules 0", fmt.Sprint("rules ", n/2)}, contents(after))
}

// BenchmarkRemovePrefix removes every message of a conversation of 1,000
// and of 100,000 messages while another client PINGs, and reports the
// time per removal, the longest script of it (from the server's SLOWLOG:
// how long it held the server) and the longest PING:
//
//	go test -run '^$' -bench RemovePrefix -benchtime 5x ./store/redisstore/
func BenchmarkRemovePrefix(b *testing.B) {
	addr := testsvc.Redis(b)
	ctx := context.Background()
	raw := redis.NewClient(&redis.Options{Addr: addr})
	defer raw.Close()
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			prefix := "bench-rp-" + randomHex(6)
			s, err := redisstore.Open(ctx, addr, redisstore.WithKeyPrefix(prefix))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var ping, script, total time.Duration
			msgs := keysOf(prefix, "default", alice).msgs
			for range b.N {
				b.StopTimer()
				fill(b, s, alice, n)
				b.StartTimer()
				l, _ := longestScript(b, raw, msgs, func() {
					p, _ := pinger(b, raw, func() {
						t0 := time.Now()
						if _, err := s.RemovePrefix(ctx, alice, math.MaxInt64); err != nil {
							b.Fatal(err)
						}
						total += time.Since(t0)
					})
					ping = max(ping, p)
				})
				script = max(script, l)
				b.StopTimer()
				if err := s.Forget(ctx, alice); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "ms/removal")
			b.ReportMetric(float64(script.Microseconds())/1e3, "longest-script-ms")
			b.ReportMetric(float64(ping.Microseconds())/1e3, "longest-ping-ms")
		})
	}
}
