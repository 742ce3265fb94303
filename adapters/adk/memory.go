package adk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/tokens"
	"github.com/tmc/langchaingo/llms"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/platform"
	"google.golang.org/adk/v2/session"
)

// RecallStateName is the store state in which the MemoryService's Recall
// keeps a durable (vector) index's bookkeeping: its own, not
// memories.RecallStateName, so a memories.Recall of a chain's stack with
// a vector index of its own can share the store and conversations.
const RecallStateName = "adk.recall"

// addedStateName is the state value, on a session's conversation, in
// which a MemoryService records what it has added of the session.
const addedStateName = "adk.memory-added"

// MemoryService is ADK's memory.Service over memstack: AddSessionToMemory
// stores a session's turns in a memstack store as a conversation of the
// user (AppName → tenant, UserID → user, session ID → conversation), and
// SearchMemory is memories.Recall's search across the user's
// conversations, as many entries as a token budget holds, best first.
// See the package documentation.
//
// It is safe for concurrent use, also by several processes over one store.
type MemoryService struct {
	skip     map[string]bool
	recall   *memories.Recall
	st       store.Store
	counter  tokens.Counter
	budget   int
	maxEvent int
}

var _ memory.Service = (*MemoryService)(nil)

// NewMemoryService returns a memory.Service that keeps what sessions said
// in st and searches it with a memories.Recall. Options: WithRecallOptions,
// WithTokenBudget, WithTokenCounter, WithSkipTools, WithMaxEventBytes. st is best a store
// that implements store.Users (every store of memstack does): the Recall
// then searches every conversation of the user, and ForgetUser and
// ExportUser work.
func NewMemoryService(st store.Store, opts ...Option) (*MemoryService, error) {
	if st == nil {
		return nil, errors.New("adk: NewMemoryService: store is nil")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if !c.counterSet {
		if c.counter, err = tokens.CL100K(); err != nil {
			return nil, fmt.Errorf("adk: NewMemoryService: %w", err)
		}
	}
	// The service's own options last: a store or scope among the caller's
	// would split the data from ForgetUser's and ExportUser's, or show a
	// user other users' turns.
	ropts := append(slices.Clone(c.recallOpts), memories.WithStore(st), memories.WithRequireIdentity(),
		memories.WithRecallStateName(RecallStateName))
	if _, ok := st.(store.Users); ok {
		ropts = append(ropts, memories.WithRecallScope(memories.RecallScopeUser))
	}
	recall, err := memories.NewRecall(ropts...)
	if err != nil {
		return nil, fmt.Errorf("adk: NewMemoryService: %w", err)
	}
	skip := map[string]bool{}
	names := c.skipTools
	if names == nil {
		names = DefaultSkipTools
	}
	for _, n := range names {
		skip[n] = true
	}
	return &MemoryService{skip: skip, recall: recall, st: st, counter: c.counter, budget: c.budget, maxEvent: c.maxEvent}, nil
}

// added is what a MemoryService has added of a session, kept as a state
// value on its conversation.
type added struct {
	// Gen is the absent version the record had when it was first
	// written (before anything of the session was stored): a part of
	// every save key, so that after a Clear of the conversation (which
	// removes this record and gives the name a fresh absent version) the
	// session is stored again, even by a store that still remembers the
	// old keys (redisstore, for two minutes).
	Gen int64 `json:"gen"`
	// Keys holds the key (eventKey) of every event added.
	Keys []string `json:"keys"`
}

// authorStatePrefix starts the name of the state value, one per model
// event's time, in which a MemoryService keeps who said the model
// messages of that time: a search reads those of the turns it shows.
const authorStatePrefix = "adk.author."

func authorStateName(at time.Time) string {
	return authorStatePrefix + strconv.FormatInt(at.UnixNano(), 36)
}

// pending is an event of a session with what it adds.
type pending struct {
	ev   *session.Event
	key  string
	msgs []llms.ChatMessage
	// at is the time the messages are stored with: the event's
	// Timestamp, or, for an event without one, the time of the call.
	at time.Time
}

// normalized returns ev as it reads back from JSON (how a SessionService
// stores it): the same event added from the runner's session value and
// later from a Get gives the same messages and the same key.
func normalized(ev *session.Event) (*session.Event, error) {
	data, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	if err := checkNumbers(data); err != nil {
		return nil, err
	}
	out := new(session.Event)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

// eventKey names an (normalized) event by its ID, time and content: two
// events are the same only when all three are (a session deleted and
// created again may reuse IDs; an event edited since it was added is
// added again).
func eventKey(ev *session.Event) (string, error) {
	content, err := json.Marshal(ev.Content)
	if err != nil {
		return "", err
	}
	var generic any // map keys in order, numbers as float64
	if err := json.Unmarshal(content, &generic); err != nil {
		return "", err
	}
	if content, err = json.Marshal(generic); err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(ev.ID))
	h.Write([]byte{0})
	h.Write([]byte(ev.Timestamp.UTC().Format(time.RFC3339Nano)))
	h.Write([]byte{0})
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// messageKey names a message by its content and tool calls: how a search
// finds its author among those of its time.
func messageKey(msg llms.ChatMessage) string {
	h := sha256.New()
	h.Write([]byte(msg.GetContent()))
	if ai, ok := msg.(llms.AIChatMessage); ok {
		for _, tc := range ai.ToolCalls {
			h.Write([]byte{0})
			h.Write([]byte(tc.ID))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// AddSessionToMemory stores the turns of s's events that carry text (see
// the package documentation for which messages an event gives), at the
// events' own times, in the conversation {AppName, UserID, ID} of the
// MemoryService's store, and indexes them.
//
// It may be called any number of times per session, with the whole
// session, a longer version of it or a window of it (Get with
// NumRecentEvents): it stores each event once, in the order it first sees
// them. It keeps the keys of the events it added (a state value on the
// conversation: each event's ID, time and content, as the event reads
// back from JSON) and adds the others; each message is also stored under
// a save key made of its event's key (memstack.WithSaveKey), so two
// concurrent adds of one session, or one retried after an error, store it
// once too. After a Clear of the conversation the session is added again
// whole. An add reads and writes that record whole: its cost grows with
// the number of events added, like the session it is given.
//
// Every event is checked before anything is stored: an event with text
// but no ID, a value that would not read back from JSON as given (see
// SessionService.AppendEvent), or more than WithMaxEventBytes of text is
// an error wrapping ErrInvalidEvent that names the event, and nothing of
// the call is stored (nothing stored before is touched).
func (m *MemoryService) AddSessionToMemory(ctx context.Context, s session.Session) error {
	if s == nil {
		return errors.New("adk: AddSessionToMemory: session is nil")
	}
	app, user, sid := s.AppName(), s.UserID(), s.ID()
	if err := checkNames("AddSessionToMemory", app, user, sid, true); err != nil {
		return err
	}
	id := memstack.Identity{Tenant: app, User: user, Conversation: sid}
	if storekit.Derived(id) {
		return fmt.Errorf("adk: AddSessionToMemory: session ID %q starts with a NUL byte, reserved for memstack's derived data", sid)
	}
	var items []pending
	callTime := platform.Now(ctx)
	if evs := s.Events(); evs != nil {
		i := -1
		for ev := range evs.All() {
			i++
			if ev == nil || ev.Partial {
				continue
			}
			bad := func(err error) error {
				return fmt.Errorf("%w: session %q: event %d (ID %q): %w", ErrInvalidEvent, sid, i, ev.ID, err)
			}
			if err := checkValue(ev); err != nil {
				return bad(err)
			}
			norm, err := normalized(ev)
			if err != nil {
				return bad(err)
			}
			msgs, size, err := eventMessages(norm, m.skip)
			if err != nil {
				return bad(err)
			}
			if size > m.maxEvent {
				return fmt.Errorf("%w: session %q: event %d (ID %q) holds %d bytes of text, more than %d (WithMaxEventBytes)", ErrInvalidEvent, sid, i, ev.ID, size, m.maxEvent)
			}
			if len(msgs) == 0 {
				continue
			}
			if ev.ID == "" {
				return fmt.Errorf("%w: session %q: event %d has text but no ID: adding a session again needs its events' IDs", ErrInvalidEvent, sid, i)
			}
			key, err := eventKey(norm)
			if err != nil {
				return bad(err)
			}
			at := norm.Timestamp
			if at.IsZero() {
				at = callTime
			}
			items = append(items, pending{ev: norm, key: key, msgs: msgs, at: at})
		}
	}
	if len(items) == 0 {
		return nil
	}
	sctx := memstack.WithIdentity(ctx, id)
	fail := func(what string, err error) error {
		return fmt.Errorf("adk: AddSessionToMemory: session %q: %s: %w", sid, what, err)
	}
	// storedGen[key] is the generation this call stored an event under.
	storedGen := map[string]int64{}
	for tries := 0; ; tries++ {
		if tries == 16 {
			return fail("recording what was added", errors.New("too many concurrent changes of the record"))
		}
		st, err := m.st.GetState(ctx, id, addedStateName)
		if err != nil {
			return fail("reading what was added", err)
		}
		var done added
		if st.Exists() {
			if err := json.Unmarshal(st.Value, &done); err != nil {
				return fail("its record does not decode", fmt.Errorf("%w (%w)", err, store.ErrCorrupt))
			}
		} else {
			// The record first, with its generation, before anything is
			// stored under it.
			done = added{Gen: st.Version, Keys: []string{}}
			data, _ := json.Marshal(done)
			if _, err := m.st.PutState(ctx, id, addedStateName, data, st.Version); err != nil && !errors.Is(err, store.ErrConflict) {
				return fail("recording what was added", err)
			}
			continue // read it back, with its version
		}
		have := make(map[string]bool, len(done.Keys))
		for _, k := range done.Keys {
			have[k] = true
		}
		var todo []pending
		for _, it := range items {
			if !have[it.key] {
				have[it.key] = true // an event given twice is added once
				todo = append(todo, it)
			}
		}
		if len(todo) == 0 {
			return nil
		}
		// Events this call stored under an older generation (a Clear ran
		// since) may be stored after the Clear: those the conversation
		// holds are not stored again.
		if staleIn(todo, storedGen, done.Gen) {
			if todo, err = m.notStored(ctx, id, todo, storedGen, done.Gen, &done); err != nil {
				return fail("reading the conversation", err)
			}
		}
		for _, it := range todo {
			if err := m.store(sctx, done.Gen, it); err != nil {
				return fail(fmt.Sprintf("event %q", it.ev.ID), err)
			}
			storedGen[it.key] = done.Gen
			if err := m.noteAuthor(ctx, id, it); err != nil {
				return fail(fmt.Sprintf("recording who said event %q", it.ev.ID), err)
			}
			done.Keys = append(done.Keys, it.key)
		}
		data, err := json.Marshal(done)
		if err != nil {
			return fail("recording what was added", err)
		}
		_, err = m.st.PutState(ctx, id, addedStateName, data, st.Version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return fail("its turns are stored, recording them failed (add the session again)", err)
		}
		// Another add of the session recorded first (or a Clear ran):
		// see what it took.
	}
}

// staleIn reports whether an event of todo was stored by this call under
// another generation than gen.
func staleIn(todo []pending, storedGen map[string]int64, gen int64) bool {
	for _, it := range todo {
		if g, ok := storedGen[it.key]; ok && g != gen {
			return true
		}
	}
	return false
}

// notStored returns the events of todo to store under generation gen:
// an event this call stored under an older generation whose messages the
// conversation holds (stored after the Clear that began gen) is recorded
// in done, not stored again.
func (m *MemoryService) notStored(ctx context.Context, id memstack.Identity, todo []pending, storedGen map[string]int64, gen int64, done *added) ([]pending, error) {
	recs, err := m.st.All(ctx, id)
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, r := range recs {
		count[messageIdentity(r.Message, r.Time)]++
	}
	var out []pending
	for _, it := range todo {
		if g, ok := storedGen[it.key]; ok && g != gen {
			present := true
			for _, msg := range it.msgs {
				if count[messageIdentity(msg, it.at)] == 0 {
					present = false
				}
			}
			if present {
				for _, msg := range it.msgs {
					count[messageIdentity(msg, it.at)]--
				}
				done.Keys = append(done.Keys, it.key)
				continue
			}
		}
		out = append(out, it)
	}
	return out, nil
}

// messageIdentity is a message's type, content (with its tool calls'
// IDs) and stored time: what tells this call's messages from another
// writer's that say the same.
func messageIdentity(msg llms.ChatMessage, at time.Time) string {
	return string(msg.GetType()) + "\x00" + messageKey(msg) + "\x00" + strconv.FormatInt(at.UnixNano(), 36)
}

// noteAuthor records who said an event's model messages, under the
// event's time (one small state value per time).
func (m *MemoryService) noteAuthor(ctx context.Context, id memstack.Identity, it pending) error {
	author := it.ev.Author
	if author == "" || author == "user" {
		return nil
	}
	var keys []string
	for _, msg := range it.msgs {
		if msg.GetType() == llms.ChatMessageTypeAI {
			keys = append(keys, messageKey(msg))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	name := authorStateName(it.at)
	for {
		st, err := m.st.GetState(ctx, id, name)
		if err != nil {
			return err
		}
		authors := map[string]string{}
		if st.Exists() {
			_ = json.Unmarshal(st.Value, &authors) // a damaged value is written anew
		}
		changed := false
		for _, k := range keys {
			if authors[k] != author {
				authors[k], changed = author, true
			}
		}
		if !changed {
			return nil
		}
		data, err := json.Marshal(authors)
		if err != nil {
			return err
		}
		if _, err = m.st.PutState(ctx, id, name, data, st.Version); !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
}

// store adds an event's messages, each under a save key made of the
// record's generation, the event's key and the message's place in it, at
// the event's time.
func (m *MemoryService) store(ctx context.Context, gen int64, it pending) error {
	ctx = memstack.WithTime(ctx, it.at)
	key := "adk-memory:" + strconv.FormatInt(gen, 36) + ":" + it.key
	for j, msg := range it.msgs {
		if err := m.recall.AddMessage(memstack.WithSaveKey(ctx, key+":"+strconv.Itoa(j)), msg); err != nil {
			return err
		}
	}
	return nil
}

// SearchMemory returns the past turns of req.UserID in req.AppName most
// relevant to req.Query, from every session added to memory, best first,
// as many as WithTokenBudget holds, each counted as JSON (an entry that
// does not fit is left out and the next, smaller one may be taken). Each
// entry is one turn (a user message, or a model message with the tool
// calls and results that follow it): ID "session/Seq", Content of role
// "user" or "model", Author "user" or the agent whose event it was
// ("model" when that is not known: a turn stored by something other than
// a MemoryService), Timestamp the event's, and CustomMetadata
// "session_id", "seq" and "score". With
// WithRecallOptions(memories.WithRecallUnit(memories.RecallExchanges)) an
// entry is an exchange, which starts with the user's message: its Author
// is "user". Other users' and other apps' turns are never returned. An
// empty query finds nothing.
func (m *MemoryService) SearchMemory(ctx context.Context, req *memory.SearchRequest) (*memory.SearchResponse, error) {
	if req == nil {
		return nil, errors.New("adk: SearchMemory: request is nil")
	}
	if err := checkNames("SearchMemory", req.AppName, req.UserID, "", false); err != nil {
		return nil, err
	}
	resp := &memory.SearchResponse{Memories: []memory.Entry{}}
	if strings.TrimSpace(req.Query) == "" {
		return resp, nil
	}
	sctx := memstack.WithIdentity(ctx, memstack.Identity{Tenant: req.AppName, User: req.UserID})
	matches, err := m.recall.Search(sctx, req.Query)
	if err != nil {
		return nil, fmt.Errorf("adk: SearchMemory: user %q of app %q: %w", req.UserID, req.AppName, err)
	}
	authors := map[authorAt]map[string]string{}
	used := 0
	for _, mt := range matches {
		content := unitContent(mt.Messages)
		if len(content.Parts) == 0 {
			continue
		}
		entry := memory.Entry{
			ID:        mt.Conversation.Conversation + "/" + strconv.FormatInt(mt.Seq, 10),
			Content:   content,
			Timestamp: mt.Time,
			CustomMetadata: map[string]any{
				"session_id": mt.Conversation.Conversation,
				"seq":        mt.Seq,
				"score":      mt.Score,
			},
		}
		// Counted as JSON, what loadmemorytool hands the model: first
		// without the author, whose lookup only an entry that may fit
		// pays for.
		n, err := m.countEntry(entry)
		if err != nil {
			return nil, err
		}
		if used+n > m.budget {
			continue
		}
		entry.Author = "user"
		if content.Role != "user" {
			if entry.Author, err = m.authorOf(ctx, mt, authors); err != nil {
				return nil, err
			}
		}
		if n, err = m.countEntry(entry); err != nil {
			return nil, err
		}
		if used+n > m.budget {
			continue
		}
		used += n
		resp.Memories = append(resp.Memories, entry)
	}
	return resp, nil
}

// countEntry counts an entry's tokens as JSON.
func (m *MemoryService) countEntry(e memory.Entry) (int, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return 0, fmt.Errorf("adk: SearchMemory: entry %s: %w", e.ID, err)
	}
	n, err := tokens.Count(m.counter, string(data))
	if err != nil {
		return 0, fmt.Errorf("adk: SearchMemory: %w", err)
	}
	return n, nil
}

// authorAt names the authors of one time of one conversation.
type authorAt struct {
	id memstack.Identity
	at int64
}

// authorOf returns who said a model turn: the author recorded for its
// first model message at its time, else "model" (a turn stored by
// another writer than a MemoryService, or before authors were kept).
func (m *MemoryService) authorOf(ctx context.Context, mt memories.RecallMatch, seen map[authorAt]map[string]string) (string, error) {
	var first llms.ChatMessage
	for _, msg := range mt.Messages {
		if msg.GetType() == llms.ChatMessageTypeAI {
			first = msg
			break
		}
	}
	if first == nil || mt.Time.IsZero() {
		return "model", nil
	}
	k := authorAt{mt.Conversation, mt.Time.UnixNano()}
	authors, ok := seen[k]
	if !ok {
		st, err := m.st.GetState(ctx, mt.Conversation, authorStateName(mt.Time))
		if err != nil {
			return "", fmt.Errorf("adk: SearchMemory: session %q: %w", mt.Conversation.Conversation, err)
		}
		if st.Exists() {
			_ = json.Unmarshal(st.Value, &authors) // a damaged value costs the author only: "model"
		}
		seen[k] = authors
	}
	if who, ok := authors[messageKey(first)]; ok {
		return who, nil
	}
	return "model", nil
}

// ForgetUser removes everything the store holds for userID in appName:
// every conversation a MemoryService added, with its index entries and
// vectors (through the Recall's Clear), then every identity of the user
// (store.Users.ForgetScope): the sessions and user state of a
// SessionService on the same store too. It returns how many identities
// it removed. It needs a store that implements store.Users.
func (m *MemoryService) ForgetUser(ctx context.Context, appName, userID string) (int, error) {
	if err := checkNames("ForgetUser", appName, userID, "", false); err != nil {
		return 0, err
	}
	users, ok := m.st.(store.Users)
	if !ok {
		return 0, fmt.Errorf("adk: ForgetUser: store %T does not implement store.Users", m.st)
	}
	scope := store.UserScope(appName, userID)
	ids, err := users.Identities(ctx, scope)
	if err != nil {
		return 0, fmt.Errorf("adk: ForgetUser: %w", err)
	}
	for _, id := range ids {
		if storekit.Derived(id) {
			continue
		}
		if err := m.recall.Clear(memstack.WithIdentity(ctx, id)); err != nil {
			return 0, fmt.Errorf("adk: ForgetUser: clearing session %q: %w", id.Conversation, err)
		}
	}
	n, err := users.ForgetScope(ctx, scope)
	if err != nil {
		return n, fmt.Errorf("adk: ForgetUser: %w", err)
	}
	return n, nil
}

// ExportUser returns everything the store holds for userID in appName
// (store.Users.Export): the conversations a MemoryService added, and the
// sessions and user state of a SessionService on the same store.
func (m *MemoryService) ExportUser(ctx context.Context, appName, userID string) (store.Export, error) {
	if err := checkNames("ExportUser", appName, userID, "", false); err != nil {
		return store.Export{}, err
	}
	users, ok := m.st.(store.Users)
	if !ok {
		return store.Export{}, fmt.Errorf("adk: ExportUser: store %T does not implement store.Users", m.st)
	}
	e, err := users.Export(ctx, store.UserScope(appName, userID))
	if err != nil {
		return store.Export{}, fmt.Errorf("adk: ExportUser: %w", err)
	}
	return e, nil
}
