// Package observe reports what memory layers do: for each load and save of
// each layer, which items it injected into the prompt and which it dropped
// (with the reason and score), how many tokens, how long it took, and how
// many LLM and embedding calls it made — so "what was injected and why" is
// never a mystery.
//
// The design has two halves:
//
//   - Layers record. During a call, a layer takes the Recorder from its
//     context (FromContext) and notes what it does: Injected, Dropped,
//     LLMCall, EmbeddingCall, Tokens, and for a save SavedAt. With no
//     observer configured the context carries no Recorder, FromContext
//     returns nil, and every method of a nil *Recorder is a no-op —
//     recording costs nothing when it is off.
//   - Observers emit. Whoever calls the layer (combined.Memory with
//     combined.WithObserver, or Wrap around a single memory) puts a fresh
//     Recorder in the context (StartRecorder, naming the identity with
//     IdentityHash), times the call (FinishNow), and hands the finished
//     Report to a Sink: a plain Go func (SinkFunc), log/slog (Slog), or
//     OpenTelemetry spans and metrics (otelobserve.New, in the module
//     github.com/memstack/memstack/observe/otelobserve).
//
// Reports never contain message text or user identities: items are named by
// an ID (a Seq, a fact key) and the identity by memstack.Identity.Hash; an
// error a report carries names the identity by its hash too (Redact), as
// do the errors of memories' own events (Summary, Facts, Recall hooks).
// They do carry times: when each item was stored (Item.Time) and, for a
// save, the time its messages were dated with (Report.At) — the time a
// caller gave with memstack.WithTime when it replays a history.
package observe

import (
	"context"
	"sync"
	"time"
)

// Operations reported.
const (
	OpLoad  = "load"
	OpSave  = "save"
	OpAdd   = "add"
	OpClear = "clear"
)

// Reasons an item is dropped (layers may use others).
const (
	ReasonBudget         = "budget"          // over the token budget
	ReasonWindow         = "outside_window"  // older than a window shows
	ReasonThreshold      = "below_threshold" // relevance score under the threshold
	ReasonRank           = "below_top_k"     // ranked after the top k
	ReasonShownElsewhere = "shown_by_recent" // already shown by a recent window
	ReasonSuperseded     = "superseded"      // a newer value replaced it
	ReasonOverridden     = "overridden_key"  // a later layer loads the same variable
	ReasonDuplicate      = "duplicate"       // the same text as an item shown
)

// Item is one thing a layer injected or dropped. It names the thing, never
// its content.
type Item struct {
	// Kind is what the item is: "message", "summary", "fact", "exchange".
	Kind string
	// ID identifies the item within the layer (a Seq, a fact key).
	ID string
	// Score is the item's relevance score where the layer ranks items
	// (Recall); 0 otherwise.
	Score float64
	// Tokens is the item's size in tokens, when the layer knows it.
	Tokens int
	// Reason says why a dropped item was dropped (see the Reason
	// constants); empty for injected items.
	Reason string
	// Time is the stored time of what the item stands for: the time a
	// message was saved (store.Record.Time), an exchange's, or the time a
	// fact became valid. It is zero when the layer does not know it (a
	// summary; messages stored before memstack recorded times).
	Time time.Time
	// Conversation is the hash (as IdentityHash) of the conversation the
	// item comes from, when a layer shows items of more than one
	// conversation (a Recall searching a user's conversations); empty
	// otherwise.
	Conversation string
}

// Report is what one layer did in one call.
type Report struct {
	// Op is the operation: OpLoad, OpSave, OpAdd or OpClear.
	Op string
	// Layer names the layer (see combined.WithObserver and Wrap).
	Layer string
	// IdentityHash is memstack.Identity.Hash of the conversation, or the
	// layer's own hash of it (observe.IdentityHasher: a keyed hash).
	IdentityHash string
	// Injected and Dropped list the items the layer put into the prompt
	// and the ones it considered and left out.
	Injected []Item
	Dropped  []Item
	// Tokens is the size of what the layer injected, in tokens.
	Tokens int
	// Duration is how long the call took.
	Duration time.Duration
	// LLMCalls and EmbeddingCalls count the model calls the layer made.
	LLMCalls       int
	EmbeddingCalls int
	// Err is the call's error, if any.
	Err error
	// Start is when the call started: set by StartRecorder, zero with
	// NewRecorder (sinks then take the end as now and the start as
	// Duration before it).
	Start time.Time
	// At is, for a save (OpSave, OpAdd) that stored messages, the time
	// they were dated with: the time the caller gave with
	// memstack.WithTime, else the clock when they were saved (see
	// storekit.AppendTime), even for a store that keeps no times
	// (store.FromHistory). It is zero for other operations and for a save
	// that stored nothing. A replayed history reports the times of its
	// turns here, while Start stays the time the call ran.
	At time.Time
}

// Recorder collects one call's Report. All methods are safe for concurrent
// use and are no-ops on a nil *Recorder.
type Recorder struct {
	mu sync.Mutex
	r  Report
}

// NewRecorder returns a Recorder for one call of op on layer for the
// identity with hash idHash.
func NewRecorder(op, layer, idHash string) *Recorder {
	return &Recorder{r: Report{Op: op, Layer: layer, IdentityHash: idHash}}
}

// StartRecorder is NewRecorder that also notes the start time, for
// FinishNow and for the span start of the OpenTelemetry sink.
func StartRecorder(op, layer, idHash string) *Recorder {
	return &Recorder{r: Report{Op: op, Layer: layer, IdentityHash: idHash, Start: time.Now()}}
}

type recorderKey struct{}

// WithRecorder returns a copy of ctx that carries r.
func WithRecorder(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// FromContext returns the Recorder in ctx, or nil when nothing observes
// this call.
func FromContext(ctx context.Context) *Recorder {
	if ctx == nil {
		return nil
	}
	r, _ := ctx.Value(recorderKey{}).(*Recorder)
	return r
}

// Injected notes items the layer put into the prompt.
func (r *Recorder) Injected(items ...Item) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.r.Injected = append(r.r.Injected, items...)
	r.mu.Unlock()
}

// Dropped notes items the layer considered and left out.
func (r *Recorder) Dropped(items ...Item) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.r.Dropped = append(r.r.Dropped, items...)
	r.mu.Unlock()
}

// Tokens adds n to the size of what the layer injected.
func (r *Recorder) Tokens(n int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.r.Tokens += n
	r.mu.Unlock()
}

// LLMCall notes n calls to a language model.
func (r *Recorder) LLMCall(n int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.r.LLMCalls += n
	r.mu.Unlock()
}

// EmbeddingCall notes n calls to an embedding model.
func (r *Recorder) EmbeddingCall(n int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.r.EmbeddingCalls += n
	r.mu.Unlock()
}

// SavedAt notes the time the messages a save stored were dated with
// (Report.At).
func (r *Recorder) SavedAt(t time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.r.At = t
	r.mu.Unlock()
}

// Enabled reports whether r records anything; layers may skip work done
// only for reporting (such as listing dropped items) when it does not.
func (r *Recorder) Enabled() bool { return r != nil }

// Finish sets the call's duration and error and returns the Report (a copy
// the caller owns).
func (r *Recorder) Finish(d time.Duration, err error) Report {
	if r == nil {
		return Report{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.r.Duration, r.r.Err = d, err
	out := r.r
	out.Injected = append([]Item(nil), r.r.Injected...)
	out.Dropped = append([]Item(nil), r.r.Dropped...)
	return out
}

// FinishNow is Finish with the duration since StartRecorder (0 for a
// Recorder from NewRecorder).
func (r *Recorder) FinishNow(err error) Report {
	if r == nil {
		return Report{}
	}
	var d time.Duration
	r.mu.Lock()
	start := r.r.Start
	r.mu.Unlock()
	if !start.IsZero() {
		d = time.Since(start)
	}
	return r.Finish(d, err)
}

// Sink receives finished Reports. Implementations must be safe for
// concurrent use and should return quickly.
type Sink interface {
	Observe(ctx context.Context, r Report)
}

// SinkFunc adapts a function to Sink: the plain Go hook, for tests and
// custom sinks.
type SinkFunc func(ctx context.Context, r Report)

// Observe implements Sink.
func (f SinkFunc) Observe(ctx context.Context, r Report) { f(ctx, r) }
