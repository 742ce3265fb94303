package memories

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/memories/internal/fold"
	"github.com/memstack/memstack/memories/internal/worker"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
	"github.com/memstack/memstack/tokens"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// SummaryPrefix starts the line (string mode) or the system message
// (messages mode) that carries a Summary's running summary.
const SummaryPrefix = "Summary of earlier conversation: "

// SummaryStateName is the name of the store state (store.States) in which a
// Summary keeps each identity's running summary and the Seq it covers.
const SummaryStateName = "summary"

// Defaults of the Summary memory.
const (
	DefaultMaxMessages = 15
	DefaultBatchSize   = 6
	defaultRetryMin    = time.Second
	defaultRetryMax    = time.Minute
)

// DefaultSummaryTimeout bounds each summarizer call (see
// WithSummaryTimeout).
const DefaultSummaryTimeout = 2 * time.Minute

// ErrSummaryTimeout is wrapped by the error of a summarizer call that did not
// return within the Summary's timeout (WithSummaryTimeout).
var ErrSummaryTimeout = errors.New("memories: the summarizer did not answer in time")

// ErrClosed is returned (wrapped) by the SaveContext, AddMessage, Clear and
// Flush of a Summary or Facts memory after Close.
var ErrClosed = errors.New("memories: the memory is closed")

// SummaryEvent describes one summarization attempt of a Summary; the hook
// set with WithSummaryHook receives one per attempt.
type SummaryEvent struct {
	// IdentityHash is memstack.Identity.Hash (or, with WithHashKey, its
	// KeyedHash) of the conversation: it names
	// the conversation without showing whose it is.
	IdentityHash string
	// Messages is the number of messages the attempt tried to fold; they
	// are folded if Err is nil. It is 0 when reading the store failed
	// before a batch was chosen.
	Messages int
	// Duration is how long the summarizer took.
	Duration time.Duration
	// Err is nil when the new summary was committed. Otherwise the
	// messages stay raw: Err wraps the summarizer's error (errors.Is finds
	// summarizer.ErrEmptySummary, summarizer.ErrNotShorter, the model's
	// error, context.Canceled...), a store error, or store.ErrConflict when
	// another writer committed a summary first (no retry is needed then).
	Err error
}

// SummaryStats counts a Summary's summarization work since it was built,
// over all identities.
type SummaryStats struct {
	// Calls is the number of summarizer calls made.
	Calls int64
	// Failures is the number of those calls that returned an error or an
	// empty summary.
	Failures int64
	// MessagesFolded is the number of messages folded into committed
	// summaries.
	MessagesFolded int64
}

// Summary keeps a running summary of everything older than the most recent
// messages, and those messages raw. It fixes what other summary memories get
// wrong: it calls the model once per batch of messages, never once per
// exchange; it persists the summary through the store, so a restarted
// process resumes without summarizing again; it never loses a message,
// whatever the model does; and it can summarize in the background so that
// a save never waits for the model.
//
// # Folding
//
// Count mode (the default): when the unsummarized non-system messages of an
// identity exceed n (WithMaxMessages, default 15), the oldest batch of at
// least m messages (WithBatchSize, default 6) is folded into the summary in
// one Summarizer call. A batch never ends inside an exchange (it ends just
// before a human message), so a tool call stays with its results, and it never
// includes system messages. If the messages pile up (while the model was
// failing, or while a background summarization ran), one batch folds the
// whole excess: n messages stay raw. In a plain chain (one human message and
// one AI answer per exchange) with n = 15 and m = 6 the first call comes at
// exchange 8 and then one every 3 exchanges: 40 exchanges cost 11 calls,
// 1,000 exchanges 331.
// When the messages after the oldest m include no human message, the batch
// waits for one — unless the conversation has no human messages at all,
// when a batch ends at any point that does not split a tool call from its
// results. The newest message always stays raw.
//
// Token mode (WithMaxTokens(t)): when the unsummarized messages exceed t
// tokens (each message costs its rendered line plus one, as in
// TokenWindow), the oldest are folded in one call until at most about t/2
// remain (high and low watermarks), with the same exchange rule; if the
// newest exchange alone exceeds t/2, everything before it is folded.
//
// # Loading
//
// A load returns the summary first — in string mode a line
// SummaryPrefix+summary ahead of the transcript (joined by "\n"), in
// messages mode an llms.SystemChatMessage with that text — then every system
// message, then the messages the summary does not cover, rendered like
// llms.GetBufferString. A load never calls the summarizer, so it never fails
// because of it.
//
// # Storage and crash safety
//
// Messages are kept in the store (WithStore), and each identity's summary
// and the Seq it covers through are kept in the store's state under
// SummaryStateName, as JSON, with compare-and-set. A fold commits the new
// state; it removes no message: the store is one transcript that other
// layers may read (package store, "One transcript"), and loads read only
// the messages after the covered Seq (store.Messages.Tail), so a load
// costs what it shows however long the conversation has run. Under a
// retention (WithRetention) a committed fold also removes the messages the
// summary covers that are older than the retention's newest ones (with
// KeepLast(0), every message it covers: the store then holds only what
// the summary does not cover); a crash between the two steps loses and
// duplicates nothing (the next fold removes the leftovers). If another writer (another process on the same
// store) committed first, the fold is dropped and the messages stay raw:
// no message is folded twice. A new Summary over the same store resumes
// from the stored summary with no model call.
//
// # Failures
//
// Messages leave the raw buffer only once a summary covering them is
// committed. When the summarizer fails, times out or returns an empty
// summary, the messages stay raw and the failure is reported: a synchronous
// SaveContext returns an error saying the turn was stored and summarization
// failed (note that chains.Call then returns that error; use background mode
// where that matters), and the WithSummaryHook hook gets a SummaryEvent in
// both modes. The identity is not tried again until the retry backoff
// (WithRetryBackoff; default 1s doubling up to 1m) has passed; the next turn
// after that retries. A cancelled context abandons the summarization (no
// backoff). The backoff is kept in process memory for the 16,384
// identities that failed most recently; an identity pushed out by newer
// failures (or after a restart) retries at its next turn, starting again
// from the shortest backoff. A fold that commits, and a Clear, end an
// identity's backoff; Close drops them all. Apart from the backoffs and,
// in token mode, the bounded cache of token counts (WithCacheSize), a
// Summary keeps nothing per identity once the identity's save or
// background work is done.
//
// # Earlier conversations
//
// With WithEarlierSummaries(k) a Summary also keeps, per user, the summary
// of each of the user's conversations, and every load shows, before the
// conversation's own summary and messages, the summaries of the user's k
// most recent other conversations, each dated with its last message's day
// ("Summary of an earlier conversation (8 May 2023): ..."; in messages
// mode a system message each). Under combined.WithTokenBudget they are
// items of their own, dropped first and whole. A conversation's summary is
// completed — its running summary with every message it does not cover
// folded in, one summarizer call — when the user's next conversation
// starts: the first summarization pass of a conversation in a process
// lists the user's conversations (store.Users) and completes the k most
// recent whose newest messages no summary covers. Call Complete when a
// conversation ends (a session closes, or a timer of yours finds it
// quiet) to do it then instead. The summaries live in the store's state
// under {Tenant, User, UserSummariesConversation}, at most 32 per user;
// Clear removes its conversation's, a load never shows the summary of a
// conversation the store no longer holds (cleared or forgotten by any
// replica), and a user-wide ForgetScope removes them all. Any summarizer
// works: an LLM through summarizer.New, or the extractive one.
//
// # Background mode
//
// With WithBackground(true), SaveContext and AddMessage store the message
// and return; summarization runs in a goroutine, at most one per identity at
// a time (in either mode there is never more than one summarization of an
// identity in flight per Summary). Loads during a summarization return the
// last committed summary plus every message it does not cover. Flush waits
// for pending work; Close cancels it and waits for it to stop.
//
// Summary is safe for concurrent use.
type Summary struct {
	base
	sum       summarizer.Summarizer
	tokenMode bool
	n, m, t   int
	counter   tokens.Counter
	counts    *lru.Cache[tokenKey, int]

	// eng is the mechanism (package memories/internal/fold): it keeps
	// each identity's running summary, and with WithEarlierSummaries the
	// user's conversations' summaries, in step with the store.
	eng *fold.Engine
	// pool runs the summarizations (eng.Run): one at a time per
	// identity, on the caller's goroutine or in a background worker per
	// identity.
	pool *worker.Pool[identity]
}

// maxSummaryBackoffs bounds how many identities' retry backoffs a Summary
// keeps (see Summary, "Failures"): with a failing model, the bookkeeping
// of a Summary serving any number of identities stays bounded.
const maxSummaryBackoffs = 1 << 14

var (
	_ schema.Memory = (*Summary)(nil)
	_ fmt.Stringer  = (*Summary)(nil)
)

// NewSummary returns a Summary that folds old messages with s. A nil s is an
// error; so is an s with a Validate() error method that reports an error
// (summarizer.New(nil) does), and so are the bad options listed on
// WithMaxMessages, WithBatchSize, WithMaxTokens and WithRetryBackoff.
func NewSummary(s summarizer.Summarizer, opts ...SummaryOption) (*Summary, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: NewSummary: the summarizer is nil", ErrInvalidOption)
	}
	if v := reflect.ValueOf(s); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("%w: NewSummary: the summarizer is a nil %T", ErrInvalidOption, s)
	}
	if v, ok := s.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("%w: NewSummary: the summarizer cannot summarize: %w", ErrInvalidOption, err)
		}
	}
	m := &Summary{base: newBase(opts, SummaryOption.applySummary), sum: s}
	if m.err != nil {
		return nil, m.err
	}
	if _, lists := m.cfg.store.(store.Users); m.cfg.earlier > 0 && !lists {
		return nil, fmt.Errorf("%w: NewSummary: WithEarlierSummaries(%d): the store %T cannot list a user's conversations (store.Users)", ErrInvalidOption, m.cfg.earlier, m.cfg.store)
	}
	c := &m.cfg
	if ps, ok := c.store.(store.ProcessState); ok && ps.StateInProcess() && c.retention != nil {
		return nil, fmt.Errorf("%w: NewSummary: WithStore(%T) with WithRetention(%s): under a retention a Summary removes the messages it folded into its state, "+
			"and this store keeps state in process memory only while its messages outlive the process: after a restart the folded messages would be gone "+
			"(give the Summary a store that keeps state: store.NewInMemory, sqlitestore, redisstore, pgstore, or no retention)", ErrInvalidOption, c.store, *c.retention)
	}
	if c.maxTokens > 0 {
		if c.maxMessagesSet || c.batchSizeSet {
			return nil, fmt.Errorf("%w: NewSummary: WithMaxTokens(%d) selects token mode and cannot be combined with WithMaxMessages or WithBatchSize (count mode)", ErrInvalidOption, c.maxTokens)
		}
		m.tokenMode, m.t = true, c.maxTokens
		m.counter = c.counter
		if m.counter == nil {
			cl, err := tokens.CL100K()
			if err != nil {
				return nil, err
			}
			m.counter = cl
		}
		if c.cacheSize > 0 {
			m.counts, _ = lru.New[tokenKey, int](64 * c.cacheSize)
		}
	} else {
		m.n = DefaultMaxMessages
		if c.maxMessagesSet {
			m.n = c.maxMessages
		}
		m.m = min(DefaultBatchSize, m.n)
		if c.batchSizeSet {
			m.m = c.batchSize
		}
		if m.m > m.n {
			return nil, fmt.Errorf("%w: NewSummary: WithBatchSize(%d) is larger than WithMaxMessages(%d): a batch cannot exceed the messages kept raw", ErrInvalidOption, m.m, m.n)
		}
	}
	m.eng = fold.New(m.engineConfig())
	m.pool = worker.New(worker.Config[identity]{Run: m.eng.Run, Wait: m.eng.Waiting})
	return m, nil
}

// SaveContext stores the turn (validated first; stored whole or not at all),
// then summarizes if needed: synchronously, or in the background with
// WithBackground. A synchronous summarization failure returns an error
// saying so (the turn is stored all the same), wrapping the cause.
func (m *Summary) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
	id, msgs, err := m.turn(ctx, inputs, outputs)
	if err != nil {
		return err
	}
	if err := m.open(); err != nil {
		return err
	}
	if err := m.append(ctx, id, msgs...); err != nil {
		return err
	}
	return m.after(ctx, id, "turn")
}

// AddMessage stores one message of any role, then summarizes if needed, as
// SaveContext does. System messages are never summarized.
func (m *Summary) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
	id, msg, err := m.message(ctx, msg)
	if err != nil {
		return err
	}
	if err := m.open(); err != nil {
		return err
	}
	if err := m.append(ctx, id, msg); err != nil {
		return err
	}
	return m.after(ctx, id, "message")
}

// LoadMemoryVariables returns the summary, the system messages and the
// messages the summary does not cover (see Summary). It never calls the
// summarizer. The inputs are not used.
func (m *Summary) LoadMemoryVariables(ctx context.Context, _ map[string]any) (map[string]any, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return nil, err
	}
	st, system, rest, err := m.eng.Unsummarized(ctx, id)
	if err != nil {
		return nil, err
	}
	earlier, err := m.eng.Earlier(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		for _, c := range earlier {
			rec.Injected(observe.Item{Kind: kindEarlierSummary, ID: seqID(c.Through), Time: c.To})
		}
		if st.Summary != "" {
			rec.Injected(observe.Item{Kind: kindSummary, ID: seqID(st.Through)})
		}
		recordMessages(rec, nil, system, rest)
	}
	msgs := make([]llms.ChatMessage, 0, len(earlier)+len(system)+len(rest)+1)
	if m.cfg.returnMessages {
		for _, c := range earlier {
			msgs = append(msgs, llms.SystemChatMessage{Content: earlierText(c)})
		}
	}
	if m.cfg.returnMessages && st.Summary != "" {
		msgs = append(msgs, llms.SystemChatMessage{Content: SummaryPrefix + st.Summary})
	}
	msgs = append(msgs, messagesOf(system)...)
	msgs = append(msgs, messagesOf(rest)...)
	if m.cfg.returnMessages {
		return map[string]any{m.cfg.memoryKey: msgs}, nil
	}
	s, err := adapter.Render(msgs, m.cfg.humanPrefix, m.cfg.aiPrefix)
	if err != nil {
		return nil, err
	}
	if st.Summary != "" {
		if s != "" {
			s = "\n" + s
		}
		s = SummaryPrefix + st.Summary + s
	}
	for i := len(earlier) - 1; i >= 0; i-- {
		if s != "" {
			s = "\n" + s
		}
		s = earlierText(earlier[i]) + s
	}
	return map[string]any{m.cfg.memoryKey: s}, nil
}

// Clear removes the messages and the summary of the identity in ctx, and
// only that one. A summarization of that identity in flight in this Summary
// is cancelled first and cannot commit afterwards.
func (m *Summary) Clear(ctx context.Context) error {
	return m.clearExclusive(ctx, m.pool, ErrClosed, func(id identity) error { return m.eng.Cleared(ctx, id) })
}

// Flush waits until no summarization is running or pending in this Summary
// (in background mode: until every identity's worker is done), or ctx is
// done. Summarization failures are not returned: they are reported to the
// hook and counted in Stats. After Close it returns ErrClosed.
func (m *Summary) Flush(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	return poolErr(m.pool.Flush(ctx), ctx, "flush", ErrClosed)
}

// Close cancels every running summarization (their messages stay raw),
// waits for them to stop and stops background work for good, dropping
// every identity's retry backoff. Afterwards SaveContext, AddMessage,
// Clear and Flush return ErrClosed; loads keep working. Closing again is a
// no-op that returns, like a Close called concurrently, once the first
// Close has stopped the work.
func (m *Summary) Close() error {
	m.pool.Close()
	m.eng.Close()
	return nil
}

// Stats returns the summarization counters.
func (m *Summary) Stats() SummaryStats {
	calls, failures, folded := m.eng.Counts()
	return SummaryStats{Calls: calls, Failures: failures, MessagesFolded: folded}
}

// String describes the memory's configuration.
func (m *Summary) String() string {
	mode := fmt.Sprintf("max_messages=%d, batch=%d", m.n, m.m)
	if m.tokenMode {
		mode = fmt.Sprintf("max_tokens=%d", m.t)
	}
	return m.describe("Summary", fmt.Sprintf("%s, background=%t, summarizer=%T", mode, m.cfg.background, m.sum))
}
