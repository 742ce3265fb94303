package memories

import (
	"cmp"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/tokens"
	"github.com/tmc/langchaingo/embeddings"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/vectorstores"
)

// Defaults and names of the Recall memory.
const (
	// RecallMemoryKey is the variable a Recall loads unless WithMemoryKey
	// says otherwise.
	RecallMemoryKey = "relevant_history"
	// DefaultRecallK is how many units a Recall returns at most,
	// unless WithK says otherwise.
	DefaultRecallK = 3
	// DefaultRecallBudgetK is how many units a Recall offers a token
	// budget (combined.WithTokenBudget) at most, unless WithK says
	// otherwise: the budget keeps the most relevant of them that fit.
	DefaultRecallBudgetK = 32
	// DefaultRecallContextWeight is the weight the words of the units
	// next to a unit count with when it is indexed (half of it for the
	// units two away), unless WithContextWeight says otherwise.
	DefaultRecallContextWeight = 0.5
	// DefaultRecallNeighbourShare is the share of a hit's score that each
	// of its two neighbouring units is offered to a token budget with,
	// unless WithNeighbourShare says otherwise: a neighbour competes for
	// the budget's room with the other hits (see Recall, "Under a token
	// budget").
	DefaultRecallNeighbourShare = 0.8
	// RecallSeparator separates runs of units in a Recall's string
	// mode: a blank line.
	RecallSeparator = "\n\n"
	// RecallDateLayout is the time layout of the date a Recall shows
	// before each run of units in string mode, in brackets:
	// "[8 May 2023]".
	RecallDateLayout = "2 January 2006"
	// RecallStateName is the name of the store state (store.States) in
	// which a Recall with a durable index (a vector index) keeps, per
	// identity, the Seq through which units are in the vector store
	// and the vector spaces they were embedded in.
	RecallStateName = "recall"
	// RecallChromemCollection is the chromem-go collection WithVector and
	// WithHybrid create when given no vector store.
	RecallChromemCollection = "memstack-recall"
)

// Operations a RecallEvent reports.
const (
	RecallOpIndex  = "index"
	RecallOpSearch = "search"
)

// RecallEvent describes one index operation of a Recall: the hook set with
// WithRecallHook receives one per operation, successful or not.
type RecallEvent struct {
	// IdentityHash is memstack.Identity.Hash of the conversation (its
	// KeyedHash with WithHashKey).
	IdentityHash string
	// Op is RecallOpIndex (units added to the index, on a save or on
	// the first use of an identity) or RecallOpSearch (a load's query).
	Op string
	// Exchanges is the number of units indexed, or of hits returned.
	Exchanges int
	// Duration is how long the index took.
	Duration time.Duration
	// Err is nil on success. Otherwise it wraps the cause:
	// retrieval.ErrEmbedding (the embedder failed, panicked or timed
	// out), retrieval.ErrDegraded (one part of a hybrid failed; the
	// other's hits were used), retrieval.ErrDimensionChanged or
	// retrieval.ErrSpaceMismatch (permanent), a vector store or message
	// store error, an index call that panicked (the error says
	// "panicked"), or context.DeadlineExceeded (WithRecallTimeout; also
	// for a call abandoned because it ignored its context).
	Err error
}

// Recall shows the past turns of a conversation that matter for the
// current question: it indexes every saved turn and, on each load,
// searches them with the current input and returns the best few — under a
// token budget, as many as fit.
//
// # Turns and exchanges
//
// A Recall works in units. By default (RecallTurns) a unit is a turn: a
// human message, or an AI message together with the tool and function
// results that follow it (so a tool call is never shown without its
// results, nor a result without its call). With
// WithRecallUnit(RecallExchanges) a unit is an exchange: a human message
// and every message after it up to the next human message (the AI answer,
// tool calls and results). Messages before the first unit's opening
// message form a unit of their own. System messages belong to no unit and
// are never shown. A unit is named by the Seq of its first message
// (store.Record.Seq) and indexed as the contents of its messages, one per
// line. Turns are the default because a turn costs half an exchange's
// tokens, so a budget holds twice as many of them, and on real
// conversations that finds more (docs/recall/results.md). Below,
// "exchange" in option names stands for either unit.
//
// # Indexing
//
// Messages are kept in the store (WithStore) like every memory's; the index
// is derived from them. SaveContext and AddMessage store the message(s),
// then add the new or grown units to the index. The first time a Recall
// meets an identity (after a restart, or after evicting it from its cache,
// WithCacheSize), it rebuilds the identity's index from store.Messages.All;
// after that it indexes incrementally, reading only the newest messages. A
// load first indexes whatever it finds in the store that is not indexed yet
// (another process's turns, a save whose indexing failed), so every stored
// exchange is searchable.
//
// Each unit is scored with the words of the units next to it as its
// context: those of the units just before and after it count with a lower
// weight (WithContextWeight, default DefaultRecallContextWeight = 0.5),
// those two away with half of it (retrieval.WithNeighbourWeights, on the
// default index and the lexical part of WithHybrid; an index given with
// WithIndex is used as configured, and a vector index embeds each unit's
// own text). In a real conversation the turn that holds an answer often
// shares no word with the question, while the turns around it do. Each
// unit is still indexed once, so a save costs what indexing the new unit
// costs.
//
// The default index is retrieval.BM25, lexical and in process memory: no
// model, rebuilt after a restart. Its terms are stemmed with the English
// Snowball stemmer (retrieval.Stem). WithVector uses a vector index over any
// langchaingo embeddings.Embedder and vectorstores.VectorStore (by default
// the embedded chromem-go store), WithHybrid fuses both, and WithIndex takes
// any retrieval.Index. A vector store outlives the process: for such a
// durable index (retrieval.Durable) the Recall keeps, per identity, the Seq
// through which exchanges are in the vector store, and the vector space
// (embedder name and dimension) they were embedded in, in the store's
// state under RecallStateName — so after a restart it embeds only newer
// exchanges (embeddings are persisted with the vectors, never recomputed),
// and refuses an embedder of another space with an error wrapping
// retrieval.ErrSpaceMismatch rather than mix vector spaces.
//
// # Loading
//
// The query is the current input: the entry of the inputs map chosen as
// SaveContext chooses it (WithInputKey, or the only entry). A nil or empty
// inputs map, or an empty or whitespace-only input, is no query: the load
// returns nothing, with no error and no index call. An inputs map from
// which no entry can be chosen is an error, as it is for SaveContext.
//
// The index returns candidates best first. Units that a recent window
// already shows (WithExcludeRecent) are dropped first, then those scoring
// below the threshold (WithThreshold; by default none: every candidate the
// index returns passes — for BM25 that is every unit sharing a term with
// the query or its context), then those whose text (case and spacing
// aside) is that of a better hit — the same words said again —, then all
// but the best k (WithK, default 3).
// Each kept unit brings its n neighbouring units on either side
// (WithNeighbours) unless a recent window shows them; without
// WithNeighbours, in turn units, each kept turn brings its partner — the
// AI turn answering a human turn, the turn an AI turn answers — so a
// question is shown with its answer.
//
// The result is in conversation order. In string mode, runs of consecutive
// units are rendered like llms.GetBufferString (with the configured
// prefixes) and runs are separated by RecallSeparator, a blank line. A run
// starts with the date its first unit was saved on, in brackets
// ("[8 May 2023]", RecallDateLayout, in the location of the stored time),
// unless the run before it ended on that day, and a run that crosses into
// another day shows the new date before the first unit of that day, so a
// question about when something happened can be answered; the date is
// store.Record.Time, which a caller sets for imported or replayed turns
// with memstack.WithTime. Units stored without a time (by an older
// memstack, or in a langchaingo history) show no date;
// WithRecallDates(false) shows none at all. In messages mode the messages
// of the chosen units are returned, in order, as a fresh
// []llms.ChatMessage, without dates (a message list has no place for
// them). Nothing found loads "" (or an empty slice).
//
// # Dates in the question
//
// A question that names a date — "8 May 2023", "May 8, 2023",
// "2023-05-08", or a month, "May 2023" — is searched without the date's
// words, and every unit saved on that day gains RecallDayBoost (1.0)
// times the best hit's score (every unit of that month,
// RecallMonthBoost, 0.3), whether or not it shares a word with the
// question: "What did we decide on 3 June 2023?" finds that day's
// turns. A unit's day is that of its first message's
// store.Record.Time, in the time's own location (set with
// memstack.WithTime for imported or replayed turns). Only English month
// names and ISO dates are recognised; relative dates ("last week") are not.
//
// # Under a token budget
//
// A combined memory with a token budget (combined.WithTokenBudget) loads a
// Recall through LoadItems, and the Recall then fills whatever room the
// budget leaves rather than stopping at k: it offers the best
// DefaultRecallBudgetK (32) units (WithK, when given, sets this number
// too), each with Priority = its score, and each hit's neighbouring
// unit on either side (at least one, or WithNeighbours' n, on each
// side) with Priority = DefaultRecallNeighbourShare (0.8, WithNeighbourShare) of the hit's score at
// distance one (0.8² at two...), unless the neighbour scores more itself
// (WithNeighbourShare(0) offers the hits alone).
// The budget drops the lowest priorities first, so what is kept is the
// most relevant that fits: with a small budget only the best hits, with a
// large one their context too. A Recall loaded without a budget
// (LoadMemoryVariables) stays small: k (default 3) units with their
// partners or WithNeighbours' neighbours.
//
// # Observability
//
// A load records in the observe.Recorder of its context: each shown
// unit as an injected observe.Item of kind "turn" (or "exchange", RecallUnit.String) with its Seq as
// ID, its score (0 for a neighbour shown only for context) and its tokens
// (WithTokenCounter's counter, cl100k by default); each candidate left out
// as a dropped item with its score and reason (observe.ReasonShownElsewhere,
// observe.ReasonThreshold, observe.ReasonRank); and the embedding calls the
// index made (observe.EmbeddingCall), as does a save.
//
// # Failures
//
// The index never costs a turn: SaveContext and AddMessage store the turn
// first. A transient indexing failure — the embedder fails or times out
// (WithRecallTimeout), the vector store is down — is reported to the hook
// (WithRecallHook) and retried at the next save or load; the save returns
// nil. A load whose search fails that way returns nothing (or, with a
// hybrid index, the working part's ranking), reports the failure and does
// not fail the chain. Failures retrying cannot fix — an embedder whose
// dimension changed (retrieval.ErrDimensionChanged) or stored vectors from
// another space (retrieval.ErrSpaceMismatch) — are reported and also
// returned: by SaveContext and AddMessage as "stored; indexing failed", and
// by LoadMemoryVariables. A cancelled context fails a load with its error.
//
// Every call into the index — and so every call to the embedder and the
// vector store: embedding, adding, searching, deleting — is bounded as
// Summary and Facts bound their model calls (the default index, BM25 in
// process memory, is called directly: it cannot hang). A panic in it is an
// index failure like any other (transient: reported, retried; the error
// says "panicked") and never reaches the caller. A call that ignores its
// context (the WithRecallTimeout deadline, or the caller's context) is
// given a quarter second more, then abandoned: the save or load goes on as
// after a timeout, with an error wrapping context.DeadlineExceeded
// reported, and no lock of the identity stays held, so its next save, load
// or Clear proceeds. An abandoned call goes on in its goroutine, and
// nothing it does is recorded: the identity's indexed watermark (in
// process, and under RecallStateName in the store) advances only for an
// add that answered in time, so its units are indexed again at the next
// save or load. When an abandoned (or late) add ends, what it stored for
// messages that are gone by then (a Clear or Forget came meanwhile) is
// taken back: removed from a durable index (a vector store that cannot
// delete keeps it as stale vectors, never shown), or, from an in-process
// index, with the identity's entries, rebuilt at its next use. A Clear
// whose index delete is abandoned returns an error saying the messages are
// cleared and the index was not; until that delete ends, nothing is
// indexed for the identity in this Recall (the late delete would remove
// it): turns saved meanwhile are indexed at the first save or load after
// it. With a hybrid index (WithHybrid) a search does not wait for a vector
// part that ignores its context (retrieval.HybridSearchGrace), so its
// lexical part's hits are shown. Without WithRecallTimeout only the
// caller's context bounds an index call.
//
// # Identities and stores
//
// One Recall serves many identities: each identity's units are indexed
// under its own scope (memstack.Identity.Key), and a search never returns
// another identity's unit. A Recall only shows units that are in
// its store: it may share the store with the other layers of a stack,
// which remove nothing unless given a retention, and combined.New refuses
// a retention there that would remove what Recall searches (package
// memories, Storage). Clear removes the identity's messages and its index
// entries (a vector store that cannot delete keeps stale vectors, which are
// never shown: Seqs are never reused). An index value serves one Recall.
//
// Recall is safe for concurrent use.
type Recall struct {
	base
	idx     retrieval.Index
	durable retrieval.Durable // idx, if it is durable
	// inProcess: idx is a retrieval.BM25, called without a goroutine of
	// its own (see indexCall).
	inProcess  bool
	k          int
	budgetK    int
	threshold  float64
	neighbours int
	// neighboursSet: WithNeighbours was given (else, in turn units, an
	// unbudgeted load shows each hit with its partner).
	neighboursSet bool
	exclude       int
	timeout       time.Duration
	hook          func(RecallEvent)
	ctxWeight     float64
	unit          RecallUnit
	share         float64
	dates         bool
	queryDates    bool

	counterOnce sync.Once
	counter     tokens.Counter

	mu      sync.Mutex
	entries map[identity]*recallEntry
	lru     list.List // of *recallEntry, most recently used first
}

// recallEntry is what a Recall knows about one identity's index.
type recallEntry struct {
	id   identity
	elem *list.Element
	refs int // guarded by Recall.mu; an entry in use is never evicted

	mu    sync.Mutex // held while indexing or loading the identity
	ready bool       // the identity's exchanges were indexed in this process
	seen  int64      // the Seq of the newest message indexed
	// deletes are closed when the index deletes of the identity that
	// were abandoned (see deleteIndex) return; while one is open nothing
	// is indexed for the identity. Guarded by mu.
	deletes []chan struct{}

	// The identity's exchanges as stored, kept up to date incrementally
	// (see refreshExchanges) so that a load costs O(new messages + what
	// it shows), not O(history). stat is the store's Stat they reflect.
	exs     []recallExchange
	exsStat store.Stat
	exsOK   bool
}

// recallState is what a Recall with a durable index keeps in the store's
// state per identity.
type recallState struct {
	// Through is the Seq of the newest message whose exchange is in the
	// durable index.
	Through int64 `json:"through"`
	// Spaces are the durable index's vector spaces.
	Spaces []retrieval.Space `json:"spaces,omitempty"`
}

// recallExchange is one exchange: its first message's Seq, its last
// message's Seq, its messages and the time its first message was saved.
type recallExchange struct {
	seq, through int64
	msgs         []llms.ChatMessage
	at           time.Time
}

var (
	_ schema.Memory = (*Recall)(nil)
	_ fmt.Stringer  = (*Recall)(nil)
)

// WithK sets how many units a Recall shows at most (default 3). k < 1
// is an error.
func WithK(k int) RecallOption {
	return recallOpt(func(c *config) {
		if k < 1 {
			c.bad("WithK(%d): k must be at least 1", k)
			return
		}
		c.recall.k, c.recall.kSet = k, true
	})
}

// WithThreshold sets the least score an unit needs to be shown (a score
// equal to the threshold passes). The range depends on the index:
// retrieval.BM25 scores lie in [0, 1] (the share of the query's weight an
// unit matches; see retrieval.BM25), a vector index's are cosine
// similarities in [-1, 1], a hybrid's fused scores lie in [0, 1]. NewRecall
// rejects a threshold outside its index's range, or NaN. Default: the
// lower end of the range (no threshold).
func WithThreshold(x float64) RecallOption {
	return recallOpt(func(c *config) {
		if math.IsNaN(x) {
			c.bad("WithThreshold(NaN): the threshold must be a number")
			return
		}
		c.recall.threshold, c.recall.thresholdSet = x, true
	})
}

// WithNeighbours makes a Recall show, around each unit it finds, the n
// units before and the n after it, for context (default 0). n < 0 is an
// error.
func WithNeighbours(n int) RecallOption {
	return recallOpt(func(c *config) {
		if n < 0 {
			c.bad("WithNeighbours(%d): n must not be negative", n)
			return
		}
		c.recall.neighbours, c.recall.neighboursSet = n, true
	})
}

// RecallUnit is what a Recall indexes, finds and shows as one piece of the
// past: a turn (the default) or an exchange (see Recall, "Turns and
// exchanges").
type RecallUnit int

// The units a Recall can work in (WithRecallUnit).
const (
	// RecallTurns makes each turn a unit: a human message, or an AI
	// message together with the tool and function results that follow
	// it (the results of its calls). The default.
	RecallTurns RecallUnit = iota
	// RecallExchanges makes each exchange a unit: a human message and
	// every message after it up to the next human message.
	RecallExchanges
)

// String returns "turn" or "exchange": the Kind of a unit's items in
// reports.
func (u RecallUnit) String() string {
	if u == RecallExchanges {
		return "exchange"
	}
	return "turn"
}

// WithRecallUnit sets what a Recall indexes and shows as one unit:
// RecallTurns (the default) or RecallExchanges. Any other value is an
// error.
func WithRecallUnit(u RecallUnit) RecallOption {
	return recallOpt(func(c *config) {
		if u != RecallTurns && u != RecallExchanges {
			c.bad("WithRecallUnit(%d): the unit must be RecallTurns or RecallExchanges", int(u))
			return
		}
		c.recall.unit = u
	})
}

// WithContextWeight sets the weight, in [0, 1], that the words of an
// unit's neighbouring units count with when it is indexed (default
// DefaultRecallContextWeight, 0.4; see Recall, "Indexing"). 0 indexes each
// unit alone. A weight outside [0, 1], or NaN, is an error.
func WithContextWeight(w float64) RecallOption {
	return recallOpt(func(c *config) {
		if math.IsNaN(w) || w < 0 || w > 1 {
			c.bad("WithContextWeight(%v): the weight must lie in [0, 1]", w)
			return
		}
		c.recall.contextWeight, c.recall.contextSet = w, true
	})
}

// WithNeighbourShare sets the share, in [0, 1), of a hit's score that the
// units next to it are offered to a token budget with (default
// DefaultRecallNeighbourShare, 0.8; see Recall, "Under a token budget").
// 0 offers a budget the hits alone (and WithNeighbours' neighbours with
// no priority of their own, as an unbudgeted load shows them). A share
// outside [0, 1), or NaN, is an error.
func WithNeighbourShare(x float64) RecallOption {
	return recallOpt(func(c *config) {
		if math.IsNaN(x) || x < 0 || x >= 1 {
			c.bad("WithNeighbourShare(%v): the share must lie in [0, 1)", x)
			return
		}
		c.recall.share, c.recall.shareSet = x, true
	})
}

// WithQueryDates sets whether a Recall reads a date named in the question
// (default true; see Recall, "Dates in the question").
func WithQueryDates(on bool) RecallOption {
	return recallOpt(func(c *config) {
		c.recall.noQueryDates = !on
	})
}

// WithRecallDates sets whether a Recall in string mode shows the date of
// each run of units it recalls (default true; see Recall, "Loading").
func WithRecallDates(on bool) RecallOption {
	return recallOpt(func(c *config) {
		c.recall.noDates = !on
	})
}

// WithExcludeRecent makes a Recall leave out every unit that has a
// message among the last n non-system messages of its store — what a
// RecentN(n) beside it already shows — so the two layers never show the
// same unit twice (default 0). n < 0 is an error.
func WithExcludeRecent(n int) RecallOption {
	return recallOpt(func(c *config) {
		if n < 0 {
			c.bad("WithExcludeRecent(%d): n must not be negative", n)
			return
		}
		c.recall.excludeRecent = n
	})
}

// WithIndex sets the index a Recall searches (default: a new
// retrieval.BM25). An index serves one Recall. A nil index is an error, and
// so is choosing an index twice (WithIndex, WithVector, WithHybrid).
func WithIndex(idx retrieval.Index) RecallOption {
	return recallOpt(func(c *config) {
		if idx == nil {
			c.bad("WithIndex(nil): the index must not be nil")
			return
		}
		c.recall.setIndex("WithIndex", idx)
	})
}

// WithVector makes a Recall search by vector similarity: a
// retrieval.Vector embedding with e and keeping vectors in vs, configured
// by opts (retrieval.WithEmbedderName is recommended). A nil vs is a new
// in-memory chromem-go collection (retrieval.NewChromem); pass a Chromem
// over chromem.NewPersistentDB, or any langchaingo vector store, to keep
// the vectors across restarts. A nil e is an error.
func WithVector(e embeddings.Embedder, vs vectorstores.VectorStore, opts ...retrieval.VectorOption) RecallOption {
	return recallOpt(func(c *config) {
		v, err := newRecallVector("WithVector", e, vs, opts)
		if err != nil {
			c.errs = append(c.errs, err)
			return
		}
		c.recall.setIndex("WithVector", v)
	})
}

// WithHybrid makes a Recall fuse a lexical retrieval.BM25 and the vector
// index WithVector would build (retrieval.NewHybrid): retrieval keeps
// working, lexically, while the embedder is down. A nil e is an error.
func WithHybrid(e embeddings.Embedder, vs vectorstores.VectorStore, opts ...retrieval.VectorOption) RecallOption {
	return recallOpt(func(c *config) {
		v, err := newRecallVector("WithHybrid", e, vs, opts)
		if err != nil {
			c.errs = append(c.errs, err)
			return
		}
		// NewRecall builds the hybrid, its BM25 part weighted like the
		// default index (WithContextWeight).
		c.recall.hybridVector = v
		c.recall.setIndex("WithHybrid", nil)
	})
}

func newRecallVector(option string, e embeddings.Embedder, vs vectorstores.VectorStore, opts []retrieval.VectorOption) (*retrieval.Vector, error) {
	if vs == nil {
		ch, err := retrieval.NewChromem(nil, RecallChromemCollection, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidOption, option, err)
		}
		vs = ch
	}
	v, err := retrieval.NewVector(e, vs, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidOption, option, err)
	}
	return v, nil
}

func (s *recallSettings) setIndex(option string, idx retrieval.Index) {
	s.index = idx
	s.indexBy = append(s.indexBy, option)
}

// WithRecallTimeout bounds each index operation of a Recall (embedding and
// vector store calls included, and the index delete of a Clear) by d; an
// operation that takes longer fails as a transient failure, and one that
// ignores its context is abandoned a quarter second after d (see Recall,
// "Failures"). Default 0: no bound but the call's context. d < 0 is an
// error.
func WithRecallTimeout(d time.Duration) RecallOption {
	return recallOpt(func(c *config) {
		if d < 0 {
			c.bad("WithRecallTimeout(%v): the timeout must not be negative", d)
			return
		}
		c.recall.timeout = d
	})
}

// WithRecallHook sets a function a Recall calls after each index operation
// with what happened (see RecallEvent); failures of the embedder and the
// vector store are reported there. It is called on the caller's goroutine,
// possibly concurrently for different identities; it must be quick and
// safe for concurrent use. A nil hook is an error.
func WithRecallHook(hook func(RecallEvent)) RecallOption {
	return recallOpt(func(c *config) {
		if hook == nil {
			c.bad("WithRecallHook(nil): the hook must not be nil")
			return
		}
		c.recall.hook = hook
	})
}

// NewRecall returns a Recall memory. With no options it indexes units
// lexically (retrieval.BM25, no model), shows the best 3 for each query in
// the variable "relevant_history", and keeps messages in a store of its
// own. Bad options are errors naming the option and the value: k < 1, a
// threshold outside the index's score range, a negative neighbour or
// exclude count, an index chosen twice.
func NewRecall(opts ...RecallOption) (*Recall, error) {
	for i, o := range opts {
		if o == nil { // checked here: the default key below shifts positions
			return nil, fmt.Errorf("%w: option %d of %d is nil", ErrInvalidOption, i+1, len(opts))
		}
	}
	opts = append([]RecallOption{WithMemoryKey(RecallMemoryKey)}, opts...)
	m := &Recall{base: newBase(opts, RecallOption.applyRecall), entries: make(map[identity]*recallEntry)}
	if m.err != nil {
		return nil, m.err
	}
	s := m.cfg.recall
	if len(s.indexBy) > 1 {
		return nil, fmt.Errorf("%w: NewRecall: the index is chosen %d times (%s); choose one", ErrInvalidOption, len(s.indexBy), strings.Join(s.indexBy, ", "))
	}
	m.ctxWeight = DefaultRecallContextWeight
	if s.contextSet {
		m.ctxWeight = s.contextWeight
	}
	m.idx = s.index
	switch {
	case s.hybridVector != nil:
		lex, err := m.lexical()
		if err != nil {
			return nil, err
		}
		h, err := retrieval.NewHybrid(lex, s.hybridVector)
		if err != nil {
			return nil, fmt.Errorf("%w: WithHybrid: %w", ErrInvalidOption, err)
		}
		m.idx = h
	case m.idx == nil:
		lex, err := m.lexical()
		if err != nil {
			return nil, err
		}
		m.idx = lex
	}
	m.durable, _ = m.idx.(retrieval.Durable)
	_, m.inProcess = m.idx.(*retrieval.BM25)
	r := m.idx.Range()
	m.threshold = r.Min
	if s.thresholdSet {
		if !r.Contains(s.threshold) {
			return nil, fmt.Errorf("%w: WithThreshold(%v): the threshold must lie in %s, the score range of index %s", ErrInvalidOption, s.threshold, r, recallIndexName(m.idx))
		}
		m.threshold = s.threshold
	}
	m.k, m.budgetK = DefaultRecallK, DefaultRecallBudgetK
	if s.kSet {
		m.k, m.budgetK = s.k, s.k
	}
	m.dates, m.queryDates = !s.noDates, !s.noQueryDates
	m.share = DefaultRecallNeighbourShare
	if s.shareSet {
		m.share = s.share
	}
	m.neighbours, m.exclude, m.unit = s.neighbours, s.excludeRecent, s.unit
	m.neighboursSet = s.neighboursSet
	m.timeout, m.hook = s.timeout, s.hook
	return m, nil
}

// lexical returns the BM25 index a Recall builds (the default index, and
// the lexical part of WithHybrid): units scored with their neighbours'
// words at the context weight (next to them) and half of it (two away).
func (m *Recall) lexical() (*retrieval.BM25, error) {
	x, err := retrieval.NewBM25(retrieval.WithNeighbourWeights(m.ctxWeight, m.ctxWeight/2))
	if err != nil {
		return nil, fmt.Errorf("%w: WithContextWeight(%v): %w", ErrInvalidOption, m.ctxWeight, err)
	}
	return x, nil
}

func recallIndexName(idx retrieval.Index) string {
	if s, ok := idx.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", idx)
}

// String describes the memory's configuration.
func (m *Recall) String() string {
	return m.describe("Recall", fmt.Sprintf("index=%s, k=%d, budget_k=%d, threshold=%g, neighbours=%d, neighbour_share=%g, context_weight=%g, exclude_recent=%d, dates=%t, query_dates=%t",
		recallIndexName(m.idx), m.k, m.budgetK, m.threshold, m.neighbours, m.share, m.ctxWeight, m.exclude, m.dates, m.queryDates))
}

// SaveContext stores the turn (validated first; stored whole or not at all)
// and indexes it. A transient indexing failure is reported to the hook and
// retried later, and the save succeeds; a permanent one (a vector space
// mismatch) is returned, wrapped, after the turn is stored.
func (m *Recall) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
	id, msgs, err := m.turn(ctx, inputs, outputs)
	if err != nil {
		return err
	}
	if err := m.append(ctx, id, msgs...); err != nil {
		return err
	}
	return m.indexStored(ctx, id, "turn")
}

// AddMessage stores one message of any role and indexes the unit it
// belongs to, as SaveContext does. System messages are stored but never
// indexed or shown.
func (m *Recall) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
	id, msg, err := m.message(ctx, msg)
	if err != nil {
		return err
	}
	if err := m.append(ctx, id, msg); err != nil {
		return err
	}
	return m.indexStored(ctx, id, "message")
}

func (m *Recall) indexStored(ctx context.Context, id identity, what string) error {
	e := m.acquire(id)
	defer m.release(e)
	if err := m.sync(ctx, id, e, nil); err != nil && retrieval.Permanent(err) {
		return fmt.Errorf("memstack: %s stored; indexing failed: %w", what, err)
	}
	return nil
}

// LoadMemoryVariables returns the stored units most relevant to the
// current input (see Recall).
func (m *Recall) LoadMemoryVariables(ctx context.Context, inputs map[string]any) (map[string]any, error) {
	sel, err := m.selectExchanges(ctx, inputs, false)
	if err != nil {
		return nil, err
	}
	vars, err := m.variablesOf(sel.exs, sel.order)
	if err != nil {
		return nil, err
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		m.record(rec, sel.exs, sel.order, sel.scores, sel.dropped)
	}
	return vars, nil
}

// LoadItems implements layer.Itemizer: the units a Recall offers a
// token budget (see Recall, "Under a token budget": more than
// LoadMemoryVariables shows, so the budget's room is filled), one item per
// unit (kind "turn" or "exchange", ID its first Seq), in conversation order,
// with Priority = the unit's score, or its share of a neighbouring
// hit's, so that a budget drops the least relevant first. It records on
// the context's Recorder only the units its own threshold, rank and
// recent-window rules left out.
func (m *Recall) LoadItems(ctx context.Context, inputs map[string]any) (layer.Items, error) {
	sel, err := m.selectExchanges(ctx, inputs, true)
	if err != nil {
		return layer.Items{}, err
	}
	items := make([]layer.Item, len(sel.order))
	for n, i := range sel.order {
		text, err := adapter.Render(sel.exs[i].msgs, m.cfg.humanPrefix, m.cfg.aiPrefix)
		if err != nil {
			return layer.Items{}, err
		}
		items[n] = layer.Item{
			Text:     text,
			Kind:     m.unit.String(),
			ID:       strconv.FormatInt(sel.exs[i].seq, 10),
			Score:    sel.scores[i],
			Priority: sel.priority[i],
			Time:     sel.exs[i].at,
		}
	}
	if rec := observe.FromContext(ctx); rec.Enabled() {
		rec.Dropped(sel.dropped...)
	}
	return layer.Items{
		Key:  m.cfg.memoryKey,
		List: items,
		Render: func(keep []bool) (any, error) {
			order := make([]int, 0, len(sel.order))
			for n, i := range sel.order {
				if n < len(keep) && keep[n] {
					order = append(order, i)
				}
			}
			vars, err := m.variablesOf(sel.exs, order)
			if err != nil {
				return nil, err
			}
			return vars[m.cfg.memoryKey], nil
		},
	}, nil
}

// recallSelection is what a load shows: exs[i] for i in order (ascending),
// the hits' scores, and the candidates left out.
type recallSelection struct {
	exs      []recallExchange
	order    []int
	scores   map[int]float64
	priority map[int]float64 // of every shown exchange (budgeted loads)
	dropped  []observe.Item
}

// selectExchanges runs a load's search and selection (see
// LoadMemoryVariables); budgeted selects what LoadItems offers a budget.
func (m *Recall) selectExchanges(ctx context.Context, inputs map[string]any, budgeted bool) (recallSelection, error) {
	id, err := m.begin(ctx)
	if err != nil {
		return recallSelection{}, err
	}
	query := ""
	if len(inputs) > 0 {
		if query, err = adapter.InputValue(inputs, m.cfg.inputKey); err != nil {
			return recallSelection{}, err
		}
	}
	if strings.TrimSpace(query) == "" {
		return recallSelection{}, nil
	}
	e := m.acquire(id)
	defer m.release(e)
	// The entry stays locked for the whole load: the exchanges read below
	// are the entry's own, which a concurrent save would extend.
	e.mu.Lock()
	defer e.mu.Unlock()
	recs, err := m.refreshExchanges(ctx, id, e)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return recallSelection{}, fmt.Errorf("memstack: %w", cerr)
		}
		if errors.As(err, new(recallResetError)) {
			return recallSelection{}, nil // a transient index failure, reported
		}
		return recallSelection{}, err
	}
	if err := m.syncLocked(ctx, id, e, recs); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return recallSelection{}, fmt.Errorf("memstack: %w", cerr)
		}
		if retrieval.Permanent(err) {
			return recallSelection{}, fmt.Errorf("memstack: recall index: %w", err)
		}
		// Transient: reported; search what is indexed.
	}
	exs := e.exs
	firstExcluded := m.firstExcluded(exs)
	nExcluded := len(exs) - firstExcluded
	excluded := func(i int) bool { return i >= firstExcluded }
	if len(exs) == nExcluded {
		return recallSelection{}, nil
	}
	k, neighbours := m.k, m.neighbours
	partners := !budgeted && m.unit == RecallTurns && !m.neighboursSet
	if partners {
		neighbours = 0 // each hit brings its partner instead (below)
	}
	if budgeted {
		k = m.budgetK
		if m.share > 0 {
			neighbours = max(m.neighbours, 1)
		}
	}
	var date queryDate
	dated := false
	if m.queryDates {
		var rest string
		if date, rest, dated = parseQueryDate(query); dated {
			query = rest
		}
	}
	var hits []retrieval.Hit
	if strings.TrimSpace(query) != "" {
		// Hits for units no longer stored (a durable index keeps what
		// another writer cleared) take no place: ask again for more while
		// they crowd out the k wanted (up to maxRecallSearch hits).
		want := min(len(exs), 2*k+nExcluded)
		for ask := want; ; ask *= 4 {
			hits, err = m.search(ctx, id, query, ask)
			if err != nil || len(hits) < ask || ask >= maxRecallSearch || m.stored(exs, hits) >= want {
				break
			}
		}
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return recallSelection{}, fmt.Errorf("memstack: %w", cerr)
		}
		if retrieval.Permanent(err) {
			return recallSelection{}, fmt.Errorf("memstack: recall search: %w", err)
		}
		// Transient (reported): use whatever hits came back (a degraded
		// hybrid's), or none.
	}
	if dated {
		hits = m.dateBoost(exs, hits, date)
	}
	scores := make(map[int]float64)
	var dropped []observe.Item
	var droppedAt []int // dropped[n] is exs[droppedAt[n]]
	// texts holds the hits' texts (key): a hit with the text of a better
	// one (the same words said again) is left out, ReasonDuplicate.
	texts := make(map[string]struct{})
	for _, h := range hits {
		i, ok := unitAt(exs, h.Seq)
		if !ok {
			continue // not in the store any more (cleared, trimmed)
		}
		if _, dup := scores[i]; dup {
			continue
		}
		item := observe.Item{Kind: m.unit.String(), ID: strconv.FormatInt(h.Seq, 10), Score: h.Score, Time: exs[i].at}
		switch {
		case excluded(i):
			item.Reason = observe.ReasonShownElsewhere
		case h.Score < m.threshold:
			item.Reason = observe.ReasonThreshold
		case len(scores) >= k:
			item.Reason = observe.ReasonRank
		default:
			// Only a candidate that would be kept is compared by text.
			key := exs[i].key()
			if _, dup := texts[key]; !dup {
				scores[i] = h.Score
				texts[key] = struct{}{}
				continue
			}
			item.Reason = observe.ReasonDuplicate
		}
		dropped = append(dropped, item)
		droppedAt = append(droppedAt, i)
	}
	// priority holds every shown exchange: a hit's score, or a
	// neighbour's share of the best hit next to it.
	priority := make(map[int]float64, len(scores)*(1+2*neighbours))
	for i, sc := range scores {
		for j := max(i-neighbours, 0); j <= min(i+neighbours, len(exs)-1); j++ {
			if excluded(j) {
				continue
			}
			p := sc
			if j != i {
				p = neighbourShare(sc, m.share, abs(j-i))
			}
			if own, hit := scores[j]; hit {
				p = max(p, own)
			}
			if old, ok := priority[j]; !ok || p > old {
				priority[j] = p
			}
		}
	}
	if partners {
		for i, sc := range scores {
			if j := m.partner(exs, i); j >= 0 && !excluded(j) {
				if _, ok := priority[j]; !ok {
					priority[j] = neighbourShare(sc, m.share, 1)
				}
			}
		}
	}
	order := make([]int, 0, len(priority))
	for i := range priority {
		order = append(order, i)
	}
	slices.Sort(order)
	// A candidate left out as a hit but shown next to one is not dropped.
	kept := dropped[:0]
	for n, it := range dropped {
		if _, shown := priority[droppedAt[n]]; !shown {
			kept = append(kept, it)
		}
	}
	return recallSelection{exs: exs, order: order, scores: scores, priority: priority, dropped: kept}, nil
}

// dateBoost adds RecallDayBoost (or RecallMonthBoost) times the best
// hit's score (1 when there is no hit) to every exchange of exs saved on
// date, hit or not, and returns the hits re-ranked.
func (m *Recall) dateBoost(exs []recallExchange, hits []retrieval.Hit, date queryDate) []retrieval.Hit {
	top := m.idx.Range().Max
	if len(hits) > 0 && hits[0].Score > 0 {
		top = hits[0].Score
	}
	boost := RecallDayBoost * top
	if date.day == 0 {
		boost = RecallMonthBoost * top
	}
	at := make(map[int64]int, len(hits))
	for n, h := range hits {
		if _, dup := at[h.Seq]; !dup {
			at[h.Seq] = n
		}
	}
	out := slices.Clone(hits)
	for _, x := range exs {
		if !date.matches(x.at) {
			continue
		}
		if n, ok := at[x.seq]; ok {
			out[n].Score += boost
		} else {
			out = append(out, retrieval.Hit{Seq: x.seq, Score: boost})
		}
	}
	slices.SortStableFunc(out, func(a, b retrieval.Hit) int { return cmp.Compare(b.Score, a.Score) })
	return out
}

// maxRecallSearch bounds how many hits a load asks the index for when
// hits for units no longer stored crowd out the ones wanted.
const maxRecallSearch = 2048

// unitAt returns the index of the unit of exs (in Seq order) whose first
// message has Seq seq.
func unitAt(exs []recallExchange, seq int64) (int, bool) {
	return slices.BinarySearchFunc(exs, seq, func(x recallExchange, seq int64) int { return cmp.Compare(x.seq, seq) })
}

// stored counts the hits whose unit is in exs.
func (m *Recall) stored(exs []recallExchange, hits []retrieval.Hit) int {
	n := 0
	for _, h := range hits {
		if _, ok := unitAt(exs, h.Seq); ok {
			n++
		}
	}
	return n
}

// partner returns the turn shown with turn i when an unbudgeted load
// finds it: for a human turn the AI turn answering it, for an AI turn the
// turn it answers (a human turn, or the tool call whose results it
// reads); -1 when there is none.
func (m *Recall) partner(exs []recallExchange, i int) int {
	isHuman := func(j int) bool { return exs[j].msgs[0].GetType() == llms.ChatMessageTypeHuman }
	switch {
	case isHuman(i) && i+1 < len(exs) && !isHuman(i+1):
		return i + 1
	case !isHuman(i) && i > 0:
		return i - 1
	}
	return -1
}

// neighbourShare is the priority of an exchange at distance d from a hit
// scoring score: share^d of it (for a negative score, a cosine
// similarity, the same distance below it).
func neighbourShare(score, share float64, d int) float64 {
	f := math.Pow(share, float64(d))
	if score >= 0 {
		return score * f
	}
	return score * (2 - f)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Clear removes the messages and the index entries of the identity in ctx,
// and only that one. When removing the index entries fails (or is
// abandoned, see Recall, "Failures") after the messages were removed, the
// error says the messages are cleared.
func (m *Recall) Clear(ctx context.Context) error {
	id, err := m.begin(ctx)
	if err != nil {
		return err
	}
	e := m.acquire(id)
	defer m.release(e)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := m.cfg.store.Clear(ctx, id); err != nil {
		return fmt.Errorf("memstack: clearing: %w", err)
	}
	e.ready, e.seen = false, 0
	ictx, cancel := m.indexCtx(ctx)
	defer cancel()
	if err := m.deleteIndex(ictx, id, e); err != nil {
		return fmt.Errorf("memstack: messages cleared; clearing the recall index: %w", err)
	}
	return nil
}

// acquire returns id's entry, created if needed, marked in use.
func (m *Recall) acquire(id identity) *recallEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[id]
	if e == nil {
		e = &recallEntry{id: id}
		e.elem = m.lru.PushFront(e)
		m.entries[id] = e
	} else {
		m.lru.MoveToFront(e.elem)
	}
	e.refs++
	return e
}

// hold marks e in use once more (an index call that may outlive its
// caller); release ends it.
func (m *Recall) hold(e *recallEntry) {
	m.mu.Lock()
	e.refs++
	m.mu.Unlock()
}

// release marks e no longer in use and evicts the least recently used
// entries beyond the cache size, releasing their in-process index state.
func (m *Recall) release(e *recallEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.refs--
	for el := m.lru.Back(); el != nil && len(m.entries) > m.cfg.cacheSize; {
		prev := el.Prev()
		if old := el.Value.(*recallEntry); old.refs == 0 {
			m.lru.Remove(el)
			delete(m.entries, old.id)
			if r, ok := m.idx.(retrieval.Releaser); ok {
				r.Release(old.id.Key())
			}
		}
		el = prev
	}
}

func (m *Recall) indexCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if m.timeout > 0 {
		return context.WithTimeout(ctx, m.timeout)
	}
	return ctx, func() {}
}

func (m *Recall) report(id identity, op string, n int, took time.Duration, err error) {
	if m.hook != nil {
		m.hook(RecallEvent{IdentityHash: m.HashIdentity(id), Op: op, Exchanges: n, Duration: took, Err: m.redact(err, id)})
	}
}

// sync indexes what the store holds for id that e has not indexed yet.
// recs, if not nil, is everything the store holds for id.
func (m *Recall) sync(ctx context.Context, id identity, e *recallEntry, recs []store.Record) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return m.syncLocked(ctx, id, e, recs)
}

// syncLocked is sync with e.mu held.
func (m *Recall) syncLocked(ctx context.Context, id identity, e *recallEntry, recs []store.Record) error {
	if recs == nil {
		var err error
		if recs, err = m.unindexed(ctx, id, e); err != nil {
			m.report(id, RecallOpIndex, 0, 0, err)
			return err
		}
	}
	if len(recs) == 0 || (e.ready && recs[len(recs)-1].Seq == e.seen) {
		e.ready = true
		return nil
	}
	last := recs[len(recs)-1].Seq
	var docs []retrieval.Doc
	for _, x := range m.recallExchanges(recs) {
		if !e.ready || x.through > e.seen {
			docs = append(docs, retrieval.Doc{Seq: x.seq, Through: x.through, Text: x.text()})
		}
	}
	if len(docs) > 0 {
		ictx, cancel := m.indexCtx(ctx)
		start := time.Now()
		err := m.add(ictx, id, e, docs)
		cancel()
		m.report(id, RecallOpIndex, len(docs), time.Since(start), err)
		if err != nil {
			return err
		}
	}
	e.ready, e.seen = true, last
	return nil
}

// unindexed returns the stored messages of id that e may not have indexed
// yet, starting at a human message (so the first exchange is whole): all
// of them on first use, else the newest ones, read in growing batches.
func (m *Recall) unindexed(ctx context.Context, id identity, e *recallEntry) ([]store.Record, error) {
	s := m.cfg.store
	if !e.ready {
		recs, err := s.All(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("memstack: reading messages to index: %w", err)
		}
		return recs, nil
	}
	st, err := s.Stat(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("memstack: reading messages to index: %w", err)
	}
	if st.Count == 0 || st.LastSeq == e.seen {
		return nil, nil
	}
	// Enough to start at a unit that was indexed already.
	const need = 1
	for n := 8; ; n *= 2 {
		recs, err := s.Last(ctx, id, n)
		if err != nil {
			return nil, fmt.Errorf("memstack: reading messages to index: %w", err)
		}
		if len(recs) < n || n >= st.Count {
			return recs, nil
		}
		if first := recs[0]; first.Seq <= e.seen && m.opens(first.Message) {
			old := 0
			for _, r := range recs {
				if r.Seq <= e.seen && m.opens(r.Message) {
					old++
				}
			}
			if old >= need {
				return recs, nil
			}
		}
	}
}

// add adds docs to the index; for a durable index it checks and advances
// the identity's recorded state. e.mu is held.
func (m *Recall) add(ctx context.Context, id identity, e *recallEntry, docs []retrieval.Doc) error {
	if m.durable == nil {
		return m.addDocs(ctx, id, e, docs, 0)
	}
	st, version, err := m.readRecallState(ctx, id)
	if err != nil {
		return err
	}
	if err := m.durable.CheckSpaces(st.Spaces); err != nil {
		return err
	}
	if err := m.addDocs(ctx, id, e, docs, st.Through); err != nil {
		return err
	}
	// Cleared means gone: if another replica cleared (or a Forget removed)
	// the messages while they were being indexed, take their docs back —
	// its Clear deleted the scope's docs before these landed. A Clear
	// after this check deletes them itself. Docs of messages still stored
	// stay; so do the stale docs of a store that cannot remove single
	// ones (Recall never shows them: it shows only stored messages).
	docs, err = m.dropGone(ctx, id, docs)
	if err != nil || len(docs) == 0 {
		return err
	}
	through := st.Through
	for _, d := range docs {
		through = max(through, d.Through)
	}
	for attempt := 0; ; attempt++ {
		next := recallState{Through: max(st.Through, through), Spaces: m.durable.Spaces()}
		if next.Through == st.Through && slices.Equal(next.Spaces, st.Spaces) {
			return nil
		}
		value, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("memstack: encoding the recall state of %s: %w", id.Key(), err)
		}
		_, err = m.cfg.store.PutState(ctx, id, RecallStateName, value, version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt == 2 {
			return fmt.Errorf("memstack: recording the recall state of %s: %w", id.Key(), err)
		}
		// Another writer advanced the state, or a Clear or Forget moved
		// its version: merge with what is there now, for the docs whose
		// messages are still stored (a Clear leaves no state to restore).
		if st, version, err = m.readRecallState(ctx, id); err != nil {
			return err
		}
		if docs, err = m.dropGone(ctx, id, docs); err != nil || len(docs) == 0 {
			return err
		}
		through = 0
		for _, d := range docs {
			through = max(through, d.Through)
		}
	}
}

// indexCall runs f, one call into m's index (and so into its embedder and
// vector store), through runBounded: a panic is an error, and a call that
// outlives its context by abandonGrace is abandoned (see Recall,
// "Failures"); late, if not nil, runs when an abandoned call ends.
// The default index (a retrieval.BM25: in process memory, no model, no
// store) is called on the caller's goroutine, its panics recovered all the
// same: it cannot hang, and a goroutine per call would cost its fast
// operations more than they do.
func indexCall[T any](m *Recall, ctx context.Context, op string, f func(context.Context) (T, error), late func(T, error)) (T, boundedEnd, error) {
	what := func() string { return fmt.Sprintf("%s in the recall index %s", op, recallIndexName(m.idx)) }
	if m.inProcess {
		v, err := callRecovered(ctx, what, f)
		if ctx.Err() != nil {
			return v, boundedLate, err
		}
		return v, boundedInTime, err
	}
	return runBounded(ctx, what, f, late)
}

// callRecovered calls f; a panic is an error naming what().
func callRecovered[T any](ctx context.Context, what func() string, f func(context.Context) (T, error)) (v T, err error) {
	defer func() {
		if p := recover(); p != nil {
			var zero T
			v, err = zero, fmt.Errorf("%s panicked: %v", what(), p)
		}
	}()
	return f(ctx)
}

// addDocs adds docs to the index (for a durable index, those with Through
// after since) as a bounded call; e.mu is held. The caller records the
// docs as indexed only when it returns nil, which it does only for an add
// that answered in time: an add whose answer came late, or that was
// abandoned, fails, and its docs are indexed again at the next save or
// load. Once such an add has returned, afterAdd takes back what it added
// for messages that are gone by then.
func (m *Recall) addDocs(ctx context.Context, id identity, e *recallEntry, docs []retrieval.Doc, since int64) error {
	if err := m.deletePending(e); err != nil {
		return err
	}
	m.hold(e) // released when the call has ended (by afterAdd, if its answer is not used)
	// afterAdd outlives the call: ctx's values without its deadline, and
	// without its Recorder (the call's report is done by then).
	bg := observe.WithRecorder(context.WithoutCancel(ctx), nil)
	_, end, err := indexCall(m, ctx, "add", func(ctx context.Context) (struct{}, error) {
		if m.durable != nil {
			return struct{}{}, m.durable.AddSince(ctx, id.Key(), docs, since)
		}
		return struct{}{}, m.idx.Add(ctx, id.Key(), docs)
	}, func(struct{}, error) { m.afterAdd(bg, id, e, docs) })
	switch end {
	case boundedInTime:
		m.release(e)
	case boundedLate:
		go m.afterAdd(bg, id, e, docs)
		if err == nil {
			err = fmt.Errorf("memstack: the recall index answered after its context ended: %w", ctx.Err())
		}
	}
	return err
}

// afterAdd runs once an add whose answer was not used has returned (see
// addDocs), and releases e. What the add stored for messages the store no
// longer holds — a Clear or Forget, here or in another process, came
// while it ran — is taken back: removed from a durable index (a store that
// cannot remove single docs keeps them, never shown: Seqs are never
// reused), or, from an in-process index, with the identity's entries,
// which its next save or load rebuilds from the store. Failures are not
// reported (the hook is called on callers' goroutines only).
func (m *Recall) afterAdd(ctx context.Context, id identity, e *recallEntry, docs []retrieval.Doc) {
	defer m.release(e)
	ctx, cancel := context.WithTimeout(ctx, m.cleanupTimeout())
	defer cancel()
	if m.durable != nil {
		_, _ = m.dropGone(ctx, id, docs)
		return
	}
	stat, err := m.cfg.store.Stat(ctx, id)
	if err != nil || !slices.ContainsFunc(docs, func(d retrieval.Doc) bool { return stat.Count == 0 || d.Through < stat.FirstSeq }) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if m.deleteIndex(ctx, id, e) == nil {
		e.ready, e.seen = false, 0
	}
}

// deleteIndex deletes the identity's index entries as a bounded call; e.mu
// is held. A delete that is abandoned goes on; until it has returned,
// nothing is indexed for the identity (deletePending), since it would
// remove what was indexed meanwhile.
func (m *Recall) deleteIndex(ctx context.Context, id identity, e *recallEntry) error {
	m.hold(e) // released when the call has ended
	done := make(chan struct{})
	_, end, err := indexCall(m, ctx, "delete", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, m.idx.Delete(ctx, id.Key())
	}, func(struct{}, error) {
		close(done)
		m.release(e)
	})
	if end == boundedAbandoned {
		e.deletes = append(e.deletes, done)
	} else {
		m.release(e)
	}
	return err
}

// errDeletePending fails the indexing of an identity while a delete of its
// index entries that was abandoned still runs.
var errDeletePending = errors.New("memstack: not indexed: an abandoned delete of the identity's recall index entries (a Clear's) is still running; indexing is retried at the next save or load")

// deletePending returns errDeletePending while an abandoned delete of e's
// identity runs; e.mu is held.
func (m *Recall) deletePending(e *recallEntry) error {
	e.deletes = slices.DeleteFunc(e.deletes, func(done chan struct{}) bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	if len(e.deletes) > 0 {
		return errDeletePending
	}
	e.deletes = nil
	return nil
}

// recallCleanupTimeout bounds the work afterAdd does when no
// WithRecallTimeout is set.
const recallCleanupTimeout = 30 * time.Second

func (m *Recall) cleanupTimeout() time.Duration {
	if m.timeout > 0 {
		return m.timeout
	}
	return recallCleanupTimeout
}

// dropGone removes from the durable index the docs whose messages the
// store no longer holds (all of them are older than its oldest message)
// and returns the others.
func (m *Recall) dropGone(ctx context.Context, id identity, docs []retrieval.Doc) ([]retrieval.Doc, error) {
	stat, err := m.cfg.store.Stat(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("memstack: reading the messages of %s after indexing: %w", id.Key(), err)
	}
	var gone []int64
	kept := docs[:0:0]
	for _, d := range docs {
		if stat.Count == 0 || d.Through < stat.FirstSeq {
			gone = append(gone, d.Seq)
		} else {
			kept = append(kept, d)
		}
	}
	if len(gone) == 0 {
		return docs, nil
	}
	if r, ok := m.durable.(retrieval.Remover); ok {
		_, _, err := indexCall(m, ctx, "remove", func(ctx context.Context) (struct{}, error) {
			return struct{}{}, r.Remove(ctx, id.Key(), gone)
		}, nil)
		if err != nil && !errors.Is(err, retrieval.ErrCannotRemove) {
			return nil, fmt.Errorf("memstack: removing the index entries of cleared messages: %w", err)
		}
	}
	return kept, nil
}

func (m *Recall) readRecallState(ctx context.Context, id identity) (recallState, int64, error) {
	st, err := m.cfg.store.GetState(ctx, id, RecallStateName)
	if err != nil {
		return recallState{}, 0, fmt.Errorf("memstack: reading the recall state of %s: %w", id.Key(), err)
	}
	var s recallState
	if !st.Exists() {
		return s, st.Version, nil // the absent version: a Clear or Forget moves it
	}
	if err := json.Unmarshal(st.Value, &s); err != nil {
		return recallState{}, 0, fmt.Errorf("memstack: the recall state of %s (state %q) is not valid JSON: %w", id.Key(), RecallStateName, err)
	}
	return s, st.Version, nil
}

// search runs the query with the timeout and reports it.
func (m *Recall) search(ctx context.Context, id identity, query string, k int) ([]retrieval.Hit, error) {
	ictx, cancel := m.indexCtx(ctx)
	defer cancel()
	start := time.Now()
	// An answer that comes after the deadline but within the grace is
	// used: a search commits nothing, and a hybrid whose vector part
	// hangs answers then with its lexical part's hits.
	hits, _, err := indexCall(m, ictx, "search", func(ctx context.Context) ([]retrieval.Hit, error) {
		return m.idx.Search(ctx, id.Key(), query, k)
	}, nil)
	m.report(id, RecallOpSearch, len(hits), time.Since(start), err)
	return hits, err
}

// excluded reports, per exchange, whether it has a message among the last
// m.exclude non-system messages.
func (m *Recall) firstExcluded(exs []recallExchange) int {
	first, seen := len(exs), 0
	for first > 0 && seen < m.exclude {
		first--
		seen += len(exs[first].msgs)
	}
	return first
}

// refreshExchanges brings e's exchanges up to date with the store (e.mu is
// held) and returns every stored record when it had to read them all (on
// first use, or when the store changed other than by appends), else nil.
func (m *Recall) refreshExchanges(ctx context.Context, id identity, e *recallEntry) ([]store.Record, error) {
	s := m.cfg.store
	st, err := s.Stat(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("memstack: loading history: %w", err)
	}
	if e.exsOK && st == e.exsStat {
		return nil, nil
	}
	if e.exsOK && e.exsStat.Count > 0 && st.FirstSeq == e.exsStat.FirstSeq && st.Count > e.exsStat.Count {
		k := st.Count - e.exsStat.Count
		recs, err := s.Last(ctx, id, k+1)
		if err != nil {
			return nil, fmt.Errorf("memstack: loading history: %w", err)
		}
		if len(recs) == k+1 && recs[0].Seq == e.exsStat.LastSeq {
			old, cloned := len(e.exs), false
			for _, r := range recs[1:] {
				// A message that extends an exchange an earlier load
				// may still be rendering (a selection outlives the lock
				// through LoadItems' Render) goes to a copy: exchanges
				// other goroutines can see are never written.
				if t := r.Message.GetType(); !cloned && old > 0 && len(e.exs) == old &&
					t != llms.ChatMessageTypeSystem && !m.opens(r.Message) {
					e.exs, cloned = slices.Clone(e.exs), true
				}
				e.exs = m.appendExchange(e.exs, r)
			}
			e.exsStat = store.Stat{Count: e.exsStat.Count + k, FirstSeq: e.exsStat.FirstSeq, LastSeq: recs[k].Seq}
			return nil, nil
		}
	}
	recs, err := loadAll(ctx, s, id)
	if err != nil {
		return nil, err
	}
	if (e.exsOK || e.ready) && m.durable == nil {
		// The store changed other than by appends (another writer cleared
		// it or removed a prefix), or this is the first load and saves
		// indexed before it, which may have been cleared since: drop the
		// in-process index of the identity and index what is stored now,
		// so removed units do not take the places of real hits. (A
		// durable index keeps its entries; hits for removed units are
		// skipped, and the search asks for more — see selectExchanges.)
		ictx, cancel := m.indexCtx(ctx)
		start := time.Now()
		err := m.deleteIndex(ictx, id, e)
		cancel()
		if err != nil {
			// An index failure like any other: reported, and the load
			// shows nothing; the next load resets again (e is as it was).
			err = fmt.Errorf("memstack: resetting the recall index: %w", err)
			m.report(id, RecallOpIndex, 0, time.Since(start), err)
			return nil, recallResetError{err}
		}
		e.ready, e.seen = false, 0
	}
	e.exs = m.recallExchanges(recs)
	e.exsStat, e.exsOK = store.Stat{Count: len(recs)}, true
	if len(recs) > 0 {
		e.exsStat.FirstSeq, e.exsStat.LastSeq = recs[0].Seq, recs[len(recs)-1].Seq
	}
	return recs, nil
}

// recallResetError is refreshExchanges' error when deleting the identity's
// in-process index entries failed: an index failure, reported already.
type recallResetError struct{ err error }

func (e recallResetError) Error() string { return e.err.Error() }
func (e recallResetError) Unwrap() error { return e.err }

// variablesOf renders the exchanges exs[i] for i in order (ascending).
func (m *Recall) variablesOf(exs []recallExchange, order []int) (map[string]any, error) {
	if m.cfg.returnMessages {
		// Copies: a caller may change what it gets (a tool call's
		// arguments) without changing the next load.
		msgs := []llms.ChatMessage{}
		for _, i := range order {
			for _, msg := range exs[i].msgs {
				msgs = append(msgs, storekit.CloneMessage(msg))
			}
		}
		return map[string]any{m.cfg.memoryKey: msgs}, nil
	}
	var b strings.Builder
	day := "" // the date shown last
	for start := 0; start < len(order); {
		end := start + 1
		for end < len(order) && order[end] == order[end-1]+1 {
			end++
		}
		if b.Len() > 0 {
			b.WriteString(RecallSeparator)
		}
		// The run, split where the date changes; each part after its date
		// unless the part before (in this run or the run before) showed
		// it already.
		for p := start; p < end; {
			q := p + 1
			d := m.dateOf(exs[order[p]])
			for q < end && m.dateOf(exs[order[q]]) == d {
				q++
			}
			if d != "" && d != day {
				if p > start {
					b.WriteByte('\n')
				}
				b.WriteString("[" + d + "]\n")
				day = d
			} else if p > start {
				b.WriteByte('\n')
			}
			var part []llms.ChatMessage
			for _, i := range order[p:q] {
				part = append(part, exs[i].msgs...)
			}
			s, err := adapter.Render(part, m.cfg.humanPrefix, m.cfg.aiPrefix)
			if err != nil {
				return nil, err
			}
			b.WriteString(s)
			p = q
		}
		start = end
	}
	return map[string]any{m.cfg.memoryKey: b.String()}, nil
}

// dateOf returns the date a run shows for x ("" for none: dates are off,
// or x was stored without a time).
func (m *Recall) dateOf(x recallExchange) string {
	if !m.dates || x.at.IsZero() {
		return ""
	}
	return x.at.Format(RecallDateLayout)
}

// record notes a load's injected and dropped exchanges in rec.
func (m *Recall) record(rec *observe.Recorder, exs []recallExchange, order []int, scores map[int]float64, dropped []observe.Item) {
	m.counterOnce.Do(func() {
		m.counter = m.cfg.counter
		if m.counter == nil {
			if c, err := tokens.CL100K(); err == nil {
				m.counter = c
			}
		}
	})
	items := make([]observe.Item, len(order))
	total := 0
	for n, i := range order {
		items[n] = observe.Item{Kind: m.unit.String(), ID: strconv.FormatInt(exs[i].seq, 10), Score: scores[i], Time: exs[i].at}
		if m.counter != nil {
			if s, err := adapter.Render(exs[i].msgs, m.cfg.humanPrefix, m.cfg.aiPrefix); err == nil {
				// Reports only: a bad count (tokens.Count) is reported
				// as 0, unknown, and never changes what the load shows.
				items[n].Tokens, _ = tokens.Count(m.counter, s)
				total += items[n].Tokens
			}
		}
	}
	rec.Injected(items...)
	rec.Dropped(dropped...)
	rec.Tokens(total)
}

// recallExchanges splits recs into m's units (see Recall).
func (m *Recall) recallExchanges(recs []store.Record) []recallExchange {
	var out []recallExchange
	for _, r := range recs {
		out = m.appendExchange(out, r)
	}
	return out
}

// opens reports whether msg opens a unit: a human message, and in turn
// units an AI message too.
func (m *Recall) opens(msg llms.ChatMessage) bool {
	switch msg.GetType() {
	case llms.ChatMessageTypeHuman:
		return true
	case llms.ChatMessageTypeAI:
		return m.unit == RecallTurns
	}
	return false
}

// appendExchange adds one stored message to exs: a message that opens a
// unit (or the first message) opens one, any other joins the last one,
// and system messages are left out.
func (m *Recall) appendExchange(exs []recallExchange, r store.Record) []recallExchange {
	t := r.Message.GetType()
	if t == llms.ChatMessageTypeSystem {
		return exs
	}
	if len(exs) == 0 || m.opens(r.Message) {
		exs = append(exs, recallExchange{seq: r.Seq, at: r.Time})
	}
	x := &exs[len(exs)-1]
	x.through = r.Seq
	x.msgs = append(x.msgs, r.Message)
	return exs
}

// key is x's text as a duplicate check compares it: lower-case, runs of
// white space as one space.
func (x recallExchange) key() string {
	return strings.Join(strings.Fields(strings.ToLower(x.text())), " ")
}

// text is what the index sees of the exchange: its messages' contents, one
// per line.
func (x recallExchange) text() string {
	parts := make([]string, 0, len(x.msgs))
	for _, msg := range x.msgs {
		if c := msg.GetContent(); c != "" {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "\n")
}
