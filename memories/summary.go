package memories

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/memstack/memstack/adapter"
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
// wrong: it calls the model once per batch of messages, never once per turn;
// it persists the summary through the store, so a restarted process resumes
// without summarizing again; it never loses a message, whatever the model
// does; and it can summarize in the background so that a save never waits
// for the model.
//
// # Folding
//
// Count mode (the default): when the unsummarized non-system messages of an
// identity exceed n (WithMaxMessages, default 15), the oldest batch of at
// least m messages (WithBatchSize, default 6) is folded into the summary in
// one Summarizer call. A batch never ends inside a turn (it ends just before
// a human message), so a tool call stays with its results, and it never
// includes system messages. If the messages pile up (while the model was
// failing, or while a background summarization ran), one batch folds the
// whole excess: n messages stay raw. In a plain chain (one human message and
// one AI answer per turn) with n = 15 and m = 6 the first call comes at turn
// 8 and then one every 3 turns: 40 turns cost 11 calls, 1,000 turns 331.
// When the messages after the oldest m include no human message, the batch
// waits for one — unless the conversation has no human messages at all,
// when a batch ends at any point that does not split a tool call from its
// results. The newest message always stays raw.
//
// Token mode (WithMaxTokens(t)): when the unsummarized messages exceed t
// tokens (each message costs its rendered line plus one, as in
// TokenWindow), the oldest are folded in one call until at most about t/2
// remain (high and low watermarks), with the same turn rule; if the newest
// turn alone exceeds t/2, everything before it is folded.
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
	retryMin  time.Duration
	retryMax  time.Duration
	timeout   time.Duration
	counter   tokens.Counter
	counts    *lru.Cache[tokenKey, int]

	calls, failures, folded atomic.Int64

	closeCtx context.Context
	closeAll context.CancelFunc

	mu     sync.Mutex
	closed bool
	// closeDone is closed when the first Close has stopped the work;
	// set with closed.
	closeDone chan struct{}
	// ids holds the entries of the identities in use (a save, a Clear, a
	// worker); an entry goes when its last user releases it.
	ids map[identity]*sumEntry
	// backoffs holds the retry backoff of the identities whose last
	// summarization failed, the maxSummaryBackoffs most recent; guarded
	// by mu.
	backoffs *simplelru.LRU[identity, sumBackoff]
	inflight int           // summarizations and background workers running
	idle     chan struct{} // closed when inflight drops to 0; nil while 0
}

// maxSummaryBackoffs bounds how many identities' retry backoffs a Summary
// keeps (see Summary, "Failures"): with a failing model, the bookkeeping
// of a Summary serving any number of identities stays bounded.
const maxSummaryBackoffs = 1 << 14

// sumBackoff is the retry backoff of an identity whose summarizations
// failed.
type sumBackoff struct {
	failures int // consecutive summarizer failures
	nextTry  time.Time
}

// sumEntry is the per-identity coordination state of a Summary.
type sumEntry struct {
	// sem (capacity 1) is held during a summarization step of the
	// identity, and by Clear.
	sem chan struct{}
	// The rest is guarded by Summary.mu.
	refs   int
	worker bool               // a background worker goroutine runs for the identity
	dirty  bool               // messages arrived since the worker last planned
	cancel context.CancelFunc // cancels the running step, if any
}

// summaryState is what a Summary keeps in the store's state per identity.
type summaryState struct {
	Summary string `json:"summary"`
	// Through is the Seq of the newest message the summary covers.
	Through int64 `json:"through"`
	// Folded counts the messages folded into the summary so far.
	Folded int64 `json:"folded"`
}

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
	m := &Summary{base: newBase(opts, SummaryOption.applySummary), sum: s, ids: make(map[identity]*sumEntry)}
	if m.err != nil {
		return nil, m.err
	}
	m.backoffs, _ = simplelru.NewLRU[identity, sumBackoff](maxSummaryBackoffs, nil)
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
	m.retryMin, m.retryMax = defaultRetryMin, defaultRetryMax
	if c.retrySet {
		m.retryMin, m.retryMax = c.retryMin, c.retryMax
	}
	m.timeout = DefaultSummaryTimeout
	if c.sumTimeoutSet {
		m.timeout = c.sumTimeout
	}
	m.closeCtx, m.closeAll = context.WithCancel(context.Background())
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
	st, system, rest, err := m.unsummarized(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		if st.Summary != "" {
			rec.Injected(observe.Item{Kind: kindSummary, ID: seqID(st.Through)})
		}
		recordMessages(rec, nil, system, rest)
	}
	msgs := make([]llms.ChatMessage, 0, len(system)+len(rest)+1)
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
	return map[string]any{m.cfg.memoryKey: s}, nil
}

// Clear removes the messages and the summary of the identity in ctx, and
// only that one. A summarization of that identity in flight in this Summary
// is cancelled first and cannot commit afterwards.
func (m *Summary) Clear(ctx context.Context) error {
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
	m.mu.Lock()
	m.backoffs.Remove(id)
	m.mu.Unlock()
	return nil
}

// Flush waits until no summarization is running or pending in this Summary
// (in background mode: until every identity's worker is done), or ctx is
// done. Summarization failures are not returned: they are reported to the
// hook and counted in Stats. After Close it returns ErrClosed.
func (m *Summary) Flush(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return ErrClosed
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

// Close cancels every running summarization (their messages stay raw),
// waits for them to stop and stops background work for good, dropping
// every identity's retry backoff. Afterwards SaveContext, AddMessage,
// Clear and Flush return ErrClosed; loads keep working. Closing again is a
// no-op that returns, like a Close called concurrently, once the first
// Close has stopped the work.
func (m *Summary) Close() error {
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
	m.backoffs.Purge()
	m.mu.Unlock()
	close(m.closeDone)
	return nil
}

// Stats returns the summarization counters.
func (m *Summary) Stats() SummaryStats {
	return SummaryStats{Calls: m.calls.Load(), Failures: m.failures.Load(), MessagesFolded: m.folded.Load()}
}

// String describes the memory's configuration.
func (m *Summary) String() string {
	mode := fmt.Sprintf("max_messages=%d, batch=%d", m.n, m.m)
	if m.tokenMode {
		mode = fmt.Sprintf("max_tokens=%d", m.t)
	}
	return m.describe("Summary", fmt.Sprintf("%s, background=%t, summarizer=%T", mode, m.cfg.background, m.sum))
}

// open returns ErrClosed after Close.
func (m *Summary) open() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// after runs or schedules summarization once what (a turn, a message) is
// stored for id.
func (m *Summary) after(ctx context.Context, id identity, what string) error {
	if m.cfg.background {
		m.kick(ctx, id)
		return nil
	}
	if err := m.summarizeNow(ctx, id); err != nil {
		return fmt.Errorf("memstack: %s stored; summarization failed: %w", what, err)
	}
	return nil
}

// entryLocked returns id's entry, created if needed, with one more
// reference. m.mu must be held; release drops the reference.
func (m *Summary) entryLocked(id identity) *sumEntry {
	e := m.ids[id]
	if e == nil {
		e = &sumEntry{sem: make(chan struct{}, 1)}
		m.ids[id] = e
	}
	e.refs++
	return e
}

func (m *Summary) release(id identity, e *sumEntry) {
	m.mu.Lock()
	m.releaseLocked(id, e)
	m.mu.Unlock()
}

// releaseLocked drops a reference to e, and e itself once nothing uses it
// (its backoff, if any, is in m.backoffs).
func (m *Summary) releaseLocked(id identity, e *sumEntry) {
	e.refs--
	if e.refs == 0 && !e.worker && m.ids[id] == e {
		delete(m.ids, id)
	}
}

// waitingLocked reports whether id's retry backoff has not passed yet.
// m.mu must be held.
func (m *Summary) waitingLocked(id identity) bool {
	b, ok := m.backoffs.Peek(id)
	return ok && time.Now().Before(b.nextTry)
}

// startLocked counts one more running summarization or worker; it fails
// after Close. m.mu must be held.
func (m *Summary) startLocked() bool {
	if m.closed {
		return false
	}
	if m.inflight == 0 {
		m.idle = make(chan struct{})
	}
	m.inflight++
	return true
}

func (m *Summary) doneLocked() {
	m.inflight--
	if m.inflight == 0 {
		close(m.idle)
		m.idle = nil
	}
}

// summarizeNow is synchronous mode: one summarization step for id on the
// caller's goroutine, unless one is already running for id, the backoff has
// not passed, or the memory is closed.
func (m *Summary) summarizeNow(ctx context.Context, id identity) error {
	m.mu.Lock()
	if !m.startLocked() {
		m.mu.Unlock()
		return nil
	}
	e := m.entryLocked(id)
	wait := m.waitingLocked(id)
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.releaseLocked(id, e)
		m.doneLocked()
		m.mu.Unlock()
	}()
	if wait {
		return nil
	}
	select {
	case e.sem <- struct{}{}:
	default:
		return nil // another call is summarizing id; it or the next turn covers this one
	}
	defer func() { <-e.sem }()
	return m.step(ctx, id, e)
}

// kick is background mode: mark id dirty and start its worker unless one
// runs.
func (m *Summary) kick(ctx context.Context, id identity) {
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
	// The worker outlives the call: keep ctx's values (the identity,
	// tracing), drop its cancellation; Close cancels the worker. The
	// call's observe.Recorder is dropped too: the call's report is done
	// before the worker summarizes.
	wctx := context.WithoutCancel(ctx)
	if observe.FromContext(ctx) != nil {
		wctx = observe.WithRecorder(wctx, nil)
	}
	go m.work(wctx, id, e)
}

// work is id's background worker: it summarizes while messages keep
// arriving, then exits.
func (m *Summary) work(ctx context.Context, id identity, e *sumEntry) {
	for {
		m.mu.Lock()
		if !e.dirty || m.closed || m.waitingLocked(id) {
			// Exit in the same critical section that kick checks, so a
			// message arriving now starts a new worker.
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
		_ = m.step(ctx, id, e) // reported to the hook
		<-e.sem
	}
}

// step runs one summarization attempt with a context that Close and Clear
// can cancel. The caller holds e.sem.
func (m *Summary) step(ctx context.Context, id identity, e *sumEntry) error {
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
	return m.attempt(ctx, id)
}

// summarize calls the summarizer through callBounded: a panic is an
// error, and a call that outlives its context is abandoned.
func (m *Summary) summarize(ctx context.Context, prev string, batch []llms.ChatMessage) (string, error) {
	return callBounded(ctx, fmt.Sprintf("the summarizer %T", m.sum), func(ctx context.Context) (string, error) {
		return m.sum.Summarize(ctx, prev, batch)
	})
}

// sumPlan is one fold: the batch of messages and the state it builds on.
type sumPlan struct {
	prev    summaryState
	version int64
	batch   []llms.ChatMessage
	through int64
}

// attempt plans a fold for id and, if one is due, summarizes and commits it.
func (m *Summary) attempt(ctx context.Context, id identity) error {
	p, err := m.plan(ctx, id)
	if err != nil {
		m.report(id, 0, 0, err)
		return err
	}
	if p == nil {
		return nil
	}
	n := len(p.batch)
	start := time.Now()
	m.calls.Add(1)
	if _, offline := m.sum.(*summarizer.Extractive); !offline {
		observe.FromContext(ctx).LLMCall(1)
	}
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if m.timeout > 0 {
		sctx, cancel = context.WithTimeout(ctx, m.timeout)
	}
	text, err := m.summarize(sctx, p.prev.Summary, p.batch)
	timedOut := err != nil && ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded)
	cancel()
	if timedOut {
		err = fmt.Errorf("%w after %v: %w", ErrSummaryTimeout, m.timeout, err)
	}
	took := time.Since(start)
	if err == nil && strings.TrimSpace(text) == "" {
		err = fmt.Errorf("%w: the summarizer returned no text", summarizer.ErrEmptySummary)
	}
	if err != nil {
		m.failures.Add(1)
		if ctx.Err() == nil { // a cancelled call is not the summarizer's fault
			m.backoff(id)
		}
		err = fmt.Errorf("summarizing %d messages of %s: %w", n, id.Key(), err)
		m.report(id, n, took, err)
		return err
	}
	value, err := json.Marshal(summaryState{Summary: text, Through: p.through, Folded: p.prev.Folded + int64(n)})
	if err != nil {
		err = fmt.Errorf("encoding the summary of %s: %w", id.Key(), err)
		m.report(id, n, took, err)
		return err
	}
	if _, err := m.cfg.store.PutState(ctx, id, SummaryStateName, value, p.version); err != nil {
		err = fmt.Errorf("committing the summary of %s: %w", id.Key(), err)
		m.report(id, n, took, err)
		if errors.Is(err, store.ErrConflict) {
			// Another writer committed a summary first; ours was built on
			// an older one and is dropped, so nothing is folded twice.
			// Finish the other writer's commit; the next turn plans anew.
			m.tidy(context.WithoutCancel(ctx), id)
			return nil
		}
		return err
	}
	m.folded.Add(int64(n))
	m.mu.Lock()
	m.backoffs.Remove(id)
	m.mu.Unlock()
	// Committed. Under a retention, removing folded messages is
	// housekeeping (loads already skip them), so it is not cancelled with
	// the call and a failure is left for the next fold.
	m.retain(context.WithoutCancel(ctx), id, 0, p.through)
	m.report(id, n, took, nil)
	return nil
}

// tidy re-reads id's state and, under a retention, removes the messages
// it lets go.
func (m *Summary) tidy(ctx context.Context, id identity) {
	if m.cfg.retention == nil {
		return
	}
	if st, _, err := m.readState(ctx, id); err == nil && st.Through > 0 {
		m.retain(ctx, id, 0, st.Through)
	}
}

// backoff records one more failure of id and when to try it again. After
// Close it records nothing.
func (m *Summary) backoff(id identity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	b, _ := m.backoffs.Get(id)
	b.failures++
	d := m.retryMin
	for i := 1; i < b.failures && d < m.retryMax; i++ {
		d *= 2
	}
	d = min(d, m.retryMax)
	b.nextTry = time.Now().Add(d)
	m.backoffs.Add(id, b)
}

func (m *Summary) report(id identity, n int, took time.Duration, err error) {
	if m.cfg.summaryHook != nil {
		m.cfg.summaryHook(SummaryEvent{IdentityHash: m.HashIdentity(id), Messages: n, Duration: took, Err: m.redact(err, id)})
	}
}

// readState returns id's summary state and its version: for an absent
// state the zero summaryState and the store's absent version, which a
// Clear or Forget moves (see package store).
func (m *Summary) readState(ctx context.Context, id identity) (summaryState, int64, error) {
	st, err := m.cfg.store.GetState(ctx, id, SummaryStateName)
	if err != nil {
		return summaryState{}, 0, fmt.Errorf("memstack: reading the summary of %s: %w", id.Key(), err)
	}
	var s summaryState
	if !st.Exists() {
		return s, st.Version, nil // the absent version: a Clear or Forget moves it
	}
	if err := json.Unmarshal(st.Value, &s); err != nil {
		return summaryState{}, 0, fmt.Errorf("memstack: the stored summary of %s (state %q) is not valid JSON: %w", id.Key(), SummaryStateName, err)
	}
	return s, st.Version, nil
}

// unsummarized reads id's summary state, then the system messages and
// the non-system messages the summary does not cover (store Tail after
// the covered Seq), both in order: what a load shows. The state is read
// again after the messages and the pair retried until it is unchanged: a
// Clear in between (by any replica) would otherwise pair the cleared
// summary with messages saved after the Clear, and under a retention a
// fold committed in between may remove messages the first read does not
// cover.
func (m *Summary) unsummarized(ctx context.Context, id identity) (summaryState, []store.Record, []store.Record, error) {
	for attempt := 0; ; attempt++ {
		st, version, err := m.readState(ctx, id)
		if err != nil {
			return summaryState{}, nil, nil, err
		}
		recs, err := m.cfg.store.Tail(ctx, id, math.MaxInt, st.Through)
		if err != nil {
			return summaryState{}, nil, nil, fmt.Errorf("memstack: loading history: %w", err)
		}
		if attempt < 8 {
			_, again, err := m.readState(ctx, id)
			if err != nil {
				return summaryState{}, nil, nil, err
			}
			if again != version {
				continue
			}
		}
		system, rest := split(recs)
		return st, system, rest, nil
	}
}

// plan returns the fold due for id, or nil if none is.
func (m *Summary) plan(ctx context.Context, id identity) (*sumPlan, error) {
	// The state before the messages: the fold commits with the version
	// read here, so a Clear or Forget after this read — by this process
	// or another replica — makes the commit conflict, and one before it
	// is seen by the read of the messages below. Read the other way
	// round, a Clear in between would hand the fold the cleared messages
	// and the cleared state's new version, and the commit would bring the
	// cleared text back. (A fold committed by another writer in between
	// makes the commit conflict too.) The messages read are those after
	// the covered Seq only (Tail), so a plan costs what a load shows.
	prev, version, err := m.readState(ctx, id)
	if err != nil {
		return nil, err
	}
	recs, err := m.cfg.store.Tail(ctx, id, math.MaxInt, prev.Through)
	if err != nil {
		return nil, fmt.Errorf("reading the messages of %s: %w", id.Key(), err)
	}
	_, rest := split(recs)
	var cut int
	if m.tokenMode {
		if cut, err = m.tokenCut(id, rest); err != nil {
			return nil, err
		}
	} else if len(rest) > m.n {
		cut = batchEnd(rest, max(m.m, len(rest)-m.n), false)
	}
	if cut == 0 {
		return nil, nil
	}
	return &sumPlan{prev: prev, version: version, batch: messagesOf(rest[:cut]), through: rest[cut-1].Seq}, nil
}

// tokenCut returns how many of the oldest messages of rest to fold in token
// mode: 0 while they are within t tokens, else enough that about t/2 remain.
// A bad count (tokens.Count) is an error: nothing is folded.
func (m *Summary) tokenCut(id identity, rest []store.Record) (int, error) {
	costs := make([]int, len(rest))
	total := 0
	for i, r := range rest {
		c, err := m.cost(id, r)
		if err != nil {
			return 0, fmt.Errorf("counting the tokens of message Seq %d of %s: %w", r.Seq, id.Key(), err)
		}
		costs[i] = c
		total = min(total+c, math.MaxInt/2)
	}
	if total <= m.t {
		return 0, nil
	}
	k, left := 0, total
	for k < len(rest) && left > m.t/2 {
		left -= costs[k]
		k++
	}
	return batchEnd(rest, k, true), nil
}

// cost is a message's token cost: its rendered line plus the line break,
// cached per (identity, Seq), capped at 2^40 so sums never wrap. A
// negative count or a panicking counter is an error (tokens.Count), never
// cached.
func (m *Summary) cost(id identity, r store.Record) (int, error) {
	k := tokenKey{id, r.Seq}
	if m.counts != nil {
		if n, ok := m.counts.Get(k); ok {
			return n, nil
		}
	}
	line, err := adapter.RenderLine(r.Message, m.cfg.humanPrefix, m.cfg.aiPrefix)
	if err != nil {
		return math.MaxInt / 4, nil
	}
	n, err := tokens.Count(m.counter, line)
	if err != nil {
		return 0, err
	}
	n = min(n, 1<<40) + 1
	if m.counts != nil {
		m.counts.Add(k, n)
	}
	return n, nil
}

// batchEnd returns where a batch of the oldest messages of rest that should
// hold at least k messages ends (the number of messages in it), or 0 for no
// batch. The end is a turn boundary (just before a human message) at or
// after k; if rest has no human message after its first, any boundary that
// keeps a tool call with its results. The newest message is never included.
// With back set, when no boundary lies at or after k, the latest boundary
// before k is used instead.
func batchEnd(rest []store.Record, k int, back bool) int {
	if len(rest) < 2 {
		return 0
	}
	k = min(max(k, 1), len(rest)-1)
	ok := func(c int) bool { return rest[c].Message.GetType() == llms.ChatMessageTypeHuman }
	hasHuman := false
	for _, r := range rest[1:] {
		if r.Message.GetType() == llms.ChatMessageTypeHuman {
			hasHuman = true
			break
		}
	}
	if !hasHuman {
		starts := groupStarts(rest)
		ok = func(c int) bool { return starts[c] == c }
	}
	for c := k; c < len(rest); c++ {
		if ok(c) {
			return c
		}
	}
	if back {
		for c := k - 1; c > 0; c-- {
			if ok(c) {
				return c
			}
		}
	}
	return 0
}

// groupStarts returns, for each message, the index of the first message of
// its group: an AI message that calls tools with the results that follow
// it, or any other single message (as in RecentN).
func groupStarts(rest []store.Record) []int {
	starts := make([]int, len(rest))
	open := -1
	for i, r := range rest {
		switch {
		case callsTools(r.Message):
			open, starts[i] = i, i
		case isToolResult(r.Message) && open >= 0:
			starts[i] = open
		case r.Message.GetType() == llms.ChatMessageTypeSystem:
			// A system message between a tool call and its results is a
			// unit of its own and does not end the call's group: the
			// results stay with their call.
			starts[i] = i
		default:
			open, starts[i] = -1, i
		}
	}
	return starts
}
