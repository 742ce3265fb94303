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
	"google.golang.org/adk/v2/session"
)

type (
	recallOption = memories.RecallOption
	tokenCounter = tokens.Counter
)

// DefaultTokenBudget is how many tokens of entries SearchMemory returns at
// most, unless WithTokenBudget says otherwise.
const DefaultTokenBudget = 2000

// addedStateName is the state value, on a session's conversation, in
// which a MemoryService records what it has added of the session.
const addedStateName = "adk.memory-added"

// WithRecallOptions configures the memories.Recall a MemoryService
// searches with: WithHybrid or WithVector for vector or hybrid retrieval
// (BM25 by default), WithK, WithThreshold, WithNeighbourShare,
// WithRecallUnit, WithCacheSize... The service sets, after these, the
// store it was given, RecallScopeUser and WithRequireIdentity: a
// WithStore or WithRecallScope among them has no effect (another store
// would hide the turns from ForgetUser and ExportUser; a tenant scope
// would show a user other users' turns).
func WithRecallOptions(opts ...memories.RecallOption) Option {
	return func(c *config) { c.recallOpts = append(c.recallOpts, opts...) }
}

// WithTokenBudget sets how many tokens the entries SearchMemory returns
// may hold together (default DefaultTokenBudget), counted with the
// WithTokenCounter counter. n < 1 is an error.
func WithTokenBudget(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.problems = append(c.problems, fmt.Sprintf("WithTokenBudget(%d): the budget must be at least 1", n))
			return
		}
		c.budget = n
	}
}

// WithTokenCounter sets how a MemoryService counts an entry's tokens
// against WithTokenBudget (default tokens.CL100K, OpenAI's cl100k_base;
// pass the counter of the model the agent uses).
func WithTokenCounter(counter tokens.Counter) Option {
	return func(c *config) {
		if counter == nil {
			c.problems = append(c.problems, "WithTokenCounter(nil): the counter is nil")
			return
		}
		c.counter, c.counterSet = counter, true
	}
}

// MemoryService is ADK's memory.Service over memstack: AddSessionToMemory
// stores a session's turns in a memstack store as a conversation of the
// user (AppName → tenant, UserID → user, session ID → conversation), and
// SearchMemory is memories.Recall's search across the user's
// conversations, as many entries as a token budget holds, best first.
// See the package documentation.
//
// It is safe for concurrent use, also by several processes over one store.
type MemoryService struct {
	recall   *memories.Recall
	st       store.Store
	counter  tokens.Counter
	budget   int
	maxEvent int
}

var _ memory.Service = (*MemoryService)(nil)

// NewMemoryService returns a memory.Service that keeps what sessions said
// in st and searches it with a memories.Recall. Options: WithRecallOptions,
// WithTokenBudget, WithTokenCounter, WithMaxEventBytes. st is best a store
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
	ropts := append(slices.Clone(c.recallOpts), memories.WithStore(st), memories.WithRequireIdentity())
	if _, ok := st.(store.Users); ok {
		ropts = append(ropts, memories.WithRecallScope(memories.RecallScopeUser))
	}
	recall, err := memories.NewRecall(ropts...)
	if err != nil {
		return nil, fmt.Errorf("adk: NewMemoryService: %w", err)
	}
	return &MemoryService{recall: recall, st: st, counter: c.counter, budget: c.budget, maxEvent: c.maxEvent}, nil
}

// added is what a MemoryService has added of a session, kept as a state
// value on its conversation.
type added struct {
	// Gen is the absent version the record had when it was first
	// written: a part of every save key, so that after a Clear of the
	// conversation (which removes this record and gives the name a fresh
	// absent version) the session is stored again, even by a store that
	// still remembers the old keys (redisstore, for two minutes).
	Gen int64 `json:"gen"`
	// Keys holds the key (eventKey) of every event added.
	Keys []string `json:"keys"`
	// Agent is the author of the first model turn added; Authors maps the
	// key of a model message (messageKey) to its author when another
	// agent said it.
	Agent   string            `json:"agent,omitempty"`
	Authors map[string]string `json:"authors,omitempty"`
}

// pending is an event of a session with what it adds.
type pending struct {
	ev   *session.Event
	key  string
	msgs []llms.ChatMessage
}

// eventKey names an event by its ID, time and content: two events are the
// same only when all three are (a session deleted and created again may
// reuse IDs; an event edited since it was added is added again).
func eventKey(ev *session.Event) (string, error) {
	content, err := json.Marshal(ev.Content)
	if err != nil {
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

// messageKey names a model message by its content and tool calls: how a
// search finds its author.
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
// conversation: an event's ID, time and content) and adds the others;
// each message is also stored under a save key made of its event's key
// (memstack.WithSaveKey), so two concurrent adds of one session, or one
// retried after an error, store it once too. After a Clear of the
// conversation the session is added again whole.
//
// Every event is checked before anything is stored: an event with text
// but no ID, a string that is not UTF-8, or more than WithMaxEventBytes
// of text is an error wrapping ErrInvalidEvent that names the event, and
// nothing of the call is stored (nothing stored before is touched).
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
	if evs := s.Events(); evs != nil {
		i := -1
		for ev := range evs.All() {
			i++
			if ev == nil || ev.Partial {
				continue
			}
			if err := checkUTF8(ev); err != nil {
				return fmt.Errorf("%w: session %q: event %d (ID %q): %w", ErrInvalidEvent, sid, i, ev.ID, err)
			}
			msgs, size, err := eventMessages(ev)
			if err != nil {
				return fmt.Errorf("%w: session %q: event %d (ID %q): %w", ErrInvalidEvent, sid, i, ev.ID, err)
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
			key, err := eventKey(ev)
			if err != nil {
				return fmt.Errorf("%w: session %q: event %d (ID %q): %w", ErrInvalidEvent, sid, i, ev.ID, err)
			}
			items = append(items, pending{ev: ev, key: key, msgs: msgs})
		}
	}
	sctx := memstack.WithIdentity(ctx, id)
	for tries := 0; ; tries++ {
		st, err := m.st.GetState(ctx, id, addedStateName)
		if err != nil {
			return fmt.Errorf("adk: AddSessionToMemory: session %q: %w", sid, err)
		}
		done := added{Gen: st.Version}
		if st.Exists() {
			if err := json.Unmarshal(st.Value, &done); err != nil {
				return fmt.Errorf("adk: AddSessionToMemory: session %q: its record does not decode: %w (%w)", sid, err, store.ErrCorrupt)
			}
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
		for _, it := range todo {
			if err := m.store(sctx, done.Gen, it); err != nil {
				return fmt.Errorf("adk: AddSessionToMemory: session %q: event %q: %w", sid, it.ev.ID, err)
			}
			done.Keys = append(done.Keys, it.key)
			done.noteAuthor(it)
		}
		data, err := json.Marshal(done)
		if err != nil {
			return fmt.Errorf("adk: AddSessionToMemory: session %q: %w", sid, err)
		}
		_, err = m.st.PutState(ctx, id, addedStateName, data, st.Version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || tries == 8 {
			return fmt.Errorf("adk: AddSessionToMemory: session %q: its turns are stored, recording them failed (add the session again): %w", sid, err)
		}
		// Another add of the session recorded first (or a Clear ran):
		// see what it took.
	}
}

// noteAuthor records who said an event's model messages.
func (a *added) noteAuthor(it pending) {
	author := it.ev.Author
	if author == "" || author == "user" {
		return
	}
	for _, msg := range it.msgs {
		if msg.GetType() != llms.ChatMessageTypeAI {
			continue
		}
		switch {
		case a.Agent == "":
			a.Agent = author
		case author != a.Agent:
			if a.Authors == nil {
				a.Authors = map[string]string{}
			}
			a.Authors[messageKey(msg)] = author
		}
	}
}

// authorOf returns who said a model turn: the author recorded for its
// first model message, else the session's agent, else "model".
func (a added) authorOf(msgs []llms.ChatMessage) string {
	for _, msg := range msgs {
		if msg.GetType() == llms.ChatMessageTypeAI {
			if who, ok := a.Authors[messageKey(msg)]; ok {
				return who
			}
			break
		}
	}
	if a.Agent != "" {
		return a.Agent
	}
	return "model"
}

// store adds an event's messages, each under a save key made of the
// record's generation, the event's key and the message's place in it, at
// the event's time.
func (m *MemoryService) store(ctx context.Context, gen int64, it pending) error {
	if !it.ev.Timestamp.IsZero() {
		ctx = memstack.WithTime(ctx, it.ev.Timestamp)
	}
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
// as many as WithTokenBudget holds (an entry that does not fit is left out
// and the next, smaller one may be taken). Each entry is one turn (a user
// message, or a model message with the tool calls and results that follow
// it): ID "session/Seq", Content of role "user" or "model", Author "user"
// or the agent whose event it was ("model" when that is not known: a turn
// stored by something other than a MemoryService), Timestamp the event's, and CustomMetadata "session_id", "seq" and "score". Other
// users' and other apps' turns are never returned. An empty query finds
// nothing.
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
	records := map[memstack.Identity]added{}
	used := 0
	for _, mt := range matches {
		content := unitContent(mt.Messages)
		if len(content.Parts) == 0 {
			continue
		}
		n, err := tokens.Count(m.counter, contentText(content))
		if err != nil {
			return nil, fmt.Errorf("adk: SearchMemory: %w", err)
		}
		if used+n > m.budget {
			continue
		}
		used += n
		author := "user"
		if content.Role != "user" {
			rec, err := m.recordOf(ctx, mt.Conversation, records)
			if err != nil {
				return nil, err
			}
			author = rec.authorOf(mt.Messages)
		}
		resp.Memories = append(resp.Memories, memory.Entry{
			ID:        mt.Conversation.Conversation + "/" + strconv.FormatInt(mt.Seq, 10),
			Content:   content,
			Author:    author,
			Timestamp: mt.Time,
			CustomMetadata: map[string]any{
				"session_id": mt.Conversation.Conversation,
				"seq":        mt.Seq,
				"score":      mt.Score,
			},
		})
	}
	return resp, nil
}

// recordOf returns what was added of a session (for its authors), read
// once per search.
func (m *MemoryService) recordOf(ctx context.Context, id memstack.Identity, seen map[memstack.Identity]added) (added, error) {
	if a, ok := seen[id]; ok {
		return a, nil
	}
	st, err := m.st.GetState(ctx, id, addedStateName)
	if err != nil {
		return added{}, fmt.Errorf("adk: SearchMemory: session %q: %w", id.Conversation, err)
	}
	var a added
	if st.Exists() {
		_ = json.Unmarshal(st.Value, &a) // a damaged record costs the authors only: "model"
	}
	seen[id] = a
	return a, nil
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
