package memories

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/tokens"
)

// ErrInvalidOption is wrapped by errors about a bad option or constructor
// argument; the message names the option and the value.
var ErrInvalidOption = errors.New("memories: invalid option")

// BufferOption configures a Buffer (NewBuffer).
type BufferOption interface{ applyBuffer(*config) }

// RecentNOption configures a RecentN (NewRecentN).
type RecentNOption interface{ applyRecentN(*config) }

// TokenWindowOption configures a TokenWindow (NewTokenWindow).
type TokenWindowOption interface{ applyTokenWindow(*config) }

// SummaryOption configures a Summary (NewSummary).
type SummaryOption interface{ applySummary(*config) }

// FactsOption configures a Facts memory (NewFacts).
type FactsOption interface{ applyFacts(*config) }

// RecallOption configures a Recall (NewRecall).
type RecallOption interface{ applyRecall(*config) }

// Option is an option of every memory type: it satisfies each type's
// option interface.
//
// Options are typed, as OpenTelemetry-Go's are: each memory type has an
// option interface of its own (BufferOption, RecentNOption,
// TokenWindowOption, SummaryOption, FactsOption, RecallOption), and each
// With… function returns a type that satisfies the interfaces of exactly
// the types it applies to, so an option given to a type it does not apply
// to does not compile: memories.NewBuffer(memories.WithK(2)) is a compile
// error, not a run-time one.
//
//   - Option (every type): WithMemoryKey, WithStore, WithReturnMessages,
//     WithInputKey, WithOutputKey, WithHumanPrefix, WithAIPrefix,
//     WithDefaultIdentity, WithRequireIdentity, WithHashKey, WithCacheSize.
//   - TokenCounterOption (TokenWindow, Summary, Facts, Recall — the types
//     that count tokens): WithTokenCounter.
//   - RetentionOption (RecentN, TokenWindow, Summary): WithRetention.
//   - BackgroundOption (Summary, Facts): WithBackground.
//   - SummaryOption only: WithMaxMessages, WithBatchSize, WithMaxTokens,
//     WithSummaryHook, WithSummaryTimeout, WithRetryBackoff.
//   - FactsOption only: WithMaxPerTurn, WithMaxFacts, WithFactTokens,
//     WithClock, WithFactsHook, WithFactsPerUser, WithExtractTimeout.
//   - RecallOption only: WithK, WithThreshold, WithNeighbours,
//     WithRecallUnit, WithContextWeight, WithNeighbourShare,
//     WithQueryDates, WithRecallDates, WithExcludeRecent, WithIndex,
//     WithVector, WithHybrid, WithRecallTimeout, WithRecallHook.
//
// A bad value (a nil store, an empty key, a negative size, a nil option)
// is still found at run time: the constructor returns an error wrapping
// ErrInvalidOption that names the option; no constructor panics.
//
// To keep options in a slice, use the type of the constructor they are
// for: []memories.SummaryOption{memories.WithStore(st),
// memories.WithMaxMessages(8)}.
type Option interface {
	BufferOption
	RecentNOption
	TokenWindowOption
	SummaryOption
	FactsOption
	RecallOption
}

// TokenCounterOption is an option of the types that count tokens:
// TokenWindow, Summary, Facts and Recall (WithTokenCounter).
type TokenCounterOption interface {
	TokenWindowOption
	SummaryOption
	FactsOption
	RecallOption
}

// RetentionOption is an option of the types that may remove old messages
// from their store: RecentN, TokenWindow and Summary (WithRetention).
type RetentionOption interface {
	RecentNOption
	TokenWindowOption
	SummaryOption
}

// BackgroundOption is an option of the types that may work in the
// background: Summary and Facts (WithBackground).
type BackgroundOption interface {
	SummaryOption
	FactsOption
}

// The concrete option types: each has the apply methods of the types it
// applies to, and no other.
type (
	sharedOpt     func(*config)
	counterOpt    func(*config)
	retentionOpt  func(*config)
	backgroundOpt func(*config)
	summaryOpt    func(*config)
	factsOpt      func(*config)
	recallOpt     func(*config)
)

func (o sharedOpt) applyBuffer(c *config)      { o(c) }
func (o sharedOpt) applyRecentN(c *config)     { o(c) }
func (o sharedOpt) applyTokenWindow(c *config) { o(c) }
func (o sharedOpt) applySummary(c *config)     { o(c) }
func (o sharedOpt) applyFacts(c *config)       { o(c) }
func (o sharedOpt) applyRecall(c *config)      { o(c) }

func (o counterOpt) applyTokenWindow(c *config) { o(c) }
func (o counterOpt) applySummary(c *config)     { o(c) }
func (o counterOpt) applyFacts(c *config)       { o(c) }
func (o counterOpt) applyRecall(c *config)      { o(c) }

func (o retentionOpt) applyRecentN(c *config)     { o(c) }
func (o retentionOpt) applyTokenWindow(c *config) { o(c) }
func (o retentionOpt) applySummary(c *config)     { o(c) }

func (o backgroundOpt) applySummary(c *config) { o(c) }
func (o backgroundOpt) applyFacts(c *config)   { o(c) }

func (o summaryOpt) applySummary(c *config) { o(c) }
func (o factsOpt) applyFacts(c *config)     { o(c) }
func (o recallOpt) applyRecall(c *config)   { o(c) }

type config struct {
	memoryKey      string
	inputKey       string
	outputKey      string
	humanPrefix    string
	aiPrefix       string
	returnMessages bool
	defaultID      memstack.Identity
	requireID      bool
	hashKey        []byte
	store          store.Store
	counter        tokens.Counter
	cacheSize      int
	errs           []error

	// Summary settings (see summary.go); the *Set fields record whether
	// an option set them, for the checks that involve two options.
	maxMessages    int
	maxMessagesSet bool
	earlier        int // WithEarlierSummaries
	batchSize      int
	batchSizeSet   bool
	maxTokens      int
	background     bool
	summaryHook    func(SummaryEvent)
	retryMin       time.Duration
	retryMax       time.Duration
	retrySet       bool
	sumTimeout     time.Duration
	sumTimeoutSet  bool

	// retention is WithRetention's (RecentN, TokenWindow, Summary); nil
	// without it.
	retention *Retention

	// Settings of the long-term layers, each owned by its type's file.
	facts  factsSettings
	recall recallSettings
}

const defaultCacheSize = 1024

// newConfig applies opts, each by apply (the method of the constructor's
// option interface, such as BufferOption.applyBuffer). A nil option is an
// error naming its position.
func newConfig[O any](opts []O, apply func(O, *config)) config {
	c := config{
		memoryKey:   adapter.DefaultMemoryKey,
		humanPrefix: adapter.DefaultHumanPrefix,
		aiPrefix:    adapter.DefaultAIPrefix,
		cacheSize:   defaultCacheSize,
	}
	for i, o := range opts {
		if any(o) == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: option %d of %d is nil", ErrInvalidOption, i+1, len(opts)))
			continue
		}
		apply(o, &c)
	}
	if c.store == nil && len(c.errs) == 0 {
		c.store = store.NewInMemory()
	}
	return c
}

func (c *config) bad(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
}

// WithMemoryKey sets the name of the variable the memory loads (default
// "history", as in langchaingo). An empty key is an error.
func WithMemoryKey(key string) Option {
	return sharedOpt(func(c *config) {
		if key == "" {
			c.bad("WithMemoryKey(%q): the memory key must not be empty", key)
			return
		}
		c.memoryKey = key
	})
}

// WithReturnMessages makes the memory load a []llms.ChatMessage (a fresh
// copy the caller may change) instead of a rendered string; use it with chat
// prompt templates (prompts.MessagesPlaceholder).
func WithReturnMessages(returnMessages bool) Option {
	return sharedOpt(func(c *config) { c.returnMessages = returnMessages })
}

// WithInputKey names the entry of a chain's input map that is the user's
// message. Without it the input map must hold exactly one entry, as in
// langchaingo.
func WithInputKey(key string) Option {
	return sharedOpt(func(c *config) { c.inputKey = key })
}

// WithOutputKey names the entry of a chain's output map that is the model's
// answer. Without it the output map must hold exactly one entry besides an
// agent executor's "intermediateSteps".
func WithOutputKey(key string) Option {
	return sharedOpt(func(c *config) { c.outputKey = key })
}

// WithHumanPrefix sets the role name of human messages in the rendered
// history (default "Human").
func WithHumanPrefix(prefix string) Option {
	return sharedOpt(func(c *config) { c.humanPrefix = prefix })
}

// WithAIPrefix sets the role name of AI messages in the rendered history
// (default "AI").
func WithAIPrefix(prefix string) Option {
	return sharedOpt(func(c *config) { c.aiPrefix = prefix })
}

// WithDefaultIdentity sets the identity used by calls whose context carries
// none (see memstack.WithIdentity). The default is the zero Identity: one
// shared conversation, which is what plain langchaingo use expects.
func WithDefaultIdentity(id memstack.Identity) Option {
	return sharedOpt(func(c *config) { c.defaultID = id })
}

// WithHashKey makes the memory name identities in its reports and events
// (observe Reports, SummaryEvent, FactsEvent, RecallEvent) by
// memstack.Identity.KeyedHash with secret instead of the unsalted
// Identity.Hash, so that telemetry cannot be matched against a list of
// likely user ids. Keep the secret like a password, and give every memory
// of a stack the same one so their reports agree. An empty secret is an
// error.
func WithHashKey(secret []byte) Option {
	return sharedOpt(func(c *config) {
		if len(secret) == 0 {
			c.bad("WithHashKey: the secret must not be empty")
			return
		}
		c.hashKey = bytes.Clone(secret)
	})
}

// WithRequireIdentity makes every call whose context carries no identity
// fail with memstack.ErrNoIdentity, so a multi-user service cannot fall back
// to a shared conversation by mistake.
func WithRequireIdentity() Option {
	return sharedOpt(func(c *config) { c.requireID = true })
}

// WithStore sets where the memory keeps its messages (default: a new
// store.InMemory of its own). One store may serve every layer of a stack:
// it keeps one transcript per conversation, no memory removes a message
// unless given a retention (WithRetention), and combined.Memory stores
// each turn there once (see the package documentation, Storage). A nil
// store is an error.
func WithStore(s store.Store) Option {
	return sharedOpt(func(c *config) {
		if s == nil {
			c.bad("WithStore(nil): the store must not be nil")
			return
		}
		c.store = s
	})
}

// WithTokenCounter sets how the types that count tokens — TokenWindow,
// Summary's token mode, Facts (WithFactTokens) and Recall (under a token
// budget) — count them (default: offline cl100k_base, tokens.CL100K). It
// is not an option of Buffer or RecentN, which count no tokens. A nil
// counter is an error.
func WithTokenCounter(counter tokens.Counter) TokenCounterOption {
	return counterOpt(func(c *config) {
		if counter == nil {
			c.bad("WithTokenCounter(nil): the counter must not be nil")
			return
		}
		c.counter = counter
	})
}

// WithCacheSize sets for how many identities a memory keeps derived state
// (Buffer's rendered history; TokenWindow keeps 64 token counts per
// identity slot) in process memory, least recently used first out
// (default 1024). 0 turns caching off; a negative size is an error.
// Caches are only an optimisation: they are checked against the store on
// every load, so they are never stale. It is an option of every type;
// RecentN and Facts keep no such cache, so there it only checks n.
func WithCacheSize(n int) Option {
	return sharedOpt(func(c *config) {
		if n < 0 {
			c.bad("WithCacheSize(%d): the size must not be negative", n)
			return
		}
		c.cacheSize = n
	})
}

// WithMaxMessages sets how many unsummarized non-system messages a Summary
// keeps raw (default 15): when there are more, the oldest batch is folded
// into the running summary (see WithBatchSize). n < 1 is an error, and so
// is combining it with WithMaxTokens.
func WithMaxMessages(n int) SummaryOption {
	return summaryOpt(func(c *config) {
		if n < 1 {
			c.bad("WithMaxMessages(%d): n must be at least 1", n)
			return
		}
		c.maxMessages, c.maxMessagesSet = n, true
	})
}

// WithBatchSize sets the least number of messages a Summary folds into its
// summary in one call (default 6, or the WithMaxMessages value if that is
// smaller). A batch is extended to a whole turn. m < 1 is an error, and so
// is an m larger than WithMaxMessages's n.
func WithBatchSize(m int) SummaryOption {
	return summaryOpt(func(c *config) {
		if m < 1 {
			c.bad("WithBatchSize(%d): the batch size must be at least 1", m)
			return
		}
		c.batchSize, c.batchSizeSet = m, true
	})
}

// WithMaxTokens puts a Summary in token mode: when its unsummarized
// messages exceed t tokens (counted as TokenWindow counts them, with
// WithTokenCounter's counter), the oldest are folded in one call until about
// t/2 remain. t < 1 is an error, and so is combining it with WithMaxMessages
// or WithBatchSize (count mode).
func WithMaxTokens(t int) SummaryOption {
	return summaryOpt(func(c *config) {
		if t < 1 {
			c.bad("WithMaxTokens(%d): the token limit must be at least 1", t)
			return
		}
		c.maxTokens = t
	})
}

// WithBackground makes a Summary summarize in the background: SaveContext
// and AddMessage store the message and return, and summarization runs in a
// goroutine, at most one per identity at a time. Summary.Flush waits for it
// and Summary.Close stops it. Failures are reported to the WithSummaryHook
// hook and counted in Summary.Stats. It does the same for Facts: extraction
// runs off the save path (Facts.Flush, Facts.Close, WithFactsHook).
func WithBackground(background bool) BackgroundOption {
	return backgroundOpt(func(c *config) {
		c.background = background
	})
}

// WithSummaryHook sets a function that a Summary calls after each
// summarization attempt (successful or not) with what happened. It is called
// from the goroutine that summarized — the caller's in synchronous mode, a
// background goroutine otherwise — possibly concurrently for different
// identities; it must be quick and safe for concurrent use. A nil hook is an
// error.
func WithSummaryHook(hook func(SummaryEvent)) SummaryOption {
	return summaryOpt(func(c *config) {
		if hook == nil {
			c.bad("WithSummaryHook(nil): the hook must not be nil")
			return
		}
		c.summaryHook = hook
	})
}

// WithSummaryTimeout bounds each summarizer call of a Summary (default
// DefaultSummaryTimeout, 2 minutes): a call that has not returned by then is
// abandoned — even one that ignores its context: a quarter of a second
// after the context ends it is left to go on in its own goroutine, and its
// late answer is discarded — counted as a failure
// (errors.Is ErrSummaryTimeout), reported and retried after the backoff,
// with the messages kept raw. (A summarizer that panics is a failure too,
// never a crash.) It matters most
// in background mode, where no caller's deadline reaches the model call: a
// model that never answers would otherwise stall that identity's
// summarization until Close. 0 turns the bound off; d < 0 is an error.
func WithSummaryTimeout(d time.Duration) SummaryOption {
	return summaryOpt(func(c *config) {
		if d < 0 {
			c.bad("WithSummaryTimeout(%v): the timeout must not be negative", d)
			return
		}
		c.sumTimeout, c.sumTimeoutSet = d, true
	})
}

// WithRetryBackoff sets how long a Summary waits, after its summarizer
// fails for an identity, before it tries that identity again (default 1s
// doubling up to 1m): min after the first failure, doubling after each
// further one, at most max. Until then turns are stored and nothing is
// summarized for that identity. min < 0 or max < min is an error; 0, 0 retries at
// the next turn.
func WithRetryBackoff(min, max time.Duration) SummaryOption {
	return summaryOpt(func(c *config) {
		if min < 0 || max < min {
			c.bad("WithRetryBackoff(%v, %v): need 0 <= min <= max", min, max)
			return
		}
		c.retryMin, c.retryMax, c.retrySet = min, max, true
	})
}

// Retention is a rule for removing a conversation's old messages from a
// memory's store (WithRetention). Build one with KeepLast.
type Retention struct {
	keep int
}

// KeepLast is the retention that keeps the newest n non-system messages
// of each conversation and lets the memory remove older ones (system
// messages are always kept: they are pinned). n < 0 is an error when
// the option is applied.
func KeepLast(n int) Retention { return Retention{keep: n} }

// Keep returns how many of the newest non-system messages r keeps.
func (r Retention) Keep() int { return r.keep }

// String describes r, as in "KeepLast(50)".
func (r Retention) String() string { return fmt.Sprintf("KeepLast(%d)", r.keep) }

// WithRetention lets a RecentN, TokenWindow or Summary remove old messages
// from its store: without it no memory removes a message (a store is one
// transcript that every layer over it reads; see package store, "One
// transcript"). With it, after a save, the memory removes the non-system
// messages older than the newest r.Keep() ones of the conversation, in
// batches (once 16 more are due), never splitting a tool call from its
// results; a Summary removes only messages its summary already covers.
// Use it when the memory is the only reader of its store and the store
// must stay small.
//
// What each layer sees under it: a RecentN(n) or TokenWindow shows its
// window of the messages kept (a RecentN needs r.Keep() >= n, or its
// window could not fill: an error); a Summary shows its summary and the
// messages it has not folded, which the retention never removes. Another
// memory that reads the same store would lose what this one removes, so
// combined.New refuses a stack where a retention removes messages another
// layer on the same store can read (a Buffer, Recall, Facts, Summary or
// TokenWindow, or a RecentN whose n exceeds r.Keep()). r.Keep() < 0 is an
// error, and so is r.Keep() == 0 for a window (it would show nothing).
func WithRetention(r Retention) RetentionOption {
	return retentionOpt(func(c *config) {
		if r.keep < 0 {
			c.bad("WithRetention(%s): the messages kept must not be negative", r)
			return
		}
		c.retention = &r
	})
}
