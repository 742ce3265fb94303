package proof_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/adk/v2/session"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// eventIdentitiesOf returns the identities of ana in travel that hold
// events of session sid (any generation) and the number of messages each
// holds.
func eventIdentitiesOf(t *testing.T, st store.Store, sid string) map[string]int {
	t.Helper()
	ctx := context.Background()
	ids, err := st.(store.Users).Identities(ctx, store.UserScope("travel", "ana"))
	require.NoError(t, err)
	out := map[string]int{}
	for _, id := range ids {
		if strings.HasPrefix(id.Conversation, adk.EventsConversationPrefix) && strings.HasSuffix(id.Conversation, ":"+sid) {
			recs, err := st.All(ctx, id)
			require.NoError(t, err)
			if len(recs) > 0 {
				out[id.Conversation] = len(recs)
			}
		}
	}
	return out
}

// TestADKReview3_DeleteRetryLeavesEvents: Delete removes the record, then
// the events of the generation the record named. If the second step fails
// (ctx cancelled, a dropped connection), Delete returns an error; the
// caller calls Delete again, which finds no record, so it does not know
// the generation, and returns nil: "deleted". The session's events stay
// in the store for good (ExportUser returns them, nothing ever shows or
// removes them short of ForgetUser).
func TestADKReview3_DeleteRetryLeavesEvents(t *testing.T) {
	for _, b := range backends()[:2] {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			raw := open("adk")
			hs := newADK2Store(raw)
			svc := mustSessions(t, hs)
			c, err := svc.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			require.NoError(t, svc.AppendEvent(ctx, c.Session, adkText("e1", "user", time.Now(), "my passport number is X123")))
			require.Len(t, eventIdentitiesOf(t, raw, "s1"), 1)

			dctx, cancel := context.WithCancel(ctx)
			defer cancel()
			hs.on("forget", isEventsOf("s1"), func(context.Context) { cancel() })
			err = svc.Delete(dctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.Error(t, err, "the Delete whose second step failed")
			require.NoError(t, svc.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"}), "Delete called again")
			assert.Empty(t, eventIdentitiesOf(t, raw, "s1"), "events of a deleted session left in the store after Delete returned nil")
		})
	}
}

// TestADKReview3_DeleteRaceOrphansEvents: Delete reads the record (gen
// g1), then Forgets the session's identity and g1's events. If, in
// between, another replica deletes the session and creates it again
// (gen g2) and appends to it, the first Delete's Forget removes the new
// session's record but not its events (it forgets g1's): the session is
// gone, its events stay under g2 for good, never shown nor removed.
func TestADKReview3_DeleteRaceOrphansEvents(t *testing.T) {
	for _, b := range backends()[:2] {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			raw := open("adk")
			hs := newADK2Store(raw)
			ra := mustSessions(t, hs)
			rb := mustSessions(t, open("adk"))
			c, err := rb.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			require.NoError(t, rb.AppendEvent(ctx, c.Session, adkText("old1", "user", time.Now(), "said to the old session")))
			var errB error
			hs.on("forget", isID(adk.SessionIdentity("travel", "ana", "s1")), func(ctx context.Context) {
				if errB = rb.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"}); errB != nil {
					return
				}
				var c *session.CreateResponse
				if c, errB = rb.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"}); errB == nil {
					errB = rb.AppendEvent(ctx, c.Session, adkText("new1", "user", time.Now(), "said to the new session"))
				}
			})
			require.NoError(t, ra.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"}))
			require.NoError(t, errB)
			left := eventIdentitiesOf(t, raw, "s1")
			if _, err := rb.Get(ctx, sreq("s1")); err != nil {
				require.ErrorIs(t, err, adk.ErrSessionNotFound)
				assert.Empty(t, left, "no session s1, yet its events are stored")
			} else {
				assert.Len(t, left, 1, "events of session s1 under more than its generation")
			}
		})
	}
}

// TestADKReview3_ClearMidAddSameTextTwice: after a Clear mid-add,
// notStored decides which of the events this add stored before the Clear
// the conversation still holds by message type and text alone. A session
// that says the same words twice ("Yes.": common) then has its second
// "Yes." (stored after the Clear) counted for the first (removed by the
// Clear): the first is never stored again, the second is stored twice.
// The package says "an add that a Clear interrupts does not store twice
// what it stored after the Clear".
func TestADKReview3_ClearMidAddSameTextTwice(t *testing.T) {
	for _, b := range backends()[:2] {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			raw := open("adk")
			hs := newADK2Store(raw)
			mem, err := adk.NewMemoryService(hs)
			require.NoError(t, err)
			f := adkFixture{st: raw, open: open, sessions: mustSessions(t, raw), mem: mem}
			s := f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "Yes."),
				adkText("e2", "planner", adkDay.Add(time.Minute), "Lisbon it is, shall I book?"),
				adkText("e3", "user", adkDay.Add(2*time.Minute), "Yes."))
			conv := memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s1"}
			rc, err := memories.NewRecall(memories.WithStore(raw))
			require.NoError(t, err)
			n := 0
			hs.on("append", func(id memstack.Identity, _ string) bool {
				if id != conv {
					return false
				}
				n++
				return n == 2 // just before e2 is stored: e1 is stored, then cleared
			}, func(ctx context.Context) {
				require.NoError(t, rc.Clear(memstack.WithIdentity(ctx, conv)))
			})
			require.NoError(t, mem.AddSessionToMemory(ctx, s))
			msgs, times := stored(t, raw, "travel", "ana", "s1")
			var got []string
			for i, m := range msgs {
				got = append(got, fmt.Sprintf("%s @%s", m.GetContent(), times[i].UTC().Format("15:04")))
			}
			sort.Strings(got)
			assert.Equal(t, []string{"Lisbon it is, shall I book? @09:01", "Yes. @09:00", "Yes. @09:02"}, got,
				"each event stored once, at its time")
		})
	}
}

// TestADKReview3_BigIntegerByOtherTypes: checkValue refuses an int64 beyond
// 2^53 (it reads back rounded) but not the same integer held by types that
// encoding/json marshals as a JSON number: json.Number (a tool that decoded
// with UseNumber), *big.Int, or a number inside a json.RawMessage. They are
// accepted and read back as a different number.
func TestADKReview3_BigIntegerByOtherTypes(t *testing.T) {
	const order = "1152921504606846977" // 2^60 + 1
	n, _ := new(big.Int).SetString(order, 10)
	cases := map[string]any{
		"json.Number": json.Number(order),
		"*big.Int":    n,
		"RawMessage":  json.RawMessage(order),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sessions := mustSessions(t, store.NewInMemory())
			c, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			err = sessions.AppendEvent(ctx, c.Session, adkCall("e1", "planner", time.Now(), "c1", "cancel_order", map[string]any{"order": v}))
			if err != nil {
				assert.ErrorIs(t, err, adk.ErrInvalidEvent)
				return
			}
			got := getSession(t, sessions, "travel", "ana", "s1")
			back, _ := json.Marshal(got.Events().At(0).Content.Parts[0].FunctionCall.Args["order"])
			assert.Equal(t, order, string(back), "the order number read back")
		})
	}
}

// TestADKReview3_AppendCancelledAfterDeleteOrphansEvent: AppendEvent stores
// its event, then re-checks the record with the caller's ctx and removes
// the event if the session was deleted meanwhile. When ctx ends between
// the two (the client hung up: common during streaming), the re-check
// fails, AppendEvent returns an error, and the event stays in the deleted
// generation's identity for good: a retry finds no session
// (ErrSessionNotFound) and removes nothing; the deleted session's text
// stays in the store (ExportUser returns it). Create's clean-up uses
// context.WithoutCancel; this one does not.
func TestADKReview3_AppendCancelledAfterDeleteOrphansEvent(t *testing.T) {
	for _, b := range backends()[:2] {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			raw := open("adk")
			hs := newADK2Store(raw)
			ra := mustSessions(t, hs)
			rb := mustSessions(t, open("adk"))
			_, err := ra.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			s := getSession(t, ra, "travel", "ana", "s1")
			actx, cancel := context.WithCancel(ctx)
			defer cancel()
			var errB error
			hs.on("append", isEventsOf("s1"), func(ctx context.Context) {
				errB = rb.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
				// The client goes away once the event is stored.
				hs.on("get", isState(adk.SessionIdentity("travel", "ana", "s1"), "adk.session"), func(context.Context) { cancel() })
			})
			ev := adkText("e1", "user", time.Now(), "my card number is 4111")
			errA := ra.AppendEvent(actx, s, ev)
			require.NoError(t, errB)
			require.Error(t, errA)
			// The caller retries, as the error says.
			errA = ra.AppendEvent(ctx, s, ev)
			assert.ErrorIs(t, errA, adk.ErrSessionNotFound)
			assert.Empty(t, eventIdentitiesOf(t, raw, "s1"), "an event of a deleted session left in the store")
		})
	}
}

// TestADKReview3_AuthorOfUndatedEvent: an event without a Timestamp is
// stored at the store's clock, but its author is recorded under the
// zero time's name (authorStateName(time.Time{}), whose UnixNano is
// undefined); a search looks it up under the message's stored time and
// labels the agent's turn "model".
func TestADKReview3_AuthorOfUndatedEvent(t *testing.T) {
	ctx := context.Background()
	mem, err := adk.NewMemoryService(store.NewInMemory())
	require.NoError(t, err)
	require.NoError(t, mem.AddSessionToMemory(ctx, &listSession{app: "travel", user: "ana", id: "s1", events: []*session.Event{
		adkText("e1", "user", time.Time{}, "Where is the offsite?"),
		adkText("e2", "planner", time.Time{}, "The zebra offsite is in Lisbon."),
	}}))
	found := false
	for _, e := range search(t, mem, "travel", "ana", "zebra offsite Lisbon") {
		if strings.Contains(entryText(e), "zebra offsite") {
			found = true
			assert.Equal(t, "planner", e.Author)
		}
	}
	require.True(t, found)
}

// TestADKReview3_ClearMidAddLosesEventToOtherLayer: the same matching by
// text, with another layer on the conversation (the normal one-store
// configuration): after the Clear a memories.Buffer saves a turn whose
// answer is "Yes."; the add's retry takes it for the agent's "Yes." it
// stored before the Clear, and never stores that event again: an event
// AddSessionToMemory accepted (it returned nil) is not in memory.
func TestADKReview3_ClearMidAddLosesEventToOtherLayer(t *testing.T) {
	for _, b := range backends()[:2] {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			raw := open("adk")
			hs := newADK2Store(raw)
			mem, err := adk.NewMemoryService(hs)
			require.NoError(t, err)
			f := adkFixture{st: raw, open: open, sessions: mustSessions(t, raw), mem: mem}
			s := f.session(t, "travel", "ana", "s1",
				adkText("e1", "planner", adkDay, "Yes."),
				adkText("e2", "user", adkDay.Add(time.Minute), "Then book Lisbon."))
			conv := memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s1"}
			rc, err := memories.NewRecall(memories.WithStore(raw))
			require.NoError(t, err)
			buf, err := memories.NewBuffer(memories.WithStore(raw))
			require.NoError(t, err)
			n := 0
			hs.on("append", func(id memstack.Identity, _ string) bool {
				if id != conv {
					return false
				}
				n++
				return n == 2
			}, func(ctx context.Context) {
				cctx := memstack.WithIdentity(ctx, conv)
				require.NoError(t, rc.Clear(cctx))
				require.NoError(t, buf.SaveContext(memstack.WithTime(cctx, adkDay.Add(time.Hour)),
					map[string]any{"input": "Is it sunny?"}, map[string]any{"output": "Yes."}))
			})
			require.NoError(t, mem.AddSessionToMemory(ctx, s))
			msgs, times := stored(t, raw, "travel", "ana", "s1")
			var got []string
			for i, m := range msgs {
				got = append(got, fmt.Sprintf("%s @%s", m.GetContent(), times[i].UTC().Format("15:04")))
			}
			assert.Contains(t, got, "Yes. @09:00", "the agent's event e1, accepted, in memory: %q", got)
		})
	}
}
