package adk

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"
)

// checkEventText refuses an event whose text is not UTF-8: JSON (and
// every store of memstack) would replace its bad bytes silently.
func checkEventText(ev *session.Event) error {
	if !utf8.ValidString(ev.ErrorMessage) {
		return fmt.Errorf("its ErrorMessage is not valid UTF-8")
	}
	if ev.Content == nil {
		return nil
	}
	for i, p := range ev.Content.Parts {
		if p != nil && !utf8.ValidString(p.Text) {
			return fmt.Errorf("the text of part %d is not valid UTF-8", i)
		}
	}
	return nil
}

// eventMessages returns the messages a MemoryService adds for an event,
// and how many bytes of text they hold:
//
//   - function responses: one llms.ToolChatMessage each (ID the call's
//     ID, else its name; content the response as JSON);
//   - function calls: one llms.AIChatMessage with the calls as ToolCalls
//     and the event's text as content;
//   - text: an llms.HumanChatMessage when the author is "user" (or the
//     content's role is "user"), else an llms.AIChatMessage.
//
// Text parts are joined by a newline. Thoughts (Part.Thought), inline and
// file data (images, audio, documents), code and its results are not
// text a user said or was told: they are left out. A partial event, and
// one with nothing left, gives none.
func eventMessages(ev *session.Event) ([]llms.ChatMessage, int, error) {
	if ev.Partial || ev.Content == nil {
		return nil, 0, nil
	}
	var texts []string
	var calls []llms.ToolCall
	var results []llms.ChatMessage
	size := 0
	for i, p := range ev.Content.Parts {
		switch {
		case p == nil:
		case p.FunctionResponse != nil:
			r := p.FunctionResponse
			body, err := json.Marshal(r.Response)
			if err != nil {
				return nil, 0, fmt.Errorf("the response of part %d is not JSON: %w", i, err)
			}
			callID := r.ID
			if callID == "" {
				callID = r.Name
			}
			size += len(body)
			results = append(results, llms.ToolChatMessage{ID: callID, Content: string(body)})
		case p.FunctionCall != nil:
			c := p.FunctionCall
			args, err := json.Marshal(c.Args)
			if err != nil {
				return nil, 0, fmt.Errorf("the arguments of part %d are not JSON: %w", i, err)
			}
			callID := c.ID
			if callID == "" {
				callID = c.Name
			}
			size += len(args) + len(c.Name)
			calls = append(calls, llms.ToolCall{ID: callID, Type: "function", FunctionCall: &llms.FunctionCall{Name: c.Name, Arguments: string(args)}})
		case p.Thought:
		case p.Text != "":
			if !utf8.ValidString(p.Text) {
				return nil, 0, fmt.Errorf("the text of part %d is not valid UTF-8", i)
			}
			size += len(p.Text)
			texts = append(texts, p.Text)
		}
	}
	if len(results) > 0 {
		return results, size, nil
	}
	text := strings.Join(texts, "\n")
	switch {
	case len(calls) > 0:
		return []llms.ChatMessage{llms.AIChatMessage{Content: text, ToolCalls: calls}}, size, nil
	case text == "":
		return nil, 0, nil
	case ev.Author == "user" || ev.Content.Role == genai.RoleUser:
		return []llms.ChatMessage{llms.HumanChatMessage{Content: text}}, size, nil
	}
	return []llms.ChatMessage{llms.AIChatMessage{Content: text}}, size, nil
}

// unitContent returns the genai.Content of a unit's messages (what
// eventMessages made of its events): role "user" for a human turn, else
// "model"; a text part per message with text, a FunctionCall part per
// tool call and a FunctionResponse part per tool result (named after the
// unit's call of the same ID).
func unitContent(msgs []llms.ChatMessage) *genai.Content {
	c := &genai.Content{Role: genai.RoleModel}
	if len(msgs) > 0 && msgs[0].GetType() == llms.ChatMessageTypeHuman {
		c.Role = genai.RoleUser
	}
	names := map[string]string{}
	for _, m := range msgs {
		switch m := m.(type) {
		case llms.AIChatMessage:
			if m.Content != "" {
				c.Parts = append(c.Parts, genai.NewPartFromText(m.Content))
			}
			for _, tc := range m.ToolCalls {
				if tc.FunctionCall == nil {
					continue
				}
				var args map[string]any
				_ = json.Unmarshal([]byte(tc.FunctionCall.Arguments), &args)
				names[tc.ID] = tc.FunctionCall.Name
				c.Parts = append(c.Parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: tc.ID, Name: tc.FunctionCall.Name, Args: args}})
			}
		case llms.ToolChatMessage:
			var resp map[string]any
			if json.Unmarshal([]byte(m.Content), &resp) != nil {
				resp = map[string]any{"output": m.Content}
			}
			name := names[m.ID]
			if name == "" {
				name = m.ID
			}
			c.Parts = append(c.Parts, &genai.Part{FunctionResponse: &genai.FunctionResponse{ID: m.ID, Name: name, Response: resp}})
		default:
			if text := m.GetContent(); text != "" {
				c.Parts = append(c.Parts, genai.NewPartFromText(text))
			}
		}
	}
	return c
}

// contentText is the text of a content's parts as a token budget counts
// it: text parts, and calls and responses as their JSON.
func contentText(c *genai.Content) string {
	var b strings.Builder
	for _, p := range c.Parts {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		switch {
		case p.FunctionCall != nil:
			args, _ := json.Marshal(p.FunctionCall.Args)
			b.WriteString(p.FunctionCall.Name + string(args))
		case p.FunctionResponse != nil:
			resp, _ := json.Marshal(p.FunctionResponse.Response)
			b.WriteString(p.FunctionResponse.Name + string(resp))
		default:
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
