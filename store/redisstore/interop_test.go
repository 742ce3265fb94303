package redisstore_test

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

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
)

// recordingLLM is an llms.Model test double: it answers from a script and
// records every prompt it was given.
type recordingLLM struct {
	mu      sync.Mutex
	answers []string
	prompts []string
}

func (m *recordingLLM) GenerateContent(_ context.Context, msgs []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for _, mc := range msgs {
		for _, p := range mc.Parts {
			if t, ok := p.(llms.TextContent); ok {
				b.WriteString(t.Text)
			}
		}
	}
	m.prompts = append(m.prompts, b.String())
	if len(m.answers) == 0 {
		return nil, fmt.Errorf("recordingLLM: no answer left for prompt %d", len(m.prompts))
	}
	a := m.answers[0]
	m.answers = m.answers[1:]
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: a}}}, nil
}

func (m *recordingLLM) Call(ctx context.Context, prompt string, opts ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, opts...)
}

// langchaingo's own ConversationBuffer, in langchaingo's own conversation
// chain, keeps its history in Redis through store.AsHistory; a second
// process (another client, another buffer) continues the conversation.
func TestLangchaingoConversationBufferOnRedis(t *testing.T) {
	addr := testsvc.Redis(t)
	prefix := uniquePrefix()
	ctx := context.Background()
	id := memstack.Identity{Tenant: "acme", User: "u42", Conversation: "support"}

	s1 := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("lc"))
	llm := &recordingLLM{answers: []string{"Hello Ada!", "Your name is Ada."}}
	chain := chains.NewConversation(llm, memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s1, id))))
	out, err := chains.Run(ctx, chain, "Hi, I am Ada.")
	require.NoError(t, err)
	assert.Equal(t, "Hello Ada!", out)

	// Another process: its own client and its own buffer over the same
	// conversation.
	s2 := open(t, addr, redisstore.WithKeyPrefix(prefix), redisstore.WithNamespace("lc"))
	chain2 := chains.NewConversation(llm, memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s2, id))))
	out, err = chains.Run(ctx, chain2, "What is my name?")
	require.NoError(t, err)
	assert.Equal(t, "Your name is Ada.", out)
	require.Len(t, llm.prompts, 2)
	assert.Contains(t, llm.prompts[1], "Human: Hi, I am Ada.\nAI: Hello Ada!", "the second chain saw the first turn, read from Redis")

	rs, err := s1.All(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []string{"Hi, I am Ada.", "Hello Ada!", "What is my name?", "Your name is Ada."}, contents(rs))
	assert.Equal(t, llms.ChatMessageTypeHuman, rs[0].Message.GetType())
	assert.Equal(t, llms.ChatMessageTypeAI, rs[1].Message.GetType())

	// The langchaingo memory's variables and Clear work over Redis too.
	buf := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s2, id)), memory.WithReturnMessages(true))
	vars, err := buf.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	msgs, ok := vars["history"].([]llms.ChatMessage)
	require.True(t, ok, "%T", vars["history"])
	assert.Len(t, msgs, 4)
	require.NoError(t, buf.Clear(ctx))
	rs, err = s1.All(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, rs)

	// Other conversations in the same store are not touched.
	other := store.AsHistory(s1, alice)
	require.NoError(t, other.AddUserMessage(ctx, "mine"))
	require.NoError(t, buf.Clear(ctx))
	got, err := other.Messages(ctx)
	require.NoError(t, err)
	assert.Equal(t, []llms.ChatMessage{llms.HumanChatMessage{Content: "mine"}}, got)
}
