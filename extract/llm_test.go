package extract_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/observe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// recModel is an llms.Model test double: it records every call (messages
// and the call options applied to an llms.CallOptions) and answers with
// answer, or fails with err.
type recModel struct {
	answer string
	err    error
	block  bool // wait for ctx to be done

	mu    sync.Mutex
	calls []recCall
}

type recCall struct {
	Messages []llms.MessageContent
	Options  llms.CallOptions
}

var _ llms.Model = (*recModel)(nil)

func (m *recModel) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var opts llms.CallOptions
	for _, o := range options {
		o(&opts)
	}
	m.mu.Lock()
	m.calls = append(m.calls, recCall{Messages: messages, Options: opts})
	m.mu.Unlock()
	if m.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if m.err != nil {
		return nil, m.err
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: m.answer}}}, nil
}

func (m *recModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

func (m *recModel) Calls() []recCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]recCall(nil), m.calls...)
}

func partText(mc llms.MessageContent) string {
	var b strings.Builder
	for _, p := range mc.Parts {
		if t, ok := p.(llms.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func turn() []llms.ChatMessage {
	return []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Hi, I'm Ana and I just moved to Porto."},
		llms.AIChatMessage{Content: "Welcome to Porto, Ana!"},
		llms.HumanChatMessage{Content: "  "},
		llms.HumanChatMessage{Content: "Let's use Postgres for the database."},
	}
}

func TestLLM_PromptAndJSONMode(t *testing.T) {
	model := &recModel{answer: `{"facts":[]}`}
	l, err := extract.NewLLM(model, extract.WithCallOptions(llms.WithTemperature(0.1), llms.WithModel("m1")))
	require.NoError(t, err)
	got, err := l.Extract(context.Background(), turn())
	require.NoError(t, err)
	assert.Empty(t, got)

	calls := model.Calls()
	require.Len(t, calls, 1)
	c := calls[0]
	assert.True(t, c.Options.JSONMode, "the call must ask for JSON mode")
	assert.Equal(t, 0.1, c.Options.Temperature)
	assert.Equal(t, "m1", c.Options.Model)
	require.Len(t, c.Messages, 2)
	assert.Equal(t, llms.ChatMessageTypeSystem, c.Messages[0].Role)
	assert.Equal(t, extract.DefaultInstruction, partText(c.Messages[0]))
	assert.Contains(t, partText(c.Messages[0]), `{"facts":[{"subject":"user","attribute":"name","value":"Ana","sources":[0]}]}`)
	assert.Equal(t, llms.ChatMessageTypeHuman, c.Messages[1].Role)
	assert.Equal(t, "Messages:\n"+
		"[0] user: Hi, I'm Ana and I just moved to Porto.\n"+
		"[1] assistant: Welcome to Porto, Ana!\n"+
		"[3] user: Let's use Postgres for the database.\n", partText(c.Messages[1]))
}

func TestLLM_ValidAnswer(t *testing.T) {
	cases := []struct {
		name   string
		answer string
		want   []extract.Candidate
	}{
		{"facts", `{"facts":[{"subject":"User","attribute":"Name","value":" Ana ","sources":[0,1]},` +
			`{"subject":"we","attribute":"decision:database","value":"Postgres","sources":[3],"confidence":0.9}]}`,
			[]extract.Candidate{
				{Subject: "user", Attribute: "name", Value: "Ana", Sources: []int{0, 1}, Rule: "llm"},
				{Subject: "we", Attribute: "decision:database", Value: "Postgres", Sources: []int{3}, Rule: "llm"},
			}},
		{"no sources", `{"facts":[{"subject":"user","attribute":"location","value":"Porto"}]}`,
			[]extract.Candidate{{Subject: "user", Attribute: "location", Value: "Porto", Rule: "llm"}}},
		{"fenced", "```json\n{\"facts\":[{\"subject\":\"user\",\"attribute\":\"location\",\"value\":\"Porto\"}]}\n```",
			[]extract.Candidate{{Subject: "user", Attribute: "location", Value: "Porto", Rule: "llm"}}},
		{"empty list", `{"facts": []}`, []extract.Candidate{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := extract.NewLLM(&recModel{answer: tc.answer})
			require.NoError(t, err)
			got, err := l.Extract(context.Background(), turn())
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLLM_MalformedAnswer(t *testing.T) {
	cases := []struct{ name, answer, reason string }{
		{"prose", "The user is called Ana.", "not a JSON object"},
		{"empty", "   ", "the answer is empty"},
		{"array", `[{"subject":"user"}]`, "not a JSON object"},
		{"broken JSON", `{"facts":[{"subject":"user",`, "not valid JSON"},
		{"trailing text", `{"facts":[]} and more`, "not valid JSON"},
		{"no facts key", `{"items":[]}`, `no "facts" array`},
		{"facts null", `{"facts":null}`, `no "facts" array`},
		{"facts not array", `{"facts":"Ana"}`, "not valid JSON"},
		{"missing value", `{"facts":[{"subject":"user","attribute":"name"}]}`, "fact 1 has no value"},
		{"blank attribute", `{"facts":[{"subject":"user","attribute":"name","value":"Ana"},{"subject":"user","attribute":" ","value":"x"}]}`, "fact 2 has no attribute"},
		{"non-string value", `{"facts":[{"subject":"user","attribute":"age","value":42}]}`, "fact 1 does not follow the schema"},
		{"source out of range", `{"facts":[{"subject":"user","attribute":"name","value":"Ana","sources":[9]}]}`, "fact 1 names message 9; there are 4"},
		{"long attribute", `{"facts":[{"subject":"user","attribute":"` + strings.Repeat("a", 129) + `","value":"x"}]}`, "attribute is longer than 128"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := extract.NewLLM(&recModel{answer: tc.answer})
			require.NoError(t, err)
			got, err := l.Extract(context.Background(), turn())
			require.Error(t, err)
			assert.Nil(t, got, "malformed output gives no facts")
			assert.ErrorIs(t, err, extract.ErrMalformed)
			var me *extract.MalformedError
			require.ErrorAs(t, err, &me)
			assert.Contains(t, me.Reason, tc.reason)
			assert.NotContains(t, err.Error(), "Ana", "the error never quotes the answer")
		})
	}
	t.Run("no choices", func(t *testing.T) {
		l, err := extract.NewLLM(noChoices{})
		require.NoError(t, err)
		_, err = l.Extract(context.Background(), turn())
		assert.ErrorIs(t, err, extract.ErrMalformed)
	})
}

type noChoices struct{}

func (noChoices) GenerateContent(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error) {
	return &llms.ContentResponse{}, nil
}
func (noChoices) Call(context.Context, string, ...llms.CallOption) (string, error) { return "", nil }

func TestLLM_ModelErrorAndContext(t *testing.T) {
	boom := errors.New("boom")
	l, err := extract.NewLLM(&recModel{err: boom})
	require.NoError(t, err)
	_, err = l.Extract(context.Background(), turn())
	require.ErrorIs(t, err, boom)
	assert.NotErrorIs(t, err, extract.ErrMalformed)

	blocking := &recModel{block: true}
	l, err = extract.NewLLM(blocking)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = l.Extract(ctx, turn())
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, blocking.Calls(), "a done context makes no call")
}

func TestLLM_NothingToExtractMakesNoCall(t *testing.T) {
	model := &recModel{answer: `{"facts":[]}`}
	l, err := extract.NewLLM(model)
	require.NoError(t, err)
	for _, msgs := range [][]llms.ChatMessage{nil, {llms.HumanChatMessage{Content: " \n"}}, {nil}} {
		got, err := l.Extract(context.Background(), msgs)
		require.NoError(t, err)
		assert.Empty(t, got)
	}
	assert.Empty(t, model.Calls())
}

func TestLLM_RecordsLLMCall(t *testing.T) {
	l, err := extract.NewLLM(&recModel{answer: `{"facts":[]}`})
	require.NoError(t, err)
	rec := observe.NewRecorder(observe.OpSave, "facts", "h")
	_, err = l.Extract(observe.WithRecorder(context.Background(), rec), turn())
	require.NoError(t, err)
	rep := rec.Finish(0, nil)
	assert.Equal(t, 1, rep.LLMCalls)
}

func TestLLM_InstructionOption(t *testing.T) {
	model := &recModel{answer: `{"facts":[]}`}
	l, err := extract.NewLLM(model, extract.WithInstruction("Custom."))
	require.NoError(t, err)
	_, err = l.Extract(context.Background(), turn())
	require.NoError(t, err)
	assert.Equal(t, "Custom.", partText(model.Calls()[0].Messages[0]))
}

func TestNewLLM_Invalid(t *testing.T) {
	var nilModel *recModel
	cases := []struct {
		name  string
		model llms.Model
		opts  []extract.LLMOption
		want  string
	}{
		{"nil model", nil, nil, "NewLLM: the model is nil"},
		{"typed nil model", nilModel, nil, "the model is a nil *extract_test.recModel"},
		{"nil option", &recModel{}, []extract.LLMOption{nil}, "option 1 of 1 is nil"},
		{"blank instruction", &recModel{}, []extract.LLMOption{extract.WithInstruction(" ")}, "WithInstruction"},
		{"nil call option", &recModel{}, []extract.LLMOption{extract.WithCallOptions(nil)}, "WithCallOptions"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := extract.NewLLM(tc.model, tc.opts...)
			require.Error(t, err)
			assert.Nil(t, l)
			assert.ErrorIs(t, err, extract.ErrInvalidOption)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
