package memories

import (
	"strings"

	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

// recallExchanges splits recs into m's units (see Recall).
func (m *Recall) recallExchanges(recs []store.Record) []recallExchange {
	var out []recallExchange
	for _, r := range recs {
		out = m.appendExchange(out, r)
	}
	return out
}

// opens reports whether msg opens a unit: a human message, and in turn
// units an AI message too.
func (m *Recall) opens(msg llms.ChatMessage) bool {
	switch msg.GetType() {
	case llms.ChatMessageTypeHuman:
		return true
	case llms.ChatMessageTypeAI:
		return m.unit == RecallTurns
	}
	return false
}

// appendExchange adds one stored message to exs: a message that opens a
// unit (or the first message) opens one, any other joins the last one,
// and system messages are left out.
func (m *Recall) appendExchange(exs []recallExchange, r store.Record) []recallExchange {
	t := r.Message.GetType()
	if t == llms.ChatMessageTypeSystem {
		return exs
	}
	if len(exs) == 0 || m.opens(r.Message) {
		exs = append(exs, recallExchange{seq: r.Seq, at: r.Time})
	}
	x := &exs[len(exs)-1]
	x.through = r.Seq
	x.msgs = append(x.msgs, r.Message)
	return exs
}

// key is x's text as a duplicate check compares it: lower-case, runs of
// white space as one space.
func (x recallExchange) key() string {
	return strings.Join(strings.Fields(strings.ToLower(x.text())), " ")
}

// text is what the index sees of the exchange: its messages' contents, one
// per line.
func (x recallExchange) text() string {
	parts := make([]string, 0, len(x.msgs))
	for _, msg := range x.msgs {
		if c := msg.GetContent(); c != "" {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "\n")
}
