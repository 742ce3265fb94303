package memories

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/observe"
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

// Bounds on a candidate's fields; a candidate over them is dropped.
const (
	maxFactSubject   = 64
	maxFactAttribute = 128
	maxFactValue     = 500
	stateRetries     = 8
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
	timeout    time.Duration

	extractions, failures, stored, superseded atomic.Int64

	closeCtx context.Context
	closeAll context.CancelFunc

	mu       sync.Mutex
	laterLLM map[identity]int // background model calls not reported yet
	closed   bool
	// closeDone is closed when the first Close has stopped the work;
	// set with closed.
	closeDone chan struct{}
	ids       map[identity]*factsEntry
	inflight  int
	idle      chan struct{}
}

// factsEntry is the per-identity coordination state of a Facts memory.
type factsEntry struct {
	// sem (capacity 1) is held while extracting for the identity, and by
	// Clear.
	sem chan struct{}
	// The rest is guarded by Facts.mu.
	refs   int
	worker bool // a background worker goroutine runs for the identity
	dirty  bool // messages arrived since extraction last looked
	cancel context.CancelFunc
}

// factsState is what a Facts memory keeps in the store's state.
type factsState struct {
	// Through maps a conversation to the Seq of the newest of its messages
	// that extraction covered.
	Through map[string]int64 `json:"through,omitempty"`
	// Facts holds every fact, current and superseded, in the order they
	// were recorded.
	Facts []Fact `json:"facts"`
	// Epoch changes whenever the facts are cleared while the state stays
	// (Clear with WithFactsPerUser keeps the coverage of the user's other
	// conversations): an extraction that read another epoch before its
	// model call commits its coverage but none of its facts.
	Epoch uint64 `json:"epoch,omitempty"`
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
	return factsOpt(func(c *config) {
		if n < 1 {
			c.bad("WithMaxPerTurn(%d): n must be at least 1", n)
			return
		}
		c.facts.maxPerTurn = n
	})
}

// WithMaxFacts sets how many facts a Facts memory shows at most (default
// 20). n < 1 is an error.
func WithMaxFacts(n int) FactsOption {
	return factsOpt(func(c *config) {
		if n < 1 {
			c.bad("WithMaxFacts(%d): n must be at least 1", n)
			return
		}
		c.facts.maxFacts = n
	})
}

// WithFactTokens sets how many tokens the facts a Facts memory shows may
// take at most (default 300), counted with WithTokenCounter's counter.
// n < 1 is an error.
func WithFactTokens(n int) FactsOption {
	return factsOpt(func(c *config) {
		if n < 1 {
			c.bad("WithFactTokens(%d): n must be at least 1", n)
			return
		}
		c.facts.tokens = n
	})
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
	m := &Facts{base: newBase(all, FactsOption.applyFacts), ext: ext, ids: make(map[identity]*factsEntry)}
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
	m.hook, m.perUser, m.timeout = s.hook, s.perUser, s.timeout
	m.base.checkID = m.checkID
	m.counter = m.cfg.counter
	if m.counter == nil {
		cl, err := tokens.CL100K()
		if err != nil {
			return nil, err
		}
		m.counter = cl
	}
	m.closeCtx, m.closeAll = context.WithCancel(context.Background())
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

// LoadMemoryVariables returns the current facts of the identity in ctx
// (see Facts for the format and the caps). The inputs are not used.
func (m *Facts) LoadMemoryVariables(ctx context.Context, _ map[string]any) (map[string]any, error) {
	shown, err := m.load(ctx, true)
	if err != nil {
		return nil, err
	}
	lines := make([]string, len(shown))
	for i, s := range shown {
		lines[i] = s.line
	}
	return map[string]any{m.cfg.memoryKey: m.render(lines)}, nil
}

// LoadItems implements layer.Itemizer: the facts LoadMemoryVariables
// would show, one item per fact (kind "fact", ID the key, Time its
// ValidFrom), the oldest with the lowest priority so that a budget drops
// it first. It records on the context's Recorder only the facts its own
// caps left out.
func (m *Facts) LoadItems(ctx context.Context, _ map[string]any) (layer.Items, error) {
	shown, err := m.load(ctx, false)
	if err != nil {
		return layer.Items{}, err
	}
	items := make([]layer.Item, len(shown))
	for i, s := range shown {
		items[i] = layer.Item{
			Text:     s.line,
			Kind:     "fact",
			ID:       s.fact.Key,
			Time:     s.fact.ValidFrom,
			Priority: float64(len(shown) - i), // the oldest (last) lowest
		}
	}
	return layer.Items{
		Key:  m.cfg.memoryKey,
		List: items,
		Render: func(keep []bool) (any, error) {
			lines := make([]string, 0, len(shown))
			for i, k := range keep {
				if k && i < len(shown) {
					lines = append(lines, shown[i].line)
				}
			}
			return m.render(lines), nil
		},
	}, nil
}

// Current returns the current facts of the identity in ctx, most recent
// first, without the load caps.
func (m *Facts) Current(ctx context.Context) ([]Fact, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return nil, err
	}
	st, _, err := m.readState(ctx, m.scope(id))
	if err != nil {
		return nil, err
	}
	return cloneFacts(currentFacts(st.Facts)), nil
}

// History returns every fact of the identity in ctx, current and
// superseded, in the order they were recorded (oldest first).
func (m *Facts) History(ctx context.Context) ([]Fact, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return nil, err
	}
	st, _, err := m.readState(ctx, m.scope(id))
	if err != nil {
		return nil, err
	}
	return cloneFacts(st.Facts), nil
}

// Clear removes the messages and the facts of the identity in ctx, and
// only that one; with WithFactsPerUser it removes this conversation's
// messages and the user's facts (shared by all their conversations; the
// other conversations' messages stay, and are not extracted again). An
// extraction of that identity in flight in this Facts is cancelled first
// and cannot commit afterwards.
func (m *Facts) Clear(ctx context.Context) error {
	id, err := m.begin(ctx)
	if err != nil {
		return err
	}
	if err := m.open(); err != nil {
		return err
	}
	m.mu.Lock()
	e := m.entryLocked(id)
	if e.cancel != nil {
		e.cancel()
	}
	m.mu.Unlock()
	defer m.release(id, e)
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("memstack: clearing: %w", ctx.Err())
	}
	defer func() { <-e.sem }()
	if err := m.cfg.store.Clear(ctx, id); err != nil {
		return fmt.Errorf("memstack: clearing: %w", err)
	}
	if m.perUser {
		if err := m.forgetFacts(ctx, m.scope(id)); err != nil {
			return fmt.Errorf("memstack: clearing the facts: %w", err)
		}
	}
	return nil
}

// Flush waits until no extraction is running or pending in this Facts, or
// ctx is done. Extraction failures are not returned: they are reported to
// the hook and counted in Stats. After Close it returns an error wrapping
// ErrClosed.
func (m *Facts) Flush(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return errFactsClosed{}
		}
		if m.inflight == 0 {
			m.mu.Unlock()
			return nil
		}
		idle := m.idle
		m.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("memstack: flush: %w", ctx.Err())
		}
	}
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
	m.mu.Lock()
	if m.closed {
		// Closed, or closing: return once the first Close has stopped
		// the work.
		done := m.closeDone
		m.mu.Unlock()
		<-done
		return nil
	}
	m.closed = true
	m.closeDone = make(chan struct{})
	idle := m.idle
	m.mu.Unlock()
	m.closeAll()
	if idle != nil {
		<-idle
	}
	m.mu.Lock()
	m.laterLLM = nil
	m.mu.Unlock()
	close(m.closeDone)
	return nil
}

// Stats returns the extraction counters.
func (m *Facts) Stats() FactsStats {
	return FactsStats{
		Extractions: m.extractions.Load(),
		Failures:    m.failures.Load(),
		FactsStored: m.stored.Load(),
		Superseded:  m.superseded.Load(),
	}
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errFactsClosed{}
	}
	return nil
}

// ---- loading ----

type shownFact struct {
	fact Fact
	line string
}

// load returns the facts a load shows and records the ones the caps leave
// out; with injected set it records the shown ones and their tokens too.
func (m *Facts) load(ctx context.Context, injected bool) ([]shownFact, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return nil, err
	}
	st, _, err := m.readState(ctx, m.scope(id))
	if err != nil {
		return nil, err
	}
	m.reportLaterLLM(ctx, id)
	rec := observe.FromContext(ctx)
	cur := currentFacts(st.Facts)
	used := 0
	if m.cfg.returnMessages && len(cur) > 0 {
		n, err := tokens.Count(m.counter, FactsHeader)
		if err != nil {
			return nil, fmt.Errorf("memstack: Facts: counting the tokens of the header: %w", err)
		}
		used = min(n, 1<<40) + 1
	}
	shown := make([]shownFact, 0, min(len(cur), m.maxFacts))
	full := false
	for _, f := range cur {
		line := f.Line()
		n, err := tokens.Count(m.counter, line)
		if err != nil {
			return nil, fmt.Errorf("memstack: Facts: counting the tokens of fact %q: %w", f.Key, err)
		}
		n = min(n, 1<<40) + 1
		if full || len(shown) == m.maxFacts || used+n > m.maxTokens {
			full = true
			rec.Dropped(observe.Item{Kind: "fact", ID: f.Key, Tokens: n, Reason: observe.ReasonBudget, Time: f.ValidFrom})
			continue
		}
		used += n
		shown = append(shown, shownFact{fact: f, line: line})
		if injected {
			rec.Injected(observe.Item{Kind: "fact", ID: f.Key, Tokens: n, Time: f.ValidFrom})
		}
	}
	if injected && len(shown) > 0 {
		rec.Tokens(used)
	}
	return shown, nil
}

// render returns the variable's value for the given lines.
func (m *Facts) render(lines []string) any {
	text := strings.Join(lines, "\n")
	if !m.cfg.returnMessages {
		return text
	}
	if len(lines) == 0 {
		return []llms.ChatMessage{}
	}
	return []llms.ChatMessage{llms.SystemChatMessage{Content: FactsHeader + "\n" + text}}
}

// currentFacts returns the current facts, most recent first: by ValidFrom,
// and among facts recorded at the same time (one turn's) the last recorded
// first.
func currentFacts(all []Fact) []Fact {
	out := make([]Fact, 0, len(all))
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Current() {
			out = append(out, all[i])
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ValidFrom.After(out[j].ValidFrom) })
	return out
}

func cloneFacts(fs []Fact) []Fact {
	out := make([]Fact, len(fs))
	for i, f := range fs {
		f.Sources = slices.Clone(f.Sources)
		out[i] = f
	}
	return out
}

// ---- state ----

// readState returns the facts state kept under scope and its version: for
// an absent state the zero factsState and the store's absent version,
// which a Clear or Forget moves (see package store).
func (m *Facts) readState(ctx context.Context, scope identity) (factsState, int64, error) {
	st, err := m.cfg.store.GetState(ctx, scope, FactsStateName)
	if err != nil {
		return factsState{}, 0, fmt.Errorf("memstack: reading the facts of %s: %w", scope.Key(), err)
	}
	var s factsState
	if !st.Exists() {
		return s, st.Version, nil // the absent version: a Clear or Forget moves it
	}
	if err := json.Unmarshal(st.Value, &s); err != nil {
		return factsState{}, 0, fmt.Errorf("memstack: the stored facts of %s (state %q) are not valid JSON: %w", scope.Key(), FactsStateName, err)
	}
	return s, st.Version, nil
}

// forgetFacts removes every fact kept under scope and keeps what
// extraction covered, so that other conversations sharing the facts
// (WithFactsPerUser) do not extract their old turns again. It moves the
// state's epoch even when there is no fact yet, so an extraction in
// flight — in this process or another replica — that read the state
// before commits no fact from a turn said before the Clear.
func (m *Facts) forgetFacts(ctx context.Context, scope identity) error {
	for range stateRetries {
		st, version, err := m.readState(ctx, scope)
		if err != nil {
			return err
		}
		st.Facts = nil
		st.Epoch = newEpoch(st.Epoch)
		value, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("encoding the facts of %s: %w", scope.Key(), err)
		}
		_, err = m.cfg.store.PutState(ctx, scope, FactsStateName, value, version)
		if err == nil || !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("%w: gave up after %d attempts", store.ErrConflict, stateRetries)
}

// newEpoch returns a random epoch other than 0 and old.
func newEpoch(old uint64) uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		if e := binary.LittleEndian.Uint64(b[:]); e != 0 && e != old {
			return e
		}
	}
}

// ---- extraction scheduling (the pattern of Summary) ----

// after runs or schedules extraction once a message is stored for id.
func (m *Facts) after(ctx context.Context, id identity) {
	if m.cfg.background {
		m.kick(ctx, id)
		return
	}
	m.extractNow(ctx, id)
}

// entryLocked returns id's entry, created if needed, with one more
// reference. m.mu must be held; release drops the reference.
func (m *Facts) entryLocked(id identity) *factsEntry {
	e := m.ids[id]
	if e == nil {
		e = &factsEntry{sem: make(chan struct{}, 1)}
		m.ids[id] = e
	}
	e.refs++
	return e
}

func (m *Facts) release(id identity, e *factsEntry) {
	m.mu.Lock()
	m.releaseLocked(id, e)
	m.mu.Unlock()
}

func (m *Facts) releaseLocked(id identity, e *factsEntry) {
	e.refs--
	if e.refs == 0 && !e.worker && m.ids[id] == e {
		delete(m.ids, id)
	}
}

// startLocked counts one more running extraction or worker; it fails after
// Close. m.mu must be held.
func (m *Facts) startLocked() bool {
	if m.closed {
		return false
	}
	if m.inflight == 0 {
		m.idle = make(chan struct{})
	}
	m.inflight++
	return true
}

func (m *Facts) doneLocked() {
	m.inflight--
	if m.inflight == 0 {
		close(m.idle)
		m.idle = nil
	}
}

// extractNow is synchronous mode: extract id's pending turns on the
// caller's goroutine, one pass. A call that finds another extracting id
// waits for it (or for its own ctx), then makes its own pass, which finds
// its turn covered already or covers it; no call loops over the turns of
// callers that keep arriving, so a save costs its own extraction plus,
// at most, those of the saves of its identity running at the same time.
func (m *Facts) extractNow(ctx context.Context, id identity) {
	m.mu.Lock()
	if !m.startLocked() {
		m.mu.Unlock()
		return
	}
	e := m.entryLocked(id)
	e.dirty = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.releaseLocked(id, e)
		m.doneLocked()
		m.mu.Unlock()
	}()
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return // the turn stays for the next extraction
	}
	m.mu.Lock()
	dirty := e.dirty && ctx.Err() == nil
	e.dirty = false
	m.mu.Unlock()
	if dirty {
		m.step(ctx, id, e, false)
	}
	<-e.sem
}

// kick is background mode: mark id dirty and start its worker unless one
// runs.
func (m *Facts) kick(ctx context.Context, id identity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if e := m.ids[id]; e != nil && e.worker {
		e.dirty = true
		return
	}
	if !m.startLocked() {
		return
	}
	e := m.entryLocked(id)
	e.worker, e.dirty = true, true
	// The worker outlives the call: keep ctx's values (the identity, the
	// recorder, tracing), drop its cancellation; Close cancels the worker.
	go m.work(context.WithoutCancel(ctx), id, e)
}

// work is id's background worker: it extracts while messages keep
// arriving, then exits.
func (m *Facts) work(ctx context.Context, id identity, e *factsEntry) {
	for {
		m.mu.Lock()
		if !e.dirty || m.closed {
			e.worker = false
			m.releaseLocked(id, e)
			m.doneLocked()
			m.mu.Unlock()
			return
		}
		e.dirty = false
		m.mu.Unlock()
		select {
		case e.sem <- struct{}{}:
		case <-m.closeCtx.Done():
			continue
		}
		m.step(ctx, id, e, true)
		<-e.sem
	}
}

// step extracts id's pending turns with a context that Close and Clear can
// cancel. The caller holds e.sem.
func (m *Facts) step(ctx context.Context, id identity, e *factsEntry, background bool) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(m.closeCtx, cancel)
	m.mu.Lock()
	e.cancel = cancel
	m.mu.Unlock()
	defer func() {
		stop()
		cancel()
		m.mu.Lock()
		e.cancel = nil
		m.mu.Unlock()
	}()
	if !background {
		m.catchUp(ctx, id) // the caller's Recorder counts the model calls
		return
	}
	// Model calls made here are recorded on a Recorder of the worker's
	// own (the save that started it has delivered its report already)
	// and reported with the identity's next observed call.
	priv := observe.NewRecorder(observe.OpSave, "", "")
	m.catchUp(observe.WithRecorder(ctx, priv), id)
	if n := priv.Finish(0, nil).LLMCalls; n > 0 {
		m.mu.Lock()
		if m.laterLLM == nil {
			m.laterLLM = make(map[identity]int)
		}
		if _, ok := m.laterLLM[id]; ok || len(m.laterLLM) < maxLaterLLM {
			m.laterLLM[id] += n
		}
		m.mu.Unlock()
	}
}

// maxLaterLLM bounds how many identities' background model calls a Facts
// keeps for their next report (an identity never called again would keep
// its count forever).
const maxLaterLLM = 1 << 16

// reportLaterLLM adds to the Recorder in ctx the background model calls
// made for id since its last observed call.
func (m *Facts) reportLaterLLM(ctx context.Context, id identity) {
	rec := observe.FromContext(ctx)
	if !rec.Enabled() {
		return
	}
	m.mu.Lock()
	n := m.laterLLM[id]
	delete(m.laterLLM, id)
	m.mu.Unlock()
	if n > 0 {
		rec.LLMCall(n)
	}
}

// ---- extraction ----

// catchUp extracts, turn by turn, every message of id that extraction has
// not covered yet, until there is none or an attempt cannot advance.
func (m *Facts) catchUp(ctx context.Context, id identity) {
	for ctx.Err() == nil {
		recs, epoch, err := m.pending(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				m.failures.Add(1)
				m.report(FactsEvent{IdentityHash: m.HashIdentity(id), Err: m.redact(err, id)})
			}
			return
		}
		if len(recs) == 0 {
			return
		}
		for _, g := range splitTurns(recs) {
			if !m.extractTurn(ctx, id, g, epoch) {
				return
			}
		}
	}
}

// pending returns id's messages after the last one extraction covered,
// and the epoch of the facts state it read (before the messages, so that
// commit can tell a Clear that came after).
func (m *Facts) pending(ctx context.Context, id identity) ([]store.Record, uint64, error) {
	for range stateRetries {
		recs, st, err := m.pendingOnce(ctx, id)
		if err != nil || recs == nil {
			return nil, 0, err
		}
		if !m.perUser {
			return recs, st.Epoch, nil // only a per-user Clear moves the epoch
		}
		// The epoch again, after the messages: if a per-user Clear moved
		// it while they were read, a turn said after that Clear may be
		// among them, and commit would drop its facts; read again. When
		// it did not move, every turn read was stored before any Clear
		// that moves it later, so commit may drop their facts then.
		again, _, err := m.readState(ctx, m.scope(id))
		if err != nil {
			return nil, 0, err
		}
		if again.Epoch == st.Epoch {
			return recs, st.Epoch, nil
		}
	}
	return nil, 0, fmt.Errorf("memstack: reading the facts of %s: %w: the facts were cleared %d times while their messages were read", m.scope(id).Key(), store.ErrConflict, stateRetries)
}

// pendingOnce is one read of pending: the state, then the messages after
// the covered one (nil when there are none).
func (m *Facts) pendingOnce(ctx context.Context, id identity) ([]store.Record, factsState, error) {
	st, _, err := m.readState(ctx, m.scope(id))
	if err != nil {
		return nil, factsState{}, err
	}
	through := st.Through[id.Conversation]
	stat, err := m.cfg.store.Stat(ctx, id)
	if err != nil {
		return nil, factsState{}, fmt.Errorf("memstack: reading the messages of %s: %w", id.Key(), err)
	}
	if stat.Count == 0 || stat.LastSeq <= through {
		return nil, factsState{}, nil
	}
	// Read back from the newest message until the covered one, growing
	// the window: a save reads a few messages, not the whole history.
	var recs []store.Record
	for k := 8; ; k *= 4 {
		if k >= stat.Count {
			recs, err = m.cfg.store.All(ctx, id)
		} else {
			recs, err = m.cfg.store.Last(ctx, id, k)
		}
		if err != nil {
			return nil, factsState{}, fmt.Errorf("memstack: reading the messages of %s: %w", id.Key(), err)
		}
		if k >= stat.Count || len(recs) < k || len(recs) == 0 || recs[0].Seq <= through {
			break
		}
	}
	i := sort.Search(len(recs), func(i int) bool { return recs[i].Seq > through })
	if i == len(recs) {
		return nil, st, nil
	}
	return recs[i:], st, nil
}

// splitTurns splits records into turns: each starts at a human message
// (the first may start anywhere).
func splitTurns(recs []store.Record) [][]store.Record {
	var out [][]store.Record
	start := 0
	for i := 1; i < len(recs); i++ {
		if recs[i].Message.GetType() == llms.ChatMessageTypeHuman {
			out = append(out, recs[start:i])
			start = i
		}
	}
	return append(out, recs[start:])
}

// extractTurn extracts and commits the facts of one turn and reports
// false when extraction cannot go on (cancelled, or the turn could not be
// marked as covered).
func (m *Facts) extractTurn(ctx context.Context, id identity, turn []store.Record, epoch uint64) bool {
	var msgs []llms.ChatMessage
	var seqs []int64
	var times []time.Time
	for _, r := range turn {
		t := r.Message.GetType()
		if (t == llms.ChatMessageTypeHuman || t == llms.ChatMessageTypeAI) && strings.TrimSpace(r.Message.GetContent()) != "" {
			msgs = append(msgs, r.Message)
			seqs = append(seqs, r.Seq)
			times = append(times, r.Time)
		}
	}
	through := turn[len(turn)-1].Seq
	if len(msgs) == 0 {
		_, _, err := m.commit(ctx, id, through, nil, epoch)
		return err == nil
	}
	ev := FactsEvent{IdentityHash: m.HashIdentity(id), Messages: len(msgs)}
	start := time.Now()
	m.extractions.Add(1)
	cands, err := m.callExtractor(ctx, msgs)
	ev.Duration = time.Since(start)
	ev.Candidates = len(cands)
	if err != nil {
		m.failures.Add(1)
		ev.Err = m.redact(fmt.Errorf("extracting facts from %d messages of %s: %w", len(msgs), id.Key(), err), id)
		m.report(ev)
		if ctx.Err() != nil {
			return false // cancelled: the turn is left for the next extraction
		}
		// Skip the turn: a malformed answer or a failing model would fail
		// again on it.
		_, _, err := m.commit(ctx, id, through, nil, epoch)
		return err == nil
	}
	var facts []Fact
	facts, ev.Dropped = m.choose(id, cands, seqs, times)
	ev.Stored, ev.Superseded, err = m.commit(ctx, id, through, facts, epoch)
	if err != nil {
		m.failures.Add(1)
		ev.Err = m.redact(fmt.Errorf("storing the facts of %s: %w", id.Key(), err), id)
		m.report(ev)
		return false
	}
	m.stored.Add(int64(ev.Stored))
	m.superseded.Add(int64(ev.Superseded))
	m.report(ev)
	return true
}

// callExtractor runs the extractor with the configured timeout through
// callBounded: a panic is an error, and an extractor that ignores its
// deadline is abandoned (its late answer discarded), so Close, Clear and
// Flush return on time.
func (m *Facts) callExtractor(ctx context.Context, msgs []llms.ChatMessage) ([]extract.Candidate, error) {
	if m.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.timeout)
		defer cancel()
	}
	return callBounded(ctx, fmt.Sprintf("the extractor %T", m.ext), func(ctx context.Context) ([]extract.Candidate, error) {
		return m.ext.Extract(ctx, msgs)
	})
}

// choose validates the candidates of one turn and turns at most
// maxPerTurn of them into facts, in order, each valid from the time of its
// sources (zero when none has a time: commit dates it); it returns how
// many it dropped. times[i] is the time of the message seqs[i].
func (m *Facts) choose(id identity, cands []extract.Candidate, seqs []int64, times []time.Time) ([]Fact, int) {
	facts := make([]Fact, 0, min(len(cands), m.maxPerTurn))
	at := make(map[string]int, len(cands))
	dropped := 0
	for _, c := range cands {
		subject, attr := extract.Normalize(c.Subject, c.Attribute)
		value := strings.Join(strings.FieldsFunc(c.Value, unicode.IsSpace), " ")
		if subject == "" || attr == "" || value == "" ||
			utf8.RuneCountInString(subject) > maxFactSubject ||
			utf8.RuneCountInString(attr) > maxFactAttribute ||
			utf8.RuneCountInString(value) > maxFactValue {
			dropped++
			continue
		}
		var src []int64
		for _, i := range c.Sources {
			if i >= 0 && i < len(seqs) && !slices.Contains(src, seqs[i]) {
				src = append(src, seqs[i])
			}
		}
		if len(src) == 0 {
			src = slices.Clone(seqs)
		}
		slices.Sort(src)
		f := Fact{Key: subject + " " + attr, Subject: subject, Attribute: attr, Value: value,
			Sources: src, Conversation: id.Conversation, Rule: c.Rule, ValidFrom: newestTime(src, seqs, times)}
		if i, ok := at[f.Key]; ok {
			facts[i] = f // restated in the same turn: the later value wins
			dropped++
			continue
		}
		if len(facts) == m.maxPerTurn {
			dropped++
			continue
		}
		at[f.Key] = len(facts)
		facts = append(facts, f)
	}
	return facts, dropped
}

// newestTime returns the newest non-zero time of the messages in src
// (times[i] is the time of seqs[i]), or the zero time if none has one.
func newestTime(src, seqs []int64, times []time.Time) time.Time {
	var at time.Time
	for i, seq := range seqs {
		if t := times[i]; !t.IsZero() && (at.IsZero() || t.After(at)) && slices.Contains(src, seq) {
			at = t
		}
	}
	return at
}

// commit records facts (possibly none) for id and marks its messages up to
// through as covered, in one compare-and-set of the state, retried on
// conflict. It returns how many facts it recorded and superseded. If
// another writer covered through first, it records nothing.
//
// Cleared means gone (see package store): each attempt reads the state,
// then the messages' bounds, then commits with the version it read. If
// the turn's messages are gone — a Clear or Forget, by any replica, after
// pending read them — it records nothing at all; a Clear after the state
// read makes the commit conflict, and the next attempt sees the messages
// gone. If the facts were cleared with the state kept (WithFactsPerUser:
// the epoch moved since pending's read), it records the coverage but not
// the facts: they come from a turn said before the Clear.
func (m *Facts) commit(ctx context.Context, id identity, through int64, facts []Fact, epoch uint64) (stored, superseded int, err error) {
	scope := m.scope(id)
	for range stateRetries {
		st, version, err := m.readState(ctx, scope)
		if err != nil {
			return 0, 0, err
		}
		if st.Through[id.Conversation] >= through {
			return 0, 0, nil
		}
		stat, err := m.cfg.store.Stat(ctx, id)
		if err != nil {
			return 0, 0, fmt.Errorf("reading the messages of %s: %w", id.Key(), err)
		}
		if stat.Count == 0 || stat.FirstSeq > through {
			return 0, 0, nil // cleared or forgotten since they were read
		}
		keep := facts
		if st.Epoch != epoch {
			keep = nil
		}
		now := m.clock().Round(0).UTC()
		stored, superseded = apply(&st, keep, now)
		if st.Through == nil {
			st.Through = make(map[string]int64, 1)
		}
		st.Through[id.Conversation] = through
		value, err := json.Marshal(st)
		if err != nil {
			return 0, 0, fmt.Errorf("encoding the facts of %s: %w", scope.Key(), err)
		}
		_, err = m.cfg.store.PutState(ctx, scope, FactsStateName, value, version)
		if err == nil {
			return stored, superseded, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return 0, 0, fmt.Errorf("committing the facts of %s: %w", scope.Key(), err)
		}
	}
	return 0, 0, fmt.Errorf("committing the facts of %s: %w: gave up after %d attempts", scope.Key(), store.ErrConflict, stateRetries)
}

// apply records facts in st, dating those without a ValidFrom now: a fact
// whose key has a current fact with the same value (up to case) changes
// nothing; one with another value ends the current fact at its own
// ValidFrom (at the earliest the current fact's) and is appended.
func apply(st *factsState, facts []Fact, now time.Time) (stored, superseded int) {
	current := make(map[string]int, len(st.Facts))
	for i, f := range st.Facts {
		if f.Current() {
			current[f.Key] = i
		}
	}
	for _, f := range facts {
		if f.ValidFrom.IsZero() {
			f.ValidFrom = now
		}
		if i, ok := current[f.Key]; ok {
			old := &st.Facts[i]
			if strings.EqualFold(old.Value, f.Value) {
				continue
			}
			old.ValidTo = f.ValidFrom
			if old.ValidTo.Before(old.ValidFrom) {
				old.ValidTo = old.ValidFrom // a turn replayed out of order
			}
			superseded++
		}
		f.Sources = slices.Clone(f.Sources)
		current[f.Key] = len(st.Facts)
		st.Facts = append(st.Facts, f)
		stored++
	}
	return stored, superseded
}

func (m *Facts) report(ev FactsEvent) {
	if m.hook != nil {
		m.hook(ev)
	}
}
