package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
)

// A Clear under WithTTL holds after its mark expires: the absent version
// never goes back, so a commit that read before the Clear conflicts
// however late it comes ("Cleared means gone, across replicas").

// waitGone waits until none of keys exists (a TTL ran out).
func waitGone(t *testing.T, raw *redis.Client, keys ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, err := raw.Exists(context.Background(), keys...).Result()
		return err == nil && n == 0
	}, 10*time.Second, 20*time.Millisecond, "the keys %v expire", keys)
}

func TestClearHoldsAfterItsMarkExpires(t *testing.T) {
	t.Parallel() // waits on the clock
	addr := testsvc.Redis(t)
	ctx := context.Background()
	raw := rawClient(t, addr)
	prefix := uniquePrefix()
	const ns = "ttl"
	s := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace(ns), redisstore.WithTTL(time.Second))

	// stale reads name "summary" of a fresh identity after setup, runs
	// between (the Clear), waits until every key of the namespace has
	// expired — the mark too — and returns what the read returned.
	stale := func(t *testing.T, name string, setup, between func(id memstack.Identity)) (memstack.Identity, store.State) {
		t.Helper()
		id := memstack.Identity{Tenant: "acme", User: name, Conversation: randomHex(4)}
		if setup != nil {
			setup(id)
		}
		read, err := s.GetState(ctx, id, "summary")
		require.NoError(t, err)
		between(id)
		k := keysOf(prefix, ns, id)
		require.Equal(t, int64(1), raw.Exists(ctx, k.cleared).Val(), "the Clear left its mark")
		waitGone(t, raw, k.msgs, k.state, k.cleared, k.sys, k.seq, k.nss)
		return id, read
	}
	clear := func(id memstack.Identity) { require.NoError(t, s.Clear(ctx, id)) }
	conflicts := func(t *testing.T, id memstack.Identity, read store.State) {
		t.Helper()
		_, err := s.PutState(ctx, id, "summary", []byte("the cleared text"), read.Version)
		require.ErrorIs(t, err, store.ErrConflict, "a commit that read before the Clear (version %d) lands after its mark expired", read.Version)
		st, err := s.GetState(ctx, id, "summary")
		require.NoError(t, err)
		assert.False(t, st.Exists(), "the cleared text is back: %q", st.Value)
		assert.Greater(t, st.Version, read.Version, "the absent version went back")
		// A commit that reads afterwards goes through.
		_, err = s.PutState(ctx, id, "summary", []byte("new"), st.Version)
		require.NoError(t, err)
	}

	t.Run("a state never valued (absent version 0)", func(t *testing.T) {
		t.Parallel()
		id, read := stale(t, "never", func(id memstack.Identity) {
			require.NoError(t, s.Append(ctx, id, human("my card is 4111"), ai("noted")))
		}, clear)
		require.False(t, read.Exists())
		conflicts(t, id, read)
	})

	t.Run("a state never valued, in a slot with a forgotten version", func(t *testing.T) {
		t.Parallel()
		id, read := stale(t, "forgotten", func(id memstack.Identity) {
			require.NoError(t, s.Forget(ctx, id))
			require.NoError(t, s.Append(ctx, id, human("my card is 4111")))
		}, clear)
		require.False(t, read.Exists())
		require.Positive(t, read.Version, "the read returned the slot's forgotten version")
		conflicts(t, id, read)
	})

	t.Run("an earlier Clear's mark", func(t *testing.T) {
		t.Parallel()
		id, read := stale(t, "twice", func(id memstack.Identity) {
			require.NoError(t, s.Clear(ctx, id))
			require.NoError(t, s.Append(ctx, id, human("my card is 4111")))
		}, clear)
		require.False(t, read.Exists())
		require.Positive(t, read.Version, "the read returned the first Clear's mark")
		conflicts(t, id, read)
	})

	t.Run("a value", func(t *testing.T) {
		t.Parallel()
		id, read := stale(t, "valued", func(id memstack.Identity) {
			create(t, s, id, "summary", []byte("the user's card is 4111"))
		}, clear)
		require.True(t, read.Exists())
		conflicts(t, id, read)
	})

	t.Run("Rewrite with reset", func(t *testing.T) {
		t.Parallel()
		id, read := stale(t, "rewritten", func(id memstack.Identity) {
			require.NoError(t, s.Append(ctx, id, human("my card is 4111")))
		}, func(id memstack.Identity) {
			_, err := s.Rewrite(ctx, id, 1<<62, true, human("hello"))
			require.NoError(t, err)
		})
		conflicts(t, id, read)
	})

	// The build before this rule gave a mark its expiry without raising
	// the slot's forgotten version: the next write of the namespace under
	// a TTL raises it.
	t.Run("a mark of the previous build", func(t *testing.T) {
		t.Parallel()
		id := memstack.Identity{Tenant: "acme", User: "old-build", Conversation: randomHex(4)}
		k := keysOf(prefix, ns, id)
		require.NoError(t, s.Append(ctx, id, human("my card is 4111")))
		read, err := s.GetState(ctx, id, "summary")
		require.NoError(t, err)
		// What that build's Clear left: no messages, a mark with the TTL,
		// the slot's forgotten version untouched.
		plain := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace(ns))
		require.NoError(t, plain.Clear(ctx, id))
		f, _ := raw.Get(ctx, k.forgotten).Int64()
		mark, err := raw.Get(ctx, k.cleared).Int64()
		require.NoError(t, err)
		require.Less(t, f, mark, "a Clear without TTL does not raise the forgotten version (its mark never expires)")
		require.NoError(t, raw.PExpire(ctx, k.cleared, time.Second).Err())
		require.NoError(t, s.Append(ctx, id, human("hello again")))
		f, err = raw.Get(ctx, k.forgotten).Int64()
		require.NoError(t, err)
		assert.GreaterOrEqual(t, f, mark, "a write under a TTL raises the forgotten version to the mark")
		// The plain Clear made the shared keys persistent: wait for the
		// namespace's.
		waitGone(t, raw, k.msgs, k.state, k.cleared, k.sys)
		conflicts(t, id, read)
	})
}

// A Summary fold that read before a Clear, held until the Clear's mark
// has expired with the rest of the conversation (WithTTL), must not
// commit the cleared text as the summary.
func TestSummaryFoldHeldPastTheTTLOfAClear(t *testing.T) {
	t.Parallel() // waits on the clock
	for _, first := range []bool{true, false} {
		t.Run(fmt.Sprintf("first fold=%t", first), func(t *testing.T) {
			t.Parallel()
			addr := testsvc.Redis(t)
			ctx := context.Background()
			raw := rawClient(t, addr)
			prefix := uniquePrefix()
			// Two replicas, each with its own client.
			r1 := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithTTL(time.Second))
			r2 := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithTTL(time.Second))
			g := &heldCalls{entered: make(chan struct{}, 16), release: make(chan struct{})}
			opts := []memories.SummaryOption{memories.WithMaxMessages(4), memories.WithBatchSize(2), memories.WithRetryBackoff(0, 0)}
			a, err := memories.NewSummary(heldSummarizer{g}, append(opts, memories.WithStore(r1), memories.WithBackground(true))...)
			require.NoError(t, err)
			defer a.Close()
			b, err := memories.NewSummary(heldSummarizer{g}, append(opts, memories.WithStore(r2))...)
			require.NoError(t, err)
			defer b.Close()
			save := func(in, out string) {
				require.NoError(t, a.SaveContext(ctx, map[string]any{"input": in}, map[string]any{"output": out}))
			}
			if !first {
				for i := range 3 {
					save(fmt.Sprintf("hello %d", i), "hi")
				}
				require.NoError(t, a.Flush(ctx))
				require.Positive(t, a.Stats().MessagesFolded, "an earlier fold committed")
			}
			g.armed.Store(true)
			for i := range 3 {
				save(fmt.Sprintf("my card is 4111 1111 1111 1111 (%d)", i), "noted")
			}
			select {
			case <-g.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the fold never called the summarizer")
			}
			require.NoError(t, b.Clear(ctx))
			k := keysOf(prefix, redisstore.DefaultNamespace, memstack.Identity{})
			require.Equal(t, int64(1), raw.Exists(ctx, k.cleared).Val(), "the Clear left its mark")
			waitGone(t, raw, k.msgs, k.state, k.cleared, k.sys, k.seq, k.nss)
			g.armed.Store(false)
			close(g.release)
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, a.Flush(fctx))

			sum, err := r2.GetState(ctx, memstack.Identity{}, memories.SummaryStateName)
			require.NoError(t, err)
			assert.False(t, sum.Exists(), "the fold that read before the Clear committed a summary after the mark expired: %q", sum.Value)
			for name, m := range map[string]*memories.Summary{"the folding replica": a, "the clearing replica": b} {
				vars, err := m.LoadMemoryVariables(ctx, nil)
				require.NoError(t, err)
				assert.NotContains(t, fmt.Sprint(vars), "4111", "%s shows the cleared text", name)
			}
		})
	}
}

// heldCalls holds the summarizer's calls while armed.
type heldCalls struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

type heldSummarizer struct{ g *heldCalls }

func (s heldSummarizer) Summarize(_ context.Context, prev string, msgs []llms.ChatMessage) (string, error) {
	if s.g.armed.Load() {
		s.g.entered <- struct{}{}
		<-s.g.release
	}
	var b strings.Builder
	b.WriteString(prev)
	for _, m := range msgs {
		b.WriteString(" " + m.GetContent())
	}
	return strings.TrimSpace(b.String()), nil
}
