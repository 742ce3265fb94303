// Package fold is the mechanism of memories.Summary: it keeps each
// conversation's running summary, and a user's conversations' summaries,
// in step with the store. What a load shows, in what order and how — the
// policy — is memories.Summary's; its type doc is the user's manual.
//
// Words: a conversation's running summary is a State (JSON in the store's
// state Config.StateName) — the summary text, the Seq of the newest
// message it covers (Through) and how many messages it folded. A fold
// summarizes a batch of the oldest messages the summary does not cover
// into a new summary, in one summarizer call.
//
//   - Plan. A pass reads the State (and its version) first, then only the
//     messages after Through (store Tail), so a plan costs what a load
//     shows. In count mode a fold is due when more than
//     Config.MaxMessages non-system messages are uncovered: the batch
//     takes at least Config.BatchSize of them, and the whole excess when
//     they piled up. In token mode (Config.MaxTokens > 0) it is due above
//     MaxTokens (each message costs Config.Cost), and folds until about
//     MaxTokens/2 remain. System messages are never folded.
//   - Batch boundaries. A batch ends at an exchange boundary (just before
//     a human message), so a tool call stays with its results; when the
//     messages after the first hold no human message, at any tool group
//     boundary. The newest message always stays raw. A batch that finds
//     no boundary waits for one (in token mode it takes the latest one
//     before the cut instead).
//   - Summarizing. The summarizer is called through bounded.Call (a panic
//     is an error; a call that outlives its context is abandoned), each
//     call bounded by Config.Timeout (its error then wraps
//     Config.ErrTimeout). An empty answer is a failure.
//   - Commit with compare-and-set. The new State is put with the version
//     read before the messages. A Clear or Forget of the conversation
//     after that read (by any replica) moves the version, so the commit
//     conflicts and the cleared text never comes back; a Clear before it
//     is seen by the read of the messages. Read the other way round, a
//     Clear in between would hand the fold the cleared state's version.
//   - Conflicts. When another writer committed first, the fold is
//     dropped (it was built on an older summary) and reported with
//     store.ErrConflict; nothing is folded twice and no retry is needed:
//     the next pass plans anew. The engine finishes the other writer's
//     retention.
//   - Backoff. A failed summarizer call (not a cancelled one) puts the
//     conversation in a retry backoff, Config.RetryMin doubling up to
//     RetryMax, kept for the Config.MaxBackoffs conversations that failed
//     most recently; Waiting tells the worker pool to skip it meanwhile. A
//     commit, a Clear (Cleared) and Close end backoffs.
//   - Retention. A fold removes no message: loads read past Through.
//     Under a retention (Config.Retain) a committed fold then removes the
//     covered messages the retention lets go, as housekeeping not
//     cancelled with the call; a crash in between loses and duplicates
//     nothing, the next fold removes the leftovers.
//   - Earlier conversations (Config.Earlier > 0). A conversation's summary
//     is completed — its running summary with every uncovered message
//     folded in, one call — and recorded under the user's identity
//     {Tenant, User, store.UserSummariesConversation} in the state
//     Config.UsersStateName, at most 32 per user, newest first, each
//     update a compare-and-set retried on conflicts. The first pass of a
//     conversation in a process completes the user's Earlier most recent
//     other conversations that have uncovered messages; Complete does it
//     for one conversation when it ends. A completion runs through
//     Config.Alone, so a Clear of that conversation cancels it, waits for
//     it, then removes what it recorded: otherwise a completion finishing
//     after the Clear would bring the cleared conversation's text back. A
//     completion that finds its conversation cleared or forgotten
//     meanwhile (by any replica) takes its summary back, and Earlier never
//     returns the summary of a conversation the store no longer holds.
//
// The engine counts summarizer calls, failures and messages folded
// (Counts) and reports every fold attempt to Config.Report.
package fold

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/memstack/memstack"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

type identity = memstack.Identity

// Config is what an Engine works with.
type Config struct {
	// Store holds the messages, the running summaries and the users'
	// summaries.
	Store store.Store
	// Summarizer folds messages into a summary.
	Summarizer summarizer.Summarizer
	// StateName names the state holding a conversation's State.
	StateName string
	// MaxMessages and BatchSize are the count mode's n and m (see
	// "Plan"); MaxTokens > 0 selects token mode instead, where Cost is a
	// message's token cost.
	MaxMessages, BatchSize int
	MaxTokens              int
	Cost                   func(id memstack.Identity, r store.Record) (int, error)
	// Timeout bounds each summarizer call of a fold (0: none); the error
	// of a call that ran out of it wraps ErrTimeout.
	Timeout    time.Duration
	ErrTimeout error
	// RetryMin and RetryMax bound the retry backoff; MaxBackoffs is how
	// many conversations' backoffs (and first passes) are kept.
	RetryMin, RetryMax time.Duration
	MaxBackoffs        int
	// Earlier, if > 0, keeps the users' conversations' summaries and
	// completes that many earlier conversations at a conversation's first
	// pass; UsersStateName names their state.
	Earlier        int
	UsersStateName string
	// Report, if not nil, gets every fold attempt: the messages it tried
	// to fold (0 when no batch was chosen), how long the summarizer took,
	// its error (nil when committed).
	Report func(id memstack.Identity, n int, took time.Duration, err error)
	// Retain, if not nil, applies the retention to id, removing no
	// message newer than Seq limit.
	Retain func(ctx context.Context, id memstack.Identity, limit int64)
	// Closed reports whether the layer is closed: no backoff is recorded
	// then.
	Closed func() bool
	// Alone runs f for id with no pass and no Clear of id running, so
	// that a Clear of id cancels it (worker.Pool.Cancelable).
	Alone func(ctx context.Context, id memstack.Identity, f func(context.Context) error) error
}

// Engine keeps the running summaries in Config.Store up to date. It is
// safe for concurrent use.
type Engine struct {
	cfg                     Config
	offline                 bool // the summarizer is extractive: no model call
	calls, failures, folded atomic.Int64

	// mu guards backoffs, the retry backoffs of the conversations whose
	// last fold failed, and started, the conversations whose first pass
	// ran in this process (Earlier: that pass completes the user's
	// earlier conversations), the most recent of each.
	mu       sync.Mutex
	backoffs *simplelru.LRU[identity, backoff]
	started  *simplelru.LRU[identity, struct{}]
}

// backoff is the retry backoff of a conversation whose folds failed.
type backoff struct {
	failures int // consecutive summarizer failures
	nextTry  time.Time
}

// New returns an Engine for c.
func New(c Config) *Engine {
	x := &Engine{cfg: c}
	_, x.offline = c.Summarizer.(*summarizer.Extractive)
	x.backoffs, _ = simplelru.NewLRU[identity, backoff](c.MaxBackoffs, nil)
	x.started, _ = simplelru.NewLRU[identity, struct{}](c.MaxBackoffs, nil)
	return x
}

// Counts returns the summarizer calls made, those that failed, and the
// messages folded into committed summaries.
func (x *Engine) Counts() (calls, failures, folded int64) {
	return x.calls.Load(), x.failures.Load(), x.folded.Load()
}

// Run is one pass for id (worker.Config.Run): at a conversation's first
// pass in this process it completes the user's earlier conversations,
// then it folds if a fold is due. In the background the call's
// observe.Recorder is dropped: the call's report is done before the
// worker summarizes.
func (x *Engine) Run(ctx context.Context, id memstack.Identity, background bool) error {
	if background && observe.FromContext(ctx) != nil {
		ctx = observe.WithRecorder(ctx, nil)
	}
	if x.cfg.Earlier > 0 && !x.startedHere(id) {
		// The user's next conversation starts (or this process serves it
		// for the first time): complete the earlier ones first. A failure
		// is reported and never holds up this conversation's own
		// summarization; the earlier conversation is completed when the
		// user's next conversation starts, or by Complete.
		if err := x.completeEarlier(ctx, id); err != nil {
			if ctx.Err() != nil {
				return err
			}
			x.report(id, 0, 0, err)
		}
		x.noteStarted(id)
	}
	return x.attempt(ctx, id)
}

// Waiting reports whether id's retry backoff has not passed yet
// (worker.Config.Wait).
func (x *Engine) Waiting(id memstack.Identity) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	b, ok := x.backoffs.Peek(id)
	return ok && time.Now().Before(b.nextTry)
}

// Backoffs returns how many conversations' retry backoffs are kept.
func (x *Engine) Backoffs() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.backoffs.Len()
}

// Cleared is what a Clear of id does to the engine's bookkeeping once
// its messages are gone (with no pass of id running): it ends id's
// backoff and removes its summary from its user's.
func (x *Engine) Cleared(ctx context.Context, id memstack.Identity) error {
	x.endBackoff(id)
	if x.cfg.Earlier > 0 {
		if err := x.forgetEarlier(ctx, id); err != nil {
			return fmt.Errorf("memstack: messages cleared; clearing the conversation's summary: %w", err)
		}
	}
	return nil
}

// Close drops every backoff.
func (x *Engine) Close() {
	x.mu.Lock()
	x.backoffs.Purge()
	x.mu.Unlock()
}

// backoffOnce records one more failure of id and when to try it again.
// After Close it records nothing.
func (x *Engine) backoffOnce(id identity) {
	if x.cfg.Closed != nil && x.cfg.Closed() {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	b, _ := x.backoffs.Get(id)
	b.failures++
	d := x.cfg.RetryMin
	for i := 1; i < b.failures && d < x.cfg.RetryMax; i++ {
		d *= 2
	}
	d = min(d, x.cfg.RetryMax)
	b.nextTry = time.Now().Add(d)
	x.backoffs.Add(id, b)
}

// endBackoff ends id's backoff.
func (x *Engine) endBackoff(id identity) {
	x.mu.Lock()
	x.backoffs.Remove(id)
	x.mu.Unlock()
}

// startedHere reports whether the user's earlier conversations were
// completed at a pass of id in this process (see completeEarlier).
func (x *Engine) startedHere(id identity) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.started.Contains(id)
}

// noteStarted records that they were.
func (x *Engine) noteStarted(id identity) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.started.Add(id, struct{}{})
}

// report passes one fold attempt to Config.Report.
func (x *Engine) report(id identity, n int, took time.Duration, err error) {
	if x.cfg.Report != nil {
		x.cfg.Report(id, n, took, err)
	}
}

// llmCall counts a summarizer call in ctx's observe.Recorder, unless the
// summarizer makes no model call.
func (x *Engine) llmCall(ctx context.Context) {
	if !x.offline {
		observe.FromContext(ctx).LLMCall(1)
	}
}
