package fold

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/memories/internal/statejson"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// maxUserSummaries is how many conversations' summaries a user's state
// keeps, the most recent (by their last message).
const maxUserSummaries = 32

// userSummaries is the state the engine keeps per user with
// Config.Earlier.
type userSummaries struct {
	Conversations []Conversation `json:"conversations"`
}

// Conversation is the summary of one conversation, as completed.
type Conversation struct {
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
	return identity{Tenant: id.Tenant, User: id.User, Conversation: store.UserSummariesConversation}
}

// readUserSummaries reads the summaries of id's user and their version.
func (x *Engine) readUserSummaries(ctx context.Context, id identity) (userSummaries, int64, error) {
	return statejson.Read[userSummaries](ctx, x.cfg.Store, usersID(id), x.cfg.UsersStateName,
		func(err error) error {
			return fmt.Errorf("memstack: reading the conversation summaries of the user of %s: %w", id.Key(), err)
		},
		func(err error) error {
			return fmt.Errorf("memstack: the conversation summaries of the user of %s (state %q) are not valid JSON: %w", id.Key(), x.cfg.UsersStateName, err)
		})
}

// updateUserSummaries applies change to the summaries of id's user with a
// compare-and-set, retrying on conflicts.
func (x *Engine) updateUserSummaries(ctx context.Context, id identity, change func(*userSummaries) bool) error {
	for attempt := 0; ; attempt++ {
		u, version, err := x.readUserSummaries(ctx, id)
		if err != nil {
			return err
		}
		if !change(&u) {
			return nil
		}
		slices.SortFunc(u.Conversations, func(a, b Conversation) int { return cmp.Compare(b.Through, a.Through) })
		if len(u.Conversations) > maxUserSummaries {
			u.Conversations = u.Conversations[:maxUserSummaries]
		}
		var value []byte
		if len(u.Conversations) > 0 {
			if value, err = json.Marshal(u); err != nil {
				return fmt.Errorf("memstack: encoding the conversation summaries: %w", err)
			}
		}
		_, err = x.cfg.Store.PutState(ctx, usersID(id), x.cfg.UsersStateName, value, version)
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
// the newest Config.Earlier of them. Run calls it once per conversation
// per process, in the pass after the conversation's first save here:
// when a user's next conversation starts, the earlier ones are complete.
func (x *Engine) completeEarlier(ctx context.Context, id identity) error {
	users, ok := x.cfg.Store.(store.Users)
	if !ok {
		return nil
	}
	ids, err := users.Identities(ctx, store.UserScope(id.Tenant, id.User))
	if err != nil {
		return fmt.Errorf("memstack: listing the conversations of the user of %s: %w", id.Key(), err)
	}
	u, _, err := x.readUserSummaries(ctx, id)
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
	ids = slices.DeleteFunc(ids, func(cid identity) bool { return cid == id || storekit.Derived(cid) })
	stats, err := statAll(ctx, x.cfg.Store, ids)
	if err != nil {
		return err
	}
	var due []todo
	for i, cid := range ids {
		if st := stats[i]; st.Count > 0 && st.LastSeq > done[cid.Conversation] {
			due = append(due, todo{cid, st.LastSeq})
		}
	}
	slices.SortFunc(due, func(a, b todo) int { return cmp.Compare(b.last, a.last) })
	var errs []error
	for _, d := range due[:min(len(due), x.cfg.Earlier)] {
		if err := x.Complete(ctx, d.id); err != nil {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// statAll returns the Stat of each of ids: in one round trip when s is a
// store.MultiStat (a user with a thousand conversations costs one), else
// one Stat each.
func statAll(ctx context.Context, s store.Store, ids []identity) ([]store.Stat, error) {
	if ms, ok := s.(store.MultiStat); ok && len(ids) > 1 {
		stats, err := ms.StatMany(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("memstack: reading the messages of the user's conversations: %w", err)
		}
		if len(stats) == len(ids) {
			return stats, nil
		}
	}
	stats := make([]store.Stat, len(ids))
	for i, cid := range ids {
		st, err := s.Stat(ctx, cid)
		if err != nil {
			return nil, fmt.Errorf("memstack: reading the messages of %s: %w", cid.Key(), err)
		}
		stats[i] = st
	}
	return stats, nil
}

// Complete completes conversation cid — its running summary with every
// message it does not cover folded in, one summarizer call — and records
// it in its user's summaries. It runs through Config.Alone: with no
// summarization of cid, and no Clear of it, running; a Clear of cid
// cancels the completion, waits for it to end, then removes what it
// recorded.
func (x *Engine) Complete(ctx context.Context, cid memstack.Identity) error {
	return x.cfg.Alone(ctx, cid, func(ctx context.Context) error { return x.complete(ctx, cid) })
}

// complete summarizes conversation cid whole and records it in its user's
// summaries.
func (x *Engine) complete(ctx context.Context, cid identity) error {
	st, _, rest, err := x.Unsummarized(ctx, cid)
	if err != nil {
		return err
	}
	if st.Summary == "" && len(rest) == 0 {
		return nil
	}
	text, through := st.Summary, st.Through
	if len(rest) > 0 {
		x.llmCall(ctx)
		if text, err = x.summarize(ctx, st.Summary, conv.Messages(rest, recMessage)); err != nil {
			x.failures.Add(1)
			return fmt.Errorf("memstack: summarizing conversation %s: %w", cid.Key(), err)
		}
		x.calls.Add(1)
		if strings.TrimSpace(text) == "" {
			return nil
		}
		through = rest[len(rest)-1].Seq
	}
	from, to := time.Time{}, time.Time{}
	if all, err := x.cfg.Store.All(ctx, cid); err == nil && len(all) > 0 {
		from, to = all[0].Time, all[len(all)-1].Time
	}
	err = x.updateUserSummaries(ctx, cid, func(u *userSummaries) bool {
		u.Conversations = slices.DeleteFunc(u.Conversations, func(c Conversation) bool { return c.Conversation == cid.Conversation })
		u.Conversations = append(u.Conversations, Conversation{Conversation: cid.Conversation, Summary: text, Through: through, From: from, To: to})
		return true
	})
	if err != nil {
		return err
	}
	// Cleared means gone: a Clear or Forget of cid by another replica
	// while this summary was made leaves cid without the messages it
	// summarizes; take the summary back.
	if st, err := x.cfg.Store.Stat(ctx, cid); err != nil || !covers(st, through) {
		if ferr := x.forgetEarlier(context.WithoutCancel(ctx), cid); ferr != nil {
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
func (x *Engine) forgetEarlier(ctx context.Context, id identity) error {
	return x.updateUserSummaries(ctx, id, func(u *userSummaries) bool {
		n := len(u.Conversations)
		u.Conversations = slices.DeleteFunc(u.Conversations, func(c Conversation) bool { return c.Conversation == id.Conversation })
		return len(u.Conversations) != n
	})
}

// Earlier returns the summaries of id's user's other conversations still
// stored, the newest Config.Earlier, oldest first (none without
// Config.Earlier). It reads the user's summaries and one Stat per summary
// returned.
func (x *Engine) Earlier(ctx context.Context, id memstack.Identity) ([]Conversation, error) {
	if x.cfg.Earlier == 0 {
		return nil, nil
	}
	u, _, err := x.readUserSummaries(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []Conversation
	for _, c := range u.Conversations { // newest first
		if c.Conversation == id.Conversation {
			continue
		}
		st, err := x.cfg.Store.Stat(ctx, identity{Tenant: id.Tenant, User: id.User, Conversation: c.Conversation})
		if err != nil {
			return nil, fmt.Errorf("memstack: loading history: %w", err)
		}
		if !covers(st, c.Through) {
			continue // cleared or forgotten since: gone
		}
		out = append(out, c)
		if len(out) == x.cfg.Earlier {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}
