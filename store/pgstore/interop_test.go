package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/store/storetest"
)

// countingLLM is an llms.Model test double: it answers "answer N" to its
// N-th call and records each prompt. Only the model is fake; the chain and
// the memory around it are langchaingo's.
type countingLLM struct {
	mu      sync.Mutex
	prompts []string
}

func (m *countingLLM) GenerateContent(ctx context.Context, msgs []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
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
	defer m.mu.Unlock()
	m.prompts = append(m.prompts, b.String())
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: fmt.Sprintf("answer %d", len(m.prompts))}}}, nil
}

func (m *countingLLM) Call(ctx context.Context, prompt string, opts ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, opts...)
}

// TestLangchaingoConversationBuffer runs langchaingo's own
// ConversationBuffer, inside its conversation chain, on a PostgreSQL
// history, and reads the conversation back through a second, independent
// store: what one process saved another one sees.
func TestLangchaingoConversationBuffer(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("interop")
	s := open(t, pgstore.WithTablePrefix(prefix))
	alice := memstack.Identity{Tenant: "acme", User: "alice", Conversation: "interop"}
	bob := memstack.Identity{Tenant: "acme", User: "bob", Conversation: "interop"}

	llm := &countingLLM{}
	chain := chains.NewConversation(llm, memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s, alice))))
	for _, q := range []string{"My name is Alice.", "What is my name?"} {
		_, err := chains.Run(ctx, chain, q)
		require.NoError(t, err)
	}
	require.Len(t, llm.prompts, 2)
	assert.Contains(t, llm.prompts[1], "Human: My name is Alice.\nAI: answer 1",
		"the second prompt carries the first turn, read back from PostgreSQL")

	// A second client (its own pool) over the same tables.
	s2 := open(t, pgstore.WithTablePrefix(prefix))
	rs, err := s2.All(ctx, alice)
	require.NoError(t, err)
	assert.Equal(t, []string{"My name is Alice.", "answer 1", "What is my name?", "answer 2"}, contents(rs))
	assert.Equal(t, llms.ChatMessageTypeHuman, rs[0].Message.GetType())
	assert.Equal(t, llms.ChatMessageTypeAI, rs[1].Message.GetType())

	mem2 := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s2, alice)))
	vars, err := mem2.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "Human: My name is Alice.\nAI: answer 1\nHuman: What is my name?\nAI: answer 2", vars["history"])

	// Another identity's buffer is empty, and its writes stay its own.
	other := memory.NewConversationBuffer(memory.WithChatHistory(store.AsHistory(s2, bob)))
	vars, err = other.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, "", vars["history"])
	require.NoError(t, other.SaveContext(ctx, map[string]any{"input": "hi"}, map[string]any{"output": "hello"}))

	// langchaingo's Clear clears alice only.
	require.NoError(t, mem2.Clear(ctx))
	st, err := s.Stat(ctx, alice)
	require.NoError(t, err)
	assert.Zero(t, st.Count)
	st, err = s.Stat(ctx, bob)
	require.NoError(t, err)
	assert.Equal(t, 2, st.Count)
}

// Rows written before memstack recorded times (a body without "at") still
// read, with a zero Time, next to dated ones.
func TestRowsWithoutTimes(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("undated")
	s := open(t, pgstore.WithTablePrefix(prefix))
	pool, err := pgxpool.New(ctx, testsvc.Postgres(t))
	require.NoError(t, err)
	defer pool.Close()
	storetest.RunUndated(t, s, func(t *testing.T, _ memstack.Identity, seq int64, value []byte) {
		tag, err := pool.Exec(ctx, "UPDATE "+prefix+"messages SET body = $1 WHERE seq = $2", value, seq)
		require.NoError(t, err)
		require.Equal(t, int64(1), tag.RowsAffected())
	})
}

// The time lives in the body's JSON: the tables are unchanged and the row
// holds exactly what storekit.EncodeMessageAt writes.
func TestRowCarriesTheTime(t *testing.T) {
	ctx := context.Background()
	prefix := freshPrefix("dated")
	s := open(t, pgstore.WithTablePrefix(prefix))
	at := time.Date(2023, 5, 8, 12, 30, 0, 5, time.FixedZone("CEST", 2*3600))
	msg := llms.HumanChatMessage{Content: "dated"}
	require.NoError(t, s.Append(memstack.WithTime(ctx, at), alice, msg))

	pool, err := pgxpool.New(ctx, testsvc.Postgres(t))
	require.NoError(t, err)
	defer pool.Close()
	var body []byte
	require.NoError(t, pool.QueryRow(ctx, "SELECT body FROM "+prefix+"messages").Scan(&body))
	want, err := storekit.EncodeMessageAt(msg, at)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(body))
	assert.Contains(t, string(body), `"at":"2023-05-08T12:30:00.000000005+02:00"`)

	rs, err := open(t, pgstore.WithTablePrefix(prefix)).All(ctx, alice)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	assert.True(t, rs[0].Time.Equal(at))
	assert.Equal(t, "2023-05-08T12:30:00.000000005+02:00", rs[0].Time.Format(time.RFC3339Nano))
}
