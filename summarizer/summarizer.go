package summarizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/memstack/memstack/adapter"
	"github.com/tmc/langchaingo/llms"
)

// Summarizer folds messages into a running summary.
//
// Summarize returns the new summary of a conversation whose summary so far
// is previous ("" for none) and which continued with messages, oldest first.
// The new summary replaces both: the caller may drop messages once it has
// stored the result. An implementation must not return an empty summary
// without an error, must honour ctx, and must be safe for concurrent use.
type Summarizer interface {
	Summarize(ctx context.Context, previous string, messages []llms.ChatMessage) (string, error)
}

// Errors a summarizer returns, wrapped with the details. A memory that gets
// any error from a summarizer keeps the messages raw and retries later.
var (
	// ErrEmptySummary: the summary is empty or only whitespace.
	ErrEmptySummary = errors.New("summarizer: empty summary")
	// ErrSummaryTooLong: the summary has more tokens than the maximum set
	// with WithMaxTokens.
	ErrSummaryTooLong = errors.New("summarizer: summary too long")
	// ErrNotShorter: the summary has at least as many tokens as the previous
	// summary and the transcript it would replace together, so it would
	// save nothing.
	ErrNotShorter = errors.New("summarizer: summary not shorter than what it replaces")
	// ErrNilModel: New was given a nil model.
	ErrNilModel = errors.New("summarizer: the model is nil")
	// ErrInvalidOption is wrapped by errors about a bad option; the message
	// names the option and the value.
	ErrInvalidOption = errors.New("summarizer: invalid option")
)

// Role names used in transcripts (those of llms.GetBufferString's defaults).
const (
	humanPrefix = "Human"
	aiPrefix    = "AI"
)

// transcript renders messages one per line as llms.GetBufferString does with
// the default prefixes, appending each tool call of an AI message to its line
// as JSON. It validates every message first and returns an error naming the
// offending message's position (never its content).
func transcript(messages []llms.ChatMessage) (string, error) {
	var b strings.Builder
	for i, m := range messages {
		m, err := adapter.Normalize(m)
		if err != nil {
			return "", fmt.Errorf("summarizer: message %d of %d: %w", i+1, len(messages), err)
		}
		line, err := adapter.RenderLine(m, humanPrefix, aiPrefix)
		if err != nil {
			return "", fmt.Errorf("summarizer: message %d of %d: %w", i+1, len(messages), err)
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
		for _, call := range toolCalls(m) {
			b.WriteByte(' ')
			b.WriteString(call)
		}
	}
	return b.String(), nil
}

// toolCalls returns the JSON of each tool call of an AI message (none for
// other messages).
func toolCalls(m llms.ChatMessage) []string {
	ai, ok := m.(llms.AIChatMessage)
	if !ok || len(ai.ToolCalls) == 0 {
		return nil
	}
	out := make([]string, 0, len(ai.ToolCalls))
	for _, tc := range ai.ToolCalls {
		if tc.FunctionCall == nil {
			continue
		}
		j, err := json.Marshal(tc.FunctionCall)
		if err != nil {
			continue
		}
		out = append(out, string(j))
	}
	return out
}

// checkCtx returns an error if ctx is nil or done.
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return errors.New("summarizer: nil context")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("summarizer: %w", err)
	}
	return nil
}

// isNilPointer reports whether v is a nil pointer (or nil map, func, ...)
// inside an interface.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
