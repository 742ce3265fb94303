package proof_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// adkHookStore is a store whose Append and PutState run a hook first
// (once each): a replica acting, or a fault, at that exact step.
type adkHookStore struct {
	store.Store
	store.Users
	mu       sync.Mutex
	onAppend func(ctx context.Context, id memstack.Identity, msgs []llms.ChatMessage) error
	onPut    func(ctx context.Context, id memstack.Identity, name string) error
}

func newADKHookStore(st store.Store) *adkHookStore {
	return &adkHookStore{Store: st, Users: st.(store.Users)}
}

func (h *adkHookStore) take(f *func(context.Context, memstack.Identity, []llms.ChatMessage) error) func(context.Context, memstack.Identity, []llms.ChatMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := *f
	*f = nil
	return g
}

func (h *adkHookStore) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	if f := h.take(&h.onAppend); f != nil {
		if err := f(ctx, id, msgs); err != nil {
			return err
		}
	}
	return h.Store.Append(ctx, id, msgs...)
}

func (h *adkHookStore) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	h.mu.Lock()
	f := h.onPut
	h.mu.Unlock()
	if f != nil {
		if err := f(ctx, id, name); err != nil {
			return 0, err
		}
	}
	return h.Store.PutState(ctx, id, name, value, expect)
}

func adkDelta(id string, at time.Time, text string, delta map[string]any) *session.Event {
	ev := adkText(id, "planner", at, text)
	ev.Actions.StateDelta = delta
	return ev
}

func getSession(t *testing.T, svc session.Service, app, user, sid string) session.Session {
	t.Helper()
	got, err := svc.Get(context.Background(), &session.GetRequest{AppName: app, UserID: user, SessionID: sid})
	require.NoError(t, err)
	return got.Session
}

func stateOf(s session.Session, key string) (any, bool) {
	v, err := s.State().Get(key)
	return v, err == nil
}

// TestADKReview_AppendEventRaceBetweenReplicas: two replicas hold the same
// session value and append to it at the same moment. The stale check
// (read the record, compare times) and the write are separate steps, so
// both appends are accepted: each replica goes on with a value that lacks
// the other's event and state update (a lost update ADK's database
// service's transaction prevents). One of them must get ErrStaleSession.
func TestADKReview_AppendEventRaceBetweenReplicas(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			hs := newADKHookStore(open("adk"))
			a, err := adk.NewSessionService(hs)
			require.NoError(t, err)
			r2, err := adk.NewSessionService(open("adk"))
			require.NoError(t, err)
			_, err = a.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1", State: map[string]any{"seats": 1.0}})
			require.NoError(t, err)
			va := getSession(t, a, "travel", "ana", "s1")
			vb := getSession(t, r2, "travel", "ana", "s1")
			now := time.Now()

			// Replica B's whole AppendEvent runs while replica A's is
			// between its stale check and its write.
			var errB error
			hs.onAppend = func(context.Context, memstack.Identity, []llms.ChatMessage) error {
				errB = r2.AppendEvent(ctx, vb, adkDelta("b1", now.Add(2*time.Second), "B books a seat", map[string]any{"seats": 2.0}))
				return nil
			}
			errA := a.AppendEvent(ctx, va, adkDelta("a1", now.Add(time.Second), "A books a seat", map[string]any{"seats": 2.0}))
			staleA, staleB := errors.Is(errA, adk.ErrStaleSession), errors.Is(errB, adk.ErrStaleSession)
			require.True(t, staleA != staleB, "exactly one of the replicas' appends to one session value is accepted (A: %v, B: %v)", errA, errB)
			winner, loser, wv, lv := a, r2, va, vb
			if staleA {
				winner, loser, wv, lv = r2, a, vb, va
			}
			if staleA {
				require.NoError(t, errB)
			} else {
				require.NoError(t, errA)
			}
			assert.Equal(t, 1, getSession(t, a, "travel", "ana", "s1").Events().Len(), "the stale append stored nothing")

			// The winner's value goes on; the loser's stays stale until it
			// reads the session again.
			require.NoError(t, winner.AppendEvent(ctx, wv, adkDelta("w2", now.Add(3*time.Second), "winner again", nil)))
			err = loser.AppendEvent(ctx, lv, adkDelta("l2", now.Add(4*time.Second), "loser again", nil))
			assert.ErrorIs(t, err, adk.ErrStaleSession, "the loser's value lacks the winner's events")
		})
	}
}

// TestADKReview_StaleCheckUsesEventTimestamps: a session's "last update"
// is the Timestamp of its last event, which the caller (or a replica's
// clock) sets. An event dated before the session's last update (a replica
// whose clock is behind, an imported event) moves the record's time back,
// and a replica holding an older value is then not told it is stale.
func TestADKReview_StaleCheckUsesEventTimestamps(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			a, err := adk.NewSessionService(open("adk"))
			require.NoError(t, err)
			r2, err := adk.NewSessionService(open("adk"))
			require.NoError(t, err)
			created, err := a.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			t0 := created.Session.LastUpdateTime()
			va := getSession(t, a, "travel", "ana", "s1")
			vb := getSession(t, r2, "travel", "ana", "s1")

			// Replica A's clock is a second behind.
			require.NoError(t, a.AppendEvent(ctx, va, adkDelta("a1", t0.Add(-time.Second), "from A", map[string]any{"k": "A"})))
			got := getSession(t, r2, "travel", "ana", "s1")
			assert.False(t, got.LastUpdateTime().Before(t0), "the session's update time went back from %s to %s", t0, got.LastUpdateTime())

			err = r2.AppendEvent(ctx, vb, adkDelta("b1", time.Now(), "from B", map[string]any{"k": "B"}))
			assert.ErrorIs(t, err, adk.ErrStaleSession, "B's value was read before A's event")
		})
	}
}

// TestADKReview_AppendEventFailureLeavesStateDelta: AppendEvent applies an
// event's "app:" and "user:" deltas before it stores the event. When the
// store fails the event (an outage, a cancelled ctx), the caller gets an
// error but the app's and user's state keep the delta of an event that
// was never stored.
func TestADKReview_AppendEventFailureLeavesStateDelta(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			hs := newADKHookStore(open("adk"))
			svc, err := adk.NewSessionService(hs)
			require.NoError(t, err)
			_, err = svc.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			s := getSession(t, svc, "travel", "ana", "s1")
			hs.onAppend = func(context.Context, memstack.Identity, []llms.ChatMessage) error {
				return errors.New("injected: connection reset")
			}
			err = svc.AppendEvent(ctx, s, adkDelta("e1", time.Now(), "upgrade me", map[string]any{"user:plan": "gold", "app:promo": "on", "mine": 1.0}))
			require.Error(t, err)

			got := getSession(t, svc, "travel", "ana", "s1")
			assert.Equal(t, 0, got.Events().Len())
			_, has := stateOf(got, "user:plan")
			assert.False(t, has, "the user state holds the delta of an event that was not stored")
			_, has = stateOf(got, "app:promo")
			assert.False(t, has, "the app state holds the delta of an event that was not stored")
		})
	}
}

// TestADKReview_DeleteRacingAppendResurrectsEvent: a replica deletes a
// session while another is appending to it (after its check that the
// session exists, before its write). The event lands on the deleted
// session's identity; a session created again with the same ID then
// shows an event it never had.
func TestADKReview_DeleteRacingAppendResurrectsEvent(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			hs := newADKHookStore(open("adk"))
			a, err := adk.NewSessionService(hs)
			require.NoError(t, err)
			r2, err := adk.NewSessionService(open("adk"))
			require.NoError(t, err)
			_, err = a.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			s := getSession(t, a, "travel", "ana", "s1")
			hs.onAppend = func(context.Context, memstack.Identity, []llms.ChatMessage) error {
				return r2.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			}
			_ = a.AppendEvent(ctx, s, adkText("e1", "user", time.Now(), "a secret said to the deleted session"))

			_, err = r2.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			got := getSession(t, r2, "travel", "ana", "s1")
			assert.Equal(t, 0, got.Events().Len(), "a new session shows the deleted one's event: %v", eventsText(got))
		})
	}
}

func eventsText(s session.Session) []string {
	var out []string
	for ev := range s.Events().All() {
		if ev.Content != nil && len(ev.Content.Parts) > 0 {
			out = append(out, ev.Content.Parts[0].Text)
		}
	}
	return out
}

// TestADKReview_CreateFailureLeavesAppStateAndDropsOthersEvents: Create
// stored the session record, then the app's state, then the user's, and
// when the user's failed it removed the session (Forget) — with an event
// another replica had appended meanwhile and been told was stored. Now the
// record is Create's last write, its commit point: a Create that fails
// leaves no session (so no replica can append to it), and its error says
// which of the app's and user's state it had updated (a store cannot
// write both at once).
func TestADKReview_CreateFailureLeavesAppStateAndDropsOthersEvents(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			hs := newADKHookStore(open("adk"))
			a, err := adk.NewSessionService(hs)
			require.NoError(t, err)
			r2, err := adk.NewSessionService(open("adk"))
			require.NoError(t, err)
			var errB error
			var once sync.Once
			hs.onPut = func(_ context.Context, id memstack.Identity, name string) error {
				if name != "adk.state" || id.User == "" {
					return nil // the record, the app state
				}
				var err error
				once.Do(func() {
					// Another replica (the client retried on another node
					// with the ID it chose) looks for the session.
					var got *session.GetResponse
					if got, errB = r2.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: "s1"}); errB == nil {
						errB = r2.AppendEvent(ctx, got.Session, adkText("b1", "user", time.Now().Add(time.Second), "accepted by replica B"))
					}
					err = errors.New("injected: user state write failed")
				})
				return err
			}
			_, err = a.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1",
				State: map[string]any{"app:banner": "spring", "user:plan": "gold"}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "the app state is updated", "the error says what was applied")
			hs.onPut = nil
			assert.ErrorIs(t, errB, adk.ErrSessionNotFound, "no replica finds a session whose Create has not committed")

			_, err = r2.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			assert.ErrorIs(t, err, adk.ErrSessionNotFound, "a failed Create leaves no session")
			created, err := r2.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1", State: map[string]any{"user:plan": "gold"}})
			require.NoError(t, err, "the Create can be retried")
			plan, has := stateOf(created.Session, "user:plan")
			assert.True(t, has)
			assert.Equal(t, "gold", plan)
		})
	}
}

// TestADKReview_MemoryWindowsLoseEvents: AddSessionToMemory records only
// the last event it took (and its time). A window of the session (Get
// with NumRecentEvents) that skips events after that one moves the mark
// past them, and no later add — not even of the whole session — stores
// them; a first add of a window marks the events before it as added.
// Events with equal timestamps are lost the same way.
func TestADKReview_MemoryWindowsLoseEvents(t *testing.T) {
	texts := func(msgs []llms.ChatMessage) []string {
		var out []string
		for _, m := range msgs {
			out = append(out, m.GetContent())
		}
		return out
	}
	window := func(t *testing.T, f adkFixture, sid string, n int) session.Session {
		got, err := f.sessions.Get(context.Background(), &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: sid, NumRecentEvents: n})
		require.NoError(t, err)
		return got.Session
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			at := func(i int) time.Time { return adkDay.Add(time.Duration(i) * time.Minute) }

			t.Run("gap", func(t *testing.T) {
				s := f.session(t, "travel", "ana", "gap",
					adkText("e1", "user", at(1), "t1"), adkText("e2", "planner", at(2), "t2"))
				require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
				s = f.extend(t, s, adkText("e3", "user", at(3), "t3"), adkText("e4", "planner", at(4), "t4"), adkText("e5", "user", at(5), "t5"))
				require.NoError(t, f.mem.AddSessionToMemory(ctx, window(t, f, "gap", 2))) // e4, e5
				require.NoError(t, f.mem.AddSessionToMemory(ctx, s))                      // the whole session
				msgs, _ := stored(t, f.st, "travel", "ana", "gap")
				assert.ElementsMatch(t, []string{"t1", "t2", "t3", "t4", "t5"}, texts(msgs), "every event of the session is stored once")
			})
			t.Run("window first", func(t *testing.T) {
				s := f.session(t, "travel", "ana", "first",
					adkText("e1", "user", at(1), "t1"), adkText("e2", "planner", at(2), "t2"),
					adkText("e3", "user", at(3), "t3"), adkText("e4", "planner", at(4), "t4"))
				require.NoError(t, f.mem.AddSessionToMemory(ctx, window(t, f, "first", 2))) // e3, e4
				require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
				msgs, _ := stored(t, f.st, "travel", "ana", "first")
				assert.ElementsMatch(t, []string{"t1", "t2", "t3", "t4"}, texts(msgs), "every event of the session is stored once")
			})
			t.Run("equal timestamps", func(t *testing.T) {
				s := f.session(t, "travel", "ana", "same",
					adkText("e1", "user", at(1), "t1"), adkText("e2", "planner", at(1), "t2"))
				require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
				f.extend(t, s, adkText("e3", "user", at(1), "t3"), adkText("e4", "planner", at(1), "t4"))
				require.NoError(t, f.mem.AddSessionToMemory(ctx, window(t, f, "same", 2))) // e3, e4
				msgs, _ := stored(t, f.st, "travel", "ana", "same")
				assert.Equal(t, []string{"t1", "t2", "t3", "t4"}, texts(msgs), "the window's events are stored")
			})
		})
	}
}

// TestADKReview_MemoryReAddAfterClear: after the memory conversation is
// cleared (MemoryService's record of what it added goes with it), adding
// the session again stores it again on SQLite, PostgreSQL and in process;
// on Redis the append keys outlive the Clear, so nothing is stored while
// the record says everything was.
func TestADKReview_MemoryReAddAfterClear(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			s := f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "The offsite is in Lisbon."),
				adkText("e2", "planner", adkDay.Add(time.Minute), "Noted: Lisbon."))
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			id := memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s1"}
			rc, err := memories.NewRecall(memories.WithStore(f.st))
			require.NoError(t, err)
			require.NoError(t, rc.Clear(memstack.WithIdentity(ctx, id)))
			msgs, _ := stored(t, f.st, "travel", "ana", "s1")
			require.Empty(t, msgs)

			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			msgs, _ = stored(t, f.st, "travel", "ana", "s1")
			assert.Len(t, msgs, 2, "the session re-added after a Clear is stored again")
		})
	}
}

// TestADKReview_MemoryRecreatedSessionSameEventIDs: a session deleted and
// created again with the same ID, whose events get the same IDs (a
// deterministic platform.WithUUIDProvider, as ADK offers for replay-safe
// workflows, or caller-chosen IDs), adds nothing: its events are taken
// for the deleted session's.
func TestADKReview_MemoryRecreatedSessionSameEventIDs(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			s := f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "The offsite is in Lisbon."),
				adkText("e2", "planner", adkDay.Add(time.Minute), "Noted: Lisbon."))
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			require.NoError(t, f.sessions.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"}))
			day2 := adkDay.AddDate(0, 0, 1)
			s = f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", day2, "Move the offsite to Porto."),
				adkText("e2", "planner", day2.Add(time.Minute), "Moved to Porto."))
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			got := search(t, f.mem, "travel", "ana", "Porto")
			assert.NotEmpty(t, got, "the new session's turns are in memory")
		})
	}
}

// TestADKReview_SearchAfterOtherReplicaForgets: a replica that searched
// before another replica forgot the user (ForgetUser) or cleared a
// conversation must not return the forgotten turns.
func TestADKReview_SearchAfterOtherReplicaForgets(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			require.NoError(t, f.mem.AddSessionToMemory(ctx, f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "My passport number is X123."))))
			other, err := adk.NewMemoryService(f.open("adk"))
			require.NoError(t, err)
			require.NotEmpty(t, search(t, other, "travel", "ana", "passport"))
			_, err = f.mem.ForgetUser(ctx, "travel", "ana")
			require.NoError(t, err)
			assert.Empty(t, search(t, other, "travel", "ana", "passport"), "a forgotten turn shown by another replica")
		})
	}
}

// TestADKReview_NamesDoNotLeak: apps, users and sessions whose names are
// prefixes of others or hold separators, wildcards, NUL or unicode stay
// apart in SearchMemory, List, Get and Delete.
func TestADKReview_NamesDoNotLeak(t *testing.T) {
	names := [][2]string{
		{"t", "a"}, {"t", "a:b"}, {"t:a", "b"}, {"t", "a%"}, {"t", "a_"}, {"t", "a*"}, {"t", "a\x00b"},
		{"t", "ä"}, {"t%", "a"}, {"t_", "a"}, {"t*", "a"}, {"t\x00", "a"}, {"T", "a"}, {"t", "A"},
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			for i, n := range names {
				sid := fmt.Sprintf("s:%d%%\x01ü", i)
				s := f.session(t, n[0], n[1], sid, adkText(fmt.Sprintf("e%d", i), "user", adkDay, fmt.Sprintf("zebra marker%d", i)))
				require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			}
			for i, n := range names {
				got := search(t, f.mem, n[0], n[1], "zebra")
				if assert.Len(t, got, 1, "%q/%q", n[0], n[1]) {
					assert.Contains(t, entryText(got[0]), fmt.Sprintf("marker%d", i))
				}
				list, err := f.sessions.List(ctx, &session.ListRequest{AppName: n[0], UserID: n[1]})
				require.NoError(t, err)
				assert.Len(t, list.Sessions, 1, "%q/%q", n[0], n[1])
			}
			list, err := f.sessions.List(ctx, &session.ListRequest{AppName: "t"})
			require.NoError(t, err)
			n := 0
			for _, nm := range names {
				if nm[0] == "t" {
					n++
				}
			}
			assert.Len(t, list.Sessions, n)
		})
	}
}

// TestADKReview_CancelledContext: a call with a done ctx returns an error
// and changes nothing.
func TestADKReview_CancelledContext(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			s := f.session(t, "travel", "ana", "s1", adkText("e1", "user", adkDay, "The offsite is in Lisbon."))
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			require.NotEmpty(t, search(t, f.mem, "travel", "ana", "Lisbon"))
			done, cancel := context.WithCancel(ctx)
			cancel()
			_, err := f.mem.SearchMemory(done, &memory.SearchRequest{AppName: "travel", UserID: "ana", Query: "Lisbon"})
			assert.ErrorIs(t, err, context.Canceled, "SearchMemory")
			assert.ErrorIs(t, f.mem.AddSessionToMemory(done, s), context.Canceled, "AddSessionToMemory")
			_, err = f.sessions.Get(done, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			assert.ErrorIs(t, err, context.Canceled, "Get")
			_, err = f.sessions.List(done, &session.ListRequest{AppName: "travel"})
			assert.ErrorIs(t, err, context.Canceled, "List")
			assert.ErrorIs(t, f.sessions.Delete(done, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"}), context.Canceled, "Delete")
			_, err = f.sessions.Create(done, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s2"})
			assert.ErrorIs(t, err, context.Canceled, "Create")
			assert.ErrorIs(t, f.sessions.AppendEvent(done, s, adkText("e2", "user", adkDay.Add(time.Minute), "x")), context.Canceled, "AppendEvent")
		})
	}
}

// TestADKReview_MemoryAuthorOfEachTurn: SearchMemory's entries carry
// their author. In a session where two agents spoke, every model turn is
// returned with Author "model", not the agent that said it.
func TestADKReview_MemoryAuthorOfEachTurn(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			require.NoError(t, f.mem.AddSessionToMemory(ctx, f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "Plan the offsite."),
				adkText("e2", "planner", adkDay.Add(time.Minute), "The planner picked Lisbon."),
				adkText("e3", "booker", adkDay.Add(2*time.Minute), "The booker reserved the LX Factory hall."))))
			for _, e := range search(t, f.mem, "travel", "ana", "planner picked booker reserved") {
				switch {
				case strings.Contains(entryText(e), "planner picked"):
					assert.Equal(t, "planner", e.Author)
				case strings.Contains(entryText(e), "booker reserved"):
					assert.Equal(t, "booker", e.Author)
				}
			}
		})
	}
}

// TestADKReview_EventRoundTrip: an event AppendEvent accepts reads back as
// it was given — or is refused. Strings that are not UTF-8 outside the
// text parts (an author, a function call's arguments, custom metadata) are
// replaced by U+FFFD without an error.
func TestADKReview_EventRoundTrip(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			s := f.session(t, "travel", "ana", "s1")
			loc := time.FixedZone("x", 5*3600+1800)
			full := &session.Event{ID: "full", Author: "planner", Timestamp: time.Now().In(loc), InvocationID: "inv", Branch: "a.b",
				LLMResponse: model.LLMResponse{
					Content:        &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{Text: "hi", Thought: true}, genai.NewPartFromBytes([]byte{0, 1, 2, 255}, "image/png"), {FunctionCall: &genai.FunctionCall{ID: "c", Name: "f", Args: map[string]any{"n": 1.5, "s": "x", "l": []any{"a", true, nil}}}}}},
					CustomMetadata: map[string]any{"k": "v", "n": 2.0},
					TurnComplete:   true, ErrorCode: "E", ErrorMessage: "m", FinishReason: genai.FinishReasonStop,
				},
				Actions:            session.EventActions{StateDelta: map[string]any{"a": "b"}, ArtifactDelta: map[string]int64{"f.txt": 3}, TransferToAgent: "x", Escalate: true, SkipSummarization: true},
				LongRunningToolIDs: []string{"c"},
			}
			want := jsonOf(t, full)
			require.NoError(t, f.sessions.AppendEvent(ctx, s, full))
			got := getSession(t, f.sessions, "travel", "ana", "s1")
			require.Equal(t, 1, got.Events().Len())
			assert.JSONEq(t, want, jsonOf(t, got.Events().At(0)))

			bad := &session.Event{ID: "bad", Author: "plan\xffner", Timestamp: time.Now(), InvocationID: "inv",
				LLMResponse: model.LLMResponse{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{
					{FunctionCall: &genai.FunctionCall{ID: "c", Name: "f", Args: map[string]any{"raw": "\xff\xfe"}}}}}}}
			err := f.sessions.AppendEvent(ctx, got, bad)
			if err == nil {
				got = getSession(t, f.sessions, "travel", "ana", "s1")
				ev := got.Events().At(1)
				assert.Equal(t, "plan\xffner", ev.Author, "the author was changed silently")
				assert.Equal(t, "\xff\xfe", ev.Content.Parts[0].FunctionCall.Args["raw"], "the arguments were changed silently")
			} else {
				assert.ErrorIs(t, err, adk.ErrInvalidEvent)
			}
		})
	}
}

// TestADKReview_RecallOptionsBreakIsolation: WithRecallOptions is applied
// after the options the service sets itself, so a caller's
// WithRecallScope(RecallScopeTenant) makes SearchMemory return other
// users' turns (labelled with a session_id the user may also have), and a
// caller's WithStore splits the turns (in that store) from the service's
// record of them, ForgetUser and ExportUser (in the service's store).
func TestADKReview_RecallOptionsBreakIsolation(t *testing.T) {
	b := backends()[1] // sqlite
	ctx := context.Background()
	t.Run("tenant scope", func(t *testing.T) {
		f := newADKFixture(t, b)
		require.NoError(t, f.mem.AddSessionToMemory(ctx, f.session(t, "travel", "bo", "s1", adkText("e1", "user", adkDay, "bo's zebra secret"))))
		mem, err := adk.NewMemoryService(f.st, adk.WithRecallOptions(memories.WithRecallScope(memories.RecallScopeTenant)))
		if err != nil {
			return // refused: fine
		}
		assert.Empty(t, search(t, mem, "travel", "ana", "zebra"), "ana is shown bo's turn")
	})
	t.Run("store", func(t *testing.T) {
		f := newADKFixture(t, b)
		mem, err := adk.NewMemoryService(f.st, adk.WithRecallOptions(memories.WithStore(store.NewInMemory())))
		if err != nil {
			return // refused: fine
		}
		require.NoError(t, mem.AddSessionToMemory(ctx, f.session(t, "travel", "ana", "s1", adkText("e1", "user", adkDay, "zebra"))))
		msgs, _ := stored(t, f.st, "travel", "ana", "s1")
		assert.Len(t, msgs, 1, "the turn is not in the store the service was given (ForgetUser and ExportUser miss it)")
	})
}

// TestADKReview_GetAfterOutOfOrderTimestamps: Get with After reads back
// from the newest event only until one dated before After, so events
// dated after After that sit before it (timestamps out of append order:
// replicas' clocks, imported events) are not returned; ADK's database
// service returns every event with Timestamp >= After.
func TestADKReview_GetAfterOutOfOrderTimestamps(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			c, err := f.sessions.Create(ctx, &session.CreateRequest{AppName: "a", UserID: "u", SessionID: "s"})
			require.NoError(t, err)
			base := time.Now()
			for i := range 100 {
				at := base.Add(time.Hour) // the first 36 events: dated late
				if i >= 36 {
					at = base.Add(time.Duration(i) * time.Millisecond)
				}
				require.NoError(t, f.sessions.AppendEvent(ctx, c.Session, adkText(fmt.Sprintf("e%d", i), "user", at, "x")))
			}
			got, err := f.sessions.Get(ctx, &session.GetRequest{AppName: "a", UserID: "u", SessionID: "s", After: base.Add(time.Minute)})
			require.NoError(t, err)
			assert.Equal(t, 36, got.Session.Events().Len(), "events dated after After")
		})
	}
}
