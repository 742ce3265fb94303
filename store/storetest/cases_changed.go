package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// testChanged: a store.ChangeFeed's Changed lists, from mark 0, every
// identity of the scope appended to (a user's, or a tenant's every user's,
// when the store follows that) and no other — not another user whose name
// extends this one's, not another tenant (this identity appended to in
// another namespace only, it may); given the mark it returned, only what was appended since (a
// Clear is not a change, an Append after it is); a Forget takes the
// conversation out, a ForgetScope the user's whole feed; a scope not
// followed is errors.ErrUnsupported, a bad scope or a done context an
// error.
func testChanged(t *testing.T, e *env) {
	s := e.store()
	f := optional[store.ChangeFeed](t, s, "store.ChangeFeed")
	tenant := e.tenant()
	if !f.Follows(store.UserScope(tenant, "u1")) {
		_, _, err := f.Changed(e.ctx, store.UserScope(tenant, "u1"), 0)
		require.ErrorIs(t, err, errors.ErrUnsupported, "a scope the store does not follow")
		t.Skipf("%T follows no user's conversations in this configuration", s)
	}
	conv := func(user, c string) memstack.Identity {
		return memstack.Identity{Tenant: tenant, User: user, Conversation: c}
	}
	c1, c2, c3 := conv("u1", "c1"), conv("u1", "c2"), conv("u1", "c3")
	others := []memstack.Identity{conv("u10", "c1"), conv("u", "c1"), conv("u2", "c1"), {Tenant: tenant + "x", User: "u1", Conversation: "c1"}}
	mustAppend(t, s, c1, human("h1"), ai("a1"))
	mustAppend(t, s, c2, human("h1"))
	for _, id := range others {
		mustAppend(t, s, id, human("elsewhere"))
	}
	if other, ok := e.secondNamespace(); ok {
		mustAppend(t, other, c3, human("c3 in another namespace"))
	}
	user := store.UserScope(tenant, "u1")

	changed := func(scope store.Scope, mark int64) ([]memstack.Identity, int64) {
		t.Helper()
		ids, next, err := f.Changed(e.ctx, scope, mark)
		require.NoError(t, err, "Changed(%s, %d)", scope, mark)
		require.GreaterOrEqual(t, next, mark, "next below mark")
		for _, id := range ids {
			require.True(t, scope.Contains(id), "%q is outside %s", id.Key(), scope)
		}
		return ids, next
	}
	ids, mark := changed(user, 0)
	// c3 has messages in another namespace only: a feed may name it too
	// (store.ChangeFeed allows it; a reader finds nothing there).
	assert.Subset(t, ids, []memstack.Identity{c1, c2})
	assert.Subset(t, []memstack.Identity{c1, c2, c3}, ids)
	assert.GreaterOrEqual(t, mark, max(mustStat(t, s, c1).LastSeq, mustStat(t, s, c2).LastSeq))
	ids, again := changed(user, mark)
	assert.Empty(t, ids, "nothing appended since the mark")
	assert.Equal(t, mark, again)

	mustAppend(t, s, c2, ai("a1"))
	ids, mark = changed(user, mark)
	assert.Equal(t, []memstack.Identity{c2}, ids, "only the conversation appended to")
	assert.GreaterOrEqual(t, mark, mustStat(t, s, c2).LastSeq)

	require.NoError(t, s.Clear(e.ctx, c1))
	ids, mark = changed(user, mark)
	assert.Empty(t, ids, "a Clear is not a change")
	mustAppend(t, s, c1, human("after the clear"))
	mustAppend(t, s, c3, human("new"))
	ids, _ = changed(user, mark)
	assert.Equal(t, []memstack.Identity{c1, c3}, ids)

	if f.Follows(store.TenantScope(tenant)) {
		all, _ := changed(store.TenantScope(tenant), 0)
		assert.ElementsMatch(t, []memstack.Identity{c1, c2, c3, others[0], others[1], others[2]}, all, "the tenant's every user, no other tenant")
	} else {
		_, _, err := f.Changed(e.ctx, store.TenantScope(tenant), 0)
		require.ErrorIs(t, err, errors.ErrUnsupported, "a tenant's scope, not followed")
	}

	// A forgotten conversation leaves its user's feed; a forgotten user
	// leaves no feed; an append after either is a change again.
	require.NoError(t, s.Forget(e.ctx, c2))
	ids, _ = changed(user, 0)
	assert.NotContains(t, ids, c2, "a forgotten conversation is out of the feed")
	if u, ok := s.(store.Users); ok {
		_, err := u.ForgetScope(e.ctx, user)
		require.NoError(t, err)
		ids, next := changed(user, 0)
		assert.Empty(t, ids, "nothing of a forgotten user")
		mustAppend(t, s, c1, human("back"))
		ids, _ = changed(user, next)
		assert.Equal(t, []memstack.Identity{c1}, ids, "an append after the forget is a change")
	}

	for _, id := range adversarialIdentities() {
		mustAppend(t, s, id, human("adversarial"))
		ids, _ := changed(store.UserScope(id.Tenant, id.User), 0)
		assert.Contains(t, ids, id)
	}

	_, _, err := f.Changed(e.ctx, store.Scope{Tenant: tenant, User: "u1", AllUsers: true}, 0)
	require.ErrorIs(t, err, store.ErrInvalidArgument)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, _, err = f.Changed(ctx, user, 0)
	require.ErrorIs(t, err, context.Canceled)
}

// testChangedLosesNothing: writers append to a user's conversations while
// a reader follows Changed from mark to mark, reading the Stat of every
// conversation it is told of; once the writers are done and the reader
// has caught up, it has read every conversation's final Stat. A feed that
// moves its mark past an append it did not show (a greater Seq committed
// before a smaller one) fails it.
func testChangedLosesNothing(t *testing.T, e *env) {
	s := e.store()
	f := optional[store.ChangeFeed](t, s, "store.ChangeFeed")
	tenant := e.tenant()
	if !f.Follows(store.UserScope(tenant, "u")) {
		t.Skipf("%T follows no user's conversations in this configuration", s)
	}
	const writers, appends = 8, 40
	ids := make([]memstack.Identity, writers)
	for i := range ids {
		ids[i] = memstack.Identity{Tenant: tenant, User: "u", Conversation: fmt.Sprintf("c%d", i)}
	}
	scope := store.UserScope(tenant, "u")
	seen := map[memstack.Identity]store.Stat{}
	var mark int64
	follow := func() {
		got, next, err := f.Changed(e.ctx, scope, mark)
		require.NoError(t, err)
		for _, id := range got {
			seen[id] = mustStat(t, s, id)
		}
		mark = next
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for _, id := range ids {
		wg.Go(func() {
			for i := range appends {
				if err := s.Append(e.ctx, id, human(fmt.Sprintf("turn %d", i))); err != nil {
					t.Errorf("Append to %s: %v", id, err)
					return
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		follow()
	}
	follow() // after the last append returned
	for _, id := range ids {
		assert.Equal(t, mustStat(t, s, id), seen[id], "%s: the reader missed an append", id.Key())
	}
}
