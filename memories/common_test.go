package memories_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"
)

// Every memory type is a langchaingo schema.Memory and a fmt.Stringer.
var (
	_ schema.Memory = (*memories.Buffer)(nil)
	_ schema.Memory = (*memories.RecentN)(nil)
	_ schema.Memory = (*memories.TokenWindow)(nil)
	_ fmt.Stringer  = (*memories.Buffer)(nil)
	_ fmt.Stringer  = (*memories.RecentN)(nil)
	_ fmt.Stringer  = (*memories.TokenWindow)(nil)
)

// ctMemory is what the three memory types have in common.
type ctMemory interface {
	schema.Memory
	fmt.Stringer
	AddMessage(ctx context.Context, msg llms.ChatMessage) error
}

// ctCtor builds one memory type. The windowed types get a window far larger
// than any test conversation here, so that every type shows everything and
// the shared behaviour can be compared across them.
type ctCtor struct {
	name string
	make func(opts ...memories.Option) (ctMemory, error)
}

func ctCtors() []ctCtor {
	return []ctCtor{
		{"Buffer", func(opts ...memories.Option) (ctMemory, error) {
			m, err := memories.NewBuffer(ctAs[memories.BufferOption](opts)...)
			if err != nil {
				return nil, err
			}
			return m, nil
		}},
		{"RecentN", func(opts ...memories.Option) (ctMemory, error) {
			m, err := memories.NewRecentN(100_000, ctAs[memories.RecentNOption](opts)...)
			if err != nil {
				return nil, err
			}
			return m, nil
		}},
		{"TokenWindow", func(opts ...memories.Option) (ctMemory, error) {
			m, err := memories.NewTokenWindow(100_000_000, ctAs[memories.TokenWindowOption](opts)...)
			if err != nil {
				return nil, err
			}
			return m, nil
		}},
	}
}

// ctAs converts options of every type (memories.Option) to the option
// type O of one constructor; a nil option stays nil.
func ctAs[O any](opts []memories.Option) []O {
	out := make([]O, len(opts))
	for i, o := range opts {
		if o != nil {
			out[i] = any(o).(O)
		}
	}
	return out
}

func ctMust(t testing.TB, c ctCtor, opts ...memories.Option) ctMemory {
	t.Helper()
	m, err := c.make(opts...)
	require.NoError(t, err)
	require.NotNil(t, m)
	return m
}

func ctIDCtx(id memstack.Identity) context.Context {
	return memstack.WithIdentity(context.Background(), id)
}

// ctLoad loads the memory and returns its single variable.
func ctLoad(t testing.TB, m schema.Memory, ctx context.Context, key string) any {
	t.Helper()
	vars, err := m.LoadMemoryVariables(ctx, map[string]any{})
	require.NoError(t, err)
	require.Len(t, vars, 1, "a memory loads exactly one variable")
	v, ok := vars[key]
	require.True(t, ok, "variable %q missing from %v", key, vars)
	return v
}

func ctLoadString(t testing.TB, m schema.Memory, ctx context.Context) string {
	t.Helper()
	v := ctLoad(t, m, ctx, m.GetMemoryKey(ctx))
	s, ok := v.(string)
	require.True(t, ok, "string mode must load a string, got %T", v)
	return s
}

func ctLoadMessages(t testing.TB, m schema.Memory, ctx context.Context) []llms.ChatMessage {
	t.Helper()
	v := ctLoad(t, m, ctx, m.GetMemoryKey(ctx))
	msgs, ok := v.([]llms.ChatMessage)
	require.True(t, ok, "messages mode must load []llms.ChatMessage, got %T", v)
	return msgs
}

func ctSaveTurn(t testing.TB, m schema.Memory, ctx context.Context, human, ai string) {
	t.Helper()
	require.NoError(t, m.SaveContext(ctx, map[string]any{"input": human}, map[string]any{"output": ai}))
}

func ctRender(t testing.TB, msgs []llms.ChatMessage, humanPrefix, aiPrefix string) string {
	t.Helper()
	s, err := llms.GetBufferString(msgs, humanPrefix, aiPrefix)
	require.NoError(t, err)
	return s
}

func ctStored(t testing.TB, st store.Store, id memstack.Identity) []llms.ChatMessage {
	t.Helper()
	recs, err := st.All(context.Background(), id)
	require.NoError(t, err)
	out := make([]llms.ChatMessage, len(recs))
	for i, r := range recs {
		out[i] = r.Message
	}
	return out
}

// ctConversation is a conversation with every kind of message, added in
// order through SaveContext (turns) and AddMessage (everything else).
func ctConversation() []llms.ChatMessage {
	return []llms.ChatMessage{
		llms.SystemChatMessage{Content: "You are a terse assistant."},
		llms.HumanChatMessage{Content: "What's the weather in Paris?"},
		llms.AIChatMessage{Content: "", ToolCalls: []llms.ToolCall{{
			ID: "call_1", Type: "function",
			FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: `{"city":"Paris"}`},
		}}},
		llms.ToolChatMessage{ID: "call_1", Content: `{"temp_c":18}`},
		llms.AIChatMessage{Content: "18°C and mild."},
		llms.HumanChatMessage{Content: "Thanks!"},
		llms.AIChatMessage{Content: "You're welcome."},
	}
}

func ctAddAll(t testing.TB, m ctMemory, ctx context.Context, msgs []llms.ChatMessage) {
	t.Helper()
	for _, msg := range msgs {
		require.NoError(t, m.AddMessage(ctx, msg))
	}
}

func TestMemories_StringerDescribesConfiguration(t *testing.T) {
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			def := ctMust(t, c)
			assert.True(t, strings.HasPrefix(def.String(), c.name+"("), "String() = %q", def.String())
			assert.Contains(t, def.String(), `"history"`)
			assert.Contains(t, def.String(), "string")

			custom := ctMust(t, c, memories.WithMemoryKey("chat_log"), memories.WithReturnMessages(true))
			assert.Contains(t, custom.String(), `"chat_log"`)
			assert.Contains(t, custom.String(), "messages")
			assert.NotEqual(t, def.String(), custom.String())
		})
	}
}

func TestMemories_MemoryKey(t *testing.T) {
	ctx := context.Background()
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				opts []memories.Option
				want string
			}{
				{"default is langchaingo's", nil, memory.NewConversationBuffer().MemoryKey},
				{"default is history", nil, "history"},
				{"WithMemoryKey", []memories.Option{memories.WithMemoryKey("chat_history")}, "chat_history"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					m := ctMust(t, c, tc.opts...)
					assert.Equal(t, tc.want, m.GetMemoryKey(ctx))
					assert.Equal(t, []string{tc.want}, m.MemoryVariables(ctx))
					ctSaveTurn(t, m, ctx, "hi", "hello")
					v := ctLoad(t, m, ctx, tc.want)
					assert.Equal(t, "Human: hi\nAI: hello", v)
				})
			}
		})
	}
}

func TestMemories_StringModeMatchesGetBufferString(t *testing.T) {
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range []struct {
				name     string
				opts     []memories.Option
				human    string
				aiPrefix string
			}{
				{"default prefixes", nil, "Human", "AI"},
				{"custom prefixes", []memories.Option{memories.WithHumanPrefix("User"), memories.WithAIPrefix("Assistant")}, "User", "Assistant"},
				{"custom human prefix only", []memories.Option{memories.WithHumanPrefix("Q")}, "Q", "AI"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					ctx := ctIDCtx(memstack.Identity{Tenant: "t", User: "u"})
					m := ctMust(t, c, tc.opts...)
					assert.Equal(t, ctRender(t, nil, tc.human, tc.aiPrefix), ctLoadString(t, m, ctx), "empty memory")

					// The system message comes first, so that the windowed
					// types (which pin it ahead of the window) show the same.
					want := ctConversation()
					ctAddAll(t, m, ctx, want)
					assert.Equal(t, ctRender(t, want, tc.human, tc.aiPrefix), ctLoadString(t, m, ctx))
					for i := range 3 {
						h, a := fmt.Sprintf("question %d", i), fmt.Sprintf("answer %d", i)
						ctSaveTurn(t, m, ctx, h, a)
						want = append(want, llms.HumanChatMessage{Content: h}, llms.AIChatMessage{Content: a})
						assert.Equal(t, ctRender(t, want, tc.human, tc.aiPrefix), ctLoadString(t, m, ctx))
					}
					got := ctLoadString(t, m, ctx)
					assert.Equal(t, ctRender(t, want, tc.human, tc.aiPrefix), got)
					assert.Contains(t, got, tc.human+": Thanks!")
					assert.Contains(t, got, tc.aiPrefix+": You're welcome.")
				})
			}
		})
	}
}

func TestMemories_ReturnMessagesIsACopy(t *testing.T) {
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctIDCtx(memstack.Identity{User: "u1"})
			m := ctMust(t, c, memories.WithReturnMessages(true))
			assert.Empty(t, ctLoadMessages(t, m, ctx))

			conv := ctConversation()
			ctAddAll(t, m, ctx, conv)
			ctSaveTurn(t, m, ctx, "hello", "hi there")
			want := append(ctConversation(), // a second, untouched copy
				llms.HumanChatMessage{Content: "hello"}, llms.AIChatMessage{Content: "hi there"})

			// Changing what was passed to AddMessage does not change memory.
			conv[2].(llms.AIChatMessage).ToolCalls[0].FunctionCall.Arguments = "changed by caller"

			got := ctLoadMessages(t, m, ctx)
			require.Equal(t, want, got)

			// Change everything the caller can reach in the loaded slice.
			aiIdx := 2 // the AI message with tool calls
			ai, ok := got[aiIdx].(llms.AIChatMessage)
			require.True(t, ok)
			ai.ToolCalls[0].ID = "mutated"
			ai.ToolCalls[0].FunctionCall.Arguments = "mutated"
			ai.ToolCalls[0].FunctionCall.Name = "mutated"
			got[0] = llms.HumanChatMessage{Content: "mutated"}
			got[1] = nil
			_ = append(got[:2], llms.SystemChatMessage{Content: "mutated"})

			again := ctLoadMessages(t, m, ctx)
			assert.Equal(t, want, again)
			assert.Equal(t, `{"city":"Paris"}`, again[aiIdx].(llms.AIChatMessage).ToolCalls[0].FunctionCall.Arguments)
		})
	}
}

func TestMemories_KeySelectionLikeLangchaingo(t *testing.T) {
	agentOutputs := map[string]any{
		"output": "Paris is sunny.",
		"intermediateSteps": []schema.AgentStep{{
			Action:      schema.AgentAction{Tool: "weather", ToolInput: "Paris"},
			Observation: "sunny",
		}},
	}
	cases := []struct {
		name                string
		inputKey, outputKey string
		inputs, outputs     map[string]any
		wantHuman, wantAI   string
		langchaingoAgrees   bool // langchaingo's ConversationBuffer accepts the maps
	}{
		{
			name:   "single entries with any names",
			inputs: map[string]any{"question": "What is Go?"}, outputs: map[string]any{"text": "A language."},
			wantHuman: "What is Go?", wantAI: "A language.", langchaingoAgrees: true,
		},
		{
			name: "configured keys pick among several", inputKey: "input", outputKey: "text",
			inputs:    map[string]any{"input": "hi", "context": "ignored", "n": 3},
			outputs:   map[string]any{"text": "hello", "usage": 12},
			wantHuman: "hi", wantAI: "hello", langchaingoAgrees: true,
		},
		{
			name: "configured input key, single output", inputKey: "q",
			inputs: map[string]any{"q": "ping", "other": "x"}, outputs: map[string]any{"answer": "pong"},
			wantHuman: "ping", wantAI: "pong", langchaingoAgrees: true,
		},
		{
			name: "configured output key on agent output", outputKey: "output",
			inputs: map[string]any{"input": "weather?"}, outputs: agentOutputs,
			wantHuman: "weather?", wantAI: "Paris is sunny.", langchaingoAgrees: true,
		},
		{
			name:   "agent output: intermediateSteps ignored without output key",
			inputs: map[string]any{"input": "weather?"}, outputs: agentOutputs,
			wantHuman: "weather?", wantAI: "Paris is sunny.", langchaingoAgrees: false,
		},
		{
			name:   "empty strings are valid values",
			inputs: map[string]any{"input": ""}, outputs: map[string]any{"text": ""},
			wantHuman: "", wantAI: "", langchaingoAgrees: true,
		},
	}
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					ctx := context.Background()
					m := ctMust(t, c, memories.WithInputKey(tc.inputKey), memories.WithOutputKey(tc.outputKey),
						memories.WithReturnMessages(true))
					require.NoError(t, m.SaveContext(ctx, tc.inputs, tc.outputs))
					want := []llms.ChatMessage{
						llms.HumanChatMessage{Content: tc.wantHuman}, llms.AIChatMessage{Content: tc.wantAI},
					}
					assert.Equal(t, want, ctLoadMessages(t, m, ctx))

					lc := memory.NewConversationBuffer(memory.WithInputKey(tc.inputKey),
						memory.WithOutputKey(tc.outputKey), memory.WithReturnMessages(true))
					lcErr := lc.SaveContext(ctx, tc.inputs, tc.outputs)
					if tc.langchaingoAgrees {
						require.NoError(t, lcErr)
						lcVars, err := lc.LoadMemoryVariables(ctx, nil)
						require.NoError(t, err)
						assert.Equal(t, lcVars["history"], ctLoadMessages(t, m, ctx), "same messages as langchaingo")
					} else {
						assert.Error(t, lcErr, "documented extension over langchaingo")
					}
				})
			}
		})
	}
}

// customMessage is a message type langchaingo does not know.
type customMessage struct{ content string }

func (customMessage) GetType() llms.ChatMessageType { return "custom" }
func (m customMessage) GetContent() string          { return m.content }

// customGeneric claims the generic type but is not an llms.GenericChatMessage,
// so it has no role to render.
type customGeneric struct{ content string }

func (customGeneric) GetType() llms.ChatMessageType { return llms.ChatMessageTypeGeneric }
func (m customGeneric) GetContent() string          { return m.content }

func TestMemories_BadInputStoresNothing(t *testing.T) {
	const secret = "TOP-SECRET-d41d8cd9"
	id := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	good := ctIDCtx(id)
	cancelled, cancel := context.WithCancel(good)
	cancel()
	var nilCtx context.Context
	in := map[string]any{"input": secret}
	out := map[string]any{"output": secret}
	save := func(ctx context.Context, inputs, outputs map[string]any) func(ctMemory) error {
		return func(m ctMemory) error { return m.SaveContext(ctx, inputs, outputs) }
	}
	add := func(ctx context.Context, msg llms.ChatMessage) func(ctMemory) error {
		return func(m ctMemory) error { return m.AddMessage(ctx, msg) }
	}
	cases := []struct {
		name     string
		opts     []memories.Option
		call     func(ctMemory) error
		wantIs   []error
		wantText []string
	}{
		{name: "nil inputs", call: save(good, nil, out),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"input"}},
		{name: "empty inputs", call: save(good, map[string]any{}, out),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"input"}},
		{name: "nil outputs", call: save(good, in, nil),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"output"}},
		{name: "empty outputs", call: save(good, in, map[string]any{}),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"output"}},
		{name: "missing configured input key", opts: []memories.Option{memories.WithInputKey("question")},
			call:   save(good, in, out),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{`"question"`, "input"}},
		{name: "missing configured output key", opts: []memories.Option{memories.WithOutputKey("answer")},
			call:   save(good, in, out),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{`"answer"`, "output"}},
		{name: "several input keys, none configured",
			call:   save(good, map[string]any{"input": secret, "context": secret}, out),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"WithInputKey", `"context"`, `"input"`}},
		{name: "several output keys, none configured",
			call:   save(good, in, map[string]any{"output": secret, "text": secret}),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"WithOutputKey", `"output"`, `"text"`}},
		{name: "non-string input value",
			call:   save(good, map[string]any{"input": struct{ S string }{secret}}, out),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{`"input"`, "string"}},
		{name: "non-string output value",
			call:   save(good, in, map[string]any{"output": []string{secret}}),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{`"output"`, "string"}},
		{name: "valid inputs, invalid outputs (langchaingo stores the human message)",
			call:   save(good, in, map[string]any{"a": secret, "b": secret}),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"output", "WithOutputKey"}},
		{name: "valid inputs, output of wrong type",
			call:   save(good, in, map[string]any{"output": 42}),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{`"output"`, "int"}},
		{name: "cancelled context", call: save(cancelled, in, out),
			wantIs: []error{context.Canceled}},
		{name: "nil context", call: save(nilCtx, in, out), wantText: []string{"context"}},
		{name: "identity required but absent", opts: []memories.Option{memories.WithRequireIdentity()},
			call:   save(context.Background(), in, out),
			wantIs: []error{memstack.ErrNoIdentity}, wantText: []string{"identity"}},
		{name: "AddMessage nil", call: add(good, nil),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"nil"}},
		{name: "AddMessage unsupported custom type", call: add(good, customMessage{secret}),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"custom"}},
		{name: "AddMessage generic without role", call: add(good, customGeneric{secret}),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"generic", "GenericChatMessage"}},
		{name: "AddMessage typed nil pointer", call: add(good, (*llms.HumanChatMessage)(nil)),
			wantIs: []error{memory.ErrInvalidInputValues}, wantText: []string{"nil", "HumanChatMessage"}},
		{name: "AddMessage cancelled context", call: add(cancelled, llms.SystemChatMessage{Content: secret}),
			wantIs: []error{context.Canceled}},
		{name: "AddMessage nil context", call: add(nilCtx, llms.SystemChatMessage{Content: secret}),
			wantText: []string{"context"}},
		{name: "AddMessage identity required but absent", opts: []memories.Option{memories.WithRequireIdentity()},
			call:   add(context.Background(), llms.SystemChatMessage{Content: secret}),
			wantIs: []error{memstack.ErrNoIdentity}},
	}
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					st := store.NewInMemory()
					m := ctMust(t, c, append([]memories.Option{memories.WithStore(st)}, tc.opts...)...)

					var err error
					require.NotPanics(t, func() { err = tc.call(m) })
					require.Error(t, err)
					for _, target := range tc.wantIs {
						assert.ErrorIs(t, err, target)
					}
					for _, s := range tc.wantText {
						assert.Contains(t, err.Error(), s)
					}
					assert.NotContains(t, err.Error(), secret, "error text leaks the value")

					assert.Empty(t, ctStored(t, st, id), "nothing may be stored for the caller's identity")
					assert.Empty(t, ctStored(t, st, memstack.Identity{}), "nothing may be stored for the default identity")
					assert.Equal(t, "", ctLoadString(t, m, good))
				})
			}
		})
	}
}

func TestMemories_LoadAndClearHonourCancelledContext(t *testing.T) {
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctIDCtx(memstack.Identity{User: "u"})
			m := ctMust(t, c)
			ctSaveTurn(t, m, ctx, "keep", "me")
			cancelled, cancel := context.WithCancel(ctx)
			cancel()

			_, err := m.LoadMemoryVariables(cancelled, nil)
			assert.ErrorIs(t, err, context.Canceled)
			assert.ErrorIs(t, m.Clear(cancelled), context.Canceled)
			var nilCtx context.Context
			assert.Error(t, m.Clear(nilCtx))
			_, err = m.LoadMemoryVariables(nilCtx, nil)
			assert.Error(t, err)

			assert.Equal(t, "Human: keep\nAI: me", ctLoadString(t, m, ctx), "a failed Clear clears nothing")
		})
	}
}

func TestMemories_IdentitiesAreIsolated(t *testing.T) {
	ids := []memstack.Identity{
		{}, // the default, shared conversation
		{Tenant: "a/b", User: "c"},
		{Tenant: "a", User: "b/c"},
		{Tenant: "a:b", User: "c"},
		{Tenant: "a", User: "b:c"},
		{Tenant: "a%3A", User: "b"},
		{Tenant: "a:", User: "b"},
		{Tenant: "acme", User: "u1", Conversation: "c1"},
		{Tenant: "acme", User: "u1", Conversation: "c2"},
		{Tenant: "acme", User: "u2", Conversation: "c1"},
	}
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			st := store.NewInMemory()
			m := ctMust(t, c, memories.WithStore(st))
			want := make(map[memstack.Identity][]llms.ChatMessage)
			for round := range 2 {
				for i, id := range ids {
					h, a := fmt.Sprintf("I am %d (%q) round %d", i, id.Key(), round), fmt.Sprintf("noted %d/%d", i, round)
					ctSaveTurn(t, m, ctIDCtx(id), h, a)
					want[id] = append(want[id], llms.HumanChatMessage{Content: h}, llms.AIChatMessage{Content: a})
				}
			}
			for _, id := range ids {
				assert.Equal(t, ctRender(t, want[id], "Human", "AI"), ctLoadString(t, m, ctIDCtx(id)), "identity %q", id.Key())
				assert.Equal(t, want[id], ctStored(t, st, id), "identity %q", id.Key())
			}
			// No identity in the context is the zero identity.
			assert.Equal(t, ctRender(t, want[memstack.Identity{}], "Human", "AI"), ctLoadString(t, m, context.Background()))
		})
	}
}

func TestMemories_DefaultIdentity(t *testing.T) {
	def := memstack.Identity{Tenant: "app", User: "anonymous"}
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			st := store.NewInMemory()
			m := ctMust(t, c, memories.WithStore(st), memories.WithDefaultIdentity(def))
			ctSaveTurn(t, m, context.Background(), "no identity here", "ok")
			ctSaveTurn(t, m, ctIDCtx(memstack.Identity{User: "bob"}), "I am bob", "hi bob")

			wantDef := []llms.ChatMessage{llms.HumanChatMessage{Content: "no identity here"}, llms.AIChatMessage{Content: "ok"}}
			assert.Equal(t, wantDef, ctStored(t, st, def))
			assert.Empty(t, ctStored(t, st, memstack.Identity{}), "the zero identity is not used when a default is set")
			assert.Equal(t, ctRender(t, wantDef, "Human", "AI"), ctLoadString(t, m, context.Background()))
			assert.Equal(t, ctRender(t, wantDef, "Human", "AI"), ctLoadString(t, m, ctIDCtx(def)))
			assert.Equal(t, "", ctLoadString(t, m, ctIDCtx(memstack.Identity{})),
				"an explicit zero identity is not the default identity")
			assert.Equal(t, "Human: I am bob\nAI: hi bob", ctLoadString(t, m, ctIDCtx(memstack.Identity{User: "bob"})))

			// WithRequireIdentity wins over a default.
			strict := ctMust(t, c, memories.WithStore(st), memories.WithDefaultIdentity(def), memories.WithRequireIdentity())
			_, err := strict.LoadMemoryVariables(context.Background(), nil)
			assert.ErrorIs(t, err, memstack.ErrNoIdentity)
			assert.ErrorIs(t, strict.Clear(context.Background()), memstack.ErrNoIdentity)
			assert.Equal(t, wantDef, ctStored(t, st, def))
		})
	}
}

func TestMemories_ClearOnlyThatIdentity(t *testing.T) {
	a := memstack.Identity{Tenant: "a/b", User: "c"}
	b := memstack.Identity{Tenant: "a", User: "b/c"}
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			m := ctMust(t, c)
			ctSaveTurn(t, m, ctIDCtx(a), "a1", "a2")
			ctSaveTurn(t, m, ctIDCtx(b), "b1", "b2")
			ctSaveTurn(t, m, context.Background(), "z1", "z2")
			require.NotEmpty(t, ctLoadString(t, m, ctIDCtx(a)))

			require.NoError(t, m.Clear(ctIDCtx(a)))
			assert.Equal(t, "", ctLoadString(t, m, ctIDCtx(a)))
			assert.Equal(t, "Human: b1\nAI: b2", ctLoadString(t, m, ctIDCtx(b)))
			assert.Equal(t, "Human: z1\nAI: z2", ctLoadString(t, m, context.Background()))

			// The cleared identity starts afresh.
			ctSaveTurn(t, m, ctIDCtx(a), "a3", "a4")
			assert.Equal(t, "Human: a3\nAI: a4", ctLoadString(t, m, ctIDCtx(a)))

			require.NoError(t, m.Clear(context.Background()))
			assert.Equal(t, "", ctLoadString(t, m, context.Background()))
			assert.Equal(t, "Human: b1\nAI: b2", ctLoadString(t, m, ctIDCtx(b)))
		})
	}
}

func TestMemories_InvalidOptions(t *testing.T) {
	cases := []struct {
		name  string
		opts  []memories.Option
		names []string // what the error must name
	}{
		{"WithStore(nil)", []memories.Option{memories.WithStore(nil)}, []string{"WithStore"}},
		{"WithMemoryKey empty", []memories.Option{memories.WithMemoryKey("")}, []string{"WithMemoryKey"}},
		{"WithCacheSize(-1)", []memories.Option{memories.WithCacheSize(-1)}, []string{"WithCacheSize", "-1"}},
		{"nil option", []memories.Option{memories.WithMemoryKey("k"), nil}, []string{"option 2", "nil"}},
		{"two bad options", []memories.Option{memories.WithCacheSize(-7), memories.WithMemoryKey("")},
			[]string{"WithCacheSize", "-7", "WithMemoryKey"}},
		{"bad option after good store", []memories.Option{memories.WithStore(store.NewInMemory()), memories.WithCacheSize(-2)},
			[]string{"WithCacheSize"}},
	}
	check := func(t *testing.T, err error, names []string) {
		t.Helper()
		require.Error(t, err)
		assert.ErrorIs(t, err, memories.ErrInvalidOption)
		for _, n := range names {
			assert.Contains(t, err.Error(), n)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("RecentN", func(t *testing.T) {
				m, err := memories.NewRecentN(3, ctAs[memories.RecentNOption](tc.opts)...)
				assert.Nil(t, m)
				check(t, err, tc.names)
			})
			t.Run("TokenWindow", func(t *testing.T) {
				m, err := memories.NewTokenWindow(100, ctAs[memories.TokenWindowOption](tc.opts)...)
				assert.Nil(t, m)
				check(t, err, tc.names)
			})
			t.Run("Buffer", func(t *testing.T) {
				var b *memories.Buffer
				var err error
				require.NotPanics(t, func() { b, err = memories.NewBuffer(ctAs[memories.BufferOption](tc.opts)...) })
				assert.Nil(t, b)
				check(t, err, tc.names)
			})
		})
	}
}

func TestMemories_WithStoreKeepsMessagesThere(t *testing.T) {
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			id := memstack.Identity{Tenant: "t", User: "u", Conversation: "c"}
			ctx := ctIDCtx(id)
			st := store.NewInMemory()
			m := ctMust(t, c, memories.WithStore(st))
			conv := ctConversation()
			ctAddAll(t, m, ctx, conv[:1])
			ctSaveTurn(t, m, ctx, "hello", "hi")
			want := []llms.ChatMessage{conv[0], llms.HumanChatMessage{Content: "hello"}, llms.AIChatMessage{Content: "hi"}}
			assert.Equal(t, want, ctStored(t, st, id))

			// What is written to the store directly is what the memory shows.
			require.NoError(t, st.Append(context.Background(), id, llms.HumanChatMessage{Content: "direct"}))
			want = append(want, llms.HumanChatMessage{Content: "direct"})
			assert.Equal(t, ctRender(t, want, "Human", "AI"), ctLoadString(t, m, ctx))

			require.NoError(t, m.Clear(ctx))
			assert.Empty(t, ctStored(t, st, id))
		})
	}
}

func TestMemories_LangchaingoHistoryAsStore(t *testing.T) {
	id := memstack.Identity{Tenant: "t", User: "u", Conversation: "c"}
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			h := memory.NewChatMessageHistory()
			st, err := store.FromHistory(h, id)
			require.NoError(t, err)
			m := ctMust(t, c, memories.WithStore(st))
			ctx := ctIDCtx(id)

			want := ctConversation()
			ctAddAll(t, m, ctx, want)
			assert.Equal(t, ctRender(t, want, "Human", "AI"), ctLoadString(t, m, ctx))
			for i := range 4 {
				hm, am := fmt.Sprintf("h%d", i), fmt.Sprintf("a%d", i)
				ctSaveTurn(t, m, ctx, hm, am)
				want = append(want, llms.HumanChatMessage{Content: hm}, llms.AIChatMessage{Content: am})
				assert.Equal(t, ctRender(t, want, "Human", "AI"), ctLoadString(t, m, ctx))
			}

			inHistory, err := h.Messages(context.Background())
			require.NoError(t, err)
			assert.Equal(t, want, inHistory, "the messages live in the langchaingo history")

			// A history serves one conversation: another identity is refused.
			other := ctIDCtx(memstack.Identity{User: "someone else"})
			assert.ErrorIs(t, m.SaveContext(other, map[string]any{"input": "x"}, map[string]any{"output": "y"}), store.ErrWrongIdentity)
			_, err = m.LoadMemoryVariables(other, nil)
			assert.ErrorIs(t, err, store.ErrWrongIdentity)

			require.NoError(t, m.Clear(ctx))
			inHistory, err = h.Messages(context.Background())
			require.NoError(t, err)
			assert.Empty(t, inHistory)
			assert.Equal(t, "", ctLoadString(t, m, ctx))
		})
	}
}

func TestMemories_ConcurrentIdentities(t *testing.T) {
	const goroutines, turns = 50, 20
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			st := store.NewInMemory()
			m := ctMust(t, c, memories.WithStore(st))
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id := memstack.Identity{Tenant: "t", User: fmt.Sprintf("u%d", g), Conversation: "c"}
					ctx := ctIDCtx(id)
					var want []llms.ChatMessage
					for i := range turns {
						h, a := fmt.Sprintf("g%d q%d", g, i), fmt.Sprintf("g%d a%d", g, i)
						if err := m.SaveContext(ctx, map[string]any{"input": h}, map[string]any{"output": a}); err != nil {
							errs <- fmt.Errorf("goroutine %d save %d: %w", g, i, err)
							return
						}
						want = append(want, llms.HumanChatMessage{Content: h}, llms.AIChatMessage{Content: a})
						vars, err := m.LoadMemoryVariables(ctx, nil)
						if err != nil {
							errs <- fmt.Errorf("goroutine %d load %d: %w", g, i, err)
							return
						}
						exp, _ := llms.GetBufferString(want, "Human", "AI")
						if vars["history"] != exp {
							errs <- fmt.Errorf("goroutine %d turn %d: loaded %q, want %q", g, i, vars["history"], exp)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for g := range goroutines {
				id := memstack.Identity{Tenant: "t", User: fmt.Sprintf("u%d", g), Conversation: "c"}
				got := ctStored(t, st, id)
				require.Len(t, got, 2*turns)
				for i := range turns {
					assert.Equal(t, llms.HumanChatMessage{Content: fmt.Sprintf("g%d q%d", g, i)}, got[2*i])
					assert.Equal(t, llms.AIChatMessage{Content: fmt.Sprintf("g%d a%d", g, i)}, got[2*i+1])
				}
				assert.Equal(t, ctRender(t, got, "Human", "AI"), ctLoadString(t, m, ctIDCtx(id)))
			}
		})
	}
}

// Check that errors of the shared behaviour keep langchaingo's sentinel and
// do not hide the store's errors.
func TestMemories_StoreErrorsAreWrapped(t *testing.T) {
	id := memstack.Identity{User: "only-me"}
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			st, err := store.FromHistory(memory.NewChatMessageHistory(), id)
			require.NoError(t, err)
			m := ctMust(t, c, memories.WithStore(st))
			err = m.AddMessage(ctIDCtx(memstack.Identity{User: "intruder"}), llms.SystemChatMessage{Content: "x"})
			require.Error(t, err)
			assert.True(t, errors.Is(err, store.ErrWrongIdentity), "got %v", err)
		})
	}
}

// Pointers to langchaingo's message structs are accepted and stored as the
// struct values, so they render exactly like the values do.
func TestMemories_PointerMessagesAreStoredAsValues(t *testing.T) {
	ctx := context.Background()
	msgs := []llms.ChatMessage{
		&llms.SystemChatMessage{Content: "be brief"},
		&llms.HumanChatMessage{Content: "hi"},
		&llms.AIChatMessage{Content: "calling", FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"}},
		&llms.GenericChatMessage{Role: "narrator", Content: "meanwhile"},
		&llms.ToolChatMessage{ID: "t1", Content: "42"},
		&llms.FunctionChatMessage{Name: "f", Content: "ok"},
	}
	values := make([]llms.ChatMessage, len(msgs))
	for i, m := range msgs {
		values[i] = reflect.ValueOf(m).Elem().Interface().(llms.ChatMessage)
	}
	want, err := llms.GetBufferString(values, "Human", "AI")
	require.NoError(t, err)
	for _, c := range ctCtors() {
		t.Run(c.name, func(t *testing.T) {
			s := store.NewInMemory()
			mem, err := c.make(memories.WithStore(s))
			require.NoError(t, err)
			for _, m := range msgs {
				require.NoError(t, mem.AddMessage(ctx, m))
			}
			vars, err := mem.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			assert.Equal(t, want, vars["history"])
			recs, err := s.All(ctx, memstack.Identity{})
			require.NoError(t, err)
			require.Len(t, recs, len(values))
			for i, r := range recs {
				assert.Equal(t, values[i], r.Message, "message %d is stored as a value", i)
			}
		})
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
