package combined_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// tagged is a store value whose struct type is comparable (its only field
// is an interface) while the value it holds is not: == on two of them
// panics, and so does using one as a map key.
type tagged struct{ store.Store }

type withTags struct {
	store.Store
	tags []string
}

// TestReviewS30_StoreValueOfComparableTypeButUnhashable: when two layers
// share a store, the combined call attaches a stackmemo; a third layer on
// another store whose *type* is comparable but whose *value* is not (an
// interface field holding a slice-carrying struct) must still save and
// load as it did before the memo existed. stackmemo.comparable checks
// reflect.Type.Comparable, so Claim / Tail use the value as a map key and
// panic ("hash of unhashable type"); the layer's save and load fail.
func TestReviewS30_StoreValueOfComparableTypeButUnhashable(t *testing.T) {
	id := memstack.Identity{User: "u", Conversation: "c"}
	ctx := memstack.WithIdentity(context.Background(), id)
	shared := store.NewInMemory()
	own := store.NewInMemory()
	odd := tagged{withTags{own, []string{"x"}}}

	a, err := memories.NewRecentN(6, memories.WithStore(shared), memories.WithMemoryKey("a"))
	require.NoError(t, err)
	b, err := memories.NewRecentN(6, memories.WithStore(shared), memories.WithMemoryKey("b"))
	require.NoError(t, err)
	c, err := memories.NewRecentN(6, memories.WithStore(odd), memories.WithMemoryKey("c"))
	require.NoError(t, err)
	mem, err := combined.New([]schema.Memory{a, b, c})
	require.NoError(t, err)

	require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": "hello"}, map[string]any{"output": "hi"}))
	recs, err := own.All(ctx, id)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, llms.HumanChatMessage{Content: "hello"}, recs[0].Message)

	vars, err := mem.LoadMemoryVariables(ctx, map[string]any{"input": "x"})
	require.NoError(t, err)
	require.Equal(t, vars["a"], vars["c"])
}
