package recallindex

import (
	"context"
	"fmt"
	"strings"

	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

// units splits recs into x's units.
func (x *Engine) units(recs []store.Record) []Unit {
	var out []Unit
	for _, r := range recs {
		out = x.appendUnit(out, r)
	}
	return out
}

// opens reports whether msg opens a unit: a turn (conv.OpensTurn: a human
// or an AI message) or, with RecallExchanges, an exchange
// (conv.OpensExchange: a human message).
func (x *Engine) opens(msg llms.ChatMessage) bool {
	if x.cfg.Turns {
		return conv.OpensTurn(msg)
	}
	return conv.OpensExchange(msg)
}

// appendUnit adds one stored message to exs: a message that opens a
// unit (or the first message) opens one, any other joins the last one,
// and system messages are left out.
func (x *Engine) appendUnit(exs []Unit, r store.Record) []Unit {
	if conv.IsSystem(r.Message) {
		return exs
	}
	if len(exs) == 0 || x.opens(r.Message) {
		exs = append(exs, Unit{seq: r.Seq, at: r.Time})
	}
	u := &exs[len(exs)-1]
	u.through = r.Seq
	u.msgs = append(u.msgs, r.Message)
	return exs
}

// Key is u's text as a duplicate check compares it: lower-case, runs of
// white space as one space.
func (u Unit) Key() string {
	return strings.Join(strings.Fields(strings.ToLower(u.text())), " ")
}

// text is what the index sees of the unit: its messages' contents, one
// per line.
func (u Unit) text() string {
	parts := make([]string, 0, len(u.msgs))
	for _, msg := range u.msgs {
		if c := msg.GetContent(); c != "" {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "\n")
}

// loadAll reads every message of id.
func loadAll(ctx context.Context, s store.Store, id identity) ([]store.Record, error) {
	recs, err := s.All(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("memstack: loading history: %w", err)
	}
	return recs, nil
}
