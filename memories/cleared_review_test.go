package memories_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// hookStore runs hooks around calls of the embedded InMemory, to put
// another writer's call at an exact point of a memory's work.
type hookStore struct {
	*store.InMemory
	afterStat   atomic.Pointer[func(id memstack.Identity, n int)]
	beforeGet   atomic.Pointer[func(id memstack.Identity, name string, n int)]
	afterGet    atomic.Pointer[func(id memstack.Identity, name string, n int)]
	stats, gets atomic.Int64
}

func (s *hookStore) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	st, err := s.InMemory.Stat(ctx, id)
	n := int(s.stats.Add(1))
	if f := s.afterStat.Load(); f != nil {
		(*f)(id, n)
	}
	return st, err
}

func (s *hookStore) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	n := int(s.gets.Add(1))
	if f := s.beforeGet.Load(); f != nil {
		(*f)(id, name, n)
	}
	st, err := s.InMemory.GetState(ctx, id, name)
	if f := s.afterGet.Load(); f != nil {
		(*f)(id, name, n)
	}
	return st, err
}

// Recall.add's conflict-merge retry must not write the recall state back
// after a Clear or Forget that landed between dropGone's Stat and its
// PutState (found in review; failed before the fix).
func TestRecall_ClearBetweenIndexAndCommitLeavesNoState(t *testing.T) {
	for _, how := range []string{"Forget", "Clear"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			st := &hookStore{InMemory: store.NewInMemory()}
			ch, err := retrieval.NewChromem(nil, "shared", nil)
			require.NoError(t, err)
			m, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallDates(false),
				memories.WithVector(newRCEmbedder(), ch, retrieval.WithEmbedderName("hash")))
			require.NoError(t, err)
			id := memstack.Identity{}
			var fired atomic.Bool
			hook := func(hid memstack.Identity, n int) {
				if fired.Swap(true) {
					return
				}
				// another replica / the operator, right after dropGone's Stat
				if how == "Forget" {
					require.NoError(t, st.InMemory.Forget(ctx, id))
				} else {
					require.NoError(t, st.InMemory.Clear(ctx, id))
				}
			}
			st.afterStat.Store(&hook)
			_ = m.SaveContext(ctx, map[string]any{"input": "my card is " + card}, map[string]any{"output": "noted"})
			require.True(t, fired.Load())
			s, err := st.GetState(ctx, id, memories.RecallStateName)
			require.NoError(t, err)
			assert.False(t, s.Exists(), "recall state written after %s: %s", how, s.Value)
			ids, err := st.Identities(ctx, store.UserScope("", ""))
			require.NoError(t, err)
			if how == "Forget" {
				assert.NotContains(t, ids, id, "the forgotten identity is held again")
				for _, other := range ids {
					// Only derived data may stay (the user's recall
					// journal, naming conversations), never the text.
					assert.True(t, storekit.Derived(other), "identity %q is held", other.Key())
					recs, err := st.All(ctx, other)
					require.NoError(t, err)
					for _, r := range recs {
						assert.NotContains(t, r.Message.GetContent(), card)
					}
				}
			}
		})
	}
}

// Per-user facts: a turn said after another replica's Clear, read by an
// extraction pass that read the state (the old epoch) before that Clear,
// keeps its facts: pending reads the epoch again after the messages
// (found in review; the turn's facts were dropped for good before).
func TestFacts_PerUserTurnAfterAnotherReplicasClearKeepsItsFacts(t *testing.T) {
	ctx := fcID("ana", "c2")
	st := &hookStore{InMemory: store.NewInMemory()}
	a := fcNew(t, gatedExtractor(newGate()), memories.WithStore(st), memories.WithFactsPerUser(true), memories.WithBackground(true))
	b := fcNew(t, gatedExtractor(newGate()), memories.WithStore(st), memories.WithFactsPerUser(true))
	fcSave(t, a, ctx, "hello", "hi")
	require.NoError(t, a.Flush(ctx))
	var fired atomic.Bool
	hook := func(hid memstack.Identity, name string, n int) {
		if name != memories.FactsStateName || fired.Swap(true) {
			return
		}
		// right after a's pending() read the state: b clears c2, and the
		// user goes on in c2 through a.
		require.NoError(t, b.Clear(ctx))
		fcSave(t, a, ctx, "I live in Lisbon", "nice")
	}
	st.afterGet.Store(&hook)
	fcSave(t, a, ctx, "how are you", "fine")
	require.NoError(t, a.Flush(ctx))
	st.afterGet.Store(nil)
	require.True(t, fired.Load())
	require.NoError(t, a.Flush(ctx))
	assert.Contains(t, fcLoad(t, a, ctx), "Lisbon", "the facts of a turn said after the Clear are lost")
}
