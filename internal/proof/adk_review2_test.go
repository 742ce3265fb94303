package proof_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"google.golang.org/adk/v2/session"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// adk2Store is a store that runs a hook just before one of its calls (a
// replica acting, or a fault, at that exact step). Each hook runs once: the
// first call of its op whose identity (and state name) it matches.
type adk2Store struct {
	store.Store
	store.Users
	mu    sync.Mutex
	hooks []adk2Hook
	// getBytes counts the bytes of state values GetState returned, by name.
	getBytes map[string]int
}

type adk2Hook struct {
	op    string // "get", "put", "stat", "append", "forget", "clear"
	match func(id memstack.Identity, name string) bool
	run   func(ctx context.Context)
}

func newADK2Store(st store.Store) *adk2Store {
	return &adk2Store{Store: st, Users: st.(store.Users), getBytes: map[string]int{}}
}

// on registers a hook: run, once, just before the first op call on an
// identity and state name match accepts (nil: any).
func (h *adk2Store) on(op string, match func(id memstack.Identity, name string) bool, run func(ctx context.Context)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if match == nil {
		match = func(memstack.Identity, string) bool { return true }
	}
	h.hooks = append(h.hooks, adk2Hook{op, match, run})
}

func (h *adk2Store) fire(ctx context.Context, op string, id memstack.Identity, name string) {
	h.mu.Lock()
	var run func(context.Context)
	for i, k := range h.hooks {
		if k.op == op && k.match(id, name) {
			run = k.run
			h.hooks = append(h.hooks[:i:i], h.hooks[i+1:]...)
			break
		}
	}
	h.mu.Unlock()
	if run != nil {
		run(ctx)
	}
}

func (h *adk2Store) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	h.fire(ctx, "get", id, name)
	st, err := h.Store.GetState(ctx, id, name)
	h.mu.Lock()
	h.getBytes[name] += len(st.Value)
	h.mu.Unlock()
	return st, err
}

func (h *adk2Store) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	h.fire(ctx, "put", id, name)
	return h.Store.PutState(ctx, id, name, value, expect)
}

func (h *adk2Store) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	h.fire(ctx, "stat", id, "")
	return h.Store.Stat(ctx, id)
}

func (h *adk2Store) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	h.fire(ctx, "append", id, "")
	return h.Store.Append(ctx, id, msgs...)
}

func (h *adk2Store) Forget(ctx context.Context, id memstack.Identity) error {
	h.fire(ctx, "forget", id, "")
	return h.Store.Forget(ctx, id)
}

func (h *adk2Store) Clear(ctx context.Context, id memstack.Identity) error {
	h.fire(ctx, "clear", id, "")
	return h.Store.Clear(ctx, id)
}

func (h *adk2Store) bytesRead(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.getBytes[name]
}

func isID(want memstack.Identity) func(memstack.Identity, string) bool {
	return func(id memstack.Identity, _ string) bool { return id == want }
}

// isEventsOf matches the identity holding the events of session sid of
// ana in travel, whatever its generation.
func isEventsOf(sid string) func(memstack.Identity, string) bool {
	return func(id memstack.Identity, _ string) bool {
		return id.Tenant == "travel" && id.User == "ana" &&
			strings.HasPrefix(id.Conversation, adk.EventsConversationPrefix) && strings.HasSuffix(id.Conversation, ":"+sid)
	}
}

func isState(want memstack.Identity, name string) func(memstack.Identity, string) bool {
	return func(id memstack.Identity, n string) bool { return id == want && n == name }
}

func mustSessions(t *testing.T, st store.Store) *adk.SessionService {
	t.Helper()
	s, err := adk.NewSessionService(st)
	require.NoError(t, err)
	return s
}

func sreq(sid string) *session.GetRequest {
	return &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: sid}
}

// TestADKReview2_CreateClearsLiveSession: Create reads "no record", then
// finds events and takes them for a deleted session's leftovers. If
// another replica created the session and appended to it in between (the
// client retried a Create on another node, or two nodes raced on one ID),
// the Clear removes that replica's record and its accepted event, and the
// second Create succeeds over it: an event that AppendEvent accepted is
// gone, and the session now has the other Create's state. The second
// Create must fail with ErrSessionExists and remove nothing.
func TestADKReview2_CreateClearsLiveSession(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			hs := newADK2Store(open("adk"))
			rb := mustSessions(t, hs)          // replica B, whose store calls are hooked
			ra := mustSessions(t, open("adk")) // replica A
			sid := adk.SessionIdentity("travel", "ana", "s1")
			var errA error
			hs.on("put", isState(sid, "adk.session"), func(ctx context.Context) {
				// Replica A's Create commits and its client appends, after
				// B read "no record" and before B writes its own (it
				// counted the events here, and cleared A's session).
				var c *session.CreateResponse
				if c, errA = ra.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1", State: map[string]any{"owner": "A"}}); errA == nil {
					errA = ra.AppendEvent(ctx, c.Session, adkText("a1", "user", time.Now(), "accepted by replica A"))
				}
			})
			_, errB := rb.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1", State: map[string]any{"owner": "B"}})
			require.NoError(t, errA, "replica A's Create and AppendEvent")
			assert.ErrorIs(t, errB, adk.ErrSessionExists, "replica B's Create of an ID replica A holds")
			got, err := ra.Get(ctx, sreq("s1"))
			require.NoError(t, err)
			assert.Equal(t, []string{"accepted by replica A"}, eventsText(got.Session), "replica A's accepted event")
			owner, _ := stateOf(got.Session, "owner")
			assert.Equal(t, "A", owner)
		})
	}
}

// TestADKReview2_DeleteAndCreateDuringAppend: replica A claims the record
// of session s1, then (before its event is stored) replica B deletes s1
// and creates a new s1. A's event lands on the new session; A's re-check
// finds a record (the new session's) and reports success. The new session
// shows an event said to the deleted one.
func TestADKReview2_DeleteAndCreateDuringAppend(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			hs := newADK2Store(open("adk"))
			ra := mustSessions(t, hs)
			rb := mustSessions(t, open("adk"))
			_, err := ra.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			s := getSession(t, ra, "travel", "ana", "s1")
			var errB error
			hs.on("append", isEventsOf("s1"), func(ctx context.Context) {
				if errB = rb.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"}); errB == nil {
					_, errB = rb.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
				}
			})
			errA := ra.AppendEvent(ctx, s, adkText("old1", "user", time.Now(), "said to the deleted session"))
			require.NoError(t, errB)
			got := getSession(t, rb, "travel", "ana", "s1")
			assert.Empty(t, eventsText(got), "the new session shows the deleted session's event")
			assert.Error(t, errA, "the event's session was deleted: AppendEvent reported success")
		})
	}
}

// TestADKReview2_AppendForgetDestroysRecreatedSession: AppendEvent finds,
// after storing its event, that the session was deleted, and Forgets the
// session's identity. If the session was created again in between (and
// its client appended to it), that Forget removes the new session — its
// record and an event AppendEvent accepted.
func TestADKReview2_AppendForgetDestroysRecreatedSession(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			hs := newADK2Store(open("adk"))
			ra := mustSessions(t, hs)
			rb := mustSessions(t, open("adk"))
			_, err := ra.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			s := getSession(t, ra, "travel", "ana", "s1")
			var errB, errC error
			hs.on("append", isEventsOf("s1"), func(ctx context.Context) {
				errB = rb.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			})
			hs.on("forget", isEventsOf("s1"), func(ctx context.Context) {
				// The user starts over under the same ID, on replica B.
				var c *session.CreateResponse
				if c, errC = rb.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"}); errC == nil {
					errC = rb.AppendEvent(ctx, c.Session, adkText("new1", "user", time.Now(), "said to the new session"))
				}
			})
			errA := ra.AppendEvent(ctx, s, adkText("old1", "user", time.Now(), "said to the deleted session"))
			assert.ErrorIs(t, errA, adk.ErrSessionNotFound)
			require.NoError(t, errB)
			require.NoError(t, errC, "replica B's Create and AppendEvent")
			got, err := rb.Get(ctx, sreq("s1"))
			require.NoError(t, err, "the session replica B created (and appended to) is gone")
			assert.Equal(t, []string{"said to the new session"}, eventsText(got.Session))
		})
	}
}

// TestADKReview2_CreateFailsWhenAnotherSessionIsDeleted: Create's record
// is a compare-and-set from the absent version it read. A Delete of any
// other session of the user (a Forget: it moves the absent version of the
// user's bucket) in between makes it conflict, and Create reports
// ErrSessionExists ("created meanwhile") for a session that does not
// exist — after it updated the app's and the user's state.
func TestADKReview2_CreateFailsWhenAnotherSessionIsDeleted(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			hs := newADK2Store(open("adk"))
			ra := mustSessions(t, hs)
			rb := mustSessions(t, open("adk"))
			_, err := rb.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "old"})
			require.NoError(t, err)
			hs.on("put", isState(adk.SessionIdentity("travel", "ana", "s1"), "adk.session"), func(ctx context.Context) {
				require.NoError(t, rb.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "old"}))
			})
			_, err = ra.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1", State: map[string]any{"user:plan": "gold"}})
			if assert.NoError(t, err, "a Create of a new ID while another session of the user is deleted") {
				return
			}
			_, gerr := ra.Get(ctx, sreq("s1"))
			assert.ErrorIs(t, gerr, adk.ErrSessionNotFound, "(and the session it says exists does not)")
		})
	}
}

// TestADKReview2_CreateLoserKeepsItsUserState: two Creates of one ID race;
// the one whose record conflicts returns ErrSessionExists, but the "user:"
// (and "app:") state it wrote first stays, overwriting the winner's, and
// the error does not say so (the package says a failure between state
// writes "returns an error that says what was applied").
func TestADKReview2_CreateLoserKeepsItsUserState(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			hs := newADK2Store(open("adk"))
			rb := mustSessions(t, hs)
			ra := mustSessions(t, open("adk"))
			var errA error
			hs.on("put", isState(memstack.Identity{Tenant: "travel", User: "ana", Conversation: "\x00adk-user-state"}, "adk.state"), func(ctx context.Context) {
				_, errA = ra.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1", State: map[string]any{"user:plan": "gold"}})
			})
			_, errB := rb.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1", State: map[string]any{"user:plan": "free"}})
			// B reserved the ID before it wrote the user's state: A's
			// Create, run meanwhile, finds the reservation and stops
			// before it changes any state; B's completes.
			require.ErrorIs(t, errA, adk.ErrSessionExists)
			require.NoError(t, errB)
			got := getSession(t, ra, "travel", "ana", "s1")
			plan, _ := stateOf(got, "user:plan")
			assert.Equal(t, "free", plan, "the losing Create changed the user's state")
		})
	}
}

// TestADKReview2_MemoryAddDuplicatesOnBucketForget: AddSessionToMemory
// stores a first add's messages under save keys made of the record's
// absent version, then records them by a compare-and-set from that
// version. A Forget anywhere in the user's bucket in between — deleting
// another of the user's sessions (SessionService.Delete) is one — moves
// the absent version: the record conflicts, the retry reads a new
// "generation" and stores every message again under new keys.
func TestADKReview2_MemoryAddDuplicatesOnBucketForget(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			raw := open("adk")
			hs := newADK2Store(raw)
			sessions := mustSessions(t, raw)
			mem, err := adk.NewMemoryService(hs)
			require.NoError(t, err)
			f := adkFixture{st: raw, open: open, sessions: sessions, mem: mem}
			f.session(t, "travel", "ana", "old")
			s := f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "The offsite is in Lisbon."),
				adkText("e2", "planner", adkDay.Add(time.Minute), "Noted: Lisbon."))
			conv := memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s1"}
			hs.on("put", isState(conv, "adk.memory-added"), func(ctx context.Context) {
				require.NoError(t, sessions.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "old"}))
			})
			require.NoError(t, mem.AddSessionToMemory(ctx, s))
			msgs, _ := stored(t, raw, "travel", "ana", "s1")
			assert.Equal(t, []string{"The offsite is in Lisbon.", "Noted: Lisbon."}, texts(msgs), "each event stored once")
		})
	}
}

// TestADKReview2_MemoryAddDuplicatesOnClearMidAdd: a Clear of the
// conversation (memories.Recall.Clear: the user's "forget this
// conversation") lands after AddSessionToMemory read the record's absent
// version and before it stored the first message. The messages it stores
// after the Clear stay, the record conflicts, and the retry stores them
// all again under the new generation's keys: every turn twice.
func TestADKReview2_MemoryAddDuplicatesOnClearMidAdd(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			open := b.space(t)
			raw := open("adk")
			hs := newADK2Store(raw)
			mem, err := adk.NewMemoryService(hs)
			require.NoError(t, err)
			f := adkFixture{st: raw, open: open, sessions: mustSessions(t, raw), mem: mem}
			s := f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "The offsite is in Lisbon."),
				adkText("e2", "planner", adkDay.Add(time.Minute), "Noted: Lisbon."))
			conv := memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s1"}
			rc, err := memories.NewRecall(memories.WithStore(raw))
			require.NoError(t, err)
			hs.on("append", isID(conv), func(ctx context.Context) {
				require.NoError(t, rc.Clear(memstack.WithIdentity(ctx, conv)))
			})
			require.NoError(t, mem.AddSessionToMemory(ctx, s))
			msgs, _ := stored(t, raw, "travel", "ana", "s1")
			assert.Equal(t, []string{"The offsite is in Lisbon.", "Noted: Lisbon."}, texts(msgs), "each event stored once")
		})
	}
}

// flight is a tool's typed result: ADK's functiontool puts a result that
// is not a map as it is under "result" (map[string]any{"result": out}).
type flight struct {
	To   string
	From string
}

// TestADKReview2_MemoryKeyChangesWithJSONRoundTrip: an event's key hashes
// its Content as JSON. The runner's session value (what an
// AfterRunCallback adds, as ADK's own agentengine example does with
// ic.Session()) holds the events as the agent made them; Get returns them
// decoded from JSON. A tool result holding a struct (field order) or an
// integer above 2^53 marshals differently before and after, so adding
// the session from both stores the event twice.
func TestADKReview2_MemoryKeyChangesWithJSONRoundTrip(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			c, err := f.sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			live := c.Session // the runner's value
			for _, ev := range []*session.Event{
				adkText("e1", "user", adkDay, "Find me a flight to Lisbon."),
				adkCall("e2", "planner", adkDay.Add(time.Minute), "c1", "find_flights", map[string]any{"to": "LIS"}),
				adkResult("e3", "planner", adkDay.Add(2*time.Minute), "c1", "find_flights",
					map[string]any{"result": []flight{{To: "LIS", From: "OPO"}}, "booking": int64(1<<50 + 1)}),
			} {
				require.NoError(t, f.sessions.AppendEvent(ctx, live, ev))
			}
			require.NoError(t, f.mem.AddSessionToMemory(ctx, live), "after the run, from the runner's value")
			require.NoError(t, f.mem.AddSessionToMemory(ctx, getSession(t, f.sessions, "travel", "ana", "s1")), "later, from Get")
			msgs, _ := stored(t, f.st, "travel", "ana", "s1")
			var tools []string
			for _, m := range msgs {
				if m.GetType() == llms.ChatMessageTypeTool {
					tools = append(tools, m.GetContent())
				}
			}
			assert.Len(t, msgs, 3, "each event stored once")
			assert.Len(t, tools, 1, "the tool result stored once: %q", tools)
		})
	}
}

// TestADKReview2_SearchLabelsOtherWritersTurnsWithAgent: the package says
// a model turn "stored by something other than a MemoryService" has Author
// "model". A langchaingo memory on the same conversation (the normal
// one-store configuration) saves a turn; SearchMemory labels its AI
// answer with the ADK agent's name, as if the agent had said it.
func TestADKReview2_SearchLabelsOtherWritersTurnsWithAgent(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			require.NoError(t, f.mem.AddSessionToMemory(ctx, f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "Plan the offsite."),
				adkText("e2", "planner", adkDay.Add(time.Minute), "The planner picked Lisbon."))))
			buf, err := memories.NewBuffer(memories.WithStore(f.st))
			require.NoError(t, err)
			conv := memstack.WithIdentity(memstack.WithTime(ctx, adkDay.Add(time.Hour)), memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s1"})
			require.NoError(t, buf.SaveContext(conv, map[string]any{"input": "Do zebras fly?"}, map[string]any{"output": "No, zebras gallop."}))
			found := false
			for _, e := range search(t, f.mem, "travel", "ana", "zebras gallop") {
				if strings.Contains(entryText(e), "zebras gallop") {
					found = true
					assert.Equal(t, "model", e.Author, "a turn the agent never said is labelled %q", e.Author)
				}
			}
			require.True(t, found)
		})
	}
}

// TestADKReview2_AuthorOfIdenticalTexts: authors are recorded by message
// text. When two agents of one session say the same words, every such
// turn gets the last other agent's name — also the one the first agent
// said.
func TestADKReview2_AuthorOfIdenticalTexts(t *testing.T) {
	for _, b := range backends()[:2] {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			f := newADKFixture(t, b)
			require.NoError(t, f.mem.AddSessionToMemory(ctx, f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "Plan the offsite."),
				adkText("e2", "planner", adkDay.Add(time.Minute), "Lisbon then."),
				adkText("e3", "planner", adkDay.Add(2*time.Minute), "Confirmed zebra."),
				adkText("e4", "user", adkDay.Add(3*time.Minute), "Book it."),
				adkText("e5", "booker", adkDay.Add(4*time.Minute), "Confirmed zebra."))))
			got := search(t, f.mem, "travel", "ana", "confirmed zebra")
			byTime := map[time.Time]string{}
			for _, e := range got {
				if strings.Contains(entryText(e), "Confirmed zebra") {
					byTime[e.Timestamp.UTC()] = e.Author
				}
			}
			require.NotEmpty(t, byTime)
			if a, ok := byTime[adkDay.Add(2*time.Minute)]; ok {
				assert.Equal(t, "planner", a, "the planner's turn (e3)")
			}
			if a, ok := byTime[adkDay.Add(4*time.Minute)]; ok {
				assert.Equal(t, "booker", a, "the booker's turn (e5)")
			}
		})
	}
}

// nested returns v inside depth maps: {"k": {"k": ... v}}.
func nested(depth int, v any) any {
	for range depth {
		v = map[string]any{"k": v}
	}
	return v
}

type adk2base struct{ Note string }

// adk2Wrapped's Note is marshalled by encoding/json (a promoted field of
// an embedded struct) though the embedded type is unexported.
type adk2Wrapped struct{ adk2base }

// TestADKReview2_UTF8WalkerMisses: checkUTF8 stops at depth 64 and skips
// what encoding/json marshals by other paths, so strings that are not
// UTF-8 in an event's state delta (or a Create's state) are accepted and
// read back changed (U+FFFD), which the package promises never happens.
func TestADKReview2_UTF8WalkerMisses(t *testing.T) {
	cases := map[string]any{
		// 30 levels of JSON objects: a legitimate, if deep, tool result.
		"nested 30": nested(30, "bad \xff"),
		"promoted":  adk2Wrapped{adk2base{Note: "bad \xff"}},
		"raw json":  json.RawMessage(`"bad ` + "\xff" + `"`),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sessions := mustSessions(t, store.NewInMemory())
			c, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			err = sessions.AppendEvent(ctx, c.Session, adkDelta("e1", time.Now(), "x", map[string]any{"v": v}))
			if err == nil {
				got := getSession(t, sessions, "travel", "ana", "s1")
				back, _ := json.Marshal(got.Events().At(0).Actions.StateDelta["v"])
				t.Errorf("AppendEvent accepted a string that is not UTF-8; it reads back as %s", back)
			} else {
				assert.ErrorIs(t, err, adk.ErrInvalidEvent)
			}
			_, err = sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s2", State: map[string]any{"v": v}})
			if err == nil {
				got := getSession(t, sessions, "travel", "ana", "s2")
				sv, _ := stateOf(got, "v")
				back, _ := json.Marshal(sv)
				t.Errorf("Create accepted a state string that is not UTF-8; it reads back as %s", back)
			}
		})
	}
}

// TestADKReview2_UTF8WalkerCycle: a state delta that refers to itself
// twice (m["a"] = m, m["b"] = m) makes the UTF-8 walker visit 2^30 paths
// before json.Marshal, which would refuse the cycle at once, ever runs:
// AppendEvent never returns and ignores ctx. Run in a child process,
// which the test kills.
func TestADKReview2_UTF8WalkerCycle(t *testing.T) {
	if os.Getenv("ADK_REVIEW2_CHILD") == "cycle" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		sessions := mustSessions(t, store.NewInMemory())
		c, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
		require.NoError(t, err)
		m := map[string]any{}
		m["a"], m["b"] = m, m
		err = sessions.AppendEvent(ctx, c.Session, adkDelta("e1", time.Now(), "x", map[string]any{"loop": m}))
		fmt.Printf("CHILD-RESULT: %v\n", err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestADKReview2_UTF8WalkerCycle$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ADK_REVIEW2_CHILD=cycle")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		assert.Contains(t, out.String(), "CHILD-RESULT: ")
		assert.NotContains(t, out.String(), "CHILD-RESULT: <nil>")
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Errorf("AppendEvent of an event whose state delta has a cycle did not return in 20s (its ctx had a 2s deadline)")
	}
}

// TestADKReview2_SearchReadsWholeRecord: SearchMemory reads, for the
// author of a model turn, the session's whole "added" record — a key for
// every event the session ever had — and AddSessionToMemory reads and
// rewrites it whole on every add: a search that returns one entry, and
// an add of one new turn, cost O(the session's length). Over sqlitestore
// WithRecallIndex the search otherwise reads only what it shows.
func TestADKReview2_SearchReadsWholeRecord(t *testing.T) {
	b := adkBackends()[4] // sqlite-index
	require.Equal(t, "sqlite-index", b.name)
	ctx := context.Background()
	open := b.space(t)
	hs := newADK2Store(open("adk"))
	mem, err := adk.NewMemoryService(hs)
	require.NoError(t, err)
	var evs []*session.Event
	for i := range 1500 {
		author, text := "user", fmt.Sprintf("question %d about filler", i)
		if i%2 == 1 {
			author, text = "planner", fmt.Sprintf("answer %d about filler", i)
		}
		evs = append(evs, adkText(fmt.Sprintf("e%d", i), author, adkDay.Add(time.Duration(i)*time.Second), text))
	}
	evs = append(evs, adkText("zz", "planner", adkDay.Add(time.Hour), "The zebra budget is 40k."))
	require.NoError(t, mem.AddSessionToMemory(ctx, &listSession{app: "travel", user: "ana", id: "s1", events: evs}))

	before := hs.bytesRead("adk.memory-added")
	got := search(t, mem, "travel", "ana", "zebra budget")
	require.NotEmpty(t, got)
	read := hs.bytesRead("adk.memory-added") - before
	assert.Less(t, read, 4096, "bytes of the memory record one search read for %d entries", len(got))

	// An add reads the record of the events added whole: its documented
	// cost, which grows with the session as the session an add is given
	// does (about 27 bytes an event). It reads no more than that once.
	before = hs.bytesRead("adk.memory-added")
	evs = append(evs, adkText("zz2", "user", adkDay.Add(2*time.Hour), "One more."))
	require.NoError(t, mem.AddSessionToMemory(ctx, &listSession{app: "travel", user: "ana", id: "s1", events: evs[len(evs)-2:]}))
	read = hs.bytesRead("adk.memory-added") - before
	assert.Less(t, read, 30*len(evs), "bytes of the memory record an add of one new event read")
}

// adk2ValueStore is a store passed by value whose type is not comparable
// (a slice field): a legitimate store.Store.
type adk2ValueStore struct {
	store.Store
	store.Users
	tags []string
}

// TestADKReview2_UncomparableStorePanics: AppendEvent compares the
// service's store with the one that read the session (s.svc.st == svc.st):
// for a store whose dynamic type is not comparable, that comparison
// panics.
func TestADKReview2_UncomparableStorePanics(t *testing.T) {
	ctx := context.Background()
	mem := store.NewInMemory()
	sessions := mustSessions(t, adk2ValueStore{Store: mem, Users: mem, tags: []string{"x"}})
	c, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
	require.NoError(t, err)
	var appendErr error
	require.NotPanics(t, func() {
		appendErr = sessions.AppendEvent(ctx, c.Session, adkText("e1", "user", time.Now(), "hello"))
	})
	require.NoError(t, appendErr)
}

func texts(msgs []llms.ChatMessage) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.GetContent())
	}
	return out
}

// TestADKReview2_BigIntegerReadsBackChanged: an event is stored as JSON
// and decoded into map[string]any, so an integer above 2^53 in a function
// call's arguments (an order number, a snowflake ID) is accepted and read
// back as a different number — silently, where the package promises that
// what is accepted reads back as it was given (it refuses bad UTF-8 for
// exactly that reason).
func TestADKReview2_BigIntegerReadsBackChanged(t *testing.T) {
	ctx := context.Background()
	sessions := mustSessions(t, store.NewInMemory())
	c, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
	require.NoError(t, err)
	const order = int64(1<<60 + 1) // 1152921504606846977
	err = sessions.AppendEvent(ctx, c.Session, adkCall("e1", "planner", time.Now(), "c1", "cancel_order", map[string]any{"order": order}))
	if err != nil {
		assert.ErrorIs(t, err, adk.ErrInvalidEvent)
		return
	}
	got := getSession(t, sessions, "travel", "ana", "s1")
	back, _ := json.Marshal(got.Events().At(0).Content.Parts[0].FunctionCall.Args["order"])
	assert.Equal(t, "1152921504606846977", string(back), "the order number read back")
}
