package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// testStatMany: a store.MultiStat's StatMany answers, for every identity
// in order, what Stat answers — identities with messages, never written,
// cleared, with a removed prefix, given twice, adversarial ones, and one
// whose look-alike lives in another namespace — in one call of hundreds;
// no identities is no Stats, and a done context is an error.
func testStatMany(t *testing.T, e *env) {
	s := e.store()
	m := optional[store.MultiStat](t, s, "store.MultiStat")
	ids := []memstack.Identity{alice, bob, {User: "nobody"}, {Tenant: "t", User: "cleared"}, {Tenant: "t", User: "trimmed"}}
	mustAppend(t, s, alice, human("h1"), ai("a1"))
	mustAppend(t, s, alice, human("h2"))
	mustAppend(t, s, ids[3], human("gone"))
	require.NoError(t, s.Clear(e.ctx, ids[3]))
	mustAppend(t, s, ids[4], human("h1"), ai("a1"), human("h2"), ai("a2"))
	all := mustAll(t, s, ids[4])
	_, err := s.RemovePrefix(e.ctx, ids[4], all[1].Seq)
	require.NoError(t, err)
	for i, id := range adversarialIdentities() {
		if i%2 == 0 {
			mustAppend(t, s, id, human(fmt.Sprintf("adversarial %d", i)))
		}
		ids = append(ids, id)
	}
	if other, ok := e.secondNamespace(); ok {
		mustAppend(t, other, bob, human("bob in another namespace"))
	}
	for i := 0; len(ids) < 300; i++ {
		id := memstack.Identity{Tenant: "t", User: "many", Conversation: fmt.Sprintf("c%d", i)}
		if i%3 == 0 {
			mustAppend(t, s, id, human("one"))
		}
		ids = append(ids, id, alice) // alice again and again
	}

	got, err := m.StatMany(e.ctx, ids)
	require.NoError(t, err)
	require.Len(t, got, len(ids))
	for i, id := range ids {
		assert.Equal(t, mustStat(t, s, id), got[i], "identity %d, %q", i, id.Key())
	}
	assert.Equal(t, store.Stat{}, got[1], "bob has messages in another namespace only")
	assert.Equal(t, 3, got[0].Count)

	none, err := m.StatMany(e.ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, none)

	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err = m.StatMany(ctx, ids[:3])
	require.ErrorIs(t, err, context.Canceled)
}
