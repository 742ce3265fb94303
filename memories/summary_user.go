package memories

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/summarizer"
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

// maxUserSummaries is how many conversations' summaries a user's state
// keeps, the most recent (by their last message).
const maxUserSummaries = 32

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

// userSummaries is the state a Summary with WithEarlierSummaries keeps per
// user.
type userSummaries struct {
	Conversations []conversationSummary `json:"conversations"`
}

// conversationSummary is the summary of one conversation, as completed.
type conversationSummary struct {
	Conversation string `json:"conversation"`
	Summary      string `json:"summary"`
	// Through is the Seq of the newest message the summary covers.
	Through int64 `json:"through"`
	// From and To are the times of its first and last messages.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// usersID is the identity the summaries of id's user are kept under.
func usersID(id identity) identity {
	return identity{Tenant: id.Tenant, User: id.User, Conversation: UserSummariesConversation}
}

// readUserSummaries reads the summaries of id's user and their version.
func (m *Summary) readUserSummaries(ctx context.Context, id identity) (userSummaries, int64, error) {
	st, err := m.cfg.store.GetState(ctx, usersID(id), UserSummariesStateName)
	if err != nil {
		return userSummaries{}, 0, fmt.Errorf("memstack: reading the conversation summaries of the user of %s: %w", id.Key(), err)
	}
	var u userSummaries
	if !st.Exists() {
		return u, st.Version, nil
	}
	if err := json.Unmarshal(st.Value, &u); err != nil {
		return userSummaries{}, 0, fmt.Errorf("memstack: the conversation summaries of the user of %s (state %q) are not valid JSON: %w", id.Key(), UserSummariesStateName, err)
	}
	return u, st.Version, nil
}

// updateUserSummaries applies change to the summaries of id's user with a
// compare-and-set, retrying on conflicts.
func (m *Summary) updateUserSummaries(ctx context.Context, id identity, change func(*userSummaries) bool) error {
	for attempt := 0; ; attempt++ {
		u, version, err := m.readUserSummaries(ctx, id)
		if err != nil {
			return err
		}
		if !change(&u) {
			return nil
		}
		slices.SortFunc(u.Conversations, func(a, b conversationSummary) int { return cmp.Compare(b.Through, a.Through) })
		if len(u.Conversations) > maxUserSummaries {
			u.Conversations = u.Conversations[:maxUserSummaries]
		}
		var value []byte
		if len(u.Conversations) > 0 {
			if value, err = json.Marshal(u); err != nil {
				return fmt.Errorf("memstack: encoding the conversation summaries: %w", err)
			}
		}
		_, err = m.cfg.store.PutState(ctx, usersID(id), UserSummariesStateName, value, version)
		if err == nil || !errors.Is(err, store.ErrConflict) || attempt == 4 {
			if err != nil {
				return fmt.Errorf("memstack: recording the conversation summaries: %w", err)
			}
			return nil
		}
	}
}

// completeEarlier completes the summaries of the user's other
// conversations that have messages their recorded summary does not cover:
// the newest m.cfg.earlier of them. A Summary calls it once per
// conversation per process, in the pass after the conversation's first
// save here: when a user's next conversation starts, the earlier ones are
// complete.
func (m *Summary) completeEarlier(ctx context.Context, id identity) error {
	users, ok := m.cfg.store.(store.Users)
	if !ok {
		return nil
	}
	ids, err := users.Identities(ctx, store.UserScope(id.Tenant, id.User))
	if err != nil {
		return fmt.Errorf("memstack: listing the conversations of the user of %s: %w", id.Key(), err)
	}
	u, _, err := m.readUserSummaries(ctx, id)
	if err != nil {
		return err
	}
	done := map[string]int64{}
	for _, c := range u.Conversations {
		done[c.Conversation] = c.Through
	}
	type todo struct {
		id   identity
		last int64
	}
	var due []todo
	for _, cid := range ids {
		if cid == id || storekit.Derived(cid) {
			continue
		}
		st, err := m.cfg.store.Stat(ctx, cid)
		if err != nil {
			return fmt.Errorf("memstack: reading the messages of %s: %w", cid.Key(), err)
		}
		if st.Count > 0 && st.LastSeq > done[cid.Conversation] {
			due = append(due, todo{cid, st.LastSeq})
		}
	}
	slices.SortFunc(due, func(a, b todo) int { return cmp.Compare(b.last, a.last) })
	var errs []error
	for _, d := range due[:min(len(due), m.cfg.earlier)] {
		if err := m.completeAlone(ctx, d.id); err != nil {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// completeAlone completes conversation cid with no summarization of cid,
// and no Clear of it, running in this Summary (worker.Pool.Cancelable): a
// Clear of cid cancels the completion, waits for it to end, then removes
// what it recorded.
func (m *Summary) completeAlone(ctx context.Context, cid identity) error {
	return poolErr(m.pool.Cancelable(ctx, cid, func(ctx context.Context) error { return m.complete(ctx, cid) }), ctx, "completing a conversation", ErrClosed)
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
	return m.completeAlone(ctx, id)
}

// complete summarizes conversation cid whole and records it in its user's
// summaries.
func (m *Summary) complete(ctx context.Context, cid identity) error {
	st, _, rest, err := m.unsummarized(ctx, cid)
	if err != nil {
		return err
	}
	if st.Summary == "" && len(rest) == 0 {
		return nil
	}
	text, through := st.Summary, st.Through
	if len(rest) > 0 {
		if _, offline := m.sum.(*summarizer.Extractive); !offline {
			observe.FromContext(ctx).LLMCall(1)
		}
		if text, err = m.summarize(ctx, st.Summary, messagesOf(rest)); err != nil {
			m.failures.Add(1)
			return fmt.Errorf("memstack: summarizing conversation %s: %w", cid.Key(), err)
		}
		m.calls.Add(1)
		if strings.TrimSpace(text) == "" {
			return nil
		}
		through = rest[len(rest)-1].Seq
	}
	from, to := time.Time{}, time.Time{}
	if all, err := m.cfg.store.All(ctx, cid); err == nil && len(all) > 0 {
		from, to = all[0].Time, all[len(all)-1].Time
	}
	err = m.updateUserSummaries(ctx, cid, func(u *userSummaries) bool {
		u.Conversations = slices.DeleteFunc(u.Conversations, func(c conversationSummary) bool { return c.Conversation == cid.Conversation })
		u.Conversations = append(u.Conversations, conversationSummary{Conversation: cid.Conversation, Summary: text, Through: through, From: from, To: to})
		return true
	})
	if err != nil {
		return err
	}
	// Cleared means gone: a Clear or Forget of cid by another replica
	// while this summary was made leaves cid without the messages it
	// summarizes; take the summary back.
	if st, err := m.cfg.store.Stat(ctx, cid); err != nil || !covers(st, through) {
		if ferr := m.forgetEarlier(context.WithoutCancel(ctx), cid); ferr != nil {
			return ferr
		}
	}
	return nil
}

// covers reports whether a conversation whose messages st describes
// still holds the ones a summary through Seq through was made from: it
// holds a message at or before through (a Clear or Forget, then new
// messages, leaves only later ones).
func covers(st store.Stat, through int64) bool {
	return st.Count > 0 && st.FirstSeq <= through
}

// forgetEarlier removes conversation id's summary from its user's.
func (m *Summary) forgetEarlier(ctx context.Context, id identity) error {
	return m.updateUserSummaries(ctx, id, func(u *userSummaries) bool {
		n := len(u.Conversations)
		u.Conversations = slices.DeleteFunc(u.Conversations, func(c conversationSummary) bool { return c.Conversation == id.Conversation })
		return len(u.Conversations) != n
	})
}

// earlier returns the summaries a load of id shows: of the user's other
// conversations still stored, the newest m.cfg.earlier, oldest first.
// It reads the user's summaries and one Stat per summary shown.
func (m *Summary) earlier(ctx context.Context, id identity) ([]conversationSummary, error) {
	if m.cfg.earlier == 0 {
		return nil, nil
	}
	u, _, err := m.readUserSummaries(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []conversationSummary
	for _, c := range u.Conversations { // newest first
		if c.Conversation == id.Conversation {
			continue
		}
		st, err := m.cfg.store.Stat(ctx, identity{Tenant: id.Tenant, User: id.User, Conversation: c.Conversation})
		if err != nil {
			return nil, fmt.Errorf("memstack: loading history: %w", err)
		}
		if !covers(st, c.Through) {
			continue // cleared or forgotten since: gone
		}
		out = append(out, c)
		if len(out) == m.cfg.earlier {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}

// earlierText is how c shows: its prefix, its date, its summary.
func earlierText(c conversationSummary) string {
	if c.To.IsZero() {
		return EarlierSummaryPrefix + ": " + c.Summary
	}
	return fmt.Sprintf("%s (%s): %s", EarlierSummaryPrefix, c.To.Format(RecallDateLayout), c.Summary)
}

// earlierEntries are the items of the earlier summaries: first in a load,
// and, with the priority of a message and before every message, dropped
// first under a budget, whole.
func earlierEntries(cs []conversationSummary) []entry {
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

// startedHere reports whether the user's earlier conversations were
// completed at a pass of id in this process (see completeEarlier).
func (m *Summary) startedHere(id identity) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started.Contains(id)
}

// noteStarted records that they were.
func (m *Summary) noteStarted(id identity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started.Add(id, struct{}{})
}
