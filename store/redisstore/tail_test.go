package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/storekit"
)

// checkIndex checks the index of system messages against the list, read
// raw: it exists exactly when the list does, and holds the marker
// "0|i|<head Seq>|<tail Seq>" then a copy of every system element of the
// list, in the list's order; with a TTL it expires with the list.
func checkIndex(t *testing.T, raw *redis.Client, k keyNames) {
	t.Helper()
	ctx := context.Background()
	elems, err := raw.LRange(ctx, k.msgs, 0, -1).Result()
	require.NoError(t, err)
	idx, err := raw.LRange(ctx, k.sys, 0, -1).Result()
	require.NoError(t, err)
	if len(elems) == 0 {
		assert.Empty(t, idx, "no index without a list")
		return
	}
	want := []string{"0|i|" + seqHead(elems[0]) + "|" + seqHead(elems[len(elems)-1])}
	for _, e := range elems {
		if _, rest, _ := strings.Cut(e, "|"); strings.HasPrefix(rest, "s|") {
			want = append(want, e)
		}
	}
	assert.Equal(t, want, idx, "the index holds the marker and a copy of each system element, in order")
	lt, err := raw.PTTL(ctx, k.msgs).Result()
	require.NoError(t, err)
	it, err := raw.PTTL(ctx, k.sys).Result()
	require.NoError(t, err)
	if lt < 0 {
		assert.Equal(t, lt, it, "the index expires when the list does (never)")
	} else {
		assert.InDelta(t, lt.Milliseconds(), it.Milliseconds(), 1000, "the index expires when the list does")
	}
}

// seqHead returns the Seq of a list element, as it is written.
func seqHead(e string) string {
	seq, _, _ := strings.Cut(e, "|")
	return seq
}

// checkTail compares Tail, for several n and after, with what All says it
// must return (storekit.TailOf), then checks the index (checkIndex).
func checkTail(t *testing.T, s *redisstore.Store, raw *redis.Client, k keyNames, id memstack.Identity) {
	t.Helper()
	ctx := context.Background()
	all, err := s.All(ctx, id)
	require.NoError(t, err)
	afters := []int64{0}
	if len(all) > 0 {
		afters = append(afters, all[len(all)/2].Seq, all[len(all)-1].Seq)
	}
	for _, n := range []int{1, 2, 5, math.MaxInt} {
		for _, after := range afters {
			got, err := s.Tail(ctx, id, n, after)
			require.NoError(t, err)
			require.Equal(t, storekit.TailOf(all, n, after), got, "Tail(%d, after Seq %d)", n, after)
		}
	}
	checkIndex(t, raw, k)
}

// TestTailCostsWhatItReturns counts the list elements Tail's script reads
// (the index's and the list's): the same for 1,000 and 20,000 messages —
// the two system messages and the six it returns — and, for a list that
// predates the index, the whole list once, on the Tail that builds the
// index, then again what it returns.
func TestTailCostsWhatItReturns(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	s := open(t, addr, redisstore.WithKeyPrefix(prefix))
	raw := rawClient(t, addr)
	for _, size := range []int{1_000, 20_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			id := alice
			id.Conversation = fmt.Sprint("cost-", size)
			fill(t, s, id, size) // system messages first and in the middle
			require.NoError(t, s.Append(ctx, id, human("q"), ai("a")))
			want := []string{"rules 0", fmt.Sprint("rules ", size/2)}
			for i := size - 4; i < size; i++ {
				want = append(want, fmt.Sprintf("message %d: what did we decide about the launch date and the budget?", i))
			}
			want = append(want, "q", "a")

			rs, read, err := s.TailRead(ctx, id, 6, 0)
			require.NoError(t, err)
			assert.Equal(t, want, contents(rs))
			assert.Equal(t, int64(2+6), read, "Tail(6) reads the two system messages and the six newest, not the list")

			// Up to after: the newest three of a page of 32.
			last, err := s.Last(ctx, id, 4)
			require.NoError(t, err)
			rs, read, err = s.TailRead(ctx, id, math.MaxInt, last[0].Seq)
			require.NoError(t, err)
			assert.Equal(t, append(want[:2:2], contents(last[1:])...), contents(rs))
			assert.LessOrEqual(t, read, int64(2+32), "Tail up to after reads one page")

			// The same list as written before the index existed: the
			// first Tail reads it whole, once, and builds the index.
			k := keysOf(prefix, "default", id)
			require.NoError(t, raw.Del(ctx, k.sys).Err())
			rs, read, err = s.TailRead(ctx, id, 6, 0)
			require.NoError(t, err)
			assert.Equal(t, want, contents(rs))
			assert.GreaterOrEqual(t, read, int64(size+2), "the migration reads the list once")
			rs, read, err = s.TailRead(ctx, id, 6, 0)
			require.NoError(t, err)
			assert.Equal(t, want, contents(rs))
			assert.Equal(t, int64(2+6), read, "then Tail costs what it returns again")
			checkIndex(t, raw, k)
		})
	}
}

// legacyElement is a list element as the build before the index wrote
// it: the same "<seq>|<flag>|<message>" layout, dated or not.
func legacyElement(t *testing.T, seq int64, m llms.ChatMessage, dated bool) string {
	t.Helper()
	var b []byte
	var err error
	if dated {
		b, err = storekit.EncodeMessageAt(m, time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC))
	} else {
		b, err = storekit.EncodeMessage(m)
	}
	require.NoError(t, err)
	flag := "m"
	if m.GetType() == llms.ChatMessageTypeSystem {
		flag = "s"
	}
	return fmt.Sprint(seq, "|", flag, "|", string(b))
}

// plantLegacy writes id's conversation in namespace "recent" with raw
// commands, as the build before the index left it after a window trimmed
// it: the prompts at the head, a gap in the Seqs, the newest turns with a
// system message among them; a seq counter, the namespace set, a TTL on
// the list; no index. It returns the elements.
func plantLegacy(t *testing.T, raw *redis.Client, prefix string, id memstack.Identity) []string {
	t.Helper()
	ctx := context.Background()
	k := keysOf(prefix, "recent", id)
	base := time.Now().UnixMicro()
	elems := []string{
		legacyElement(t, base, system("rules"), false),
		legacyElement(t, base+1, system("persona"), true),
		legacyElement(t, base+20, human("q7"), false),
		legacyElement(t, base+21, ai("a7"), true),
		legacyElement(t, base+22, system("late rule"), true),
		legacyElement(t, base+23, human("q8"), true),
		legacyElement(t, base+24, ai("a8"), true),
	}
	require.NoError(t, raw.RPush(ctx, k.msgs, elems).Err())
	require.NoError(t, raw.PExpire(ctx, k.msgs, time.Hour).Err())
	require.NoError(t, raw.Set(ctx, k.seq, base+24, 0).Err())
	require.NoError(t, raw.SAdd(ctx, k.nss, "recent").Err())
	return elems
}

// TestTailOnListsFromBeforeTheIndex reads lists written by the build
// before the index of system messages — with raw commands, as that build
// left them — after the upgrade: the first Tail is right and builds the
// index (with the list's TTL); writes before any Tail leave the list
// without an index and Tail is still right; a Rewrite that removes the
// whole list starts a new one.
func TestTailOnListsFromBeforeTheIndex(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	s := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("recent"))
	raw := rawClient(t, addr)

	t.Run("first Tail builds the index", func(t *testing.T) {
		k := keysOf(prefix, "recent", alice)
		elems := plantLegacy(t, raw, prefix, alice)
		rs, err := s.Tail(ctx, alice, 2, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"rules", "persona", "late rule", "q8", "a8"}, contents(rs))
		idx, err := raw.LRange(ctx, k.sys, 0, -1).Result()
		require.NoError(t, err)
		assert.Equal(t, []string{"0|i|" + seqHead(elems[0]) + "|" + seqHead(elems[6]), elems[0], elems[1], elems[4]}, idx)
		ttl, err := raw.PTTL(ctx, k.sys).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 59*time.Minute, "the index expires with the list")
		_, read, err := s.TailRead(ctx, alice, 2, 0)
		require.NoError(t, err)
		assert.Equal(t, int64(3+2), read)
		checkTail(t, s, raw, k, alice)
		// Writes go on keeping it.
		require.NoError(t, s.Append(ctx, alice, system("newer rule"), human("q9")))
		checkTail(t, s, raw, k, alice)
	})

	t.Run("writes before the first Tail", func(t *testing.T) {
		k := keysOf(prefix, "recent", bob)
		elems := plantLegacy(t, raw, prefix, bob)
		require.NoError(t, s.Append(ctx, bob, system("newer rule"), human("q9"), ai("a9")))
		seqOf := func(e string) int64 {
			var seq int64
			_, err := fmt.Sscanf(e, "%d|", &seq)
			require.NoError(t, err)
			return seq
		}
		n, err := s.RemovePrefix(ctx, bob, seqOf(elems[3]))
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		n, err = s.Rewrite(ctx, bob, seqOf(elems[0]), false, human("q10"))
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		exists, err := raw.Exists(ctx, k.sys).Result()
		require.NoError(t, err)
		assert.Zero(t, exists, "writes leave a list from before the index without one")
		rs, err := s.Tail(ctx, bob, 1, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"persona", "late rule", "newer rule", "q10"}, contents(rs))
		checkTail(t, s, raw, k, bob)
	})

	t.Run("Rewrite of the whole list starts an index", func(t *testing.T) {
		k := keysOf(prefix, "recent", alice10)
		plantLegacy(t, raw, prefix, alice10)
		_, err := s.Rewrite(ctx, alice10, math.MaxInt64, false, system("fresh"), human("hi"))
		require.NoError(t, err)
		checkIndex(t, raw, k)
		rs, read, err := s.TailRead(ctx, alice10, 1, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"fresh", "hi"}, contents(rs))
		assert.Equal(t, int64(2), read)
	})
}

// TestIndexWithWritersThatDoNotKeepIt runs, with raw commands, the writes
// a replica still on the build before the index makes during a rolling
// upgrade — Append, a Rewrite of a prefix, RemovePrefix, Clear — on a
// conversation that has an index: the index no longer matches the list's
// ends, so Tail rebuilds it and shows what the list holds, and a write of
// this build drops it.
func TestIndexWithWritersThatDoNotKeepIt(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	s := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("recent"))
	raw := rawClient(t, addr)
	k := keysOf(prefix, "recent", alice)
	// oldAppend appends as the old build's script did: Seqs from the
	// counter and the clock, no index.
	oldAppend := func(msgs ...llms.ChatMessage) {
		t.Helper()
		last, err := raw.Get(ctx, k.seq).Int64()
		require.NoError(t, err)
		first := max(last+1, time.Now().UnixMicro())
		elems := make([]any, len(msgs))
		for i, m := range msgs {
			elems[i] = legacyElement(t, first+int64(i), m, true)
		}
		require.NoError(t, raw.RPush(ctx, k.msgs, elems...).Err())
		require.NoError(t, raw.Set(ctx, k.seq, first+int64(len(msgs))-1, 0).Err())
	}
	tail := func(n int) []string {
		t.Helper()
		rs, err := s.Tail(ctx, alice, n, 0)
		require.NoError(t, err)
		return contents(rs)
	}

	require.NoError(t, s.Append(ctx, alice, system("rules"), human("q1"), ai("a1")))
	require.NoError(t, s.Append(ctx, alice, system("persona"), human("q2"), ai("a2")))
	require.Equal(t, []string{"rules", "persona", "a2"}, tail(1))

	oldAppend(system("old rule"), human("q3"))
	assert.Equal(t, []string{"rules", "persona", "old rule", "q3"}, tail(1), "an old Append's system message shows")
	checkIndex(t, raw, k)

	// An old Rewrite removing a prefix, the first system message with it.
	require.NoError(t, raw.LTrim(ctx, k.msgs, 2, -1).Err())
	assert.Equal(t, []string{"persona", "old rule", "q3"}, tail(1), "a system message an old Rewrite removed is gone")
	checkIndex(t, raw, k)

	// An old RemovePrefix: the non-system messages at the head go, the
	// system ones stay.
	elems, err := raw.LRange(ctx, k.msgs, 0, -1).Result()
	require.NoError(t, err)
	require.NoError(t, raw.Del(ctx, k.msgs).Err())
	for _, e := range elems {
		if strings.Contains(e, "|s|") || strings.Contains(e, `"q3"`) {
			require.NoError(t, raw.RPush(ctx, k.msgs, e).Err())
		}
	}
	assert.Equal(t, []string{"persona", "old rule", "q3"}, tail(5))
	checkIndex(t, raw, k)

	// An old Clear, then an old Append.
	require.NoError(t, raw.Del(ctx, k.msgs).Err())
	assert.Empty(t, tail(5), "an old Clear leaves an index without a list: ignored")
	oldAppend(system("after clear"), human("q4"))
	assert.Equal(t, []string{"after clear", "q4"}, tail(5), "nothing from before the Clear")
	checkIndex(t, raw, k)

	// An old Append, then a write of this build before any Tail: the
	// write drops the stale index, and the next Tail builds it.
	oldAppend(system("another old rule"), human("q5"))
	require.NoError(t, s.Append(ctx, alice, human("q6")))
	assert.Zero(t, raw.Exists(ctx, k.sys).Val(), "a write drops a stale index")
	assert.Equal(t, []string{"after clear", "another old rule", "q6"}, tail(1))
	checkTail(t, s, raw, k, alice)
	n, err := s.RemovePrefix(ctx, alice, math.MaxInt64)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	checkTail(t, s, raw, k, alice)
}

// TestIndexFollowsEveryWrite runs random writes — Appends of system and
// other messages (some larger than a script's batch), RemovePrefix (some
// in several chunks), Rewrite with and without reset, PutState, Clear,
// Forget — and checks after each one that the index is exactly the list's
// system elements, expiring with it, and that Tail agrees with All.
func TestIndexFollowsEveryWrite(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	raw := rawClient(t, addr)
	for _, ttl := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprint("ttl=", ttl), func(t *testing.T) {
			prefix := uniquePrefix()
			s := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithTTL(ttl))
			k := keysOf(prefix, "default", alice)
			rng := rand.New(rand.NewPCG(1, uint64(ttl)))
			msgs := func(n int) []llms.ChatMessage {
				out := make([]llms.ChatMessage, n)
				for i := range out {
					if rng.IntN(3) == 0 {
						out[i] = system(fmt.Sprint("s", rng.Int()))
					} else {
						out[i] = human(fmt.Sprint("h", rng.Int()))
					}
				}
				return out
			}
			through := func() int64 {
				all, err := s.All(ctx, alice)
				require.NoError(t, err)
				if len(all) == 0 || rng.IntN(5) == 0 {
					return math.MaxInt64
				}
				return all[rng.IntN(len(all))].Seq
			}
			for step := range 150 {
				var what string
				switch r := rng.IntN(100); {
				case r < 45:
					what = "Append"
					require.NoError(t, s.Append(ctx, alice, msgs(1+rng.IntN(3))...))
				case r < 50:
					what = "large Append"
					require.NoError(t, s.Append(ctx, alice, msgs(1200+rng.IntN(300))...))
				case r < 65:
					what = "RemovePrefix"
					_, err := s.RemovePrefix(ctx, alice, through())
					require.NoError(t, err)
				case r < 82:
					what = "Rewrite"
					_, err := s.Rewrite(ctx, alice, through(), rng.IntN(3) == 0, msgs(rng.IntN(3))...)
					require.NoError(t, err)
				case r < 90:
					what = "PutState"
					st, err := s.GetState(ctx, alice, "x")
					require.NoError(t, err)
					_, err = s.PutState(ctx, alice, "x", []byte("v"), st.Version)
					require.NoError(t, err)
				case r < 95:
					what = "Clear"
					require.NoError(t, s.Clear(ctx, alice))
				default:
					what = "Forget"
					require.NoError(t, s.Forget(ctx, alice))
				}
				checkIndex(t, raw, k)
				if t.Failed() {
					t.Fatalf("step %d: %s", step, what)
				}
				if step%10 == 0 {
					checkTail(t, s, raw, k, alice)
				}
			}
			checkTail(t, s, raw, k, alice)
		})
	}
}

// TestAppendKeyPerNamespace: an append key is remembered per identity and
// namespace — the ops hash holding the tokens is the identity's, shared by
// its namespaces, so the key's token names the namespace — across clients,
// through Clear, and not through Forget.
func TestAppendKeyPerNamespace(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	recent := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("recent"))
	facts := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("facts"))
	recent2 := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("recent"))
	raw := rawClient(t, addr)
	kctx := store.WithAppendKey(ctx, "save:1")
	all := func(s *redisstore.Store) []string {
		t.Helper()
		rs, err := s.All(ctx, alice)
		require.NoError(t, err)
		return contents(rs)
	}

	require.NoError(t, recent.Append(kctx, alice, human("q"), ai("a")))
	require.NoError(t, facts.Append(kctx, alice, human("q"), ai("a")))
	assert.Equal(t, []string{"q", "a"}, all(facts), "the key used in another namespace stores the turn here too")
	require.NoError(t, recent2.Append(kctx, alice, human("q"), ai("a")))
	require.NoError(t, facts.Append(kctx, alice, human("q"), ai("a")))
	assert.Equal(t, []string{"q", "a"}, all(recent), "another client, same namespace and key: stored once")
	assert.Equal(t, []string{"q", "a"}, all(facts))
	ops, err := raw.HKeys(ctx, keysOf(prefix, "recent", alice).ops).Result()
	require.NoError(t, err)
	assert.Subset(t, ops, []string{"k:recent:save:1", "k:facts:save:1"})

	require.NoError(t, recent.Clear(ctx, alice))
	require.NoError(t, recent.Append(kctx, alice, human("q"), ai("a")))
	assert.Empty(t, all(recent), "the key is remembered through Clear")
	require.NoError(t, recent.Forget(ctx, alice))
	require.NoError(t, recent.Append(kctx, alice, human("q"), ai("a")))
	assert.Equal(t, []string{"q", "a"}, all(recent), "Forget leaves nothing of the identity, its keys included")

	err = recent.Append(store.WithAppendKey(ctx, "two words"), alice, human("x"))
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	assert.Contains(t, err.Error(), alice.Key())
	assert.Equal(t, []string{"q", "a"}, all(recent), "an invalid key stores nothing")
}

// BenchmarkTail reads Tail(10) of a conversation of 1,000 and of 100,000
// messages, two of them system messages: the time per call is the same,
// since Tail reads what it returns.
//
//	go test -run '^$' -bench Tail ./store/redisstore/
func BenchmarkTail(b *testing.B) {
	addr := testsvc.Redis(b)
	ctx := context.Background()
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			s, err := redisstore.Open(ctx, addr, redisstore.WithKeyPrefix("bench-tail-"+randomHex(6)))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			fill(b, s, alice, n)
			for b.Loop() {
				if _, err := s.Tail(ctx, alice, 10, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if err := s.Forget(ctx, alice); err != nil {
				b.Fatal(err)
			}
		})
	}
}
