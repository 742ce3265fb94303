package memories

import (
	"strings"

	"github.com/memstack/memstack/internal/conv"
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

// opens reports whether msg opens a unit: a turn (conv.OpensTurn: a human
// or an AI message) or, with RecallExchanges, an exchange
// (conv.OpensExchange: a human message).
func (m *Recall) opens(msg llms.ChatMessage) bool {
	if m.unit == RecallTurns {
		return conv.OpensTurn(msg)
	}
	return conv.OpensExchange(msg)
}

// appendExchange adds one stored message to exs: a message that opens a
// unit (or the first message) opens one, any other joins the last one,
// and system messages are left out.
func (m *Recall) appendExchange(exs []recallExchange, r store.Record) []recallExchange {
	if conv.IsSystem(r.Message) {
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
