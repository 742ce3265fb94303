package memories

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/memories/internal/factsengine"
	"github.com/memstack/memstack/memories/internal/worker"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/tokens"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// Defaults and names of the Facts memory.
const (
	// DefaultFactsMemoryKey is the variable a Facts memory loads unless
	// WithMemoryKey sets another.
	DefaultFactsMemoryKey = "facts"
	// FactsStateName is the name of the store state (store.States) in
	// which a Facts memory keeps each identity's facts, as JSON.
	FactsStateName = "facts"
	// FactsHeader heads the system message a Facts memory loads in
	// messages mode (WithReturnMessages); string mode has no header, the
	// prompt template says what the lines are.
	FactsHeader = "Known facts:"

	DefaultMaxPerTurn = 5
	DefaultMaxFacts   = 20
	DefaultFactTokens = 300
)

// Fact is one fact a Facts memory knows about a conversation (or, with
// WithFactsPerUser, a user): a value for a key during a span of time.
type Fact struct {
	// Key is Subject and Attribute joined by a space ("user name"); a new
	// value for the same key supersedes the current one.
	Key string `json:"key"`
	// Subject and Attribute are the key's parts, normalized (see
	// extract.Normalize).
	Subject   string `json:"subject"`
	Attribute string `json:"attribute"`
	// Value is the fact's value.
	Value string `json:"value"`
	// Sources are the Seqs (store.Record.Seq) of the messages the fact
	// came from, in the conversation Conversation.
	Sources []int64 `json:"sources,omitempty"`
	// Conversation is the Conversation part of the identity whose
	// messages the fact came from.
	Conversation string `json:"conversation,omitempty"`
	// Rule names what found the fact (extract.Candidate.Rule).
	Rule string `json:"rule,omitempty"`
	// ValidFrom is when the fact became valid: the time of the messages
	// it came from (store.Record.Time, the newest of its sources — the
	// time the caller gave with memstack.WithTime, else when the Facts
	// memory saved them, by its WithClock clock), or the clock at
	// extraction for messages stored without a time. ValidTo is when a
	// newer value superseded it — the ValidFrom of that value, never
	// before this ValidFrom — and zero while the fact is current. Both
	// keep the location of the time they come from (UTC for the clock's).
	ValidFrom time.Time `json:"valid_from"`
	ValidTo   time.Time `json:"valid_to,omitzero"`
}

// Current reports whether no newer value has superseded the fact.
func (f Fact) Current() bool { return f.ValidTo.IsZero() }

// Line renders the fact as a Facts memory shows it, as in
// "- user name: Ana (since 2026-11-30)": "- ", the subject, the
// attribute, ": ", the value and the date it became valid, in ValidFrom's
// own location: UTC for a fact dated by the clock, the caller's for one
// whose messages were dated with memstack.WithTime, so a history replayed
// at its turns' times shows the dates they were said. An attribute
// "category:topic" whose topic the value already contains is shown as its
// category alone, so the line stays short: "- user preference: loves
// hiking (since ...)" for the key "user preference:hiking".
func (f Fact) Line() string {
	attr := f.Attribute
	if i := strings.IndexByte(attr, ':'); i > 0 && strings.Contains(strings.ToLower(f.Value), attr[i+1:]) {
		attr = attr[:i]
	}
	return "- " + f.Subject + " " + attr + ": " + f.Value + " (since " + f.ValidFrom.Format(time.DateOnly) + ")"
}

// FactsEvent describes one extraction attempt of a Facts memory (one turn
// of one identity); the hook set with WithFactsHook receives one per
// attempt.
type FactsEvent struct {
	// IdentityHash is memstack.Identity.Hash of the conversation (its
	// KeyedHash with WithHashKey).
	IdentityHash string
	// Messages is the number of messages given to the extractor.
	Messages int
	// Candidates is the number of candidates the extractor returned.
	Candidates int
	// Stored is the number of facts recorded (new keys and new values);
	// Superseded the number of facts they superseded.
	Stored, Superseded int
	// Dropped is the number of candidates left out: over WithMaxPerTurn,
	// invalid (a blank or overlong field), or restated later in the same
	// turn.
	Dropped int
	// Duration is how long the extractor took.
	Duration time.Duration
	// Err is nil when the facts were committed. Otherwise nothing was
	// recorded for the turn: Err wraps the extractor's error (errors.Is
	// finds extract.ErrMalformed, context.DeadlineExceeded after
	// WithExtractTimeout, the model's error...) or a store error.
	Err error
}

// FactsStats counts a Facts memory's extraction work since it was built,
// over all identities.
type FactsStats struct {
	// Extractions is the number of extractor calls made.
	Extractions int64
	// Failures is the number of extractions that failed or whose facts
	// could not be stored.
	Failures int64
	// FactsStored is the number of facts recorded; Superseded the number
	// of facts they superseded.
	FactsStored int64
	Superseded  int64
}

// Facts remembers durable facts about a conversation — the user's name,
// location, job, preferences, the decisions taken — and shows the current
// ones to the model. It implements schema.Memory; its variable ("facts" by
// default) holds lines such as
//
//	// string mode, most recent first:
//	- we decision: go with Postgres (since 2026-12-02)
//	- user location: Porto (since 2026-12-02)
//	- user name: Ana (since 2026-11-30)
//
// (see Fact.Line) in string mode, and in messages mode one
// llms.SystemChatMessage with FactsHeader, a line break and those lines (no
// message when there are no facts).
//
// # Extraction
//
// Every saved turn is stored in the memory's store (WithStore) and then
// given to the extractor (extract.Patterns needs no model; extract.LLM asks
// one). A turn is a human message and the messages after it up to the next
// human message; the extractor gets its human and AI messages with
// non-blank content (system and tool messages are never read). At most
// WithMaxPerTurn (default 5) of the candidates it returns are kept, in the
// order returned; a key stated twice in one turn keeps its last value.
// Each fact records the Seqs of the messages it came from (the candidate's
// sources; all of the turn's messages when it names none) and the time it
// became valid: the time of those messages (the newest of them).
//
// What has been extracted is tracked by Seq, in the state: the extractor
// reads the messages after the last one it covered, so in background mode
// turns that piled up are extracted one by one, in order, and a message
// stored with AddMessage is extracted when it is stored.
//
// # Time
//
// A message's time is the time of its save: the time the caller gave with
// memstack.WithTime, else the WithClock clock (time.Now by default, in
// UTC) when SaveContext or AddMessage stored it. A fact is valid from the
// time of its messages, and a fact it supersedes ends at that time, so a
// history imported or replayed turn by turn under memstack.WithTime dates
// its facts when they were said, not when they were replayed:
//
//	ctx = memstack.WithTime(ctx, turn.At) // 2023-05-08
//	facts.SaveContext(ctx, inputs, outputs)
//	// loads "- user name: Ana (since 2023-05-08)"
//
// Messages stored without a time (before memstack recorded times, or in a
// store.FromHistory store) date their facts with the clock at extraction.
// Messages another memory saved to the same store carry that save's time.
//
// # Supersession
//
// A fact's key is its subject and attribute. A new value for a key ends the
// current fact (its ValidTo is set to the new value's ValidFrom) and starts
// a new one; the old fact is kept, never deleted, and History returns it.
// Restating the current value (same value up to case and spacing) changes
// nothing.
//
// # Loading
//
// A load shows the current facts, most recent first (by ValidFrom; facts
// of one turn in reverse order of extraction), as many as fit both
// WithMaxFacts (default 20) and WithFactTokens (default 300 tokens,
// counted with WithTokenCounter's counter, cl100k by default, each line
// plus its line break, the header too in messages mode): it stops at the
// first fact that does not fit. It reports on the context's
// observe.Recorder the facts shown (Injected, kind "fact", ID the key,
// Time its ValidFrom) and those left out (Dropped, observe.ReasonBudget);
// superseded facts are not items. A load never calls the extractor. Facts also implements
// layer.Itemizer, so a combined.Memory's token budget drops the oldest
// facts first.
//
// # Storage
//
// Each identity's facts, and the Seq extraction covered, are one JSON value
// in the store's state under FactsStateName, updated with compare-and-set
// (retried on store.ErrConflict), so every backend persists them, two
// processes sharing a store never lose each other's facts, and a new Facts
// over the same store resumes where the last one stopped. The messages are
// kept too (they are the facts' sources): Facts never removes messages,
// and it may share its store with the other layers of a stack (package
// memories, Storage), as long as no other Facts keeps its state there.
// The history is never pruned; its size grows with the number of distinct
// values learnt.
//
// With WithFactsPerUser the facts are kept for the Tenant and User of the
// identity, shared by all their conversations (the messages still by
// conversation), so a user coming back in a new conversation is
// remembered.
//
// # Failures
//
// Extraction failures are never returned by SaveContext or AddMessage:
// the turn is stored, nothing is recorded for it, and the failure goes to
// the WithFactsHook hook and Stats. That holds for an extractor error, a
// malformed model answer (extract.ErrMalformed), a timeout
// (WithExtractTimeout), a panicking extractor, and a store error while
// committing facts; a failed turn is not retried, except when the
// extraction was cancelled (Close, Clear, or the caller's context in
// synchronous mode), which leaves the turn for the next extraction. Only
// errors that prevent storing the turn itself are returned.
//
// # Background mode
//
// With WithBackground(true) SaveContext and AddMessage store the message
// and return; extraction runs in a goroutine, at most one per identity at
// a time in this Facts value. Flush waits for pending work; Close cancels
// it and waits for it to stop. A background extraction's model calls are
// counted in the identity's next observed save or load (observe
// Report.LLMCalls): the report of the save that started it was delivered
// before they were made. Those counts are kept for at most 65,536
// identities at a time (beyond that a count is not kept) and dropped by
// Close. Apart from them, a Facts memory keeps nothing per identity once
// the identity's save or background work is done (it has no retry
// backoff: a failed turn is not retried). In synchronous mode the caller
// extracts, again at most one at a time per identity: a save that finds
// another extraction of its identity running leaves its turn to that one.
//
// Facts is safe for concurrent use.
type Facts struct {
	base
	ext        extract.Extractor
	maxPerTurn int
	maxFacts   int
	maxTokens  int
	counter    tokens.Counter
	clock      func() time.Time
	hook       func(FactsEvent)
	perUser    bool
	eng        *factsengine.Engine // the mechanism: extraction, and the facts in the store's state

	// pool runs the extractions: one at a time per identity, on the
	// caller's goroutine or in a background worker per identity.
	pool *worker.Pool[identity]

	mu       sync.Mutex
	laterLLM map[identity]int // background model calls not reported yet
}

var (
	_ schema.Memory  = (*Facts)(nil)
	_ fmt.Stringer   = (*Facts)(nil)
	_ layer.Itemizer = (*Facts)(nil)
)

// errFactsClosed is what a closed Facts returns; errors.Is finds ErrClosed.
type errFactsClosed struct{}

func (errFactsClosed) Error() string        { return "memories: the facts memory is closed" }
func (errFactsClosed) Is(target error) bool { return target == ErrClosed }

// WithMaxPerTurn sets how many facts a Facts memory keeps from one turn
// (default 5). n < 1 is an error.
func WithMaxPerTurn(n int) FactsOption {
	return factsCount("WithMaxPerTurn", n, func(s *factsSettings) { s.maxPerTurn = n })
}

// WithMaxFacts sets how many facts a Facts memory shows at most (default
// 20). n < 1 is an error.
func WithMaxFacts(n int) FactsOption {
	return factsCount("WithMaxFacts", n, func(s *factsSettings) { s.maxFacts = n })
}

// WithFactTokens sets how many tokens the facts a Facts memory shows may
// take at most (default 300), counted with WithTokenCounter's counter.
// n < 1 is an error.
func WithFactTokens(n int) FactsOption {
	return factsCount("WithFactTokens", n, func(s *factsSettings) { s.tokens = n })
}

// WithClock sets the clock a Facts memory dates, in UTC, the messages it
// saves without memstack.WithTime — and so the facts extracted from them —
// and the facts from messages stored without a time (default time.Now);
// tests use it for reproducible ValidFrom and ValidTo. A nil clock is an
// error.
func WithClock(now func() time.Time) FactsOption {
	return factsOpt(func(c *config) {
		if now == nil {
			c.bad("WithClock(nil): the clock must not be nil")
			return
		}
		c.facts.clock = now
	})
}

// WithFactsHook sets a function that a Facts memory calls after each
// extraction attempt (successful or not) with what happened. It is called
// from the goroutine that extracted — the caller's in synchronous mode, a
// background goroutine otherwise — possibly concurrently for different
// identities; it must be quick and safe for concurrent use. A nil hook is
// an error.
func WithFactsHook(hook func(FactsEvent)) FactsOption {
	return factsOpt(func(c *config) {
		if hook == nil {
			c.bad("WithFactsHook(nil): the hook must not be nil")
			return
		}
		c.facts.hook = hook
	})
}

// WithFactsPerUser keeps a Facts memory's facts per Tenant and User rather
// than per conversation: every conversation of a user reads and updates the
// same facts, kept under the identity {Tenant, User,
// UserFactsConversation}. The facts belong to the user, not to one
// conversation: Facts.Clear removes them (with that conversation's
// messages), and so does a user-wide store.Users ForgetScope (which
// removes the facts identity after the conversations, so an extraction
// racing with it goes too); a store-level Clear or Forget of one
// conversation removes its messages only. See Facts.
func WithFactsPerUser(perUser bool) FactsOption {
	return factsOpt(func(c *config) {
		c.facts.perUser = perUser
	})
}

// WithExtractTimeout bounds each extractor call of a Facts memory (default:
// no bound other than the caller's context). A call that takes longer is
// cancelled and reported as a failure; the turn stays stored. d < 0 is an
// error; 0 means no bound.
func WithExtractTimeout(d time.Duration) FactsOption {
	return factsOpt(func(c *config) {
		if d < 0 {
			c.bad("WithExtractTimeout(%v): the timeout must not be negative", d)
			return
		}
		c.facts.timeout = d
	})
}

// NewFacts returns a Facts memory that finds facts with ext. A nil ext is
// an error, and so are the bad options listed on WithMaxPerTurn,
// WithMaxFacts, WithFactTokens, WithClock, WithFactsHook and
// WithExtractTimeout. Its variable is "facts" unless WithMemoryKey sets
// another. The options that apply: the shared ones (WithMemoryKey,
// WithReturnMessages, keys, prefixes, identities, WithStore,
// WithTokenCounter), WithBackground, and the Facts options above.
func NewFacts(ext extract.Extractor, opts ...FactsOption) (*Facts, error) {
	if ext == nil {
		return nil, fmt.Errorf("%w: NewFacts: the extractor is nil", ErrInvalidOption)
	}
	if v := reflect.ValueOf(ext); (v.Kind() == reflect.Pointer || v.Kind() == reflect.Func) && v.IsNil() {
		return nil, fmt.Errorf("%w: NewFacts: the extractor is a nil %T", ErrInvalidOption, ext)
	}
	// The default key goes first so that WithMemoryKey overrides it; nil
	// options are reported here with their own position.
	all := make([]FactsOption, 0, len(opts)+1)
	all = append(all, factsOpt(func(c *config) { c.memoryKey = DefaultFactsMemoryKey }))
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: NewFacts: option %d of %d is nil", ErrInvalidOption, i+1, len(opts))
		}
		all = append(all, o)
	}
	m := &Facts{base: newBase(all, FactsOption.applyFacts), ext: ext}
	if m.err != nil {
		return nil, m.err
	}
	s := m.cfg.facts
	m.maxPerTurn, m.maxFacts, m.maxTokens = DefaultMaxPerTurn, DefaultMaxFacts, DefaultFactTokens
	if s.maxPerTurn > 0 {
		m.maxPerTurn = s.maxPerTurn
	}
	if s.maxFacts > 0 {
		m.maxFacts = s.maxFacts
	}
	if s.tokens > 0 {
		m.maxTokens = s.tokens
	}
	m.clock = time.Now
	if s.clock != nil {
		m.clock = s.clock
	}
	m.hook, m.perUser = s.hook, s.perUser
	m.base.checkID = m.checkID
	m.counter = m.cfg.counter
	if m.counter == nil {
		cl, err := tokens.CL100K()
		if err != nil {
			return nil, err
		}
		m.counter = cl
	}
	m.eng = factsengine.New(factsengine.Config{
		Store:      m.cfg.store,
		StateName:  FactsStateName,
		Extractor:  ext,
		Timeout:    s.timeout,
		MaxPerTurn: m.maxPerTurn,
		Clock:      m.clock,
		Scope:      m.scope,
		Report:     m.report,
	})
	m.pool = worker.New(worker.Config[identity]{Run: m.run, Queue: true})
	return m, nil
}

// SaveContext stores the turn (validated first; stored whole or not at
// all), then extracts facts from it: synchronously, or in the background
// with WithBackground. Extraction failures are not returned (see Facts).
func (m *Facts) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
	id, msgs, err := m.turn(ctx, inputs, outputs)
	if err != nil {
		return err
	}
	if err := m.open(); err != nil {
		return err
	}
	ctx = m.dated(ctx)
	if err := m.append(ctx, id, msgs...); err != nil {
		return err
	}
	m.reportLaterLLM(ctx, id)
	m.after(ctx, id)
	return nil
}

// AddMessage stores one message of any role, then extracts from it as
// SaveContext does (system and tool messages are stored and never read by
// the extractor).
func (m *Facts) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
	id, msg, err := m.message(ctx, msg)
	if err != nil {
		return err
	}
	if err := m.open(); err != nil {
		return err
	}
	ctx = m.dated(ctx)
	if err := m.append(ctx, id, msg); err != nil {
		return err
	}
	m.after(ctx, id)
	return nil
}

// dated returns ctx carrying the time a save dates its messages with: the
// caller's memstack.WithTime, else the clock's now in UTC.
func (m *Facts) dated(ctx context.Context) context.Context {
	if _, ok := memstack.TimeFrom(ctx); ok {
		return ctx
	}
	return memstack.WithTime(ctx, m.clock().UTC())
}

// Flush waits until no extraction is running or pending in this Facts, or
// ctx is done. Extraction failures are not returned: they are reported to
// the hook and counted in Stats. After Close it returns an error wrapping
// ErrClosed.
func (m *Facts) Flush(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	return poolErr(m.pool.Flush(ctx), ctx, "flush", errFactsClosed{})
}

// Close cancels every running extraction (its turn stays stored and is
// extracted by the next Facts over the same store), waits for them to stop
// and stops background work for good; the background model calls not
// reported yet are dropped (see Facts, "Background mode"). Afterwards
// SaveContext, AddMessage, Clear and Flush return an error wrapping
// ErrClosed; loads, Current and History keep working. Closing again is a
// no-op that returns, like a Close called concurrently, once the first
// Close has stopped the work.
func (m *Facts) Close() error {
	m.pool.Close()
	m.mu.Lock()
	m.laterLLM = nil
	m.mu.Unlock()
	return nil
}

// Stats returns the extraction counters.
func (m *Facts) Stats() FactsStats {
	s := m.eng.Stats()
	return FactsStats{Extractions: s.Extractions, Failures: s.Failures, FactsStored: s.Stored, Superseded: s.Superseded}
}

// String describes the memory's configuration.
func (m *Facts) String() string {
	return m.describe("Facts", fmt.Sprintf("extractor=%T, max_per_turn=%d, max_facts=%d, fact_tokens=%d, per_user=%t, background=%t",
		m.ext, m.maxPerTurn, m.maxFacts, m.maxTokens, m.perUser, m.cfg.background))
}

// UserFactsConversation is the Conversation part of the identity under
// which a Facts memory with WithFactsPerUser keeps a user's facts:
// {Tenant, User, UserFactsConversation}. It is not a conversation of its
// own — so clearing any real conversation, the default "" one included,
// never touches the user's facts state and the extraction coverage of
// their other conversations — and such a Facts refuses calls whose
// identity uses it, with an error wrapping ErrInvalidIdentity. (Before
// memstack kept it apart, per-user facts lived under the conversation "",
// and a Clear of that conversation wiped every conversation's coverage.)
// It is store.UserFactsConversation, which storekit.DerivedOf names, so a
// user-wide ForgetScope forgets it whatever was in flight.
const UserFactsConversation = store.UserFactsConversation

// ErrInvalidIdentity is wrapped by the error of a call whose identity a
// memory cannot serve (a Facts with WithFactsPerUser and a Conversation of
// UserFactsConversation).
var ErrInvalidIdentity = errors.New("memstack: invalid identity")

// scope is the identity the facts of id are kept under.
func (m *Facts) scope(id identity) identity {
	if m.perUser {
		return memstack.Identity{Tenant: id.Tenant, User: id.User, Conversation: UserFactsConversation}
	}
	return id
}

// checkID refuses the identity that per-user facts are kept under.
func (m *Facts) checkID(id identity) error {
	if m.perUser && id.Conversation == UserFactsConversation {
		return fmt.Errorf("%w: conversation %q is reserved for the user's facts (WithFactsPerUser)", ErrInvalidIdentity, id.Conversation)
	}
	return nil
}

func (m *Facts) open() error {
	if m.pool.Closed() {
		return errFactsClosed{}
	}
	return nil
}
