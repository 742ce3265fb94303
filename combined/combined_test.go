package combined_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
)

// ---------------------------------------------------------------------------
// Test doubles: a user's own schema.Memory (allowed by the house rules; it is
// not memstack code) and a barrier that proves children run concurrently.
// ---------------------------------------------------------------------------

// barrier releases its callers once n of them have arrived. If they do not
// all arrive within the timeout (because they run one after another), it
// breaks: every waiting and later caller gets an error at once, so a test
// fails quickly instead of hanging.
type barrier struct {
	n       int
	timeout time.Duration

	mu      sync.Mutex
	arrived int
	all     chan struct{}
	broken  chan struct{}
	once    sync.Once
}

func newBarrier(n int) *barrier {
	return &barrier{n: n, timeout: 2 * time.Second, all: make(chan struct{}), broken: make(chan struct{})}
}

var errBarrier = errors.New("barrier: not every child entered concurrently")

func (b *barrier) arrive() error {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-b.broken:
		return errBarrier
	case <-time.After(b.timeout):
		b.once.Do(func() { close(b.broken) })
		return errBarrier
	}
}

// userMemory is a user's own schema.Memory: it keeps the turns it is given
// (as langchaingo keys them) and renders them like llms.GetBufferString. It
// can be told to fail or to wait at a barrier. It has no AddMessage and no
// String method.
type userMemory struct {
	vars []string // MemoryVariables; the first is the memory key

	saveErr, loadErr, clearErr error
	saveGate, loadGate         *barrier

	mu     sync.Mutex
	msgs   []llms.ChatMessage
	saves  int
	loads  int
	clears int
}

var _ schema.Memory = (*userMemory)(nil)

func newUserMemory(vars ...string) *userMemory {
	if len(vars) == 0 {
		vars = []string{"user"}
	}
	return &userMemory{vars: vars}
}

func (u *userMemory) GetMemoryKey(context.Context) string { return u.vars[0] }

func (u *userMemory) MemoryVariables(context.Context) []string {
	return append([]string(nil), u.vars...)
}

func (u *userMemory) SaveContext(_ context.Context, in, out map[string]any) error {
	u.mu.Lock()
	u.saves++
	u.mu.Unlock()
	if u.saveGate != nil {
		if err := u.saveGate.arrive(); err != nil {
			return err
		}
	}
	if u.saveErr != nil {
		return u.saveErr
	}
	human, err := memory.GetInputValue(in, "")
	if err != nil {
		return err
	}
	ai, err := memory.GetInputValue(out, "")
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.msgs = append(u.msgs, llms.HumanChatMessage{Content: human}, llms.AIChatMessage{Content: ai})
	return nil
}

func (u *userMemory) LoadMemoryVariables(context.Context, map[string]any) (map[string]any, error) {
	u.mu.Lock()
	u.loads++
	u.mu.Unlock()
	if u.loadGate != nil {
		if err := u.loadGate.arrive(); err != nil {
			return nil, err
		}
	}
	if u.loadErr != nil {
		return nil, u.loadErr
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	s, err := llms.GetBufferString(u.msgs, "Human", "AI")
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, v := range u.vars {
		out[v] = s
	}
	return out, nil
}

func (u *userMemory) Clear(context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.clears++
	if u.clearErr != nil {
		return u.clearErr
	}
	u.msgs = nil
	return nil
}

func (u *userMemory) calls() (saves, loads, clears int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.saves, u.loads, u.clears
}

// describedMemory is a user memory that describes itself on two lines.
type describedMemory struct {
	*userMemory
	desc string
}

func (d describedMemory) String() string { return d.desc }

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

func turn(human, ai string) (map[string]any, map[string]any) {
	return map[string]any{"input": human}, map[string]any{"output": ai}
}

// loadKey loads m's variables and returns the one under key.
func loadKey(t *testing.T, ctx context.Context, m schema.Memory, key string) any {
	t.Helper()
	vars, err := m.LoadMemoryVariables(ctx, map[string]any{})
	require.NoError(t, err)
	v, ok := vars[key]
	require.Truef(t, ok, "no variable %q in %v", key, vars)
	return v
}

// rendered is llms.GetBufferString of msgs with langchaingo's prefixes.
func rendered(t *testing.T, msgs ...llms.ChatMessage) string {
	t.Helper()
	s, err := llms.GetBufferString(msgs, "Human", "AI")
	require.NoError(t, err)
	return s
}

func newRecent(t *testing.T, n int, opts ...memories.RecentNOption) *memories.RecentN {
	t.Helper()
	r, err := memories.NewRecentN(n, opts...)
	require.NoError(t, err)
	return r
}

func newCombined(t *testing.T, list []schema.Memory, opts ...combined.Option) *combined.Memory {
	t.Helper()
	m, err := combined.New(list, opts...)
	require.NoError(t, err)
	return m
}

func bufferKey(key string) *memories.Buffer {
	return mustBuffer(memories.WithMemoryKey(key))
}

// ---------------------------------------------------------------------------
// 1. New
// ---------------------------------------------------------------------------

func TestNewRejectsInvalidArguments(t *testing.T) {
	tests := []struct {
		name  string
		list  []schema.Memory
		opts  []combined.Option
		wants []string // substrings of the error
	}{
		{
			name:  "nil list",
			list:  nil,
			wants: []string{"empty"},
		},
		{
			name:  "empty list",
			list:  []schema.Memory{},
			wants: []string{"empty"},
		},
		{
			name:  "untyped nil child",
			list:  []schema.Memory{mustBuffer(), nil},
			wants: []string{"child 2 of 2 is nil"},
		},
		{
			name:  "typed nil memstack child",
			list:  []schema.Memory{(*memories.Buffer)(nil), mustBuffer()},
			wants: []string{"child 1 of 2 is nil"},
		},
		{
			name:  "typed nil user child",
			list:  []schema.Memory{bufferKey("a"), bufferKey("b"), (*userMemory)(nil)},
			wants: []string{"child 3 of 3 is nil"},
		},
		{
			name:  "typed nil langchaingo child",
			list:  []schema.Memory{(*memory.ConversationBuffer)(nil)},
			wants: []string{"child 1 of 1 is nil"},
		},
		{
			name:  "nil option",
			list:  []schema.Memory{mustBuffer()},
			opts:  []combined.Option{combined.WithStrictKeys(), nil},
			wants: []string{"option 2 of 2 is nil"},
		},
		{
			name:  "strict keys: collision between different types",
			list:  []schema.Memory{bufferKey("x"), newRecent(t, 3, memories.WithMemoryKey("x"))},
			opts:  []combined.Option{combined.WithStrictKeys()},
			wants: []string{"child 1 (*memories.Buffer)", "child 2 (*memories.RecentN)", `"x"`},
		},
		{
			name: "strict keys: collision with a later user memory",
			list: []schema.Memory{
				bufferKey("a"),
				memory.NewConversationBuffer(memory.WithMemoryKey("b")),
				newUserMemory("c", "a"),
			},
			opts:  []combined.Option{combined.WithStrictKeys()},
			wants: []string{"child 1 (*memories.Buffer)", "child 3 (*combined_test.userMemory)", `"a"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := combined.New(tt.list, tt.opts...)
			require.Error(t, err)
			assert.Nil(t, m)
			assert.ErrorIs(t, err, combined.ErrInvalid)
			for _, want := range tt.wants {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestNewStrictKeysCollisionDoesNotNameUninvolvedChildren(t *testing.T) {
	_, err := combined.New([]schema.Memory{
		bufferKey("a"),
		newRecent(t, 2, memories.WithMemoryKey("b")),
		newUserMemory("a"),
	}, combined.WithStrictKeys())
	require.ErrorIs(t, err, combined.ErrInvalid)
	assert.NotContains(t, err.Error(), "child 2")
	assert.NotContains(t, err.Error(), `"b"`)
}

func TestNewAcceptsCollisionWithoutStrictKeys(t *testing.T) {
	first := bufferKey("x")
	second := newRecent(t, 3, memories.WithMemoryKey("x"))
	m, err := combined.New([]schema.Memory{first, second})
	require.NoError(t, err)
	require.NotNil(t, m)
	assert.Equal(t, []string{"x"}, m.MemoryVariables(context.Background()))
	assert.Equal(t, []schema.Memory{first, second}, m.Children())
}

func TestNewStrictKeysAcceptsDistinctKeys(t *testing.T) {
	m, err := combined.New([]schema.Memory{bufferKey("a"), newRecent(t, 3, memories.WithMemoryKey("b"))},
		combined.WithStrictKeys())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, m.MemoryVariables(context.Background()))
}

func TestChildrenReturnsACopy(t *testing.T) {
	a, b := bufferKey("a"), bufferKey("b")
	m := newCombined(t, []schema.Memory{a, b})
	got := m.Children()
	require.Equal(t, []schema.Memory{a, b}, got)
	got[0] = nil
	assert.Equal(t, []schema.Memory{a, b}, m.Children())
}

// ---------------------------------------------------------------------------
// 2-3. MemoryVariables and GetMemoryKey
// ---------------------------------------------------------------------------

func TestMemoryVariables(t *testing.T) {
	tests := []struct {
		name string
		list []schema.Memory
		want []string
	}{
		{
			name: "union in list order without duplicates",
			list: []schema.Memory{bufferKey("a"), bufferKey("b"), bufferKey("a"), bufferKey("c")},
			want: []string{"a", "b", "c"},
		},
		{
			name: "children with several variables",
			list: []schema.Memory{newUserMemory("z", "a"), bufferKey("a"), newUserMemory("b", "z", "c")},
			want: []string{"z", "a", "b", "c"},
		},
		{
			name: "langchaingo child with the default key",
			list: []schema.Memory{memory.NewConversationBuffer(), bufferKey("recent")},
			want: []string{"history", "recent"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newCombined(t, tt.list)
			assert.Equal(t, tt.want, m.MemoryVariables(context.Background()))
		})
	}
}

func TestMemoryVariablesReturnsACopy(t *testing.T) {
	ctx := context.Background()
	m := newCombined(t, []schema.Memory{bufferKey("a"), bufferKey("b")})
	got := m.MemoryVariables(ctx)
	require.Equal(t, []string{"a", "b"}, got)
	got[0] = "changed"
	_ = append(got[:1], "appended")
	assert.Equal(t, []string{"a", "b"}, m.MemoryVariables(ctx))
}

func TestGetMemoryKeyIsFirstChildsKey(t *testing.T) {
	tests := []struct {
		name string
		list []schema.Memory
		want string
	}{
		{"memstack first", []schema.Memory{bufferKey("first"), bufferKey("second")}, "first"},
		{"langchaingo first", []schema.Memory{memory.NewConversationBuffer(memory.WithMemoryKey("lc")), bufferKey("b")}, "lc"},
		{"user memory first", []schema.Memory{newUserMemory("mine", "other"), bufferKey("b")}, "mine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newCombined(t, tt.list)
			assert.Equal(t, tt.want, m.GetMemoryKey(context.Background()))
		})
	}
}

// ---------------------------------------------------------------------------
// 4. SaveContext
// ---------------------------------------------------------------------------

func TestSaveContextEveryChildStoresTheTurn(t *testing.T) {
	ctx := context.Background()
	full := bufferKey("full")
	recent := newRecent(t, 4, memories.WithMemoryKey("recent"))
	lc := memory.NewConversationBuffer(memory.WithMemoryKey("lc"))
	user := newUserMemory("user")
	m := newCombined(t, []schema.Memory{full, recent, lc, user})

	in, out := turn("Hello", "Hi!")
	require.NoError(t, m.SaveContext(ctx, in, out))
	in, out = turn("How are you?", "Fine.")
	require.NoError(t, m.SaveContext(ctx, in, out))

	want := rendered(t,
		llms.HumanChatMessage{Content: "Hello"}, llms.AIChatMessage{Content: "Hi!"},
		llms.HumanChatMessage{Content: "How are you?"}, llms.AIChatMessage{Content: "Fine."})
	assert.Equal(t, want, loadKey(t, ctx, full, "full"))
	assert.Equal(t, want, loadKey(t, ctx, recent, "recent"))
	assert.Equal(t, want, loadKey(t, ctx, lc, "lc"))
	assert.Equal(t, want, loadKey(t, ctx, user, "user"))
}

func TestSaveContextRunsChildrenConcurrently(t *testing.T) {
	ctx := context.Background()
	const n = 4
	gate := newBarrier(n)
	users := make([]*userMemory, n)
	list := []schema.Memory{bufferKey("full")}
	for i := range users {
		users[i] = newUserMemory(fmt.Sprintf("u%d", i))
		users[i].saveGate = gate
		list = append(list, users[i])
	}
	m := newCombined(t, list)

	in, out := turn("Hello", "Hi!")
	start := time.Now()
	require.NoError(t, m.SaveContext(ctx, in, out), "children must be in SaveContext at the same time")
	assert.Less(t, time.Since(start), gate.timeout)

	want := rendered(t, llms.HumanChatMessage{Content: "Hello"}, llms.AIChatMessage{Content: "Hi!"})
	assert.Equal(t, want, loadKey(t, ctx, list[0], "full"))
	for i, u := range users {
		assert.Equal(t, want, loadKey(t, ctx, u, fmt.Sprintf("u%d", i)))
	}
}

var (
	errDiskFull = errors.New("user memory: disk full")
	errOffline  = errors.New("user memory: offline")
)

func TestSaveContextFailingChildDoesNotStopTheOthers(t *testing.T) {
	ctx := context.Background()
	full := bufferKey("full")
	failing := newUserMemory("failing")
	failing.saveErr = errDiskFull
	recent := newRecent(t, 3, memories.WithMemoryKey("recent"))
	lc := memory.NewConversationBuffer(memory.WithMemoryKey("lc"))
	m := newCombined(t, []schema.Memory{full, failing, recent, lc})

	in, out := turn("Hello", "Hi!")
	err := m.SaveContext(ctx, in, out)
	require.Error(t, err)
	assert.ErrorIs(t, err, errDiskFull)
	assert.Contains(t, err.Error(), "child 2 (*combined_test.userMemory)")
	assert.Contains(t, err.Error(), errDiskFull.Error())
	for _, other := range []string{"child 1", "child 3", "child 4"} {
		assert.NotContains(t, err.Error(), other)
	}

	want := rendered(t, llms.HumanChatMessage{Content: "Hello"}, llms.AIChatMessage{Content: "Hi!"})
	assert.Equal(t, want, loadKey(t, ctx, full, "full"))
	assert.Equal(t, want, loadKey(t, ctx, recent, "recent"))
	assert.Equal(t, want, loadKey(t, ctx, lc, "lc"))
	saves, _, _ := failing.calls()
	assert.Equal(t, 1, saves)
}

func TestSaveContextJoinsEveryFailure(t *testing.T) {
	ctx := context.Background()
	first := newUserMemory("first")
	first.saveErr = errDiskFull
	full := bufferKey("full")
	third := newUserMemory("third")
	third.saveErr = errOffline
	m := newCombined(t, []schema.Memory{first, full, third})

	in, out := turn("Hello", "Hi!")
	err := m.SaveContext(ctx, in, out)
	require.Error(t, err)
	assert.ErrorIs(t, err, errDiskFull)
	assert.ErrorIs(t, err, errOffline)
	assert.Contains(t, err.Error(), "child 1 (*combined_test.userMemory): "+errDiskFull.Error())
	assert.Contains(t, err.Error(), "child 3 (*combined_test.userMemory): "+errOffline.Error())
	assert.NotContains(t, err.Error(), "child 2")

	want := rendered(t, llms.HumanChatMessage{Content: "Hello"}, llms.AIChatMessage{Content: "Hi!"})
	assert.Equal(t, want, loadKey(t, ctx, full, "full"))
}

func TestSaveContextInvalidTurnNamesEveryChild(t *testing.T) {
	ctx := context.Background()
	full := bufferKey("full")
	recent := newRecent(t, 3, memories.WithMemoryKey("recent"))
	m := newCombined(t, []schema.Memory{full, recent})

	err := m.SaveContext(ctx, map[string]any{"a": "1", "b": "2"}, map[string]any{"output": "x"})
	require.Error(t, err)
	assert.ErrorIs(t, err, memory.ErrInvalidInputValues)
	assert.Contains(t, err.Error(), "child 1 (*memories.Buffer)")
	assert.Contains(t, err.Error(), "child 2 (*memories.RecentN)")
	assert.Equal(t, "", loadKey(t, ctx, full, "full"))
	assert.Equal(t, "", loadKey(t, ctx, recent, "recent"))
}

// ---------------------------------------------------------------------------
// 5. LoadMemoryVariables
// ---------------------------------------------------------------------------

func TestLoadMemoryVariablesMergesChildren(t *testing.T) {
	ctx := context.Background()
	full := bufferKey("full")
	recent := newRecent(t, 2, memories.WithMemoryKey("recent"))
	lc := memory.NewConversationWindowBuffer(1, memory.WithMemoryKey("lc"))
	m := newCombined(t, []schema.Memory{full, recent, lc})

	for i := 1; i <= 3; i++ {
		in, out := turn(fmt.Sprintf("q%d", i), fmt.Sprintf("a%d", i))
		require.NoError(t, m.SaveContext(ctx, in, out))
	}
	got, err := m.LoadMemoryVariables(ctx, map[string]any{"input": "next"})
	require.NoError(t, err)

	want := map[string]any{}
	for _, c := range []schema.Memory{full, recent, lc} {
		vars, err := c.LoadMemoryVariables(ctx, nil)
		require.NoError(t, err)
		for k, v := range vars {
			want[k] = v
		}
	}
	assert.Equal(t, want, got)
	assert.Len(t, got, 3)
	// The children's views really differ, so the merge is not trivial.
	assert.Equal(t, "Human: q3\nAI: a3", got["recent"])
	assert.Equal(t, got["recent"], got["lc"])
	assert.True(t, strings.HasPrefix(got["full"].(string), "Human: q1\nAI: a1\n"))
}

func TestLoadMemoryVariablesLaterChildWins(t *testing.T) {
	ctx := context.Background()
	// Same key, same turns, different content: the prefixes differ.
	newHuman := func() *memories.Buffer { return mustBuffer() }
	newUser := func() *memories.Buffer {
		return mustBuffer(memories.WithHumanPrefix("User"), memories.WithAIPrefix("Bot"))
	}
	tests := []struct {
		name          string
		first, second *memories.Buffer
	}{
		{"Human/AI then User/Bot", newHuman(), newUser()},
		{"User/Bot then Human/AI", newUser(), newHuman()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newCombined(t, []schema.Memory{tt.first, tt.second})
			in, out := turn("Hello", "Hi!")
			require.NoError(t, m.SaveContext(ctx, in, out))

			firstView := loadKey(t, ctx, tt.first, "history")
			secondView := loadKey(t, ctx, tt.second, "history")
			require.NotEqual(t, firstView, secondView)

			got, err := m.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			assert.Equal(t, map[string]any{"history": secondView}, got)
		})
	}
}

func TestLoadMemoryVariablesRunsChildrenConcurrently(t *testing.T) {
	ctx := context.Background()
	const n = 4
	gate := newBarrier(n)
	list := make([]schema.Memory, n)
	for i := range list {
		u := newUserMemory(fmt.Sprintf("u%d", i))
		u.loadGate = gate
		list[i] = u
	}
	m := newCombined(t, list)
	in, out := turn("Hello", "Hi!")
	require.NoError(t, m.SaveContext(ctx, in, out))

	got, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err, "children must be in LoadMemoryVariables at the same time")
	want := rendered(t, llms.HumanChatMessage{Content: "Hello"}, llms.AIChatMessage{Content: "Hi!"})
	require.Len(t, got, n)
	for i := range n {
		assert.Equal(t, want, got[fmt.Sprintf("u%d", i)])
	}
}

func TestLoadMemoryVariablesFailingChildFailsTheLoad(t *testing.T) {
	ctx := context.Background()
	full := bufferKey("full")
	failing := newUserMemory("failing")
	failing.loadErr = errOffline
	m := newCombined(t, []schema.Memory{full, failing})
	in, out := turn("Hello", "Hi!")
	require.NoError(t, m.SaveContext(ctx, in, out))

	got, err := m.LoadMemoryVariables(ctx, nil)
	require.Error(t, err)
	assert.Nil(t, got)
	assert.ErrorIs(t, err, errOffline)
	assert.Contains(t, err.Error(), "child 2 (*combined_test.userMemory)")
	assert.NotContains(t, err.Error(), "child 1")
}

// ---------------------------------------------------------------------------
// 6. AddMessage
// ---------------------------------------------------------------------------

func TestAddMessageGoesToEveryMessageTaker(t *testing.T) {
	ctx := context.Background()
	full := bufferKey("full")
	recent := newRecent(t, 3, memories.WithMemoryKey("recent"))
	lc := memory.NewConversationBuffer(memory.WithMemoryKey("lc"))
	m := newCombined(t, []schema.Memory{full, recent, lc})

	system := llms.SystemChatMessage{Content: "You are terse."}
	require.NoError(t, m.AddMessage(ctx, system))
	in, out := turn("Hello", "Hi!")
	require.NoError(t, m.SaveContext(ctx, in, out))

	human, ai := llms.HumanChatMessage{Content: "Hello"}, llms.AIChatMessage{Content: "Hi!"}
	assert.Equal(t, rendered(t, system, human, ai), loadKey(t, ctx, full, "full"))
	assert.Equal(t, rendered(t, system, human, ai), loadKey(t, ctx, recent, "recent"))
	// The langchaingo child takes no single messages: it is skipped, but it
	// still receives the turn.
	assert.Equal(t, rendered(t, human, ai), loadKey(t, ctx, lc, "lc"))
}

func TestAddMessageWithoutMessageTaker(t *testing.T) {
	ctx := context.Background()
	lc := memory.NewConversationBuffer(memory.WithMemoryKey("lc"))
	win := memory.NewConversationWindowBuffer(2, memory.WithMemoryKey("win"))
	user := newUserMemory("user")
	m := newCombined(t, []schema.Memory{lc, win, user})

	err := m.AddMessage(ctx, llms.SystemChatMessage{Content: "You are terse."})
	require.ErrorIs(t, err, combined.ErrNoMessageTaker)
	assert.Equal(t, "", loadKey(t, ctx, lc, "lc"))
	assert.Equal(t, "", loadKey(t, ctx, win, "win"))
	assert.Equal(t, "", loadKey(t, ctx, user, "user"))
}

func TestAddMessageInvalidMessageNamesTheChildren(t *testing.T) {
	ctx := context.Background()
	full := bufferKey("full")
	recent := newRecent(t, 3, memories.WithMemoryKey("recent"))
	lc := memory.NewConversationBuffer(memory.WithMemoryKey("lc"))
	m := newCombined(t, []schema.Memory{full, lc, recent})

	err := m.AddMessage(ctx, nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, adapter.ErrInvalidValues)
	assert.Contains(t, err.Error(), "child 1 (*memories.Buffer)")
	assert.Contains(t, err.Error(), "child 3 (*memories.RecentN)")
	assert.NotContains(t, err.Error(), "child 2", "the skipped langchaingo child did not fail")
	assert.Equal(t, "", loadKey(t, ctx, full, "full"))
	assert.Equal(t, "", loadKey(t, ctx, recent, "recent"))
}

func TestCombinedMemoryIsAMessageTakerChild(t *testing.T) {
	ctx := context.Background()
	full := bufferKey("full")
	inner := newCombined(t, []schema.Memory{full})
	outer := newCombined(t, []schema.Memory{inner, memory.NewConversationBuffer(memory.WithMemoryKey("lc"))})

	msg := llms.SystemChatMessage{Content: "nested"}
	require.NoError(t, outer.AddMessage(ctx, msg))
	assert.Equal(t, rendered(t, msg), loadKey(t, ctx, full, "full"))
}

// ---------------------------------------------------------------------------
// 7. Clear
// ---------------------------------------------------------------------------

func TestClearClearsEveryChildForTheIdentityOnly(t *testing.T) {
	base := context.Background()
	alice := memstack.WithIdentity(base, memstack.Identity{Tenant: "t", User: "alice", Conversation: "c"})
	bob := memstack.WithIdentity(base, memstack.Identity{Tenant: "t", User: "bob", Conversation: "c"})

	full := bufferKey("full")
	recent := newRecent(t, 3, memories.WithMemoryKey("recent"))
	user := newUserMemory("user")
	m := newCombined(t, []schema.Memory{full, recent, user})

	for _, c := range []struct {
		ctx  context.Context
		name string
	}{{alice, "alice"}, {bob, "bob"}} {
		require.NoError(t, m.AddMessage(c.ctx, llms.SystemChatMessage{Content: "system for " + c.name}))
		in, out := turn("I am "+c.name, "Hello "+c.name)
		require.NoError(t, m.SaveContext(c.ctx, in, out))
	}
	bobBefore, err := m.LoadMemoryVariables(bob, nil)
	require.NoError(t, err)
	require.Contains(t, bobBefore["full"], "I am bob")

	require.NoError(t, m.Clear(alice))

	aliceAfter, err := m.LoadMemoryVariables(alice, nil)
	require.NoError(t, err)
	assert.Equal(t, "", aliceAfter["full"])
	assert.Equal(t, "", aliceAfter["recent"])
	assert.Equal(t, "", aliceAfter["user"]) // the user memory has no identities: all gone
	_, _, clears := user.calls()
	assert.Equal(t, 1, clears)

	bobAfter, err := m.LoadMemoryVariables(bob, nil)
	require.NoError(t, err)
	assert.Equal(t, bobBefore["full"], bobAfter["full"])
	assert.Equal(t, bobBefore["recent"], bobAfter["recent"])
}

func TestClearJoinsFailuresAndClearsTheOthers(t *testing.T) {
	ctx := context.Background()
	full := bufferKey("full")
	failing := newUserMemory("failing")
	failing.clearErr = errOffline
	m := newCombined(t, []schema.Memory{failing, full})
	in, out := turn("Hello", "Hi!")
	require.NoError(t, m.SaveContext(ctx, in, out))

	err := m.Clear(ctx)
	require.ErrorIs(t, err, errOffline)
	assert.Contains(t, err.Error(), "child 1 (*combined_test.userMemory)")
	assert.Equal(t, "", loadKey(t, ctx, full, "full"))
}

// ---------------------------------------------------------------------------
// 8. String
// ---------------------------------------------------------------------------

func TestString(t *testing.T) {
	full := bufferKey("full")
	recent := newRecent(t, 3, memories.WithMemoryKey("recent"))
	lc := memory.NewConversationBuffer(memory.WithMemoryKey("lc"))
	described := describedMemory{userMemory: newUserMemory("mine"), desc: "MyMemory(v1)\nkeeps: everything"}
	m := newCombined(t, []schema.Memory{full, recent, lc, described})

	lines := strings.Split(m.String(), "\n")
	require.Len(t, lines, 6, m.String())

	first := lines[0]
	assert.True(t, strings.HasPrefix(first, "CombinedMemory("), first)
	assert.Contains(t, first, "4 children")
	for _, v := range m.MemoryVariables(context.Background()) {
		assert.Contains(t, first, fmt.Sprintf("%q", v))
	}

	assert.Equal(t, "  "+full.String(), lines[1])
	assert.Equal(t, "  "+recent.String(), lines[2])
	assert.Equal(t, "  *memory.ConversationBuffer", lines[3], "a child without String shows its Go type")
	assert.Equal(t, "  MyMemory(v1)", lines[4])
	assert.Equal(t, "  keeps: everything", lines[5])
	assert.Equal(t, m.String(), fmt.Sprint(m), "Memory is a fmt.Stringer")
}

func TestStringNestedCombinedIndentsEachLevel(t *testing.T) {
	full := bufferKey("full")
	inner := newCombined(t, []schema.Memory{full})
	outer := newCombined(t, []schema.Memory{inner})

	lines := strings.Split(outer.String(), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, "  "+strings.Split(inner.String(), "\n")[0], lines[1])
	assert.Equal(t, "    "+full.String(), lines[2])
}

// ---------------------------------------------------------------------------
// 9. Mixed children
// ---------------------------------------------------------------------------

func TestMixedChildrenAfterFiveTurns(t *testing.T) {
	ctx := context.Background()
	full := mustBuffer()
	recent := newRecent(t, 3, memories.WithMemoryKey("recent"))
	lc := memory.NewConversationWindowBuffer(2, memory.WithMemoryKey("lc"))
	m := newCombined(t, []schema.Memory{full, recent, lc})
	// langchaingo's own memory, standalone, fed the same turns.
	standalone := memory.NewConversationWindowBuffer(2, memory.WithMemoryKey("lc"))

	var msgs []llms.ChatMessage
	for i := 1; i <= 5; i++ {
		human, ai := fmt.Sprintf("question %d", i), fmt.Sprintf("answer %d", i)
		in, out := turn(human, ai)
		require.NoError(t, m.SaveContext(ctx, in, out))
		require.NoError(t, standalone.SaveContext(ctx, in, out))
		msgs = append(msgs, llms.HumanChatMessage{Content: human}, llms.AIChatMessage{Content: ai})
	}

	got, err := m.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"history", "recent", "lc"}, m.MemoryVariables(ctx))
	require.Len(t, got, 3)

	assert.Equal(t, rendered(t, msgs...), got["history"])
	assert.Equal(t, rendered(t, msgs[len(msgs)-3:]...), got["recent"])
	assert.Equal(t, "AI: answer 4\nHuman: question 5\nAI: answer 5", got["recent"])

	want := loadKey(t, ctx, standalone, "lc")
	assert.Equal(t, want, got["lc"])
	assert.Equal(t, rendered(t, msgs[len(msgs)-4:]...), got["lc"], "langchaingo keeps the last 2 pairs")
}

// ---------------------------------------------------------------------------
// 10. Cancelled context
// ---------------------------------------------------------------------------

func TestCancelledContext(t *testing.T) {
	system := llms.SystemChatMessage{Content: "You are terse."}
	tests := []struct {
		name string
		op   func(ctx context.Context, m *combined.Memory) error
	}{
		{"SaveContext", func(ctx context.Context, m *combined.Memory) error {
			in, out := turn("Hello", "Hi!")
			return m.SaveContext(ctx, in, out)
		}},
		{"AddMessage", func(ctx context.Context, m *combined.Memory) error { return m.AddMessage(ctx, system) }},
		{"LoadMemoryVariables", func(ctx context.Context, m *combined.Memory) error {
			vars, err := m.LoadMemoryVariables(ctx, nil)
			if vars != nil {
				return fmt.Errorf("got variables %v with a cancelled context", vars)
			}
			return err
		}},
		{"Clear", func(ctx context.Context, m *combined.Memory) error { return m.Clear(ctx) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			full := bufferKey("full")
			recent := newRecent(t, 3, memories.WithMemoryKey("recent"))
			lc := memory.NewConversationBuffer(memory.WithMemoryKey("lc"))
			user := newUserMemory("user")
			m := newCombined(t, []schema.Memory{full, recent, lc, user})
			// One turn already stored, so that a Clear that went through
			// would be seen.
			in, out := turn("before", "stored")
			require.NoError(t, m.SaveContext(ctx, in, out))
			before, err := m.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			saves0, loads0, clears0 := user.calls()

			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			err = tt.op(cancelled, m)
			require.Error(t, err)
			assert.ErrorIs(t, err, context.Canceled)

			saves, loads, clears := user.calls()
			assert.Equal(t, [3]int{saves0, loads0, clears0}, [3]int{saves, loads, clears},
				"no child may be called with a cancelled context")
			after, err := m.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			assert.Equal(t, before, after, "nothing stored or cleared in any child")
		})
	}
}

// ---------------------------------------------------------------------------
// 11. Concurrency
// ---------------------------------------------------------------------------

func TestConcurrentIdentitiesSeeOnlyTheirOwnMessages(t *testing.T) {
	const (
		goroutines = 50
		turns      = 10
		window     = 3
	)
	full := bufferKey("full")
	recent := newRecent(t, window, memories.WithMemoryKey("recent"))
	m := newCombined(t, []schema.Memory{full, recent})

	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("user-%02d", g)
			ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: name, Conversation: "c"})
			var msgs []llms.ChatMessage
			for i := range turns {
				human, ai := fmt.Sprintf("%s asks %d", name, i), fmt.Sprintf("%s answer %d", name, i)
				in, out := turn(human, ai)
				if !assert.NoError(t, m.SaveContext(ctx, in, out)) {
					return
				}
				msgs = append(msgs, llms.HumanChatMessage{Content: human}, llms.AIChatMessage{Content: ai})
				got, err := m.LoadMemoryVariables(ctx, nil)
				if !assert.NoError(t, err) {
					return
				}
				wantFull, err := llms.GetBufferString(msgs, "Human", "AI")
				if !assert.NoError(t, err) {
					return
				}
				wantRecent, err := llms.GetBufferString(msgs[max(0, len(msgs)-window):], "Human", "AI")
				if !assert.NoError(t, err) {
					return
				}
				if !assert.Equal(t, wantFull, got["full"], name) || !assert.Equal(t, wantRecent, got["recent"], name) {
					return
				}
			}
		}()
	}
	wg.Wait()

	// Every transcript is complete and mentions no one else.
	for g := range goroutines {
		name := fmt.Sprintf("user-%02d", g)
		ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: name, Conversation: "c"})
		got, err := m.LoadMemoryVariables(ctx, nil)
		require.NoError(t, err)
		s := got["full"].(string)
		assert.Equal(t, 2*turns, strings.Count(s, name), name)
		assert.Equal(t, 2*turns, strings.Count(s, "user-"), name)
	}
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
