package adk_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/memory"
	adkmemory "google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/session"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/tokens"
)

func TestConstructorsRefuseBadOptions(t *testing.T) {
	st := store.NewInMemory()
	history, err := store.FromHistory(memory.NewChatMessageHistory(), memstack.Identity{})
	require.NoError(t, err)
	tests := []struct {
		name string
		make func() error
		want string
	}{
		{"session: nil store", func() error { _, err := adk.NewSessionService(nil); return err }, "store is nil"},
		{"session: store without Users", func() error { _, err := adk.NewSessionService(history); return err }, "store.Users"},
		{"session: max bytes 0", func() error { _, err := adk.NewSessionService(st, adk.WithMaxEventBytes(0)); return err }, "WithMaxEventBytes(0)"},
		{"session: a memory option", func() error { _, err := adk.NewSessionService(st, adk.WithTokenBudget(10)); return err }, "configure a MemoryService"},
		{"session: nil option", func() error { _, err := adk.NewSessionService(st, nil); return err }, "nil Option"},
		{"memory: nil store", func() error { _, err := adk.NewMemoryService(nil); return err }, "store is nil"},
		{"memory: budget 0", func() error { _, err := adk.NewMemoryService(st, adk.WithTokenBudget(0)); return err }, "WithTokenBudget(0)"},
		{"memory: nil counter", func() error { _, err := adk.NewMemoryService(st, adk.WithTokenCounter(nil)); return err }, "WithTokenCounter(nil)"},
		{"memory: bad recall option", func() error {
			_, err := adk.NewMemoryService(st, adk.WithRecallOptions(memories.WithK(0)))
			return err
		}, "WithK(0)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.make()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRequestsNameWhatIsMissing(t *testing.T) {
	ctx := context.Background()
	st := store.NewInMemory()
	sessions, err := adk.NewSessionService(st)
	require.NoError(t, err)
	mem, err := adk.NewMemoryService(st, adk.WithTokenCounter(tokens.CounterFunc(func(s string) int { return len(s) })))
	require.NoError(t, err)
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"create without app", func() error {
			_, err := sessions.Create(ctx, &session.CreateRequest{UserID: "u"})
			return err
		}, "AppName is required"},
		{"create without user", func() error {
			_, err := sessions.Create(ctx, &session.CreateRequest{AppName: "a"})
			return err
		}, "UserID is required"},
		{"get without session", func() error {
			_, err := sessions.Get(ctx, &session.GetRequest{AppName: "a", UserID: "u"})
			return err
		}, "SessionID is required"},
		{"get with negative count", func() error {
			_, err := sessions.Get(ctx, &session.GetRequest{AppName: "a", UserID: "u", SessionID: "s", NumRecentEvents: -1})
			return err
		}, "NumRecentEvents is -1"},
		{"list without app", func() error { _, err := sessions.List(ctx, &session.ListRequest{}); return err }, "AppName is required"},
		{"nil requests", func() error { _, err := sessions.Get(ctx, nil); return err }, "request is nil"},
		{"append to nil session", func() error { return sessions.AppendEvent(ctx, nil, &session.Event{}) }, "session is nil"},
		{"search without user", func() error {
			_, err := mem.SearchMemory(ctx, &adkmemory.SearchRequest{AppName: "a", Query: "q"})
			return err
		}, "UserID is required"},
		{"add nil session", func() error { return mem.AddSessionToMemory(ctx, nil) }, "session is nil"},
		{"forget without app", func() error { _, err := mem.ForgetUser(ctx, "", "u"); return err }, "AppName is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	msgs, err := st.All(ctx, memstack.Identity{Tenant: "a", User: "u"})
	require.NoError(t, err)
	assert.Empty(t, msgs, "refused calls store nothing")
}

// The session's own state is held to WithMaxEventBytes as it grows, as at
// Create: an event that would pass it is refused and stores nothing.
func TestAppendEventHoldsSessionStateToTheLimit(t *testing.T) {
	ctx := context.Background()
	sessions, err := adk.NewSessionService(store.NewInMemory(), adk.WithMaxEventBytes(4096))
	require.NoError(t, err)
	created, err := sessions.Create(ctx, &session.CreateRequest{AppName: "a", UserID: "u", SessionID: "s"})
	require.NoError(t, err)
	big := make([]byte, 1500)
	for i := range big {
		big[i] = 'x'
	}
	for i := range 2 {
		ev := &session.Event{ID: string(rune('a' + i)), Author: "user"}
		ev.Actions.StateDelta = map[string]any{string(rune('k' + i)): string(big)}
		require.NoError(t, sessions.AppendEvent(ctx, created.Session, ev))
	}
	ev := &session.Event{ID: "c", Author: "user"}
	ev.Actions.StateDelta = map[string]any{"m": string(big)}
	err = sessions.AppendEvent(ctx, created.Session, ev)
	require.ErrorIs(t, err, adk.ErrInvalidEvent)
	assert.Contains(t, err.Error(), "session's state")
	got, err := sessions.Get(ctx, &session.GetRequest{AppName: "a", UserID: "u", SessionID: "s"})
	require.NoError(t, err)
	assert.Equal(t, 2, got.Session.Events().Len())
	_, err = got.Session.State().Get("m")
	assert.ErrorIs(t, err, session.ErrStateKeyNotExist)
}
