package extract

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/memstack/memstack/observe"
	"github.com/tmc/langchaingo/llms"
)

// DefaultInstruction is the system instruction an LLM extractor sends
// unless WithInstruction sets another. It states the JSON schema the answer
// must follow.
const DefaultInstruction = `You extract durable facts from messages of a conversation between a user and an AI assistant, for the assistant's long-term memory.
Answer with one JSON object and nothing else, in this form:
{"facts":[{"subject":"user","attribute":"name","value":"Ana","sources":[0]}]}
- subject: "user" for facts about the user; "we" for decisions the user and the assistant (or the user's team) took together; otherwise one lower-case word naming whom the fact is about.
- attribute: a short lower-case name: "name", "location", "job", "employer", "preference:<topic>" (for example "preference:coffee"), "decision:<topic>" (for example "decision:database"), or another short name for another durable fact.
- value: the fact itself, short, in the words of the conversation.
- sources: the numbers of the messages the fact comes from.
Only include facts that the messages state and that will still hold in later conversations. Leave out questions, greetings, guesses, and facts about the assistant. If there are none, answer {"facts":[]}.`

// Bounds an LLM extractor enforces on the model's answer: a longer subject
// or attribute makes the answer malformed; a longer value is cut at a word
// boundary.
const (
	maxLLMSubject   = 64
	maxLLMAttribute = 128
	maxLLMValue     = 200
)

// LLMOption configures an LLM extractor.
type LLMOption func(*LLM) error

// WithInstruction sets the system instruction (default
// DefaultInstruction). It should keep asking for the same JSON schema: the
// answer is validated against it whatever the instruction says. A blank
// instruction is an error.
func WithInstruction(instruction string) LLMOption {
	return func(l *LLM) error {
		if strings.TrimSpace(instruction) == "" {
			return fmt.Errorf("%w: WithInstruction: the instruction is blank", ErrInvalidOption)
		}
		l.instruction = instruction
		return nil
	}
}

// WithCallOptions passes options to every GenerateContent call (the model
// name, the temperature...). llms.WithJSONMode is always added after them.
// A nil option is an error.
func WithCallOptions(opts ...llms.CallOption) LLMOption {
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

// LLM is an Extractor that asks a language model. Build it with NewLLM; it
// is safe for concurrent use.
//
// Each Extract call with at least one non-blank message makes exactly one
// GenerateContent call, with llms.WithJSONMode() and two messages: a system
// message, the instruction, and a human message listing the messages, one
// per line, numbered by their index in Extract's input:
//
//	Messages:
//	[0] user: I moved to Porto last month.
//	[1] assistant: Nice! How do you like it?
//
// (human messages are "user", AI messages "assistant", others their
// type; blank messages are left out but keep their numbers). The call is
// recorded on the context's observe.Recorder (LLMCall).
//
// The answer must be a JSON object with a "facts" array whose elements
// have non-blank string "subject", "attribute" and "value" fields and an
// optional "sources" array of message numbers of the input; other fields
// are ignored, and a ```json fence around the object is tolerated. Any
// other answer — not JSON, no "facts" array, a missing or non-string
// field, an unknown message number, a subject over 64 or an attribute over
// 128 characters — gives no candidates and a *MalformedError (wrapping
// ErrMalformed). Values over 200 characters are cut at a word boundary.
type LLM struct {
	model       llms.Model
	instruction string
	callOpts    []llms.CallOption
}

var _ Extractor = (*LLM)(nil)

// NewLLM returns an extractor that asks model. A nil model or a bad option
// is an error wrapping ErrInvalidOption.
func NewLLM(model llms.Model, opts ...LLMOption) (*LLM, error) {
	if model == nil {
		return nil, fmt.Errorf("%w: NewLLM: the model is nil", ErrInvalidOption)
	}
	if v := reflect.ValueOf(model); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("%w: NewLLM: the model is a nil %T", ErrInvalidOption, model)
	}
	l := &LLM{model: model, instruction: DefaultInstruction}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: NewLLM: option %d of %d is nil", ErrInvalidOption, i+1, len(opts))
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// String describes the extractor (the model only by its Go type).
func (l *LLM) String() string {
	return fmt.Sprintf("extract.LLM(model=%T, call_options=%d)", l.model, len(l.callOpts))
}

// llmFact is one element of the answer's "facts" array. Pointers tell a
// missing field from an empty one.
type llmFact struct {
	Subject   *string `json:"subject"`
	Attribute *string `json:"attribute"`
	Value     *string `json:"value"`
	Sources   []int   `json:"sources"`
}

// Extract implements Extractor (see LLM).
func (l *LLM) Extract(ctx context.Context, msgs []llms.ChatMessage) ([]Candidate, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("extract: %w", err)
	}
	var b strings.Builder
	b.WriteString("Messages:\n")
	some := false
	for i, m := range msgs {
		if m == nil {
			continue
		}
		text := strings.TrimSpace(m.GetContent())
		if text == "" {
			continue
		}
		some = true
		b.WriteString("[")
		b.WriteString(strconv.Itoa(i))
		b.WriteString("] ")
		b.WriteString(roleName(m.GetType()))
		b.WriteString(": ")
		b.WriteString(text)
		b.WriteString("\n")
	}
	if !some {
		return nil, nil
	}
	opts := make([]llms.CallOption, 0, len(l.callOpts)+1)
	opts = append(opts, l.callOpts...)
	opts = append(opts, llms.WithJSONMode())
	observe.FromContext(ctx).LLMCall(1)
	resp, err := l.model.GenerateContent(ctx, []llms.MessageContent{
		{Role: llms.ChatMessageTypeSystem, Parts: []llms.ContentPart{llms.TextPart(l.instruction)}},
		{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{llms.TextPart(b.String())}},
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("extract: model call: %w", err)
	}
	if resp == nil || len(resp.Choices) == 0 || resp.Choices[0] == nil {
		return nil, &MalformedError{Reason: "the model returned no choices"}
	}
	return parseAnswer(resp.Choices[0].Content, len(msgs))
}

func roleName(t llms.ChatMessageType) string {
	switch t {
	case llms.ChatMessageTypeHuman:
		return "user"
	case llms.ChatMessageTypeAI:
		return "assistant"
	}
	return string(t)
}

// parseAnswer validates the model's answer for an input of n messages.
func parseAnswer(answer string, n int) ([]Candidate, error) {
	s := stripFence(strings.TrimSpace(answer))
	if s == "" {
		return nil, &MalformedError{Reason: "the answer is empty"}
	}
	if s[0] != '{' {
		return nil, &MalformedError{Reason: "the answer is not a JSON object"}
	}
	var top struct {
		Facts *[]json.RawMessage `json:"facts"`
	}
	if err := json.Unmarshal([]byte(s), &top); err != nil {
		return nil, &MalformedError{Reason: "the answer is not valid JSON of the schema", Err: err}
	}
	if top.Facts == nil {
		return nil, &MalformedError{Reason: `the answer has no "facts" array`}
	}
	out := make([]Candidate, 0, len(*top.Facts))
	for i, raw := range *top.Facts {
		var f llmFact
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, &MalformedError{Reason: fmt.Sprintf("fact %d does not follow the schema", i+1), Err: err}
		}
		for _, fld := range []struct {
			name string
			v    *string
			max  int
		}{{"subject", f.Subject, maxLLMSubject}, {"attribute", f.Attribute, maxLLMAttribute}, {"value", f.Value, 0}} {
			if fld.v == nil || strings.TrimSpace(*fld.v) == "" {
				return nil, &MalformedError{Reason: fmt.Sprintf("fact %d has no %s", i+1, fld.name)}
			}
			if fld.max > 0 && utf8.RuneCountInString(*fld.v) > fld.max {
				return nil, &MalformedError{Reason: fmt.Sprintf("fact %d: the %s is longer than %d characters", i+1, fld.name, fld.max)}
			}
		}
		for _, src := range f.Sources {
			if src < 0 || src >= n {
				return nil, &MalformedError{Reason: fmt.Sprintf("fact %d names message %d; there are %d", i+1, src, n)}
			}
		}
		subject, attr := Normalize(*f.Subject, *f.Attribute)
		out = append(out, Candidate{
			Subject:   subject,
			Attribute: attr,
			Value:     truncate(collapse(*f.Value), maxLLMValue),
			Sources:   f.Sources,
			Rule:      "llm",
		})
	}
	return out, nil
}

// stripFence removes a Markdown code fence (```json ... ```) around s.
func stripFence(s string) string {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	s = strings.TrimSuffix(s[3:], "```")
	if nl := strings.IndexByte(s, '\n'); nl >= 0 && !strings.Contains(s[:nl], "{") {
		s = s[nl+1:]
	}
	return strings.TrimSpace(s)
}
