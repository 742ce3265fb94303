package observe_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
)

type adder interface {
	AddMessage(ctx context.Context, msg llms.ChatMessage) error
}

type reportLog struct {
	mu sync.Mutex
	rs []observe.Report
}

func (l *reportLog) sink() observe.Sink {
	return observe.SinkFunc(func(_ context.Context, r observe.Report) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.rs = append(l.rs, r)
	})
}

func (l *reportLog) ops() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, len(l.rs))
	for i, r := range l.rs {
		out[i] = r.Op
	}
	return out
}

// echoModel is an llms.Model test double that answers with a fixed text.
type echoModel struct{}

func (echoModel) GenerateContent(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error) {
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "Nice to meet you."}}}, nil
}

func (m echoModel) Call(ctx context.Context, prompt string, _ ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt)
}

func TestWrapPreservesBehaviour(t *testing.T) {
	id := memstack.Identity{User: "u"}
	ctx := memstack.WithIdentity(context.Background(), id)
	plain, err := memories.NewRecentN(3)
	require.NoError(t, err)
	inner, err := memories.NewRecentN(3)
	require.NoError(t, err)
	var log reportLog
	wrapped := observe.Wrap(inner, "recent", log.sink())

	assert.Equal(t, plain.GetMemoryKey(ctx), wrapped.GetMemoryKey(ctx))
	assert.Equal(t, plain.MemoryVariables(ctx), wrapped.MemoryVariables(ctx))
	a, ok := wrapped.(adder)
	require.True(t, ok, "AddMessage is kept")
	for _, m := range []schema.Memory{plain, wrapped} {
		require.NoError(t, m.(adder).AddMessage(ctx, llms.SystemChatMessage{Content: "sys"}))
		for _, h := range []string{"one", "two", "three"} {
			require.NoError(t, m.SaveContext(ctx, map[string]any{"input": h}, map[string]any{"output": h + "!"}))
		}
	}
	want, err := plain.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	got, err := wrapped.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Errors pass through unchanged, and are reported.
	err = a.AddMessage(ctx, nil)
	require.Error(t, err)
	assert.Equal(t, plain.AddMessage(ctx, nil).Error(), err.Error())
	require.NoError(t, wrapped.Clear(ctx))
	got, err = wrapped.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"history": ""}, got)

	assert.Equal(t, []string{"add", "save", "save", "save", "load", "add", "clear", "load"}, log.ops())
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, r := range log.rs {
		assert.Equal(t, "recent", r.Layer)
		assert.Equal(t, id.Hash(), r.IdentityHash)
	}
	assert.Len(t, log.rs[4].Injected, 4)
	assert.Error(t, log.rs[5].Err)

	assert.Same(t, inner, wrapped.(interface{ Unwrap() schema.Memory }).Unwrap())
	assert.Contains(t, wrapped.(interface{ String() string }).String(), `layer="recent"`)
	assert.Contains(t, wrapped.(interface{ String() string }).String(), "RecentN(n=3")
}

func TestWrapWithoutAddMessage(t *testing.T) {
	var log reportLog
	lc := memory.NewConversationBuffer()
	wrapped := observe.Wrap(lc, "", log.sink())
	_, ok := wrapped.(adder)
	assert.False(t, ok, "a memory without AddMessage does not gain one")
	ctx := context.Background()
	require.NoError(t, wrapped.SaveContext(ctx, map[string]any{"input": "hi"}, map[string]any{"output": "hello"}))
	vars, err := wrapped.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "Human: hi\nAI: hello", vars["history"])
	require.Len(t, log.rs, 2)
	assert.Equal(t, "*memory.ConversationBuffer", log.rs[0].Layer, "an empty layer name is the Go type")
	assert.Equal(t, memstack.Identity{}.Hash(), log.rs[0].IdentityHash)
}

func TestWrapInAChain(t *testing.T) {
	var log reportLog
	mem := observe.Wrap(mustBuffer(), "history", log.sink())
	chain := chains.NewConversation(echoModel{}, mem)
	ctx := context.Background()
	out, err := chains.Run(ctx, chain, "Hi, I am Ada.")
	require.NoError(t, err)
	assert.Equal(t, "Nice to meet you.", out)
	_, err = chains.Run(ctx, chain, "Who am I?")
	require.NoError(t, err)
	assert.Equal(t, []string{"load", "save", "load", "save"}, log.ops())
	log.mu.Lock()
	defer log.mu.Unlock()
	assert.Len(t, log.rs[2].Injected, 2, "the second load shows the first turn")
}

func TestWrapEdgeCases(t *testing.T) {
	ctx := context.Background()
	b := mustBuffer()
	assert.Same(t, b, observe.Wrap(b, "x", nil), "a nil sink wraps nothing")

	var log reportLog
	for _, nilMem := range []schema.Memory{nil, (*memories.Buffer)(nil)} {
		w := observe.Wrap(nilMem, "x", log.sink())
		_, err := w.LoadMemoryVariables(ctx, nil)
		assert.ErrorIs(t, err, observe.ErrNilMemory)
		assert.ErrorIs(t, w.SaveContext(ctx, nil, nil), observe.ErrNilMemory)
		assert.ErrorIs(t, w.Clear(ctx), observe.ErrNilMemory)
		assert.Equal(t, "", w.GetMemoryKey(ctx))
		assert.Nil(t, w.MemoryVariables(ctx))
	}
	assert.Empty(t, log.rs)

	// A nil context reaches the memory (which rejects it) unobserved.
	w := observe.Wrap(b, "x", log.sink())
	//nolint:staticcheck // a nil context is bad input that must not panic
	_, err := w.LoadMemoryVariables(nil, nil)
	assert.Error(t, err)
	assert.Empty(t, log.rs)

	// A panic is reported, then passed on.
	p := observe.Wrap(panicMemory{}, "p", log.sink())
	assert.PanicsWithValue(t, "kaboom", func() { _ = p.Clear(ctx) })
	require.Len(t, log.rs, 1)
	assert.ErrorContains(t, log.rs[0].Err, "kaboom")
	assert.False(t, errors.Is(log.rs[0].Err, observe.ErrNilMemory))
}

type panicMemory struct{ schema.Memory }

func (panicMemory) Clear(context.Context) error { panic("kaboom") }

func TestWrapResolvesIdentities(t *testing.T) {
	def := memstack.Identity{User: "default"}
	r, err := memories.NewRecentN(2, memories.WithDefaultIdentity(def))
	require.NoError(t, err)
	var log reportLog
	w := observe.Wrap(r, "recent", log.sink())
	assert.Equal(t, def.Hash(), observe.IdentityHash(context.Background(), w), "the wrapped memory's default identity")
	given := memstack.Identity{User: "given"}
	lc := observe.Wrap(memory.NewConversationBuffer(), "lc", log.sink())
	assert.Equal(t, given.Hash(), observe.IdentityHash(memstack.WithIdentity(context.Background(), given), lc))
	assert.Equal(t, memstack.Identity{}.Hash(), observe.IdentityHash(context.Background(), lc))
}

// mustBuffer is memories.NewBuffer for options that cannot fail: a test
// that gives a bad option calls NewBuffer itself.
func mustBuffer(opts ...memories.BufferOption) *memories.Buffer {
	b, err := memories.NewBuffer(opts...)
	if err != nil {
		panic(err)
	}
	return b
}
