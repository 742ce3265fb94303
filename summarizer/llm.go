package summarizer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/memstack/memstack/tokens"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/prompts"
)

// DefaultInstruction is the instruction template LLM uses unless
// WithInstruction sets another. It asks for an objective, third-person
// summary that keeps names, numbers, dates and decisions, and for the summary
// only.
const DefaultInstruction = `You maintain the running summary of a conversation between a human (the user) and an AI assistant.
You are given the summary so far, if there is one, and new lines of the conversation. Write a new summary that folds the new lines into the summary so far.
Write objectively, in the third person ("The user ...", "The assistant ...").
Keep every name, number, date and decision exactly as stated, and say what is still open. Leave out greetings and small talk.
Be concise: the new summary must be shorter than the summary so far and the new lines together.{{if .max_tokens}} Use at most {{.max_tokens}} tokens.{{end}}
Return only the summary: no preamble, heading or commentary.`

// LLM is a Summarizer that asks an llms.Model. Build it with New.
//
// Each Summarize call makes exactly one GenerateContent call with two
// messages: a system message, the instruction template formatted with the
// variables below, and a human message that reads
//
//	Summary so far:
//	<previous>
//
//	New lines of conversation:
//	<transcript>
//
// (the first block only when there is a previous summary). The instruction
// template may use these variables; it may also use none, since the human
// message carries the previous summary and the transcript anyway:
//
//   - previous: the summary so far ("" when there is none);
//   - transcript: the new messages, rendered as described in the package
//     documentation;
//   - max_tokens: the maximum set with WithMaxTokens (0 when unset).
//
// The answer is trimmed of surrounding whitespace and checked: it must not
// be empty (ErrEmptySummary), must not exceed WithMaxTokens tokens
// (ErrSummaryTooLong), and must have fewer tokens than the previous summary
// and the transcript together (ErrNotShorter). Tokens are counted with the
// counter of WithTokenCounter (offline cl100k_base by default).
//
// An LLM is safe for concurrent use. A misconfigured LLM (a nil model, a bad
// option) does not panic: every Summarize call returns the configuration
// error, which Validate also reports.
type LLM struct {
	model       llms.Model
	instruction prompts.PromptTemplate
	callOpts    []llms.CallOption
	maxTokens   int
	counter     tokens.Counter
	err         error
}

var _ Summarizer = (*LLM)(nil)

// Option configures an LLM summarizer.
type Option func(*LLM) error

// New returns a Summarizer that asks model. New cannot fail; a nil model or a
// bad option makes Validate and every Summarize call return an error naming
// the problem (memories.NewSummary checks Validate, so a misconfigured
// summarizer is rejected when the memory is built).
func New(model llms.Model, opts ...Option) *LLM {
	l := &LLM{model: model, instruction: prompts.NewPromptTemplate(DefaultInstruction, []string{"previous", "transcript", "max_tokens"})}
	var errs []error
	if isNilModel(model) {
		errs = append(errs, fmt.Errorf("%w: New(nil): a summarizer needs a model", ErrNilModel))
	}
	for i, o := range opts {
		if o == nil {
			errs = append(errs, fmt.Errorf("%w: option %d of %d is nil", ErrInvalidOption, i+1, len(opts)))
			continue
		}
		if err := o(l); err != nil {
			errs = append(errs, err)
		}
	}
	if l.counter == nil {
		c, err := tokens.CL100K()
		if err != nil {
			errs = append(errs, err)
		}
		l.counter = c
	}
	if len(errs) == 0 {
		// Catch a template that cannot be formatted now, not at the first
		// summarization.
		if _, err := l.formatInstruction("previous", "transcript"); err != nil {
			errs = append(errs, fmt.Errorf("%w: WithInstruction: %w", ErrInvalidOption, err))
		}
	}
	l.err = errors.Join(errs...)
	return l
}

func isNilModel(m llms.Model) bool { return m == nil || isNilPointer(m) }

// WithInstruction sets the instruction template (default DefaultInstruction).
// See LLM for the variables it may use. A template with an empty text or one
// that does not format with those variables is an error.
func WithInstruction(instruction prompts.PromptTemplate) Option {
	return func(l *LLM) error {
		if strings.TrimSpace(instruction.Template) == "" {
			return fmt.Errorf("%w: WithInstruction: the template is empty", ErrInvalidOption)
		}
		if instruction.TemplateFormat == "" {
			instruction.TemplateFormat = prompts.TemplateFormatGoTemplate
		}
		l.instruction = instruction
		return nil
	}
}

// WithCallOptions passes options to every GenerateContent call (the model
// name, the temperature, ...). WithMaxTokens's llms.WithMaxTokens is applied
// after them, so it wins. A nil option is an error.
func WithCallOptions(opts ...llms.CallOption) Option {
	return func(l *LLM) error {
		for i, o := range opts {
			if o == nil {
				return fmt.Errorf("%w: WithCallOptions: option %d of %d is nil", ErrInvalidOption, i+1, len(opts))
			}
		}
		l.callOpts = append(l.callOpts, opts...)
		return nil
	}
}

// WithMaxTokens sets the maximum length of a summary in tokens, and enforces
// it: it is requested from the model (llms.WithMaxTokens, and the max_tokens
// template variable), and a longer answer is rejected with an error wrapping
// ErrSummaryTooLong. n < 1 is an error. Without it, the only length rule is
// that a summary must be shorter than what it replaces.
func WithMaxTokens(n int) Option {
	return func(l *LLM) error {
		if n < 1 {
			return fmt.Errorf("%w: WithMaxTokens(%d): the maximum must be at least 1", ErrInvalidOption, n)
		}
		l.maxTokens = n
		return nil
	}
}

// WithTokenCounter sets how summaries and what they replace are counted
// (default: offline cl100k_base, tokens.CL100K). A nil counter is an error.
func WithTokenCounter(counter tokens.Counter) Option {
	return func(l *LLM) error {
		if counter == nil {
			return fmt.Errorf("%w: WithTokenCounter(nil): the counter must not be nil", ErrInvalidOption)
		}
		l.counter = counter
		return nil
	}
}

// Validate returns the configuration error of the summarizer (a nil model,
// a bad option), or nil if it can summarize.
func (l *LLM) Validate() error {
	if l == nil {
		return fmt.Errorf("%w: the *summarizer.LLM is nil", ErrNilModel)
	}
	return l.err
}

func (l *LLM) formatInstruction(previous, transcript string) (string, error) {
	return l.instruction.Format(map[string]any{
		"previous":   previous,
		"transcript": transcript,
		"max_tokens": l.maxTokens,
	})
}

// Summarize implements Summarizer: one GenerateContent call, then the
// checks described on LLM. With no messages it returns previous unchanged
// and calls nothing.
func (l *LLM) Summarize(ctx context.Context, previous string, messages []llms.ChatMessage) (string, error) {
	if err := l.Validate(); err != nil {
		return "", err
	}
	if err := checkCtx(ctx); err != nil {
		return "", err
	}
	if len(messages) == 0 {
		return previous, nil
	}
	text, err := transcript(messages)
	if err != nil {
		return "", err
	}
	instruction, err := l.formatInstruction(previous, text)
	if err != nil {
		return "", fmt.Errorf("summarizer: formatting the instruction: %w", err)
	}
	var human strings.Builder
	if previous != "" {
		human.WriteString("Summary so far:\n")
		human.WriteString(previous)
		human.WriteString("\n\n")
	}
	human.WriteString("New lines of conversation:\n")
	human.WriteString(text)

	opts := l.callOpts
	if l.maxTokens > 0 {
		opts = append(append(make([]llms.CallOption, 0, len(opts)+1), opts...), llms.WithMaxTokens(l.maxTokens))
	}
	resp, err := l.model.GenerateContent(ctx, []llms.MessageContent{
		{Role: llms.ChatMessageTypeSystem, Parts: []llms.ContentPart{llms.TextPart(instruction)}},
		{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextPart(human.String())}},
	}, opts...)
	if err != nil {
		return "", fmt.Errorf("summarizer: model call: %w", err)
	}
	if resp == nil || len(resp.Choices) == 0 || resp.Choices[0] == nil {
		return "", fmt.Errorf("summarizer: the model returned no choices: %w", ErrEmptySummary)
	}
	summary := strings.TrimSpace(resp.Choices[0].Content)
	if summary == "" {
		return "", fmt.Errorf("%w: the model returned only whitespace", ErrEmptySummary)
	}
	got := l.counter.CountTokens(summary)
	if l.maxTokens > 0 && got > l.maxTokens {
		return "", fmt.Errorf("%w: %d tokens, the maximum is %d", ErrSummaryTooLong, got, l.maxTokens)
	}
	if replaced := l.counter.CountTokens(previous) + l.counter.CountTokens(text); got >= replaced {
		return "", fmt.Errorf("%w: %d tokens, while the previous summary and the %d new messages have %d", ErrNotShorter, got, len(messages), replaced)
	}
	return summary, nil
}

// String describes the summarizer's configuration (never the model's
// secrets: only its Go type).
func (l *LLM) String() string {
	if l == nil {
		return "summarizer.LLM(nil)"
	}
	return fmt.Sprintf("summarizer.LLM(model=%T, max_tokens=%d, call_options=%d)", l.model, l.maxTokens, len(l.callOpts))
}
