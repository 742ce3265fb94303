package adk

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"
)

// eventMessages returns the messages a MemoryService adds for an event,
// and how many bytes of text they hold:
//
//   - function responses: one llms.ToolChatMessage each (ID the call's
//     ID, else its name; content the response as JSON);
//   - function calls: one llms.AIChatMessage with the calls as ToolCalls
//     and the event's text as content;
//   - text (beside no call): an llms.HumanChatMessage when the author is
//     "user" (or the content's role is "user"), else an llms.AIChatMessage,
//     after the event's tool results if it has any.
//
// Calls of the tools in skip, and their results, are left out. Text parts
// are joined by a newline. Thoughts (Part.Thought), inline and
// file data (images, audio, documents), code and its results are not
// text a user said or was told: they are left out. A partial event, and
// one with nothing left, gives none.
func eventMessages(ev *session.Event, skip map[string]bool) ([]llms.ChatMessage, int, error) {
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
		case p.FunctionResponse != nil && skip[p.FunctionResponse.Name],
			p.FunctionCall != nil && skip[p.FunctionCall.Name]:
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
	text := strings.Join(texts, "\n")
	var out []llms.ChatMessage
	if len(calls) > 0 {
		out = append(out, llms.AIChatMessage{Content: text, ToolCalls: calls})
	}
	out = append(out, results...)
	if len(calls) == 0 && text != "" {
		// Text beside function responses comes after them: the responses
		// answer the calls before, the text is what follows.
		if ev.Author == "user" || ev.Content.Role == genai.RoleUser {
			out = append(out, llms.HumanChatMessage{Content: text})
		} else {
			out = append(out, llms.AIChatMessage{Content: text})
		}
	}
	if len(out) == 0 {
		return nil, 0, nil
	}
	return out, size, nil
}

// unitContent returns the genai.Content of a unit's messages (what
// eventMessages made of its events): role "user" for a human turn, else
// "model"; a text part per message with text, a FunctionCall part per
// tool call and a FunctionResponse part per tool result (named after the
// unit's call of the same ID). Each call also gets a text part saying
// what was called and what it returned — `get_weather({"city":"Lisbon"})
// returned {"forecast":"sunny"}` — so that a reader of the text alone
// (ADK's preloadmemorytool shows text parts only) sees it too.
func unitContent(msgs []llms.ChatMessage) *genai.Content {
	c := &genai.Content{Role: genai.RoleModel}
	if len(msgs) > 0 && msgs[0].GetType() == llms.ChatMessageTypeHuman {
		c.Role = genai.RoleUser
	}
	type call struct{ name, args string }
	calls := map[string]call{}
	var pending []string // calls without a result yet, in order
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
				if json.Unmarshal([]byte(tc.FunctionCall.Arguments), &args) != nil {
					args = map[string]any{"arguments": tc.FunctionCall.Arguments}
				}
				calls[tc.ID] = call{tc.FunctionCall.Name, tc.FunctionCall.Arguments}
				pending = append(pending, tc.ID)
				c.Parts = append(c.Parts, &genai.Part{FunctionCall: &genai.FunctionCall{ID: tc.ID, Name: tc.FunctionCall.Name, Args: args}})
			}
		case llms.ToolChatMessage:
			var resp map[string]any
			if json.Unmarshal([]byte(m.Content), &resp) != nil {
				resp = map[string]any{"output": m.Content}
			}
			cl, ok := calls[m.ID]
			if !ok {
				cl = call{name: m.ID}
			}
			pending = slices.DeleteFunc(pending, func(id string) bool { return id == m.ID })
			c.Parts = append(c.Parts,
				&genai.Part{FunctionResponse: &genai.FunctionResponse{ID: m.ID, Name: cl.name, Response: resp}},
				genai.NewPartFromText(fmt.Sprintf("%s(%s) returned %s", cl.name, cl.args, m.Content)))
		default:
			if text := m.GetContent(); text != "" {
				c.Parts = append(c.Parts, genai.NewPartFromText(text))
			}
		}
	}
	for _, id := range pending {
		c.Parts = append(c.Parts, genai.NewPartFromText(fmt.Sprintf("%s(%s) was called", calls[id].name, calls[id].args)))
	}
	return c
}
