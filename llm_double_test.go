package memstack_test

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/tmc/langchaingo/llms"
)

// recordingLLM is an llms.Model test double: it records every
// []llms.MessageContent it is asked to complete (a copy, in call order) and
// answers from a script or a function of the prompt. It is safe for
// concurrent use. It stands in only for the model's answers: the chains,
// agents, prompts and memories around it are the real ones.
type recordingLLM struct {
	// answer returns the answer to the call with the given 0-based index,
	// whose prompt text is prompt. It may be called concurrently.
	answer func(call int, prompt string) (string, error)

	mu    sync.Mutex
	calls [][]llms.MessageContent
}

var _ llms.Model = (*recordingLLM)(nil)

// newScriptedLLM returns a model whose i-th call answers answers[i]; a call
// past the end of the script is an error.
func newScriptedLLM(answers ...string) *recordingLLM {
	return &recordingLLM{answer: func(call int, _ string) (string, error) {
		if call >= len(answers) {
			return "", fmt.Errorf("scripted LLM: call %d, but only %d answers are scripted", call+1, len(answers))
		}
		return answers[call], nil
	}}
}

// newFuncLLM returns a model that answers f(prompt).
func newFuncLLM(f func(prompt string) string) *recordingLLM {
	return &recordingLLM{answer: func(_ int, prompt string) (string, error) { return f(prompt), nil }}
}

// GenerateContent implements llms.Model: it records messages and answers.
func (m *recordingLLM) GenerateContent(ctx context.Context, messages []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec := make([]llms.MessageContent, len(messages))
	for i, mc := range messages {
		rec[i] = llms.MessageContent{Role: mc.Role, Parts: append([]llms.ContentPart(nil), mc.Parts...)}
	}
	m.mu.Lock()
	call := len(m.calls)
	m.calls = append(m.calls, rec)
	m.mu.Unlock()

	ans, err := m.answer(call, textOf(rec))
	if err != nil {
		return nil, err
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: ans}}}, nil
}

// Call implements llms.Model the way langchaingo's own models do.
func (m *recordingLLM) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// Calls returns a copy of every recorded call, in call order.
func (m *recordingLLM) Calls() [][]llms.MessageContent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]llms.MessageContent(nil), m.calls...)
}

// Prompts returns the text of every recorded call, in call order.
func (m *recordingLLM) Prompts() []string {
	calls := m.Calls()
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = textOf(c)
	}
	return out
}

// textOf joins the text parts of messages: the messages with "\n", the parts
// of one message with nothing. An LLMChain sends one human message holding
// the whole formatted prompt, so for chains this is exactly that prompt.
func textOf(messages []llms.MessageContent) string {
	texts := make([]string, 0, len(messages))
	for _, mc := range messages {
		var b strings.Builder
		for _, p := range mc.Parts {
			if tc, ok := p.(llms.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		texts = append(texts, b.String())
	}
	return strings.Join(texts, "\n")
}
