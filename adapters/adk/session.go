package adk

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
	"google.golang.org/adk/v2/platform"
	"google.golang.org/adk/v2/session"
)

// SessionConversationPrefix starts the Conversation of the identity
// {AppName, UserID, SessionConversationPrefix + session ID} under which a
// SessionService keeps a session's record (a state value); its events
// (one message each) are under {AppName, UserID, EventsConversationPrefix
// + generation + ":" + session ID}, the generation being a random name
// the session got when it was created, so that a session deleted and
// created again under its ID never shows the old one's events. The
// leading NUL makes both derived identities (storekit.Derived): no memory
// layer indexes or shows them, and a user-wide store.Users.ForgetScope
// removes them with the user's other data.
const SessionConversationPrefix = "\x00adk-session:"

// EventsConversationPrefix starts the Conversation of the identity that
// holds a session's events (see SessionConversationPrefix).
const EventsConversationPrefix = "\x00adk-events:"

// pendingTimeout is how long a Create's reservation of a session ID (a
// record marked pending, while it updates the app's and the user's state)
// keeps another Create of the ID out: one that finds an older reservation
// takes it over (its Create died part-way).
const pendingTimeout = time.Minute

// Conversations of the identities that hold ADK's user-scoped
// ({AppName, UserID, userStateConversation}) and app-scoped
// ({AppName, "", appStateConversation}) state.
const (
	userStateConversation = "\x00adk-user-state"
	appStateConversation  = "\x00adk-app-state"
)

// State names a SessionService keeps values under.
const (
	sessionRecordName = "adk.session"
	scopedStateName   = "adk.state"
)

// eventRole is the Role of the llms.GenericChatMessage that holds one
// event, as JSON, in a session's conversation.
const eventRole = "adk-event"

// DefaultMaxEventBytes is the largest event, as JSON, that a
// SessionService stores and the most text of one event a MemoryService
// adds, unless WithMaxEventBytes says otherwise.
const DefaultMaxEventBytes = 8 << 20

// ErrSessionNotFound is wrapped by the errors of Get and AppendEvent for a
// session the store does not hold (never created, deleted, or another
// user's).
var ErrSessionNotFound = errors.New("adk: session not found")

// ErrSessionExists is wrapped by Create's error for a session ID the user
// already has.
var ErrSessionExists = errors.New("adk: session already exists")

// ErrStaleSession is wrapped by AppendEvent's error when the session was
// updated in the store after the session value given was read (another
// replica appended to it): Get it again and retry, as with ADK's database
// service.
var ErrStaleSession = errors.New("adk: stale session (updated in the store since it was read)")

// ErrInvalidEvent is wrapped by the errors about an event, a state or a
// session that cannot be stored or added: too large, a string that is not
// UTF-8, an integer beyond ±2^53, no ID where one is needed. Nothing of the
// call is stored.
var ErrInvalidEvent = errors.New("adk: invalid event")

// SessionService is ADK's session.Service over a memstack store
// (store.Store): sessions, their events and their state, in SQLite, Redis,
// PostgreSQL or in process, beside the conversations memstack's memories
// keep. See the package documentation for what is stored where.
//
// It is safe for concurrent use, also by several processes over one store:
// every update of a state value is a compare-and-set on its version.
type SessionService struct {
	st       store.Store
	users    store.Users
	maxEvent int
}

var _ session.Service = (*SessionService)(nil)

// NewSessionService returns a session.Service that keeps sessions in st.
// st must implement store.Users (every store of memstack does) so that
// List can find a user's or an app's sessions. Options: WithMaxEventBytes.
func NewSessionService(st store.Store, opts ...Option) (*SessionService, error) {
	if st == nil {
		return nil, errors.New("adk: NewSessionService: store is nil")
	}
	users, ok := st.(store.Users)
	if !ok {
		return nil, fmt.Errorf("adk: NewSessionService: store %T does not implement store.Users (List needs it)", st)
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(c.recallOpts) > 0 || c.counterSet || c.budget != DefaultTokenBudget || c.skipTools != nil {
		return nil, errors.New("adk: NewSessionService: WithRecallOptions, WithTokenBudget, WithTokenCounter and WithSkipTools configure a MemoryService")
	}
	return &SessionService{st: st, users: users, maxEvent: c.maxEvent}, nil
}

// SessionIdentity returns the memstack identity under which a
// SessionService keeps session sessionID of userID in appName.
func SessionIdentity(appName, userID, sessionID string) memstack.Identity {
	return memstack.Identity{Tenant: appName, User: userID, Conversation: SessionConversationPrefix + sessionID}
}

// eventsID is the identity that holds the events of generation gen of
// session sid.
func eventsID(app, user, sid, gen string) memstack.Identity {
	return memstack.Identity{Tenant: app, User: user, Conversation: EventsConversationPrefix + gen + ":" + sid}
}

// newGeneration returns a random name for a session's generation.
func newGeneration() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("adk: drawing a session generation: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func userStateID(app, user string) memstack.Identity {
	return memstack.Identity{Tenant: app, User: user, Conversation: userStateConversation}
}

func appStateID(app string) memstack.Identity {
	return memstack.Identity{Tenant: app, Conversation: appStateConversation}
}

// record is a session's stored record: its own state (not the app's or
// the user's) and its times.
type record struct {
	Created time.Time      `json:"created"`
	Updated time.Time      `json:"updated"`
	State   map[string]any `json:"state"`
	// Gen names the session's generation: its events are under
	// eventsID(…, Gen).
	Gen string `json:"gen"`
	// Pending marks a Create's reservation: the session does not exist
	// yet.
	Pending bool `json:"pending,omitempty"`
	// Deleted marks a Delete under way (a tombstone): the session no
	// longer exists, and Gen names the events still to remove.
	Deleted bool `json:"deleted,omitempty"`
}

func checkNames(op, app, user, sid string, needSession bool) error {
	switch {
	case app == "":
		return fmt.Errorf("adk: %s: AppName is required", op)
	case user == "":
		return fmt.Errorf("adk: %s: UserID is required (app %q)", op, app)
	case needSession && sid == "":
		return fmt.Errorf("adk: %s: SessionID is required (app %q, user %q)", op, app, user)
	}
	return nil
}

// Create creates a session: req.SessionID, or a new UUID (platform.NewUUID)
// when it is empty. req.State's "app:" and "user:" keys update the app's
// and the user's state, its "temp:" keys are dropped, and the rest is the
// session's own state. An ID the user already has (or that another
// Create is creating) is an error wrapping ErrSessionExists. It reserves
// the ID first (a pending record no reader sees), then updates the app's
// and the user's state, then completes the record: a Create that fails
// leaves no session, and its error says which state it had updated. The
// session returned holds the merged state.
func (s *SessionService) Create(ctx context.Context, req *session.CreateRequest) (*session.CreateResponse, error) {
	if req == nil {
		return nil, errors.New("adk: Create: request is nil")
	}
	sid := req.SessionID
	if sid == "" {
		sid = platform.NewUUID(ctx)
	}
	if err := checkNames("Create", req.AppName, req.UserID, sid, true); err != nil {
		return nil, err
	}
	app, user := req.AppName, req.UserID
	if err := checkValue(req.State); err != nil {
		return nil, fmt.Errorf("%w: Create: session %q: the state's %w", ErrInvalidEvent, sid, err)
	}
	// The whole state (its app and user keys too) is checked before
	// anything is written.
	whole, err := json.Marshal(req.State)
	if err != nil {
		return nil, fmt.Errorf("%w: Create: session %q: the state is not JSON: %w", ErrInvalidEvent, sid, err)
	}
	if len(whole) > s.maxEvent {
		return nil, fmt.Errorf("%w: Create: the state of session %q is %d bytes, more than %d (WithMaxEventBytes)", ErrInvalidEvent, sid, len(whole), s.maxEvent)
	}
	if err := checkNumbers(whole); err != nil {
		return nil, fmt.Errorf("%w: Create: the state of session %q: %w", ErrInvalidEvent, sid, err)
	}
	appDelta, userDelta, own := splitState(req.State)
	gen, err := newGeneration()
	if err != nil {
		return nil, err
	}
	now := platform.Now(ctx)
	rec := record{Created: now, Updated: now, State: own, Gen: gen, Pending: true}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("%w: Create: session %q: the state is not JSON: %w", ErrInvalidEvent, sid, err)
	}
	id := SessionIdentity(app, user, sid)
	exists := fmt.Errorf("%w: session %q of user %q in app %q", ErrSessionExists, sid, user, app)
	// Reserve the ID (a pending record): of two Creates of one ID, the
	// second stops here, before it changes any state.
	var reserved int64
	for {
		cur, err := s.st.GetState(ctx, id, sessionRecordName)
		if err != nil {
			return nil, fmt.Errorf("adk: Create: reading session %q of user %q: %w", sid, user, err)
		}
		if cur.Exists() {
			var old record
			switch {
			case json.Unmarshal(cur.Value, &old) != nil:
				return nil, exists
			case old.Deleted:
				// A Delete under way, or one that failed part-way: finish
				// it, then take the ID.
				if err := s.st.Forget(ctx, eventsID(app, user, sid, old.Gen)); err != nil {
					return nil, fmt.Errorf("adk: Create: finishing the Delete of session %q of user %q: %w", sid, user, err)
				}
			case !old.Pending || now.Sub(old.Created) < pendingTimeout:
				return nil, exists
			}
			// Else a Create that died part-way: take its reservation over.
		}
		reserved, err = s.st.PutState(ctx, id, sessionRecordName, data, cur.Version)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("adk: Create: storing session %q of user %q: %w", sid, user, err)
		}
		// Another Create, or a Forget of the user's bucket (a Delete of
		// another session) that moved the absent version: read again.
	}
	// The app's and the user's state, then the record made whole: the
	// session exists from that write on.
	fail := func(applied string, err error) (*session.CreateResponse, error) {
		if _, derr := s.st.PutState(context.WithoutCancel(ctx), id, sessionRecordName, nil, reserved); derr != nil && !errors.Is(derr, store.ErrConflict) {
			err = errors.Join(err, fmt.Errorf("removing the reservation: %w", derr))
		}
		return nil, fmt.Errorf("adk: Create: session %q of user %q%s: %w", sid, user, applied, err)
	}
	appState, err := s.updateScoped(ctx, appStateID(app), appDelta)
	if err != nil {
		return fail("", err)
	}
	applied := ""
	if len(appDelta) > 0 {
		applied = " (the app state is updated)"
	}
	userState, err := s.updateScoped(ctx, userStateID(app, user), userDelta)
	if err != nil {
		return fail(applied, err)
	}
	if len(userDelta) > 0 {
		applied = strings.Replace(applied, "the app state is", "the app and user state are", 1)
		if applied == "" {
			applied = " (the user state is updated)"
		}
	}
	rec.Pending = false
	if data, err = json.Marshal(rec); err != nil {
		return fail(applied, err)
	}
	version, err := s.st.PutState(ctx, id, sessionRecordName, data, reserved)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("adk: Create: session %q of user %q was deleted or taken over while it was created%s: %w", sid, user, applied, err)
		}
		return fail(applied, err)
	}
	return &session.CreateResponse{Session: s.newSession(app, user, sid, version, rec.Gen, mergeStates(appState, userState, own), nil, now)}, nil
}

// Get returns a session with its events, oldest first: the newest
// req.NumRecentEvents of them when it is above 0, and of those the ones
// whose Timestamp is not before req.After when it is set. With
// NumRecentEvents it reads that many events, not the whole session; After
// alone reads every event (timestamps need not be in append order: a
// replica's clock, an imported event). A session the user does not have
// is an error wrapping ErrSessionNotFound.
func (s *SessionService) Get(ctx context.Context, req *session.GetRequest) (*session.GetResponse, error) {
	if req == nil {
		return nil, errors.New("adk: Get: request is nil")
	}
	if err := checkNames("Get", req.AppName, req.UserID, req.SessionID, true); err != nil {
		return nil, err
	}
	if req.NumRecentEvents < 0 {
		return nil, fmt.Errorf("adk: Get: NumRecentEvents is %d, want 0 (all) or more", req.NumRecentEvents)
	}
	app, user, sid := req.AppName, req.UserID, req.SessionID
	id := SessionIdentity(app, user, sid)
	rec, version, err := s.readRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	events, err := s.readEvents(ctx, eventsID(app, user, sid, rec.Gen), req.NumRecentEvents, req.After)
	if err != nil {
		return nil, err
	}
	merged, err := s.mergedState(ctx, app, user, rec.State)
	if err != nil {
		return nil, err
	}
	return &session.GetResponse{Session: s.newSession(app, user, sid, version, rec.Gen, merged, events, rec.Updated)}, nil
}

// readEvents reads the events of session id (see Get).
func (s *SessionService) readEvents(ctx context.Context, id memstack.Identity, n int, after time.Time) ([]*session.Event, error) {
	var recs []store.Record
	var err error
	switch {
	case n > 0:
		recs, err = s.st.Last(ctx, id, n)
	default:
		recs, err = s.st.All(ctx, id)
	}
	if err != nil {
		return nil, fmt.Errorf("adk: reading the events of session %q: %w", sessionName(id), err)
	}
	events := make([]*session.Event, 0, len(recs))
	for _, r := range recs {
		ev, err := decodeEvent(id, r)
		if err != nil {
			return nil, err
		}
		if !after.IsZero() && ev.Timestamp.Before(after) {
			continue
		}
		events = append(events, ev)
	}
	return events, nil
}

// sessionName is the session ID of a record's or an events' identity.
func sessionName(id memstack.Identity) string {
	if rest, ok := strings.CutPrefix(id.Conversation, EventsConversationPrefix); ok {
		_, sid, _ := strings.Cut(rest, ":")
		return sid
	}
	return strings.TrimPrefix(id.Conversation, SessionConversationPrefix)
}

func decodeEvent(id memstack.Identity, r store.Record) (*session.Event, error) {
	msg, ok := r.Message.(llms.GenericChatMessage)
	if !ok || msg.Role != eventRole {
		return nil, fmt.Errorf("adk: session %q: message %d is a %s message, not an event: %w", sessionName(id), r.Seq, r.Message.GetType(), store.ErrCorrupt)
	}
	ev := new(session.Event)
	if err := json.Unmarshal([]byte(msg.Content), ev); err != nil {
		return nil, fmt.Errorf("adk: session %q: event at Seq %d does not decode: %w (%w)", sessionName(id), r.Seq, err, store.ErrCorrupt)
	}
	return ev, nil
}

// List returns the sessions of req.UserID in req.AppName, or of every user
// of the app when UserID is empty, each with its merged state and without
// events (Get a session for its events).
func (s *SessionService) List(ctx context.Context, req *session.ListRequest) (*session.ListResponse, error) {
	if req == nil {
		return nil, errors.New("adk: List: request is nil")
	}
	if req.AppName == "" {
		return nil, errors.New("adk: List: AppName is required")
	}
	scope := store.TenantScope(req.AppName)
	if req.UserID != "" {
		scope = store.UserScope(req.AppName, req.UserID)
	}
	ids, err := s.users.Identities(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("adk: List: sessions of %s: %w", scope, err)
	}
	appState, _, err := s.readScoped(ctx, appStateID(req.AppName))
	if err != nil {
		return nil, err
	}
	userStates := map[string]map[string]any{}
	out := make([]session.Session, 0)
	for _, id := range ids {
		if !strings.HasPrefix(id.Conversation, SessionConversationPrefix) {
			continue
		}
		rec, version, err := s.readRecord(ctx, id)
		if errors.Is(err, ErrSessionNotFound) {
			continue // deleted meanwhile, or only a Clear mark
		}
		if err != nil {
			return nil, err
		}
		us, ok := userStates[id.User]
		if !ok {
			if us, _, err = s.readScoped(ctx, userStateID(id.Tenant, id.User)); err != nil {
				return nil, err
			}
			userStates[id.User] = us
		}
		out = append(out, s.newSession(id.Tenant, id.User, sessionName(id), version, rec.Gen, mergeStates(appState, us, rec.State), nil, rec.Updated))
	}
	return &session.ListResponse{Sessions: out}, nil
}

// Delete removes a session, its events and its own state; the app's and
// the user's state stay. It turns the record into a tombstone first (so
// no AppendEvent claims the session any more, and a session created again
// meanwhile is not the one removed), then removes the events, then the
// tombstone. When it fails part-way, calling it again (or a Create of the
// ID) finishes. Deleting a session that does not exist is not an error.
func (s *SessionService) Delete(ctx context.Context, req *session.DeleteRequest) error {
	if req == nil {
		return errors.New("adk: Delete: request is nil")
	}
	if err := checkNames("Delete", req.AppName, req.UserID, req.SessionID, true); err != nil {
		return err
	}
	app, user, sid := req.AppName, req.UserID, req.SessionID
	id := SessionIdentity(app, user, sid)
	fail := func(what string, err error) error {
		return fmt.Errorf("adk: Delete: %s session %q of user %q (call Delete again to finish): %w", what, sid, user, err)
	}
	// The record becomes a tombstone (by compare-and-set, so a session
	// created again meanwhile is not the one removed): from then on no
	// AppendEvent claims the session, and one that claimed it before
	// removes its event again. Then the tombstone's generation's events go,
	// then the tombstone. A Delete that fails part-way leaves the
	// tombstone, and the next Delete (or a Create of the ID) finishes it.
	for {
		st, err := s.st.GetState(ctx, id, sessionRecordName)
		if err != nil {
			return fail("reading", err)
		}
		if !st.Exists() {
			return nil
		}
		var rec record
		if err := json.Unmarshal(st.Value, &rec); err != nil {
			// A damaged record: remove the identity whole.
			if err := s.st.Forget(ctx, id); err != nil {
				return fail("removing", err)
			}
			return nil
		}
		version := st.Version
		if !rec.Deleted {
			tomb, err := json.Marshal(record{Created: rec.Created, Updated: rec.Updated, Gen: rec.Gen, Deleted: true})
			if err != nil {
				return fail("marking", err)
			}
			version, err = s.st.PutState(ctx, id, sessionRecordName, tomb, st.Version)
			if errors.Is(err, store.ErrConflict) {
				continue // changed meanwhile: look again
			}
			if err != nil {
				return fail("marking", err)
			}
		}
		if err := s.st.Forget(ctx, eventsID(app, user, sid, rec.Gen)); err != nil {
			return fail("removing the events of", err)
		}
		if _, err := s.st.PutState(ctx, id, sessionRecordName, nil, version); err != nil && !errors.Is(err, store.ErrConflict) {
			return fail("removing the record of", err)
		}
		return nil
	}
}

// AppendEvent stores event at the end of sess and applies its state
// delta: "app:" and "user:" keys to the app's and the user's state,
// "temp:" keys to the session value only (never stored), the rest to the
// session's state. A partial event (streaming) is not stored. An event
// without an ID gets one (platform.NewUUID) and one without a Timestamp
// gets platform.Now, set on event itself, as ADK's own services do.
//
// It first claims the update: the session's record moves, by a
// compare-and-set, from the version sess was read at (for a value this
// service did not return, the record must not be newer than
// sess.LastUpdateTime()), so of two replicas appending to one session
// value the second gets an error wrapping ErrStaleSession and stores
// nothing, as with ADK's database service: Get the session again. The
// claim applies the session's own state delta and moves the session's
// update time to the event's Timestamp (never back). Then the event is
// stored as one message under an append key made of its ID and contents,
// so a retried AppendEvent (after an error wrapping
// store.ErrOutcomeUnknown) stores it once; then the app's and the user's
// deltas are applied. A failure after the claim says what is applied;
// calling AppendEvent again with the same session value and event
// finishes it (the claim was the value's own). A session deleted while
// the event was stored loses the event again, and the call returns an
// error wrapping ErrSessionNotFound.
//
// A session the store does not hold is an error wrapping
// ErrSessionNotFound; an event over WithMaxEventBytes or that would not
// read back from JSON as given (a string that is not UTF-8, an integer
// beyond ±2^53, anywhere in it), one wrapping ErrInvalidEvent: then
// nothing is stored.
//
// When sess is a value this service returned, its state and events are
// updated too, as the runner expects.
func (s *SessionService) AppendEvent(ctx context.Context, sess session.Session, event *session.Event) error {
	if sess == nil {
		return errors.New("adk: AppendEvent: session is nil")
	}
	if event == nil {
		return errors.New("adk: AppendEvent: event is nil")
	}
	if event.Partial {
		return nil
	}
	app, user, sid := sess.AppName(), sess.UserID(), sess.ID()
	if err := checkNames("AppendEvent", app, user, sid, true); err != nil {
		return err
	}
	if event.ID == "" {
		event.ID = platform.NewUUID(ctx)
	}
	if event.Timestamp.IsZero() {
		event.Timestamp = platform.Now(ctx)
	}
	stored := trimTemp(event)
	if err := checkValue(stored); err != nil {
		return fmt.Errorf("%w: session %q: event %q: %w", ErrInvalidEvent, sid, event.ID, err)
	}
	data, err := json.Marshal(stored)
	if err != nil {
		return fmt.Errorf("%w: session %q: event %q is not JSON: %w", ErrInvalidEvent, sid, event.ID, err)
	}
	if len(data) > s.maxEvent {
		return fmt.Errorf("%w: session %q: event %q is %d bytes as JSON, more than %d (WithMaxEventBytes)", ErrInvalidEvent, sid, event.ID, len(data), s.maxEvent)
	}
	if err := checkNumbers(data); err != nil {
		return fmt.Errorf("%w: session %q: event %q: %w", ErrInvalidEvent, sid, event.ID, err)
	}
	id := SessionIdentity(app, user, sid)
	rec, version, err := s.readRecord(ctx, id)
	if err != nil {
		return err
	}
	own, _ := sess.(*adkSession)
	switch {
	case own != nil && own.gen != rec.Gen:
		return fmt.Errorf("%w: session %q was deleted and created again after this value of it was read", ErrStaleSession, sid)
	case own != nil && own.svc == s:
		if read := own.readVersion(); read != version {
			return fmt.Errorf("%w: session %q was updated in the store after this value of it was read", ErrStaleSession, sid)
		}
	case sess.LastUpdateTime().UnixMicro() < rec.Updated.UnixMicro():
		// A value of another service (its version is not this one's to
		// compare) or of another implementation: the time check of
		// ADK's database service.
		return fmt.Errorf("%w: session %q was updated at %s, the value given was read at %s", ErrStaleSession, sid,
			rec.Updated.Format(time.RFC3339Nano), sess.LastUpdateTime().Format(time.RFC3339Nano))
	}
	appDelta, userDelta, ownDelta := splitState(stored.Actions.StateDelta)
	// Claim the update: the record moves only from the version read, so
	// of two replicas appending to one session value, the second is
	// stale, as in ADK's database service. Its update time never goes
	// back (an event dated before it: a replica's clock, an import).
	maps.Copy(rec.State, ownDelta)
	if event.Timestamp.After(rec.Updated) {
		rec.Updated = event.Timestamp
	}
	updated := rec.Updated
	recData, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("%w: session %q: event %q: its state delta is not JSON: %w", ErrInvalidEvent, sid, event.ID, err)
	}
	if len(recData) > s.maxEvent {
		return fmt.Errorf("%w: session %q: event %q would make the session's state %d bytes, more than %d (WithMaxEventBytes)", ErrInvalidEvent, sid, event.ID, len(recData), s.maxEvent)
	}
	next, err := s.st.PutState(ctx, id, sessionRecordName, recData, version)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: session %q was updated in the store while event %q was appended", ErrStaleSession, sid, event.ID)
	}
	if err != nil {
		return fmt.Errorf("adk: AppendEvent: session %q: %w", sid, err)
	}
	if own != nil && own.svc == s {
		// The claim is this value's: a retry after a failure below is
		// not stale.
		own.setVersion(next)
	}
	sum := sha256.Sum256(append([]byte(event.ID+"\x00"), data...))
	actx := store.WithAppendKey(memstack.WithTime(ctx, event.Timestamp), "adk-event:"+hex.EncodeToString(sum[:16]))
	evID := eventsID(app, user, sid, rec.Gen)
	if err := s.st.Append(actx, evID, llms.GenericChatMessage{Role: eventRole, Content: string(data)}); err != nil {
		return fmt.Errorf("adk: AppendEvent: storing event %q of session %q (the session's own state delta is applied; append the event again): %w", event.ID, sid, err)
	}
	// A Delete that ran since the claim left the event alone in its
	// generation's identity, which no session shows: remove it (a session
	// created again under the ID has another generation).
	// The check and the clean-up run even when the caller has gone: an
	// event left in a deleted generation would never be removed.
	keep := context.WithoutCancel(ctx)
	cur, err := s.st.GetState(keep, id, sessionRecordName)
	if err != nil {
		return fmt.Errorf("adk: AppendEvent: session %q: event %q is stored, checking the session still exists failed: %w", sid, event.ID, err)
	}
	var now record
	if !cur.Exists() || json.Unmarshal(cur.Value, &now) != nil || now.Gen != rec.Gen || now.Pending || now.Deleted {
		if ferr := s.st.Forget(keep, evID); ferr != nil {
			return fmt.Errorf("%w: session %q was deleted while event %q was appended (removing the event: %w)", ErrSessionNotFound, sid, event.ID, ferr)
		}
		return fmt.Errorf("%w: session %q was deleted while event %q was appended", ErrSessionNotFound, sid, event.ID)
	}
	// The app's and the user's state last: a failure before leaves them
	// as they were.
	for _, d := range []struct {
		what  string
		id    memstack.Identity
		delta map[string]any
	}{{"app", appStateID(app), appDelta}, {"user", userStateID(app, user), userDelta}} {
		if len(d.delta) == 0 {
			continue // nothing to read or write
		}
		if _, err := s.updateScoped(ctx, d.id, d.delta); err != nil {
			return fmt.Errorf("adk: AppendEvent: session %q: event %q is stored, its %s state delta is not (append the event again): %w", sid, event.ID, d.what, err)
		}
	}
	if own != nil {
		own.appended(event, stored, updated)
	}
	return nil
}

// readRecord reads the record of session id.
func (s *SessionService) readRecord(ctx context.Context, id memstack.Identity) (record, int64, error) {
	st, err := s.st.GetState(ctx, id, sessionRecordName)
	if err != nil {
		return record{}, 0, fmt.Errorf("adk: reading session %q of user %q: %w", sessionName(id), id.User, err)
	}
	if !st.Exists() {
		return record{}, st.Version, fmt.Errorf("%w: session %q of user %q in app %q", ErrSessionNotFound, sessionName(id), id.User, id.Tenant)
	}
	var rec record
	if err := json.Unmarshal(st.Value, &rec); err != nil {
		return record{}, 0, fmt.Errorf("adk: session %q of user %q: its record does not decode: %w (%w)", sessionName(id), id.User, err, store.ErrCorrupt)
	}
	if rec.Pending || rec.Deleted {
		return record{}, st.Version, fmt.Errorf("%w: session %q of user %q in app %q (being created or deleted)", ErrSessionNotFound, sessionName(id), id.User, id.Tenant)
	}
	if rec.State == nil {
		rec.State = map[string]any{}
	}
	return rec, st.Version, nil
}

// readScoped reads an app's or a user's state (empty when there is none).
func (s *SessionService) readScoped(ctx context.Context, id memstack.Identity) (map[string]any, int64, error) {
	st, err := s.st.GetState(ctx, id, scopedStateName)
	if err != nil {
		return nil, 0, fmt.Errorf("adk: reading %s state of %s: %w", scopeWord(id), id.Key(), err)
	}
	m := map[string]any{}
	if st.Exists() {
		if err := json.Unmarshal(st.Value, &m); err != nil {
			return nil, 0, fmt.Errorf("adk: %s state of %s does not decode: %w (%w)", scopeWord(id), id.Key(), err, store.ErrCorrupt)
		}
	}
	return m, st.Version, nil
}

func scopeWord(id memstack.Identity) string {
	if id.Conversation == appStateConversation {
		return "app"
	}
	return "user"
}

// updateScoped applies delta to an app's or a user's state (a
// compare-and-set, retried on conflict) and returns the state after it.
func (s *SessionService) updateScoped(ctx context.Context, id memstack.Identity, delta map[string]any) (map[string]any, error) {
	for {
		m, version, err := s.readScoped(ctx, id)
		if err != nil || len(delta) == 0 {
			return m, err
		}
		maps.Copy(m, delta)
		data, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("%s state is not JSON: %w", scopeWord(id), err)
		}
		_, err = s.st.PutState(ctx, id, scopedStateName, data, version)
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("storing %s state: %w", scopeWord(id), err)
		}
	}
}

// mergedState is a session's state as ADK shows it: its own keys, and
// the app's and the user's under their prefixes.
func (s *SessionService) mergedState(ctx context.Context, app, user string, own map[string]any) (map[string]any, error) {
	appState, _, err := s.readScoped(ctx, appStateID(app))
	if err != nil {
		return nil, err
	}
	userState, _, err := s.readScoped(ctx, userStateID(app, user))
	if err != nil {
		return nil, err
	}
	return mergeStates(appState, userState, own), nil
}

// splitState splits a state map into the app's keys, the user's (both
// without their prefix) and the session's own; "temp:" keys go nowhere.
func splitState(m map[string]any) (app, user, own map[string]any) {
	app, user, own = map[string]any{}, map[string]any{}, map[string]any{}
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, session.KeyPrefixApp):
			app[strings.TrimPrefix(k, session.KeyPrefixApp)] = v
		case strings.HasPrefix(k, session.KeyPrefixUser):
			user[strings.TrimPrefix(k, session.KeyPrefixUser)] = v
		case strings.HasPrefix(k, session.KeyPrefixTemp):
		default:
			own[k] = v
		}
	}
	return app, user, own
}

func mergeStates(app, user, own map[string]any) map[string]any {
	m := make(map[string]any, len(app)+len(user)+len(own))
	maps.Copy(m, own)
	for k, v := range app {
		m[session.KeyPrefixApp+k] = v
	}
	for k, v := range user {
		m[session.KeyPrefixUser+k] = v
	}
	return m
}

// trimTemp returns event without its "temp:" state keys (a copy when it
// has any).
func trimTemp(event *session.Event) *session.Event {
	temp := false
	for k := range event.Actions.StateDelta {
		if strings.HasPrefix(k, session.KeyPrefixTemp) {
			temp = true
			break
		}
	}
	if !temp {
		return event
	}
	c := *event
	c.Actions.StateDelta = make(map[string]any, len(event.Actions.StateDelta))
	for k, v := range event.Actions.StateDelta {
		if !strings.HasPrefix(k, session.KeyPrefixTemp) {
			c.Actions.StateDelta[k] = v
		}
	}
	return &c
}

// adkSession is the session.Session a SessionService returns.
type adkSession struct {
	app, user, id string
	// svc is the service that read the session, and version the version
	// of its record then (or after this value's last AppendEvent): an
	// AppendEvent through svc with another version in the store is stale.
	svc *SessionService
	gen string

	mu      sync.RWMutex
	version int64
	state   map[string]any
	events  []*session.Event
	updated time.Time
}

var _ session.Session = (*adkSession)(nil)

func (s *SessionService) newSession(app, user, id string, version int64, gen string, state map[string]any, events []*session.Event, updated time.Time) *adkSession {
	return &adkSession{app: app, user: user, id: id, svc: s, gen: gen, version: version, state: state, events: events, updated: updated}
}

func (s *adkSession) readVersion() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.version
}

func (s *adkSession) setVersion(v int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = v
}

// appended records on the session value an event AppendEvent stored:
// every key of its delta (also "temp:" ones, for the rest of the
// invocation) and the event without its "temp:" keys.
func (s *adkSession) appended(event, stored *session.Event, updated time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		s.state = map[string]any{}
	}
	maps.Copy(s.state, event.Actions.StateDelta)
	s.events = append(s.events, stored)
	s.updated = updated
}

func (s *adkSession) ID() string      { return s.id }
func (s *adkSession) AppName() string { return s.app }
func (s *adkSession) UserID() string  { return s.user }

func (s *adkSession) State() session.State { return sessionState{s} }

func (s *adkSession) Events() session.Events {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return eventList(s.events[:len(s.events):len(s.events)])
}

func (s *adkSession) LastUpdateTime() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.updated
}

type sessionState struct{ s *adkSession }

func (st sessionState) Get(key string) (any, error) {
	st.s.mu.RLock()
	defer st.s.mu.RUnlock()
	v, ok := st.s.state[key]
	if !ok {
		return nil, session.ErrStateKeyNotExist
	}
	return v, nil
}

func (st sessionState) Set(key string, v any) error {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	if st.s.state == nil {
		st.s.state = map[string]any{}
	}
	st.s.state[key] = v
	return nil
}

func (st sessionState) All() iter.Seq2[string, any] {
	st.s.mu.RLock()
	c := maps.Clone(st.s.state)
	st.s.mu.RUnlock()
	return func(yield func(string, any) bool) {
		for k, v := range c {
			if !yield(k, v) {
				return
			}
		}
	}
}

type eventList []*session.Event

func (e eventList) All() iter.Seq[*session.Event] {
	return func(yield func(*session.Event) bool) {
		for _, ev := range e {
			if !yield(ev) {
				return
			}
		}
	}
}

func (e eventList) Len() int { return len(e) }

func (e eventList) At(i int) *session.Event {
	if i < 0 || i >= len(e) {
		return nil
	}
	return e[i]
}
