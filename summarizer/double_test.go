package summarizer_test

import (
	"context"
	"strings"
	"sync"

	"github.com/tmc/langchaingo/llms"
)

// modelDouble is an llms.Model test double: it records every call (the
// messages and the call options it was given, applied to an
// llms.CallOptions) and answers with answer(call index, messages).
type modelDouble struct {
	answer func(call int, messages []llms.MessageContent) (string, error)
	// block, when set, makes every call wait for ctx to be done.
	block bool

	mu    sync.Mutex
	calls []recordedCall
}

type recordedCall struct {
	Messages []llms.MessageContent
	Options  llms.CallOptions
}

var _ llms.Model = (*modelDouble)(nil)

func scripted(answers ...string) *modelDouble {
	return &modelDouble{answer: func(call int, _ []llms.MessageContent) (string, error) {
		return answers[call%len(answers)], nil
	}}
}

func (d *modelDouble) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var opts llms.CallOptions
	for _, o := range options {
		o(&opts)
	}
	rec := make([]llms.MessageContent, len(messages))
	for i, mc := range messages {
		rec[i] = llms.MessageContent{Role: mc.Role, Parts: append([]llms.ContentPart(nil), mc.Parts...)}
	}
	d.mu.Lock()
	call := len(d.calls)
	d.calls = append(d.calls, recordedCall{Messages: rec, Options: opts})
	d.mu.Unlock()
	if d.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ans, err := d.answer(call, rec)
	if err != nil {
		return nil, err
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: ans}}}, nil
}

func (d *modelDouble) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, d, prompt, options...)
}

func (d *modelDouble) Calls() []recordedCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]recordedCall(nil), d.calls...)
}

// text joins the text parts of one message.
func text(mc llms.MessageContent) string {
	var b strings.Builder
	for _, p := range mc.Parts {
		if t, ok := p.(llms.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
