package adk_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"google.golang.org/adk/v2/session"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/store"
)

// countingStore counts the calls that reach the store (each a round trip
// on a network store).
type countingStore struct {
	*store.InMemory
	calls atomic.Int64
}

func (c *countingStore) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	c.calls.Add(1)
	return c.InMemory.GetState(ctx, id, name)
}

func (c *countingStore) PutState(ctx context.Context, id memstack.Identity, name string, v []byte, expect int64) (int64, error) {
	c.calls.Add(1)
	return c.InMemory.PutState(ctx, id, name, v, expect)
}

func (c *countingStore) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	c.calls.Add(1)
	return c.InMemory.Append(ctx, id, msgs...)
}

func (c *countingStore) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	c.calls.Add(1)
	return c.InMemory.Last(ctx, id, n)
}

// AppendEvent costs four store calls (read, claim, append, re-check) and
// two more per state scope its delta touches; Get with NumRecentEvents
// reads the record, the newest events and the two scopes' state.
func TestSessionServiceStoreCalls(t *testing.T) {
	ctx := context.Background()
	st := &countingStore{InMemory: store.NewInMemory()}
	sessions, err := adk.NewSessionService(st)
	require.NoError(t, err)
	created, err := sessions.Create(ctx, &session.CreateRequest{AppName: "a", UserID: "u", SessionID: "s"})
	require.NoError(t, err)
	s := created.Session
	at := time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)
	for i := range 50 {
		require.NoError(t, sessions.AppendEvent(ctx, s, text(string(rune('a'+i%26))+string(rune('0'+i/26)), "user", at.Add(time.Duration(i)*time.Second), "hello")))
	}
	tests := []struct {
		name string
		call func() error
		want int64
	}{
		{"append, no delta", func() error {
			return sessions.AppendEvent(ctx, s, text("x1", "user", at.Add(time.Hour), "plain"))
		}, 4},
		{"append, a session and a user key", func() error {
			ev := text("x2", "user", at.Add(2*time.Hour), "with state")
			ev.Actions.StateDelta = map[string]any{"k": 1, "user:k": 2}
			return sessions.AppendEvent(ctx, s, ev)
		}, 6},
		{"get the newest 3 of 52 events", func() error {
			got, err := sessions.Get(ctx, &session.GetRequest{AppName: "a", UserID: "u", SessionID: "s", NumRecentEvents: 3})
			if err == nil {
				assert.Equal(t, 3, got.Session.Events().Len())
			}
			return err
		}, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := st.calls.Load()
			require.NoError(t, tc.call())
			assert.Equal(t, tc.want, st.calls.Load()-before)
		})
	}
}
