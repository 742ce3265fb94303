package memories

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/storekit"
	"github.com/tmc/langchaingo/llms"
)

// RecallMatch is one unit a Recall's Search found: what a budgeted load
// would offer as an item, with the conversation it belongs to.
type RecallMatch struct {
	// Conversation is the identity whose conversation holds the unit: the
	// load's own, or, for a Recall searching a user's (or tenant's)
	// conversations, another of them.
	Conversation memstack.Identity
	// Seq is the Seq of the unit's first message (its ID in reports).
	Seq int64
	// Messages are the unit's messages, oldest first: copies the caller
	// may change.
	Messages []llms.ChatMessage
	// Time is the unit's stored time (store.Record.Time of its first
	// message), zero when unknown.
	Time time.Time
	// Score orders the matches: a hit's search score, or, for a unit
	// offered beside a hit (WithNeighbourShare), its share of that hit's
	// score.
	Score float64
	// Hit reports whether the unit matched the query itself; false for a
	// unit offered as a hit's neighbour.
	Hit bool
}

// Search returns the units a budgeted load (LoadItems) would offer for
// query, in the identity of ctx, best first (by Score; equal scores in
// conversation order): the structured form of a Recall's answer, for a
// caller that shows them itself (a memory service of another agent
// framework, a tool that lists a user's relevant past). It searches as a
// load does — the conversation, or the user's (tenant's) conversations
// under WithRecallScope, with the same index, dates and exclusions — and
// takes what a load takes: at most twice WithK's hits (a budget's
// candidates) with the neighbours WithNeighbourShare gives them, after
// WithThreshold and duplicate texts are left out. An empty or blank
// query finds nothing. It records nothing on an observe.Recorder.
func (m *Recall) Search(ctx context.Context, query string) ([]RecallMatch, error) {
	key := m.cfg.inputKey
	if key == "" {
		key = "input"
	}
	sel, err := m.selectExchanges(ctx, map[string]any{key: query}, true)
	if err != nil {
		return nil, err
	}
	out := make([]RecallMatch, 0, len(sel.order))
	for _, i := range sel.order {
		u := sel.exs[i]
		id, _ := sel.view.Conversation(i)
		msgs := make([]llms.ChatMessage, len(u.Msgs()))
		for j, msg := range u.Msgs() {
			msgs[j] = storekit.CloneMessage(msg)
		}
		_, hit := sel.scores[i]
		out = append(out, RecallMatch{
			Conversation: id,
			Seq:          u.Seq(),
			Messages:     msgs,
			Time:         u.At(),
			Score:        sel.priority[i],
			Hit:          hit,
		})
	}
	// sel.order is ascending (conversation order); a stable sort keeps it
	// among equal scores.
	slices.SortStableFunc(out, func(a, b RecallMatch) int { return cmp.Compare(b.Score, a.Score) })
	return out, nil
}
