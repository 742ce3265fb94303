package recallindex

import (
	"testing"
	"time"

	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two conversations of a user may hold units with the same Seq (a store's
// Seqs are unique per identity: Redis draws them from a clock per
// identity); in the user's index each gets a doc ID of its own, and
// removing one conversation's unit leaves the other's.
func TestRecallScope_EqualSeqsOfTwoConversationsStayApart(t *testing.T) {
	bm, err := retrieval.NewBM25()
	require.NoError(t, err)
	m := New(Config{Store: store.NewInMemory(), Index: bm, Turns: true, Scope: ScopeUser, CacheSize: 8})
	a := identity{Tenant: "t", User: "u", Conversation: "a"}
	b := identity{Tenant: "t", User: "u", Conversation: "b"}
	at := map[int64]time.Time{5: time.Unix(5, 0)}
	da := []retrieval.Doc{{Seq: 5, Text: "x"}}
	db := []retrieval.Doc{{Seq: 5, Text: "y"}}
	m.assign(a, da, at)
	m.assign(b, db, at)
	assert.NotEqual(t, da[0].Seq, db[0].Seq, "one doc ID each")
	again := []retrieval.Doc{{Seq: 5, Text: "x, grown"}}
	m.assign(a, again, at)
	assert.Equal(t, da[0].Seq, again[0].Seq, "a unit that grows keeps its doc ID")
	assert.Equal(t, []int64{5}, m.owned(a))
	assert.Equal(t, []int64{da[0].Seq}, m.disown(a, []int64{5}))
	assert.Empty(t, m.owned(a))
	assert.Equal(t, []int64{5}, m.owned(b), "the other conversation's unit stays")
}
