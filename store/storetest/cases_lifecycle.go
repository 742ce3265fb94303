package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/store"
)

func testCancelledContext(t *testing.T, e *env) {
	s := e.store()
	mustAppend(t, s, alice, system("sys"), human("h1"), ai("a1"))
	mustAppend(t, s, alice, human("h2"), ai("a2"))
	v := mustCreate(t, s, alice, "summary", []byte("kept"))
	before := mustAll(t, s, alice)
	stateBefore := mustGet(t, s, alice, "summary")

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()

	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Append", func(ctx context.Context) error { return s.Append(ctx, alice, human("x"), ai("y")) }},
		{"AppendNewIdentity", func(ctx context.Context) error { return s.Append(ctx, bob, human("x")) }},
		{"Last", func(ctx context.Context) error { _, err := s.Last(ctx, alice, 2); return err }},
		{"All", func(ctx context.Context) error { _, err := s.All(ctx, alice); return err }},
		{"Tail", func(ctx context.Context) error { _, err := s.Tail(ctx, alice, 2, 0); return err }},
		{"AppendKeyed", func(ctx context.Context) error {
			return s.Append(store.WithAppendKey(ctx, "cancelled-key"), alice, human("x"), ai("y"))
		}},
		{"Stat", func(ctx context.Context) error { _, err := s.Stat(ctx, alice); return err }},
		{"RemovePrefix", func(ctx context.Context) error {
			_, err := s.RemovePrefix(ctx, alice, before[len(before)-1].Seq)
			return err
		}},
		{"Clear", func(ctx context.Context) error { return s.Clear(ctx, alice) }},
		{"Forget", func(ctx context.Context) error { return s.Forget(ctx, alice) }},
		{"GetState", func(ctx context.Context) error { _, err := s.GetState(ctx, alice, "summary"); return err }},
		{"PutState", func(ctx context.Context) error {
			_, err := s.PutState(ctx, alice, "summary", []byte("lost"), v)
			return err
		}},
		{"PutStateDelete", func(ctx context.Context) error {
			_, err := s.PutState(ctx, alice, "summary", nil, v)
			return err
		}},
		{"PutStateNew", func(ctx context.Context) error {
			_, err := s.PutState(ctx, bob, "summary", []byte("lost"), 0)
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(cancelled)
			require.Error(t, err, "a cancelled context must fail the call")
			assert.ErrorIs(t, err, context.Canceled)
			err = c.call(expired)
			require.Error(t, err, "an expired context must fail the call")
			assert.ErrorIs(t, err, context.DeadlineExceeded)

			assert.Equal(t, before, mustAll(t, s, alice), "a cancelled call changes nothing")
			assert.Equal(t, stateBefore, mustGet(t, s, alice, "summary"), "a cancelled call changes no state")
			assert.Empty(t, mustAll(t, s, bob))
			assertAbsent(t, mustGet(t, s, bob, "summary"))
		})
	}
}

func testSurvivesReopen(t *testing.T, e *env) {
	c1 := e.client()
	mustAppend(t, c1, alice, system("sys"))
	mustAppend(t, c1, alice, human("h1"), ai("a1"))
	mustAppend(t, c1, alice, human("h2"), llms.AIChatMessage{Content: "a2", ToolCalls: []llms.ToolCall{{ID: "1", Type: "function",
		FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"}}}}, llms.ToolChatMessage{ID: "1", Content: "r"})
	mustAppend(t, c1, bob, human("b1"), ai("b2"))
	all := mustAll(t, c1, alice)
	_, err := c1.RemovePrefix(e.ctx, alice, all[2].Seq)
	require.NoError(t, err)
	va := mustCreate(t, c1, alice, "summary", []byte("alice \x00 summary"))
	va = mustPut(t, c1, alice, "summary", []byte("alice \x00 summary v2"), va)
	vb := mustCreate(t, c1, bob, "facts", []byte{0xff, 0x00})

	wantAlice, wantBob := mustAll(t, c1, alice), mustAll(t, c1, bob)
	wantStat := mustStat(t, c1, alice)
	e.close(c1)

	c2 := e.store()
	assert.Equal(t, wantAlice, mustAll(t, c2, alice), "messages and Seqs survive reopening")
	assert.Equal(t, wantBob, mustAll(t, c2, bob))
	assert.Equal(t, wantStat, mustStat(t, c2, alice))
	assert.Equal(t, store.State{Value: []byte("alice \x00 summary v2"), Version: va}, mustGet(t, c2, alice, "summary"), "state survives reopening")
	assert.Equal(t, store.State{Value: []byte{0xff, 0x00}, Version: vb}, mustGet(t, c2, bob, "facts"))

	// The counters continue: no Seq or version is handed out again.
	mustAppend(t, c2, alice, human("h3"))
	rs := mustAll(t, c2, alice)
	assert.Greater(t, rs[len(rs)-1].Seq, wantStat.LastSeq)
	_, err = c2.PutState(e.ctx, alice, "summary", []byte("stale"), 0)
	assert.ErrorIs(t, err, store.ErrConflict)
	v := mustPut(t, c2, alice, "summary", []byte("v3"), va)
	assert.NotEqual(t, va, v)
	assert.NotEqual(t, vb, v)
}

func testClosedStore(t *testing.T, e *env) {
	c := e.client()
	mustAppend(t, c, alice, human("h"))
	if !e.close(c) {
		t.Skip("the store does not implement io.Closer")
	}
	var s store.Store = c.Store
	calls := []struct {
		name string
		call func() error
	}{
		{"Append", func() error { return s.Append(e.ctx, alice, human("x")) }},
		{"Last", func() error { _, err := s.Last(e.ctx, alice, 1); return err }},
		{"All", func() error { _, err := s.All(e.ctx, alice); return err }},
		{"Tail", func() error { _, err := s.Tail(e.ctx, alice, 1, 0); return err }},
		{"Stat", func() error { _, err := s.Stat(e.ctx, alice); return err }},
		{"RemovePrefix", func() error { _, err := s.RemovePrefix(e.ctx, alice, 1<<40); return err }},
		{"Clear", func() error { return s.Clear(e.ctx, alice) }},
		{"Forget", func() error { return s.Forget(e.ctx, alice) }},
		{"GetState", func() error { _, err := s.GetState(e.ctx, alice, "x"); return err }},
		{"PutState", func() error { _, err := s.PutState(e.ctx, alice, "x", []byte("v"), 0); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("%s on a closed store panicked: %v", c.name, p)
					}
				}()
				err = c.call()
			}()
			assert.Error(t, err, "%s on a closed store must return an error", c.name)
		})
	}
	// The data is still there for a new client.
	assert.Equal(t, []string{"h"}, contentsOf(mustAll(t, e.store(), alice)))
}
