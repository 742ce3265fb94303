package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/store/storetest"
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

// List elements written before memstack recorded times (JSON without "at")
// still read, with a zero Time, next to dated ones; the trimming script
// keeps working on both.
func TestElementsWithoutTimes(t *testing.T) {
	addr := testsvc.Redis(t)
	prefix := uniquePrefix()
	s := open(t, addr, redisstore.WithKeyPrefix(prefix))
	raw := rawClient(t, addr)
	storetest.RunUndated(t, s, func(t *testing.T, id memstack.Identity, seq int64, value []byte) {
		ctx := context.Background()
		k := keysOf(prefix, "default", id)
		head := fmt.Sprint(seq, "|")
		// The list element, and its copy in the index of system messages
		// if it is one.
		found := false
		for _, key := range []string{k.msgs, k.sys} {
			elems, err := raw.LRange(ctx, key, 0, -1).Result()
			require.NoError(t, err)
			for i, e := range elems {
				if strings.HasPrefix(e, head) {
					// Keep the Seq and the role flag: "<seq>|<flag>|".
					require.NoError(t, raw.LSet(ctx, key, int64(i), e[:len(head)+2]+string(value)).Err())
					found = found || key == k.msgs
					break
				}
			}
		}
		if !found {
			t.Fatalf("no list element with Seq %d", seq)
		}
	})
}

// The time lives in the element's JSON: the layout is unchanged and the
// element holds exactly "<seq>|<flag>|" and what storekit.EncodeMessageAt
// writes.
func TestElementCarriesTheTime(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	prefix := uniquePrefix()
	s := open(t, addr, redisstore.WithKeyPrefix(prefix))
	at := time.Date(2023, 5, 8, 12, 30, 0, 5, time.FixedZone("CEST", 2*3600))
	msg := llms.SystemChatMessage{Content: "dated"}
	require.NoError(t, s.Append(memstack.WithTime(ctx, at), alice, msg))

	rs, err := s.All(ctx, alice)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	elems, err := rawClient(t, addr).LRange(ctx, keysOf(prefix, "default", alice).msgs, 0, -1).Result()
	require.NoError(t, err)
	want, err := storekit.EncodeMessageAt(msg, at)
	require.NoError(t, err)
	assert.Equal(t, []string{fmt.Sprint(rs[0].Seq, "|s|", string(want))}, elems)
	assert.Contains(t, elems[0], `"at":"2023-05-08T12:30:00.000000005+02:00"}`)
	assert.True(t, rs[0].Time.Equal(at))
	assert.Equal(t, "2023-05-08T12:30:00.000000005+02:00", rs[0].Time.Format(time.RFC3339Nano))
}
