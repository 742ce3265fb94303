package memories

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/memstack/memstack/memories/internal/recallindex"
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
// # The index in the database
//
// A store may keep the lexical index beside its messages
// (store.RecallSearcher: sqlitestore with WithRecallIndex), written in
// each append's transaction. A Recall with the default index over such a
// store searches it instead of building its own: a save indexes nothing
// in process, and a load asks the store — a process's first load of a
// user costs a search of the database, not a read of the user's history,
// and every replica searches what every replica saved. Such a load keeps
// nothing per conversation in process: the current conversation's recent
// units are known from its tail, and of each conversation with hits it
// reads only the units around them (store.RangeReader: one read for all),
// so its cost follows what it shows, not the user's history, and a
// process's memory does not grow with the users it has served. A
// conversation-scoped Recall loads the same way, over a scope of its one
// conversation: its first load of a long conversation reads the tail and
// the hits' stretches, with as many neighbours as WithNeighbours asks. A
// question naming a date reads the conversations of that date's units
// whole (the store's day index gives no stretch). The store ranks as
// the default index does (the same tokenizer, BM25 and neighbour
// weights; over a user's conversations a unit's neighbours are those of
// its own conversation), and answers dated questions from its own day
// index. Until the store's index is complete (a database with older
// messages is indexed in the background) the Recall indexes in process
// as over any store. With WithIndex, WithVector or WithHybrid it never
// searches the store's index.
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
// # Across conversations
//
// A Recall searches every conversation of the identity's user by default
// (RecallScopeUser): a user who comes back in a new conversation gets the
// relevant past of the earlier ones. WithRecallScope narrows the search to
// the conversation (RecallScopeConversation) or widens it to every user
// of the tenant (RecallScopeTenant, opt in); never across tenants, never
// to another user below tenant scope. A run from another conversation is
// headed with its date and RecallOtherConversation ("[8 May 2023, another
// conversation]"), and load reports name each item's conversation by its
// hash (observe.Item.Conversation). The scope's units live in one index
// (a save indexes its turn once; a load searches once, whatever the
// number of conversations): on its first load a replica indexes every
// conversation of the scope (store.Users lists them), then catches up
// with what other replicas saved: over a store with a change feed
// (store.ChangeFeed: sqlitestore, redisstore on one server), by asking the store which of the
// scope's conversations were appended to since it last looked, so a save
// writes nothing but its turn; over the others, from the scope's recall
// journal — one small message per save under {Tenant, User,
// RecallJournalConversation}, naming the conversation, never the text —
// at the cost of one Stat when nothing changed. Either way a turn another
// replica saved to another conversation is found by the next load. A
// load reads (one Stat each) only the conversations
// whose units it shows — over the store's own index (below), only the
// stretches around its hits — and shows only units still stored: a Clear of a
// conversation, on any replica, or a store Forget removes them from every
// other conversation's recall (a load whose hits were crowded by units
// gone searches again); a user-wide ForgetScope removes the journal too.
// The user scope is the default over a store that lists conversations
// (store.Users: every store of memstack); over any other store a Recall
// searches the conversation, and asking for a wider scope is an error.
//
// A durable index (WithVector, WithHybrid) is scoped the same way: the
// user's units live under the user's scope in the vector store, each doc
// under an ID every replica derives from its conversation and first Seq,
// and tagged with its conversation (retrieval.Doc.Source), so the
// replicas share one index, a process starting cold embeds nothing again
// (the per-conversation watermark), and a Clear of a conversation removes
// its vectors, also those other replicas wrote (retrieval.SourceRemover;
// a store that cannot delete keeps them, never shown). A store-level
// Forget does not reach the vector store: the vectors of a conversation
// forgotten there are never shown, and a Clear of the conversation through
// the Recall removes them. Vectors indexed under the conversation's scope
// before (an earlier version searched the conversation only) are embedded
// once more under the user's, and a Clear removes those too. The IDs are
// 52-bit hashes (exact in stores that return metadata as JSON numbers),
// in no conversation's order: the lexical part of a WithHybrid searching
// the user's conversations scores each unit alone, without its
// neighbours' words. A Clear removes the conversation's vectors by source
// before the messages go, so a turn another replica saves just after it
// keeps its vector.
//
// One Recall serves many identities: each scope's units are indexed under
// its own name (the conversation's memstack.Identity.Key, or the user's
// or tenant's key prefix), and a search never returns a unit outside the
// scope. A Recall only shows units that are in
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
	idx        retrieval.Index
	eng        *recallindex.Engine // the mechanism: the index kept in step with the store
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
	// searcher is the store's own index, searched instead of idx (see
	// "The index in the database").
	searcher   store.RecallSearcher
	unit       RecallUnit
	share      float64
	dates      bool
	queryDates bool
	// scope is whose conversations a load searches.
	scope RecallScope
	// stateName names the store state of the durable index's bookkeeping
	// (WithRecallStateName).
	stateName string

	counterOnce sync.Once
	counter     tokens.Counter
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

// WithRecallStateName sets the name of the store state in which a Recall
// with a durable index keeps its bookkeeping (default RecallStateName):
// two Recalls with vector indexes of their own over the same store and
// conversations (a second stack, or an agent framework's memory service
// beside a chain's memory) each need their own, or one takes the other's
// progress for its own. combined.New refuses two layers of one stack
// that keep state under the same name on one store. The name must be a
// valid state name (storekit.CheckStateName: 1 to 200 bytes of printable
// ASCII).
func WithRecallStateName(name string) RecallOption {
	return recallOpt(func(c *config) {
		if err := storekit.CheckStateName(name); err != nil {
			c.bad("WithRecallStateName(%q): %v", name, err)
			return
		}
		c.recall.stateName = name
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
	m := &Recall{base: newBase(opts, RecallOption.applyRecall)}
	if m.err != nil {
		return nil, m.err
	}
	m.base.checkID = m.checkScopeID
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
		if _, lists := m.cfg.store.(store.Users); err == nil && (s.scopeSet && s.scope != RecallScopeConversation || !s.scopeSet && lists) {
			// A scope wider than the conversation keys the hybrid's docs
			// by IDs every replica derives (hashes, see WithVector): their
			// order is not the conversation's, so its lexical part scores
			// each unit alone, with no neighbours to weigh.
			lex, err = retrieval.NewBM25()
		}
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
		// The default index over a store that keeps it beside its
		// messages: the store's, which ranks the same.
		m.searcher, _ = m.cfg.store.(store.RecallSearcher)
	}
	r := m.idx.Range()
	m.threshold = r.Min
	if s.thresholdSet {
		if !r.Contains(s.threshold) {
			return nil, fmt.Errorf("%w: WithThreshold(%v): the threshold must lie in %s, the score range of index %s", ErrInvalidOption, s.threshold, r, recallindex.IndexName(m.idx))
		}
		m.threshold = s.threshold
	}
	m.k, m.budgetK = DefaultRecallK, DefaultRecallBudgetK
	if s.kSet {
		m.k, m.budgetK = s.k, s.k
	}
	m.dates, m.queryDates = !s.noDates, !s.noQueryDates
	m.stateName = s.stateName
	if m.stateName == "" {
		m.stateName = RecallStateName
	}
	m.share = DefaultRecallNeighbourShare
	if s.shareSet {
		m.share = s.share
	}
	m.neighbours, m.exclude, m.unit = s.neighbours, s.excludeRecent, s.unit
	m.neighboursSet = s.neighboursSet
	m.timeout, m.hook = s.timeout, s.hook
	_, lists := m.cfg.store.(store.Users)
	switch {
	case s.scopeSet && s.scope != RecallScopeConversation && !lists:
		return nil, fmt.Errorf("%w: WithRecallScope(%s): the store %T cannot list conversations (it does not implement store.Users); use a store of memstack, or RecallScopeConversation", ErrInvalidOption, s.scope, m.cfg.store)
	case s.scopeSet:
		m.scope = s.scope
	case !lists:
		m.scope = RecallScopeConversation
	}
	m.eng = recallindex.New(recallindex.Config{
		Store:     m.cfg.store,
		Index:     m.idx,
		Turns:     m.unit == RecallTurns,
		Scope:     m.scope.engineScope(),
		Timeout:   m.timeout,
		CacheSize: m.cfg.cacheSize,
		StateName: m.stateName,
		Report:    m.report,
		Append: func(ctx context.Context, id identity, msgs ...llms.ChatMessage) error {
			_, err := m.appendQuiet(ctx, id, msgs...)
			return err
		},
		Searcher: m.searcher,
		Near:     [2]float64{m.ctxWeight, m.ctxWeight / 2},
	})
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

// String describes the memory's configuration.
func (m *Recall) String() string {
	return m.describe("Recall", fmt.Sprintf("index=%s, scope=%s, k=%d, budget_k=%d, threshold=%g, neighbours=%d, neighbour_share=%g, context_weight=%g, exclude_recent=%d, dates=%t, query_dates=%t",
		recallindex.IndexName(m.idx), m.scope, m.k, m.budgetK, m.threshold, m.neighbours, m.share, m.ctxWeight, m.exclude, m.dates, m.queryDates))
}

// engineScope is s as the engine names it.
func (s RecallScope) engineScope() recallindex.Scope {
	switch s {
	case RecallScopeConversation:
		return recallindex.ScopeConversation
	case RecallScopeTenant:
		return recallindex.ScopeTenant
	}
	return recallindex.ScopeUser
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
	return m.save(ctx, id, "turn", msgs...)
}

// save stores msgs for id and indexes them. For a Recall searching more
// than the conversation, over a store.MultiAppender, the messages and
// their journal entry are one write (the store's AppendBatches: both are
// stored or neither, so no replica reads the entry before the turn);
// over any other store the entry is written after the messages (see
// recallindex.Engine.Saved).
func (m *Recall) save(ctx context.Context, id identity, what string, msgs ...llms.ChatMessage) error {
	journaled := false
	if _, batches := m.cfg.store.(store.MultiAppender); batches {
		// The entry is made here only for a store that can take it with
		// the turn; otherwise Saved writes the one its cache keeps.
		jid, entry, scoped, err := m.eng.JournalEntry(id)
		if err != nil {
			return err
		}
		if scoped {
			if journaled, err = m.appendWith(ctx, id, msgs, jid, entry); err != nil {
				return err
			}
		}
	}
	if !journaled {
		if err := m.append(ctx, id, msgs...); err != nil {
			return err
		}
	}
	return m.eng.Saved(ctx, id, what, journaled)
}

// AddMessage stores one message of any role and indexes the unit it
// belongs to, as SaveContext does. System messages are stored but never
// indexed or shown.
func (m *Recall) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
	id, msg, err := m.message(ctx, msg)
	if err != nil {
		return err
	}
	return m.save(ctx, id, "message", msg)
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
	return m.eng.Clear(ctx, id)
}
