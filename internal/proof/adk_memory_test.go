package proof_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/sqlitestore"
)

// adkFixture is ADK's two services over one store of a backend, as an
// application lays them out: sessions and memory in the same store.
type adkFixture struct {
	st       store.Store
	open     func(ns string) store.Store
	sessions *adk.SessionService
	mem      *adk.MemoryService
}

func newADKFixture(t *testing.T, b backend, opts ...adk.Option) adkFixture {
	t.Helper()
	open := b.space(t)
	st := open("adk")
	sessions, err := adk.NewSessionService(st)
	require.NoError(t, err)
	mem, err := adk.NewMemoryService(st, opts...)
	require.NoError(t, err)
	return adkFixture{st: st, open: open, sessions: sessions, mem: mem}
}

// adkBackends is every backend, and SQLite and PostgreSQL with their
// recall index on (the search then reads the database's index).
func adkBackends() []backend {
	return append(backends(),
		backend{"sqlite-index", func(t testing.TB) func(string) store.Store {
			path := filepath.Join(t.TempDir(), "proof.db")
			return func(ns string) store.Store {
				s, err := sqlitestore.Open(openCtx(t), path, sqlitestore.WithNamespace(ns), sqlitestore.WithRecallIndex())
				return closeLater(t, "sqlitestore.Open", s, err)
			}
		}},
		backend{"postgres-index", func(t testing.TB) func(string) store.Store {
			dsn := testsvc.Postgres(t) + "&pool_max_conns=8"
			prefix := "proof_" + randomHex(6) + "_"
			return func(ns string) store.Store {
				s, err := pgstore.Open(openCtx(t), dsn, pgstore.WithTablePrefix(prefix), pgstore.WithNamespace(ns), pgstore.WithRecallIndex())
				return closeLater(t, "pgstore.Open", s, err)
			}
		}})
}

// session creates session sid of user in app through the session service,
// appends events to it and returns it as Get reads it.
func (f adkFixture) session(t *testing.T, app, user, sid string, events ...*session.Event) session.Session {
	t.Helper()
	ctx := context.Background()
	created, err := f.sessions.Create(ctx, &session.CreateRequest{AppName: app, UserID: user, SessionID: sid})
	require.NoError(t, err)
	return f.extend(t, created.Session, events...)
}

// extend appends events to s and returns the session as Get reads it.
func (f adkFixture) extend(t *testing.T, s session.Session, events ...*session.Event) session.Session {
	t.Helper()
	ctx := context.Background()
	for _, ev := range events {
		require.NoError(t, f.sessions.AppendEvent(ctx, s, ev))
	}
	got, err := f.sessions.Get(ctx, &session.GetRequest{AppName: s.AppName(), UserID: s.UserID(), SessionID: s.ID()})
	require.NoError(t, err)
	return got.Session
}

var adkDay = time.Date(2026, time.March, 2, 9, 0, 0, 0, time.UTC)

func adkText(id, author string, at time.Time, text string) *session.Event {
	role := genai.RoleModel
	if author == "user" {
		role = genai.RoleUser
	}
	return &session.Event{ID: id, Author: author, Timestamp: at, InvocationID: "inv-" + id,
		LLMResponse: model.LLMResponse{Content: genai.NewContentFromText(text, genai.Role(role))}}
}

func adkCall(id, author string, at time.Time, callID, name string, args map[string]any) *session.Event {
	return &session.Event{ID: id, Author: author, Timestamp: at, InvocationID: "inv-" + id,
		LLMResponse: model.LLMResponse{Content: &genai.Content{Role: genai.RoleModel,
			Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: callID, Name: name, Args: args}}}}}}
}

func adkResult(id, author string, at time.Time, callID, name string, resp map[string]any) *session.Event {
	return &session.Event{ID: id, Author: author, Timestamp: at, InvocationID: "inv-" + id,
		LLMResponse: model.LLMResponse{Content: &genai.Content{Role: genai.RoleUser,
			Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{ID: callID, Name: name, Response: resp}}}}}}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// stored returns the messages and times the store holds for a session's
// conversation.
func stored(t *testing.T, st store.Store, app, user, sid string) ([]llms.ChatMessage, []time.Time) {
	t.Helper()
	recs, err := st.All(context.Background(), memstack.Identity{Tenant: app, User: user, Conversation: sid})
	require.NoError(t, err)
	var msgs []llms.ChatMessage
	var times []time.Time
	for _, r := range recs {
		msgs = append(msgs, r.Message)
		times = append(times, r.Time)
	}
	return msgs, times
}

func search(t *testing.T, mem memory.Service, app, user, query string) []memory.Entry {
	t.Helper()
	resp, err := mem.SearchMemory(context.Background(), &memory.SearchRequest{AppName: app, UserID: user, Query: query})
	require.NoError(t, err)
	require.NotNil(t, resp.Memories, "an empty result is an empty slice")
	return resp.Memories
}

func entryText(e memory.Entry) string {
	var parts []string
	for _, p := range e.Content.Parts {
		switch {
		case p.FunctionCall != nil:
			parts = append(parts, "call "+p.FunctionCall.Name)
		case p.FunctionResponse != nil:
			parts = append(parts, "result "+p.FunctionResponse.Name)
		default:
			parts = append(parts, p.Text)
		}
	}
	return strings.Join(parts, " | ")
}

// TestADKMemoryAddsEachEventOnce: adding a session stores its text turns
// at the events' times, tool calls with their results, in order; adding
// it again, or a longer version of it, or from two goroutines at once,
// stores each event once.
func TestADKMemoryAddsEachEventOnce(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			f := newADKFixture(t, b)
			ctx := context.Background()
			args := map[string]any{"city": "Lisbon"}
			weather := map[string]any{"forecast": "sunny, 24 degrees"}
			s := f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "Book the offsite in Lisbon for 14 May."),
				adkText("e2", "planner", adkDay.Add(time.Minute), "Booked: Lisbon, 14 May, LX Factory."),
				adkCall("e3", "planner", adkDay.Add(2*time.Minute), "call-1", "get_weather", args),
				adkResult("e4", "planner", adkDay.Add(3*time.Minute), "call-1", "get_weather", weather),
				adkText("e5", "planner", adkDay.Add(4*time.Minute), "It will be sunny in Lisbon."),
			)
			want := []llms.ChatMessage{
				llms.HumanChatMessage{Content: "Book the offsite in Lisbon for 14 May."},
				llms.AIChatMessage{Content: "Booked: Lisbon, 14 May, LX Factory."},
				llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "call-1", Type: "function",
					FunctionCall: &llms.FunctionCall{Name: "get_weather", Arguments: jsonOf(t, args)}}}},
				llms.ToolChatMessage{ID: "call-1", Content: jsonOf(t, weather)},
				llms.AIChatMessage{Content: "It will be sunny in Lisbon."},
			}
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s), "adding the same session again")
			msgs, times := stored(t, f.st, "travel", "ana", "s1")
			assert.Equal(t, want, msgs)
			require.Len(t, times, 5)
			for i, at := range times {
				assert.True(t, at.Equal(adkDay.Add(time.Duration(i)*time.Minute)), "message %d dated %s", i, at)
			}

			// The session goes on: only the new events are added.
			s = f.extend(t, s,
				adkText("e6", "user", adkDay.Add(5*time.Minute), "And the budget?"),
				adkText("e7", "planner", adkDay.Add(6*time.Minute), "The budget is 40k euros."))
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			want = append(want, llms.HumanChatMessage{Content: "And the budget?"}, llms.AIChatMessage{Content: "The budget is 40k euros."})
			msgs, _ = stored(t, f.st, "travel", "ana", "s1")
			assert.Equal(t, want, msgs)

			// A window of the session's newest events (Get with
			// NumRecentEvents), and an older window, add nothing again.
			for _, n := range []int{2, 5} {
				got, err := f.sessions.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: "s1", NumRecentEvents: n})
				require.NoError(t, err)
				require.NoError(t, f.mem.AddSessionToMemory(ctx, got.Session))
			}
			msgs, _ = stored(t, f.st, "travel", "ana", "s1")
			assert.Equal(t, want, msgs, "windows of the session add nothing twice")

			// Two adds of a grown session at once store each event once.
			s = f.extend(t, s,
				adkText("e8", "user", adkDay.Add(7*time.Minute), "Who is the caterer?"),
				adkText("e9", "planner", adkDay.Add(8*time.Minute), "Prado catering."))
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = f.mem.AddSessionToMemory(ctx, s)
				}()
			}
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "add %d", i)
			}
			want = append(want, llms.HumanChatMessage{Content: "Who is the caterer?"}, llms.AIChatMessage{Content: "Prado catering."})
			msgs, _ = stored(t, f.st, "travel", "ana", "s1")
			assert.Equal(t, want, msgs, "concurrent adds store each event once")
		})
	}
}

// TestADKMemorySearch: SearchMemory finds a user's turns across sessions,
// best first, with author, time and session; never another user's or
// another app's; a tool call comes with its result; a second replica on
// the same store finds what the first added.
func TestADKMemorySearch(t *testing.T) {
	for _, b := range adkBackends() {
		t.Run(b.name, func(t *testing.T) {
			f := newADKFixture(t, b)
			ctx := context.Background()
			add := func(app, user, sid string, events ...*session.Event) {
				require.NoError(t, f.mem.AddSessionToMemory(ctx, f.session(t, app, user, sid, events...)))
			}
			add("travel", "ana", "s1",
				adkText("a1", "user", adkDay, "Book the offsite in Lisbon for 14 May."),
				adkText("a2", "planner", adkDay.Add(time.Minute), "Booked: Lisbon, 14 May, LX Factory."),
				adkText("a3", "user", adkDay.Add(2*time.Minute), "Which logo colour did we pick?"),
				adkText("a4", "planner", adkDay.Add(3*time.Minute), "Blue, the darker one."))
			add("travel", "ana", "s2",
				adkText("b1", "user", adkDay.AddDate(0, 0, 1), "What will the weather be at the offsite?"),
				adkCall("b2", "planner", adkDay.AddDate(0, 0, 1).Add(time.Minute), "c1", "get_weather", map[string]any{"city": "Lisbon"}),
				adkResult("b3", "planner", adkDay.AddDate(0, 0, 1).Add(2*time.Minute), "c1", "get_weather", map[string]any{"forecast": "thunderstorms expected"}),
				adkText("b4", "planner", adkDay.AddDate(0, 0, 1).Add(3*time.Minute), "Pack umbrellas."))
			// The same words for another user and in another app.
			add("travel", "bo", "s1", adkText("x1", "user", adkDay, "Our offsite is in Lisbon too, with thunderstorms."))
			add("billing", "ana", "s9", adkText("y1", "user", adkDay, "The Lisbon offsite invoice, thunderstorms or not."))

			got := search(t, f.mem, "travel", "ana", "Where is the offsite in Lisbon?")
			require.NotEmpty(t, got)
			top := got[0]
			assert.Contains(t, entryText(top), "Lisbon")
			for _, e := range got {
				sid, _ := e.CustomMetadata["session_id"].(string)
				assert.Contains(t, []string{"s1", "s2"}, sid, "entry %s is ana's in app travel", e.ID)
				assert.True(t, strings.HasPrefix(e.ID, sid+"/"), "entry ID %q names its session", e.ID)
				assert.NotContains(t, entryText(e), "too, with", "another user's turn")
				assert.NotContains(t, entryText(e), "invoice", "another app's turn")
				assert.False(t, e.Timestamp.IsZero(), "entry %s has its event's time", e.ID)
			}
			byText := map[string]memory.Entry{}
			for _, e := range got {
				byText[entryText(e)] = e
			}
			booked, ok := byText["Booked: Lisbon, 14 May, LX Factory."]
			if assert.True(t, ok, "the model's answer is found: %v", keys(byText)) {
				assert.Equal(t, "planner", booked.Author)
				assert.Equal(t, genai.Role(genai.RoleModel), genai.Role(booked.Content.Role))
				assert.True(t, booked.Timestamp.Equal(adkDay.Add(time.Minute)), "dated %s", booked.Timestamp)
				assert.Equal(t, "s1", booked.CustomMetadata["session_id"])
			}
			asked, ok := byText["Book the offsite in Lisbon for 14 May."]
			if assert.True(t, ok, "the user's turn is found: %v", keys(byText)) {
				assert.Equal(t, "user", asked.Author)
				assert.True(t, asked.Timestamp.Equal(adkDay), "dated %s", asked.Timestamp)
			}
			for i := 1; i < len(got); i++ {
				assert.GreaterOrEqual(t, got[i-1].CustomMetadata["score"].(float64), got[i].CustomMetadata["score"].(float64), "best first")
			}

			// A tool call is found by its result's words, and comes with it.
			got = search(t, f.mem, "travel", "ana", "thunderstorms")
			require.NotEmpty(t, got)
			assert.Equal(t, `call get_weather | result get_weather | get_weather({"city":"Lisbon"}) returned {"forecast":"thunderstorms expected"}`, entryText(got[0]),
				"the call, its result, and both as text for a reader of text parts")
			assert.Equal(t, "s2", got[0].CustomMetadata["session_id"])
			assert.Equal(t, "thunderstorms expected", got[0].Content.Parts[1].FunctionResponse.Response["forecast"])
			assert.Equal(t, "c1", got[0].Content.Parts[1].FunctionResponse.ID)
			for _, e := range got {
				assert.NotContains(t, entryText(e), "too, with")
				assert.NotContains(t, entryText(e), "invoice")
			}

			// Other users and apps see only their own.
			for _, e := range search(t, f.mem, "travel", "bo", "Lisbon offsite thunderstorms") {
				assert.Equal(t, "s1", e.CustomMetadata["session_id"])
				assert.Contains(t, entryText(e), "too, with")
			}
			assert.Empty(t, search(t, f.mem, "travel", "nobody", "Lisbon"))
			assert.Empty(t, search(t, f.mem, "travel", "ana", "   "), "a blank query finds nothing")

			// Another replica on the same store finds what was added.
			other, err := adk.NewMemoryService(f.open("adk"))
			require.NoError(t, err)
			got = search(t, other, "travel", "ana", "logo colour")
			require.NotEmpty(t, got)
			assert.Contains(t, entryText(got[0]), "logo colour")
		})
	}
}

func keys(m map[string]memory.Entry) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestADKMemoryTokenBudget: the entries returned fit the budget, best
// first.
func TestADKMemoryTokenBudget(t *testing.T) {
	b := backends()[1] // sqlite
	count := func(s string) int { return len(strings.Fields(s)) }
	f := newADKFixture(t, b, adk.WithTokenBudget(12), adk.WithTokenCounter(tokensFunc(count)))
	ctx := context.Background()
	var events []*session.Event
	for i := range 10 {
		events = append(events, adkText(fmt.Sprintf("e%d", i), "user", adkDay.Add(time.Duration(i)*time.Minute),
			fmt.Sprintf("note %d about the Lisbon offsite budget plan", i)))
	}
	require.NoError(t, f.mem.AddSessionToMemory(ctx, f.session(t, "travel", "ana", "s1", events...)))
	got := search(t, f.mem, "travel", "ana", "Lisbon offsite budget")
	total := 0
	for _, e := range got {
		total += count(entryText(e))
	}
	assert.Len(t, got, 1, "each entry is 8 words: one fits in 12")
	assert.LessOrEqual(t, total, 12)

	wide := newADKFixtureOn(t, f, adk.WithTokenBudget(1000), adk.WithTokenCounter(tokensFunc(count)))
	assert.Greater(t, len(search(t, wide, "travel", "ana", "Lisbon offsite budget")), 1, "a larger budget holds more entries")
}

func newADKFixtureOn(t *testing.T, f adkFixture, opts ...adk.Option) *adk.MemoryService {
	t.Helper()
	mem, err := adk.NewMemoryService(f.st, opts...)
	require.NoError(t, err)
	return mem
}

type tokensFunc func(string) int

func (f tokensFunc) CountTokens(s string) int { return f(s) }

// TestADKMemoryForgetUser: ForgetUser removes the user's memory and
// sessions, and nothing of any other user.
func TestADKMemoryForgetUser(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			f := newADKFixture(t, b)
			ctx := context.Background()
			for _, user := range []string{"ana", "bo"} {
				s := f.session(t, "travel", user, "s1",
					adkText("e1", "user", adkDay, "The offsite is in Lisbon."),
					adkText("e2", "planner", adkDay.Add(time.Minute), "Noted: Lisbon."))
				require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			}
			_, err := f.sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s2", State: map[string]any{"user:plan": "gold"}})
			require.NoError(t, err)
			require.NotEmpty(t, search(t, f.mem, "travel", "ana", "Lisbon"))

			exp, err := f.mem.ExportUser(ctx, "travel", "ana")
			require.NoError(t, err)
			require.NotEmpty(t, exp.Identities, "the export holds the user's data")
			var buf strings.Builder
			require.NoError(t, exp.WriteJSON(&buf))
			assert.Contains(t, buf.String(), "The offsite is in Lisbon.")
			assert.NotContains(t, buf.String(), "\"bo\"", "the export holds no other user")

			n, err := f.mem.ForgetUser(ctx, "travel", "ana")
			require.NoError(t, err)
			assert.GreaterOrEqual(t, n, 3, "the conversation, two sessions and the user state")
			assert.Empty(t, search(t, f.mem, "travel", "ana", "Lisbon"))
			for _, sid := range []string{"s1", "s2"} {
				_, err = f.sessions.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: sid})
				assert.ErrorIs(t, err, adk.ErrSessionNotFound)
			}
			list, err := f.sessions.List(ctx, &session.ListRequest{AppName: "travel", UserID: "ana"})
			require.NoError(t, err)
			assert.Empty(t, list.Sessions)
			created, err := f.sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana"})
			require.NoError(t, err)
			_, err = created.Session.State().Get("user:plan")
			assert.ErrorIs(t, err, session.ErrStateKeyNotExist, "the user state is gone")

			// Bo keeps everything.
			assert.NotEmpty(t, search(t, f.mem, "travel", "bo", "Lisbon"))
			got, err := f.sessions.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "bo", SessionID: "s1"})
			require.NoError(t, err)
			assert.Equal(t, 2, got.Session.Events().Len())
		})
	}
}

// TestADKMemoryHostileSession: a session with a huge event, text that is
// not UTF-8, or an event with text and no ID gets an error naming the
// event, and stores nothing of the call: what was stored before stays as
// it was. Binary parts are not text: they are left out, not refused.
func TestADKMemoryHostileSession(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			f := newADKFixture(t, b, adk.WithMaxEventBytes(64<<10))
			ctx := context.Background()
			s := f.session(t, "travel", "ana", "s1",
				adkText("e1", "user", adkDay, "The offsite is in Lisbon."),
				adkText("e2", "planner", adkDay.Add(time.Minute), "Noted: Lisbon."))
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			before, _ := stored(t, f.st, "travel", "ana", "s1")
			require.Len(t, before, 2)

			next := adkText("e3", "user", adkDay.Add(2*time.Minute), "A fine new turn that must not be stored alone.")
			bad := []struct {
				name string
				ev   *session.Event
				want string
			}{
				{"huge", adkText("big", "user", adkDay.Add(3*time.Minute), strings.Repeat("lisbon ", 20_000)), `"big"`},
				{"not UTF-8", adkText("bin", "user", adkDay.Add(3*time.Minute), "caf\xe9"), `"bin"`},
				{"no ID", adkText("", "user", adkDay.Add(3*time.Minute), "who am I"), "no ID"},
			}
			for _, tc := range bad {
				t.Run(tc.name, func(t *testing.T) {
					hostile := &listSession{app: "travel", user: "ana", id: "s1", events: append(eventsOf(s), next, tc.ev)}
					err := f.mem.AddSessionToMemory(ctx, hostile)
					require.ErrorIs(t, err, adk.ErrInvalidEvent)
					assert.Contains(t, err.Error(), tc.want)
					assert.NotContains(t, err.Error(), "lisbon lisbon", "the error does not print the text")
					after, _ := stored(t, f.st, "travel", "ana", "s1")
					assert.Equal(t, before, after, "nothing of the call is stored")
				})
			}

			// Binary parts: the text beside them is stored, the bytes are not.
			img := &session.Event{ID: "img", Author: "user", Timestamp: adkDay.Add(4 * time.Minute),
				LLMResponse: model.LLMResponse{Content: &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{
					genai.NewPartFromBytes([]byte{0xff, 0x00, 0xd8, 0xff}, "image/jpeg"),
					genai.NewPartFromText("Here is the venue photo."),
				}}}}
			onlyImg := &session.Event{ID: "img2", Author: "user", Timestamp: adkDay.Add(5 * time.Minute),
				LLMResponse: model.LLMResponse{Content: genai.NewContentFromBytes([]byte("\x00\x01binary"), "image/png", genai.RoleUser)}}
			s = f.extend(t, s, img, onlyImg)
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			after, _ := stored(t, f.st, "travel", "ana", "s1")
			assert.Equal(t, append(before, llms.HumanChatMessage{Content: "Here is the venue photo."}), after)

			// A session service with the same limit refuses the huge event
			// and stores nothing of it.
			limited, err := adk.NewSessionService(f.st, adk.WithMaxEventBytes(64<<10))
			require.NoError(t, err)
			err = limited.AppendEvent(ctx, s, bad[0].ev)
			require.ErrorIs(t, err, adk.ErrInvalidEvent)
			got, err := f.sessions.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
			require.NoError(t, err)
			assert.Equal(t, 4, got.Session.Events().Len())
		})
	}
}

// listSession is a session.Session a caller built itself (ADK's
// interface; not one of the session service's values).
type listSession struct {
	app, user, id string
	events        []*session.Event
}

func (s *listSession) ID() string                { return s.id }
func (s *listSession) AppName() string           { return s.app }
func (s *listSession) UserID() string            { return s.user }
func (s *listSession) State() session.State      { return nil }
func (s *listSession) Events() session.Events    { return listEvents(s.events) }
func (s *listSession) LastUpdateTime() time.Time { return time.Time{} }

type listEvents []*session.Event

func (e listEvents) All() iter.Seq[*session.Event] {
	return func(yield func(*session.Event) bool) {
		for _, ev := range e {
			if !yield(ev) {
				return
			}
		}
	}
}
func (e listEvents) Len() int                { return len(e) }
func (e listEvents) At(i int) *session.Event { return e[i] }

func eventsOf(s session.Session) []*session.Event {
	var out []*session.Event
	for ev := range s.Events().All() {
		out = append(out, ev)
	}
	return out
}

// TestADKMemoryReAddAfterKeysExpire: redisstore remembers append keys for
// two minutes only; a session added again later (a long conversation, a
// nightly re-add) still stores each event once. The test deletes the
// store's write tokens, as their expiry does.
func TestADKMemoryReAddAfterKeysExpire(t *testing.T) {
	addr := testsvc.Redis(t)
	prefix := "adk-expire-" + randomHex(6)
	st, err := redisstore.Open(openCtx(t), addr, redisstore.WithKeyPrefix(prefix))
	st2 := closeLater(t, "redisstore.Open", st, err)
	sessions, err := adk.NewSessionService(st2)
	require.NoError(t, err)
	mem, err := adk.NewMemoryService(st2)
	require.NoError(t, err)
	f := adkFixture{st: st2, sessions: sessions, mem: mem}
	ctx := context.Background()
	s := f.session(t, "travel", "ana", "s1",
		adkText("e1", "user", adkDay, "The offsite is in Lisbon."),
		adkText("e2", "planner", adkDay.Add(time.Minute), "Noted: Lisbon."))
	require.NoError(t, mem.AddSessionToMemory(ctx, s))
	before, _ := stored(t, st2, "travel", "ana", "s1")
	require.Len(t, before, 2)

	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	expired := 0
	for _, pattern := range []string{prefix + "*ops", prefix + "*opq"} {
		keys, err := rdb.Keys(ctx, pattern).Result()
		require.NoError(t, err)
		for _, k := range keys {
			require.NoError(t, rdb.Del(ctx, k).Err())
			expired++
		}
	}
	require.Positive(t, expired, "the store kept write tokens to expire")

	require.NoError(t, mem.AddSessionToMemory(ctx, s))
	got, err := sessions.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: "s1", NumRecentEvents: 1})
	require.NoError(t, err)
	require.NoError(t, mem.AddSessionToMemory(ctx, got.Session))
	after, _ := stored(t, st2, "travel", "ana", "s1")
	assert.Equal(t, before, after, "each event is stored once after the keys expired")
}
