package memories

import (
	"context"
	"fmt"

	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/memories/internal/fold"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

// EarlierSummaryPrefix starts the line (string mode) or the system message
// (messages mode) that carries the summary of one of the user's earlier
// conversations (WithEarlierSummaries), before its date:
// "Summary of an earlier conversation (8 May 2023): ...".
const EarlierSummaryPrefix = "Summary of an earlier conversation"

// UserSummariesConversation is the Conversation part of the identity
// {Tenant, User, UserSummariesConversation} under which a Summary with
// WithEarlierSummaries keeps the summaries of a user's conversations. It
// is derived data: a user-wide ForgetScope removes it (storekit.DerivedOf
// names it), a Summary's Clear of a conversation removes that
// conversation's summary from it, and a load never shows the summary of
// a conversation the store no longer holds.
const UserSummariesConversation = store.UserSummariesConversation

// UserSummariesStateName is the state, under the identity above, that
// holds the summaries.
const UserSummariesStateName = "conversation-summaries"

// kindEarlierSummary is the Kind of an earlier conversation's summary in
// items and reports.
const kindEarlierSummary = "conversation-summary"

// WithEarlierSummaries makes a Summary keep, per user, the summary of each
// of the user's conversations, and show in every conversation the
// summaries of the user's k most recent other conversations, dated (see
// Summary, "Earlier conversations"). k < 1 is an error. It needs a store
// that lists a user's conversations (store.Users: every store of
// memstack).
func WithEarlierSummaries(k int) SummaryOption {
	return summaryOpt(func(c *config) {
		if k < 1 {
			c.bad("WithEarlierSummaries(%d): k must be at least 1", k)
			return
		}
		c.earlier = k
	})
}

// Complete completes the summary of the conversation in ctx and records
// it as the user's (WithEarlierSummaries): the running summary with every
// message it does not cover folded in, in one summarizer call. A Summary
// does this itself for the user's earlier conversations when the user's
// next conversation starts; call Complete when a conversation ends (a
// session closes, or goes quiet on a timer of yours) so the next one does
// not wait for it. Without WithEarlierSummaries it is an error.
func (m *Summary) Complete(ctx context.Context) error {
	id, err := m.begin(ctx)
	if err != nil {
		return err
	}
	if m.cfg.earlier == 0 {
		return fmt.Errorf("%w: Complete needs WithEarlierSummaries", ErrInvalidOption)
	}
	if err := m.open(); err != nil {
		return err
	}
	return m.eng.Complete(ctx, id)
}

// earlierText is how c shows: its prefix, its date, its summary.
func earlierText(c fold.Conversation) string {
	if c.To.IsZero() {
		return EarlierSummaryPrefix + ": " + c.Summary
	}
	return fmt.Sprintf("%s (%s): %s", EarlierSummaryPrefix, c.To.Format(RecallDateLayout), c.Summary)
}

// earlierEntries are the items of the earlier summaries: first in a load,
// and, with the priority of a message and before every message, dropped
// first under a budget, whole.
func earlierEntries(cs []fold.Conversation) []entry {
	out := make([]entry, len(cs))
	for i, c := range cs {
		text := earlierText(c)
		out[i] = entry{
			item: layer.Item{Text: text, Kind: kindEarlierSummary, ID: seqID(c.Through), Priority: layer.PriorityMessage, Time: c.To},
			msg:  llms.SystemChatMessage{Content: text},
		}
	}
	return out
}
