package memories

import (
	"context"
	"fmt"

	"github.com/memstack/memstack/memories/internal/factsengine"
)

// Clear removes the messages and the facts of the identity in ctx, and
// only that one; with WithFactsPerUser it removes this conversation's
// messages and the user's facts (shared by all their conversations; the
// other conversations' messages stay, and are not extracted again). An
// extraction of that identity in flight in this Facts is cancelled first
// and cannot commit afterwards.
func (m *Facts) Clear(ctx context.Context) error {
	return m.clearExclusive(ctx, m.pool, errFactsClosed{}, func(id identity) error {
		if !m.perUser {
			return nil
		}
		if err := m.eng.Forget(ctx, id); err != nil {
			return fmt.Errorf("memstack: clearing the facts: %w", err)
		}
		return nil
	})
}

// facts returns every fact of id, current and superseded, in the order
// they were recorded: the engine's, as Facts shows them.
func (m *Facts) facts(ctx context.Context, id identity) ([]Fact, error) {
	recs, err := m.eng.Facts(ctx, id)
	if err != nil {
		return nil, err
	}
	out := make([]Fact, len(recs))
	for i, f := range recs {
		out[i] = Fact{Key: f.Key, Subject: f.Subject, Attribute: f.Attribute, Value: f.Value,
			Sources: f.Sources, Conversation: f.Conversation, Rule: f.Rule, ValidFrom: f.ValidFrom, ValidTo: f.ValidTo}
	}
	return out, nil
}

// report passes an extraction attempt of the engine to the hook, as a
// FactsEvent of id (its error redacted).
func (m *Facts) report(id identity, ev factsengine.Event) {
	if m.hook == nil {
		return
	}
	m.hook(FactsEvent{
		IdentityHash: m.HashIdentity(id),
		Messages:     ev.Messages,
		Candidates:   ev.Candidates,
		Stored:       ev.Stored,
		Superseded:   ev.Superseded,
		Dropped:      ev.Dropped,
		Duration:     ev.Duration,
		Err:          m.redact(ev.Err, id),
	})
}
