package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// echoLLM is an llms.Model test double: it answers "answer N" to its N-th
// call and records each prompt's text. Only the model is fake; the chain and
// memory around it are langchaingo's.
type echoLLM struct {
	mu      sync.Mutex
	prompts []string
}

func (m *echoLLM) GenerateContent(ctx context.Context, msgs []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, mc := range msgs {
		for _, p := range mc.Parts {
			if t, ok := p.(llms.TextContent); ok {
				b.WriteString(t.Text)
			}
		}
	}
	m.mu.Lock()
	m.prompts = append(m.prompts, b.String())
	n := len(m.prompts)
	m.mu.Unlock()
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: fmt.Sprintf("answer %d", n)}}}, nil
}

func (m *echoLLM) Call(ctx context.Context, prompt string, opts ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, opts...)
}

func TestAsHistoryWithLangchaingoConversationBuffer(t *testing.T) {
	ctx := context.Background()
	s := store.NewInMemory()
	alice := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob := memstack.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}

	mem := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s, alice)))
	other := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s, bob)))
	for i := 1; i <= 3; i++ {
		require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": fmt.Sprint("q", i)}, map[string]any{"output": fmt.Sprint("a", i)}))
	}
	require.NoError(t, other.SaveContext(ctx, map[string]any{"input": "bob's"}, map[string]any{"output": "reply"}))

	vars, err := mem.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "Human: q1\nAI: a1\nHuman: q2\nAI: a2\nHuman: q3\nAI: a3", vars["history"])

	recs, err := s.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"q1", "a1", "q2", "a2", "q3", "a3"}, contents(recs), "the buffer's messages are in the store under alice")
	recs, err = s.All(ctx, bob)
	require.NoError(t, err)
	assert.Equal(t, []string{"bob's", "reply"}, contents(recs))

	require.NoError(t, mem.Clear(ctx))
	vars, err = mem.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "", vars["history"])
	st, err := s.Stat(ctx, bob)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Count, "clearing alice's buffer leaves bob's")
}

func TestAsHistoryInLangchaingoConversationChain(t *testing.T) {
	ctx := context.Background()
	s := store.NewInMemory()
	id := memstack.Identity{User: "alice"}
	llm := &echoLLM{}
	chain := chains.NewConversation(llm, memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s, id))))

	for _, q := range []string{"Hello", "What did I say first?"} {
		_, err := chains.Run(ctx, chain, q)
		require.NoError(t, err)
	}
	require.Len(t, llm.prompts, 2)
	assert.Contains(t, llm.prompts[1], "Human: Hello\nAI: answer 1", "the second prompt shows the first turn, loaded from the store")

	recs, err := s.All(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Hello"}, llms.AIChatMessage{Content: "answer 1"},
		llms.HumanChatMessage{Content: "What did I say first?"}, llms.AIChatMessage{Content: "answer 2"},
	}, messagesOf(recs))
}

func messagesOf(rs []store.Record) []llms.ChatMessage {
	out := make([]llms.ChatMessage, len(rs))
	for i, r := range rs {
		out[i] = r.Message
	}
	return out
}

func TestAsHistoryMethods(t *testing.T) {
	ctx := context.Background()
	id := memstack.Identity{User: "alice"}
	newHistory := func(*testing.T) (*store.InMemory, schema.ChatMessageHistory) {
		s := store.NewInMemory()
		return s, store.AsHistory(s, id)
	}

	t.Run("AddMessage keeps every type", func(t *testing.T) {
		_, h := newHistory(t)
		msgs := []llms.ChatMessage{system("sys"), aiWithCalls(), llms.ToolChatMessage{ID: "call_1", Content: "42"},
			llms.GenericChatMessage{Role: "critic", Name: "r", Content: "ok"}}
		for _, m := range msgs {
			require.NoError(t, h.AddMessage(ctx, m))
		}
		require.NoError(t, h.AddUserMessage(ctx, "u"))
		require.NoError(t, h.AddAIMessage(ctx, "a"))
		got, err := h.Messages(ctx)
		require.NoError(t, err)
		assert.Equal(t, append(msgs, human("u"), ai("a")), got)
	})

	t.Run("Messages returns copies", func(t *testing.T) {
		_, h := newHistory(t)
		require.NoError(t, h.AddMessage(ctx, aiWithCalls()))
		got, err := h.Messages(ctx)
		require.NoError(t, err)
		m := got[0].(llms.AIChatMessage)
		m.ToolCalls[0].FunctionCall.Name = "changed"
		m.FunctionCall.Arguments = "changed"
		got[0] = human("replaced")
		again, err := h.Messages(ctx)
		require.NoError(t, err)
		assert.Equal(t, []llms.ChatMessage{aiWithCalls()}, again)
	})

	t.Run("SetMessages replaces the conversation, never its state", func(t *testing.T) {
		s, h := newHistory(t)
		require.NoError(t, h.AddUserMessage(ctx, "old"))
		_, err := s.PutState(ctx, id, "summary", []byte("old summary"), 0)
		require.NoError(t, err)
		before, err := s.Stat(ctx, id)
		require.NoError(t, err)

		require.NoError(t, h.SetMessages(ctx, []llms.ChatMessage{system("sys"), human("new"), ai("reply")}))
		got, err := h.Messages(ctx)
		require.NoError(t, err)
		assert.Equal(t, []llms.ChatMessage{system("sys"), human("new"), ai("reply")}, got)
		st, err := s.GetState(ctx, id, "summary")
		require.NoError(t, err)
		assert.Equal(t, "old summary", string(st.Value), "SetMessages never touches state (issue 17, item 2)")
		recs, err := s.All(ctx, id)
		require.NoError(t, err)
		assert.Greater(t, recs[0].Seq, before.LastSeq, "replaced messages get new Seqs")

		require.NoError(t, h.SetMessages(ctx, nil))
		got, err = h.Messages(ctx)
		require.NoError(t, err)
		assert.Empty(t, got)
	})

	t.Run("SetMessages with a nil message changes nothing", func(t *testing.T) {
		_, h := newHistory(t)
		require.NoError(t, h.AddUserMessage(ctx, "kept"))
		err := h.SetMessages(ctx, []llms.ChatMessage{human("x"), nil})
		assert.ErrorIs(t, err, store.ErrInvalidArgument)
		got, err := h.Messages(ctx)
		require.NoError(t, err)
		assert.Equal(t, []llms.ChatMessage{human("kept")}, got)
	})

	t.Run("AddMessage nil is an error", func(t *testing.T) {
		_, h := newHistory(t)
		assert.ErrorIs(t, h.AddMessage(ctx, nil), store.ErrInvalidArgument)
	})

	t.Run("cancelled context", func(t *testing.T) {
		_, h := newHistory(t)
		require.NoError(t, h.AddUserMessage(ctx, "kept"))
		c := cancelledCtx()
		assert.ErrorIs(t, h.AddUserMessage(c, "x"), context.Canceled)
		assert.ErrorIs(t, h.Clear(c), context.Canceled)
		assert.ErrorIs(t, h.SetMessages(c, []llms.ChatMessage{human("y")}), context.Canceled)
		_, err := h.Messages(c)
		assert.ErrorIs(t, err, context.Canceled)
		got, err := h.Messages(ctx)
		require.NoError(t, err)
		assert.Equal(t, []llms.ChatMessage{human("kept")}, got)
	})

	t.Run("nil store", func(t *testing.T) {
		h := store.AsHistory(nil, id)
		assert.ErrorIs(t, h.AddUserMessage(ctx, "x"), store.ErrInvalidArgument)
		_, err := h.Messages(ctx)
		assert.ErrorIs(t, err, store.ErrInvalidArgument)
	})
}

func ExampleAsHistory() {
	ctx := context.Background()
	s := store.NewInMemory() // or any backend: sqlitestore, Redis, PostgreSQL
	id := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}

	// langchaingo's own buffer memory, keeping its messages in s.
	mem := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s, id)))
	_ = mem.SaveContext(ctx, map[string]any{"input": "Hi"}, map[string]any{"output": "Hello!"})

	vars, _ := mem.LoadMemoryVariables(ctx, nil)
	fmt.Println(vars["history"])
	st, _ := s.Stat(ctx, id)
	fmt.Println(st.Count, "messages in the store")
	// Output:
	// Human: Hi
	// AI: Hello!
	// 2 messages in the store
}
