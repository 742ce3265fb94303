package proof_test

// Review 5: error paths, cost, interplay with memstack's own memories,
// session values.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/store"
)

// adk5Count is a store that counts its calls by operation.
type adk5Count struct {
	store.Store
	store.Users
	mu    sync.Mutex
	calls map[string]int
}

func newADK5Count(st store.Store) *adk5Count {
	return &adk5Count{Store: st, Users: st.(store.Users), calls: map[string]int{}}
}

func (c *adk5Count) note(op string) {
	c.mu.Lock()
	c.calls[op]++
	c.mu.Unlock()
}

func (c *adk5Count) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.calls
	c.calls = map[string]int{}
	return m
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func show(m map[string]int) string {
	var ks []string
	for k, v := range m {
		ks = append(ks, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

func (c *adk5Count) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	c.note("GetState " + name)
	return c.Store.GetState(ctx, id, name)
}
func (c *adk5Count) PutState(ctx context.Context, id memstack.Identity, name string, v []byte, e int64) (int64, error) {
	c.note("PutState " + name)
	return c.Store.PutState(ctx, id, name, v, e)
}
func (c *adk5Count) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	c.note("Append")
	return c.Store.Append(ctx, id, msgs...)
}
func (c *adk5Count) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	c.note("Last")
	return c.Store.Last(ctx, id, n)
}
func (c *adk5Count) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	c.note("Tail")
	return c.Store.Tail(ctx, id, n, after)
}
func (c *adk5Count) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	c.note("All")
	return c.Store.All(ctx, id)
}
func (c *adk5Count) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	c.note("Stat")
	return c.Store.Stat(ctx, id)
}
func (c *adk5Count) Identities(ctx context.Context, scope store.Scope) ([]memstack.Identity, error) {
	c.note("Identities")
	return c.Users.Identities(ctx, scope)
}

// TestADKReview5_CreateUnmarshalableStateIsNotInvalid: a state value JSON
// cannot hold (NaN, ±Inf, a channel) is refused by Create with an error
// that does not wrap ErrInvalidEvent, while AppendEvent refuses the same
// value in a state delta with ErrInvalidEvent, and Create itself wraps it
// for a non-UTF-8 or too large state. A caller that tells a bad request
// (4xx) from a store failure (5xx) by errors.Is(err, ErrInvalidEvent)
// takes Create's for a store failure and retries it forever.
func TestADKReview5_CreateUnmarshalableStateIsNotInvalid(t *testing.T) {
	ctx := context.Background()
	sessions := mustSessions(t, store.NewInMemory())
	for name, v := range map[string]any{"NaN": math.NaN(), "Inf": math.Inf(1), "chan": make(chan int)} {
		for _, key := range []string{"budget", "user:budget", "app:budget"} {
			_, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s-" + name + key,
				State: map[string]any{key: v}})
			require.Error(t, err)
			assert.ErrorIs(t, err, adk.ErrInvalidEvent, "Create with %s under %q: %v", name, key, err)
		}
		created, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "ok-" + name})
		require.NoError(t, err)
		ev := adkText("e-"+name, "user", adkDay, "hello")
		ev.Actions.StateDelta = map[string]any{"budget": v}
		err = sessions.AppendEvent(ctx, created.Session, ev)
		require.ErrorIs(t, err, adk.ErrInvalidEvent, "AppendEvent with %s: the same value is an invalid event", name)
	}
}

// TestADKReview5_TextBesideFunctionResponseIsLost: an event that holds a
// function response and text (a user answering a tool's confirmation
// request with a comment; a client that sends the result with a note)
// adds only the response: eventMessages returns the results as soon as
// there are any and drops the event's text (and any call beside them)
// without a word, though the package promises the text of every event.
func TestADKReview5_TextBesideFunctionResponseIsLost(t *testing.T) {
	f := newADKFixture(t, backends()[0])
	ctx := context.Background()
	ev := &session.Event{ID: "r1", Author: "user", Timestamp: adkDay, InvocationID: "inv-r1",
		LLMResponse: model.LLMResponse{Content: &genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{
			{FunctionResponse: &genai.FunctionResponse{ID: "c1", Name: "book_venue", Response: map[string]any{"confirmed": true}}},
			genai.NewPartFromText("Confirmed, but make it the Porto venue with the zebra mural."),
		}}}}
	s := f.session(t, "travel", "ana", "s1",
		adkCall("c", "planner", adkDay.Add(-time.Minute), "c1", "book_venue", map[string]any{"venue": "Lisbon"}), ev)
	require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
	msgs, _ := stored(t, f.st, "travel", "ana", "s1")
	var all []string
	for _, m := range msgs {
		all = append(all, m.GetContent())
	}
	assert.Contains(t, strings.Join(all, "\n"), "zebra mural", "the text of the response event is added")
	got := search(t, f.mem, "travel", "ana", "zebra mural")
	assert.NotEmpty(t, got, "a search finds the event's text")
}

// TestADKReview5_AppendEventReadsStateItDoesNotChange: AppendEvent of an
// event without "app:" or "user:" keys (nearly every event the runner
// appends) still reads the app's and the user's state values: two of its
// six round trips, a third of the cost of every append on a networked
// store, are reads whose result is thrown away (updateScoped reads before
// it looks at the delta).
func TestADKReview5_AppendEventReadsStateItDoesNotChange(t *testing.T) {
	ctx := context.Background()
	cs := newADK5Count(store.NewInMemory())
	sessions := mustSessions(t, cs)
	created, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
	require.NoError(t, err)
	cs.reset()
	require.NoError(t, sessions.AppendEvent(ctx, created.Session, adkText("e1", "user", adkDay, "hello")))
	m := cs.reset()
	assert.Zero(t, m["GetState adk.state"], "state values read for an event with no app or user delta (%s)", show(m))
	assert.LessOrEqual(t, total(m), 4, "round trips of one AppendEvent: %s", show(m))
}

// TestADKReview5_ForeignValueAppendsToRecreatedSession: for a session
// value this service did not return, AppendEvent's only check is the
// record's update time against the value's LastUpdateTime. A session
// whose last event is dated ahead of the clock (a replica's clock, an
// imported event: the update time never goes back) keeps that time on
// the value; after the session is deleted and created again, the new
// record's update time is the clock's, earlier, so the old value passes
// the check and its event lands in the new session — another session
// that only shares the ID (the generation, on the value, is never
// compared). Another SessionService over the same store (a second
// service in one process, a test harness, a wrapper) is enough.
func TestADKReview5_ForeignValueAppendsToRecreatedSession(t *testing.T) {
	ctx := context.Background()
	st := store.NewInMemory()
	a := mustSessions(t, st)
	b := mustSessions(t, st)
	created, err := a.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
	require.NoError(t, err)
	old := created.Session
	require.NoError(t, a.AppendEvent(ctx, old, adkText("e1", "user", time.Now().Add(time.Hour), "old session's first words")))
	require.NoError(t, a.Delete(ctx, &session.DeleteRequest{AppName: "travel", UserID: "ana", SessionID: "s1"}))
	_, err = a.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
	require.NoError(t, err)

	err = b.AppendEvent(ctx, old, adkText("e2", "user", time.Now(), "old session's second words"))
	assert.True(t, errors.Is(err, adk.ErrStaleSession) || errors.Is(err, adk.ErrSessionNotFound),
		"an append through a value of the deleted session is refused: %v", err)
	got, err := a.Get(ctx, sreq("s1"))
	require.NoError(t, err)
	assert.Zero(t, got.Session.Events().Len(), "the new session holds none of the old one's events")
}

// TestADKReview5_SessionValueConcurrency: one session value used from
// several goroutines — State().Set by a tool, Events() and State().All()
// by a callback, AppendEvent by the runner — under -race.
func TestADKReview5_SessionValueConcurrency(t *testing.T) {
	ctx := context.Background()
	sessions := mustSessions(t, store.NewInMemory())
	created, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
	require.NoError(t, err)
	s := created.Session
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = s.State().Set(fmt.Sprintf("k%d", i%7), i)
			for range s.State().All() {
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			evs := s.Events()
			for ev := range evs.All() {
				_ = ev.ID
				_ = len(ev.Actions.StateDelta)
			}
			_ = s.LastUpdateTime()
		}
	}()
	for i := range 50 {
		ev := adkText(fmt.Sprintf("e%d", i), "user", adkDay.Add(time.Duration(i)*time.Second), "hi")
		ev.Actions.StateDelta = map[string]any{"n": i, "temp:t": i, "user:u": i}
		require.NoError(t, sessions.AppendEvent(ctx, s, ev))
	}
	close(stop)
	wg.Wait()
	assert.Equal(t, 50, s.Events().Len())
}

// TestADKReview5_CreateChecksOnlyTheSessionsOwnState: Create checks the
// record it writes — the session's own keys — for size and for integers
// JSON would round (checkNumbers on the record's JSON); the "app:" and
// "user:" keys of req.State never go through either. A json.Number (or
// math/big value, or raw JSON) beyond 2^53 under "user:" is stored and
// reads back rounded, a "user:" value of any size is stored whatever
// WithMaxEventBytes says, and an invalid "user:" value (NaN) fails only
// after the "app:" keys of the same request are applied: a refused
// Create changes the app's state for every user.
func TestADKReview5_CreateChecksOnlyTheSessionsOwnState(t *testing.T) {
	ctx := context.Background()
	st := store.NewInMemory()
	sessions, err := adk.NewSessionService(st, adk.WithMaxEventBytes(1024))
	require.NoError(t, err)

	big := json.Number("9007199254740993") // 2^53 + 1
	_, err = sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "own",
		State: map[string]any{"n": big}})
	assert.ErrorIs(t, err, adk.ErrInvalidEvent, "the session's own key is checked")
	c, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "user",
		State: map[string]any{"user:n": big}})
	if assert.ErrorIs(t, err, adk.ErrInvalidEvent, "a user key beyond 2^53 is refused as the session's own is") {
		assert.Nil(t, c)
	} else {
		got, err := sessions.Get(ctx, sreq("user"))
		require.NoError(t, err)
		v, _ := got.Session.State().Get("user:n")
		t.Logf("user:n given %s, reads back %v", big, v)
	}

	_, err = sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "huge",
		State: map[string]any{"user:notes": strings.Repeat("x", 64<<10)}})
	assert.ErrorIs(t, err, adk.ErrInvalidEvent, "a 64 KiB user value is over WithMaxEventBytes(1024)")

	_, err = sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "bob", SessionID: "half",
		State: map[string]any{"app:theme": "dark", "user:budget": math.NaN()}})
	require.Error(t, err)
	app, err := st.GetState(ctx, memstack.Identity{Tenant: "travel", Conversation: "\x00adk-app-state"}, "adk.state")
	require.NoError(t, err)
	assert.NotContains(t, string(app.Value), "dark", "a refused Create leaves the app state as it was")
}

// TestADKReview5_ErrorQuotesLongStateKeys: checkValue names a map key in
// its error only when it is short (40 bytes: a state or argument name),
// but checkNumbers — the check of integers beyond 2^53 in json.Number,
// math/big and raw JSON — quotes every key on the path whole. A state
// value keyed by what the user said (notes by question, a cache by
// prompt) puts the user's words into an error that ends up in logs.
func TestADKReview5_ErrorQuotesLongStateKeys(t *testing.T) {
	ctx := context.Background()
	sessions := mustSessions(t, store.NewInMemory())
	created, err := sessions.Create(ctx, &session.CreateRequest{AppName: "travel", UserID: "ana", SessionID: "s1"})
	require.NoError(t, err)
	said := "my card number is 4111 1111 1111 1111 and the code is 123, please book it"
	ev := adkText("e1", "user", adkDay, "hello")
	ev.Actions.StateDelta = map[string]any{"answers": map[string]any{said: json.Number("9007199254740993")}}
	err = sessions.AppendEvent(ctx, created.Session, ev)
	require.ErrorIs(t, err, adk.ErrInvalidEvent)
	assert.NotContains(t, err.Error(), "4111", "the error names the place, not the user's words: %v", err)
}
