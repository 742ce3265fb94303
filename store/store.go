// Package store is the storage port of memstack: the one narrow interface
// through which every memory keeps its messages, and the in-memory backend
// that memories use by default.
//
// The data flow is one way: a chain calls a memory (packages memories and
// combined), the memory decides what to keep and show, and the memory keeps
// it in a Store. A Store knows nothing of langchaingo's input maps, prompts
// or windows; a memory knows nothing of where its messages live. SQLite,
// Redis and PostgreSQL backends implement the same interface, so any memory
// runs on any backend without change.
//
// # Contract
//
// Every method takes the identity whose conversation it touches; a backend
// keeps each identity's data apart (use memstack.Identity.Key for an
// injective string key). Every method honours ctx: a call with a context
// that is already done returns ctx.Err() (wrapped) and changes nothing.
//
// Messages are appended in units (a whole turn: the human message and the AI
// answer) that are stored whole or not at all. Each stored message gets a
// sequence number, Seq, which increases strictly in append order within one
// identity and is never handed out twice for that identity: not after
// RemovePrefix, not after Clear, not after Forget. Memories use Seq to cache
// per-message work (rendered lines, token counts) and to detect changes
// cheaply with Stat, so a reused Seq could show a forgotten conversation
// from a cache; backends draw Seqs from a store-wide counter (InMemory,
// SQL sequences) or from a clock-based counter (max(last+1, now in µs)).
//
// # Time
//
// Every stored message carries the time it was saved (Record.Time). An
// Append dates all its messages with one time, storekit.AppendTime(ctx): the time
// the caller put in ctx with memstack.WithTime — to import a history, or
// replay one, at the times its turns were said — else the clock when the
// Append runs. Every read (Last, All) returns it: the same instant
// (time.Time.Equal) with the same UTC offset, in every backend, and
// RemovePrefix of other messages leaves it alone. Memories pass their
// caller's ctx to Append, so
//
//	ctx = memstack.WithTime(ctx, turn.At)
//	err := mem.SaveContext(ctx, inputs, outputs)
//
// stores the turn dated turn.At. A time RFC 3339 cannot hold (storekit.CheckTime)
// makes the Append fail, storing nothing. Messages stored before memstack
// recorded times read back with a zero Time, and so do the messages of a
// store that cannot keep one (FromHistory).
//
// Besides messages, a store keeps small named values per identity (State):
// what a memory derives from the messages and must not lose on restart — a
// running summary and the Seq it covers, extracted facts. PutState is a
// compare-and-set on a version, so two processes sharing a store cannot
// overwrite each other's update unnoticed. Versions, like Seqs, are never
// reused.
//
// # Cleared means gone, across replicas
//
// A Clear or Forget defeats every state compare-and-set that read the
// state before it — also one another process was in the middle of (a
// background summary folding the turns being cleared). Without that, a
// commit that read "no summary yet" before a Clear would land after it,
// and the cleared text would be shown and stored again.
//
// The rule that makes it so: an absent value has a version too. GetState
// of a name with no value returns Value nil and the identity's absent
// version, which is
//
//   - 0 for an identity never cleared in a store that never ran Forget;
//   - after Clear, a fresh version drawn for that identity (in the Store's
//     namespace): Clear leaves this one mark of the identity behind;
//   - after Forget, which leaves nothing of the identity behind, not even
//     a mark, a fresh version drawn for the identity's user bucket
//     (storekit.ForgetBucket: the tenant and user hashed into
//     storekit.ForgetBuckets buckets; redisstore uses the identity's Redis Cluster slot): the
//     absent version of every identity without a Clear mark in that
//     bucket changes — the user's other conversations and derived
//     identities included — so a first commit racing with the Forget of
//     a user conflicts and is retried, while the first commits of almost
//     every other user land (issue 17: a Forget moving one store-wide
//     version starved every new conversation's Summary).
//
// Absent versions come from the same never-reused counter as versions. A
// PutState that creates a value must expect the version GetState reported
// for the absent value (State.Exists tells which it is); one that read
// before a Clear or Forget conflicts after it. A nil value deletes and
// returns the absent version the name has afterwards. Clear and Forget are
// each one atomic step for a reader of one namespace: it sees the
// identity's messages, state and absent versions all from before or all
// from after.
//
// Memories build on it by reading the state, with its version, before the
// messages they derive a commit from: a commit built on messages that a
// Clear or Forget removed then always conflicts, and is dropped (Summary,
// Facts and Recall do this; see package memories).
//
// System messages are pinned: RemovePrefix never removes them; only Clear
// and Forget do. Every memory type keeps system prompts ahead of whatever window it
// shows, so the store is where that rule lives, and Tail reads them
// together with the newest messages in one call.
//
// # One transcript
//
// A store keeps one transcript per identity (in its namespace), however
// many memory layers read it: a window, a summary, facts and recall over
// one store all see the same messages, and each keeps what it derives
// (a summary, facts, an index) in state values of its own. Two rules make
// that safe:
//
//   - Nothing a layer does on its own removes messages. RemovePrefix is
//     called only under a retention the user asked for
//     (memories.WithRetention), and combined.New refuses a stack where
//     that retention would remove messages another layer on the same
//     store reads. Clear and Forget are the user's: they remove the
//     identity's conversation for every layer.
//   - A turn is stored once. Every layer of a stack appends the turn it
//     saves under the same append key (WithAppendKey; memories derive it
//     from memstack.WithSaveKey, which combined.Memory sets for each
//     save), and the store keeps the first Append under a key and
//     ignores the rest, even when they race — so four layers on one
//     store, or a save retried after an error, store the turn once. A
//     backend remembers a key while the unit's first message is stored,
//     or for at least two minutes after the Append, whichever is shorter:
//     SQLite, PostgreSQL and InMemory keep it with the unit's first
//     message (a retention cuts at the start of a turn, so it never
//     removes that message and keeps the rest); redisstore keeps it for
//     two minutes, like its write tokens; History keeps it in process
//     memory, per History value. After a Clear or Forget of the identity
//     a backend may or may not remember it.
//
// Reads cost what they return: Last and Tail read the newest messages
// (and Tail the pinned system ones) without touching the rest of the
// conversation, so a window over a store that holds 100,000 messages
// loads as fast as over one that holds a thousand.
//
// # Writes whose outcome is unknown
//
// A write sent to a server whose reply never comes — the call's deadline
// or cancellation, a dropped connection, a failover — may or may not have
// been applied, and may still be applied after the call returned. A
// network backend then returns an error wrapping ErrOutcomeUnknown (and
// the cause: errors.Is(err, context.DeadlineExceeded) still holds), never
// a plain error that reads as "nothing was stored". Retry such a write so
// that it happens once: an Append under the same append key (memories
// derive it from memstack.WithSaveKey, so a SaveContext retried under the
// same save key stores its turn once); a PutState after reading the state
// again (its first try may have landed, and a retry with the same expect
// then conflicts). A write that fails without ErrOutcomeUnknown was not
// applied, and one whose context was already done, or that failed before
// anything was sent, never wraps it. InMemory and sqlitestore work in
// process and always know (see each backend's documentation); History
// knows what the langchaingo history it wraps tells it.
//
// All implementations must be safe for concurrent use by multiple
// goroutines, and — for shared backends — by multiple processes.
//
// Messages returned by a store are the store's copies: callers may change
// the returned slices and messages freely.
//
// # Writing a backend
//
// The helpers a backend calls to follow these rules — the shared storage
// form of a message (storekit.EncodeMessageAt, storekit.DecodeRecord),
// the checks an Append or PutState runs first (storekit.CheckAppendKeyOf,
// storekit.CheckTime, storekit.CheckStateName), Tail's answer
// (storekit.TailOf, storekit.MergeBySeq) and Forget's buckets and derived
// identities (storekit.ForgetBucket, storekit.DerivedOf,
// storekit.ForgetOrder) — are in package store/storekit; package
// store/storetest checks a backend against the contract.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/internal/kit"
	"github.com/tmc/langchaingo/llms"
)

// Record is one stored message and its sequence number.
type Record struct {
	// Seq is the message's sequence number within its identity (see the
	// package documentation).
	Seq int64
	// Message is the stored message.
	Message llms.ChatMessage
	// Time is when the message was saved: the time carried by the
	// context of the Append that stored it (memstack.WithTime), else the
	// backend's clock at that Append (see storekit.AppendTime). Every message of
	// one Append has the same Time. It is zero for messages stored before
	// memstack recorded times, and for stores that cannot keep one (a
	// langchaingo history, FromHistory).
	Time time.Time
}

// Stat describes what a store holds for one identity. It is cheap to get:
// memories call it on every load to decide whether their caches are still
// valid.
type Stat struct {
	// Count is the number of stored messages.
	Count int
	// FirstSeq and LastSeq are the sequence numbers of the oldest and newest
	// stored messages; both are 0 when Count is 0.
	FirstSeq, LastSeq int64
}

// State is one named value kept for an identity and the version that
// guards its updates.
type State struct {
	// Value is the stored value; nil when there is none (a stored empty
	// value is a non-nil, empty slice).
	Value []byte
	// Version guards the next PutState: the version of the stored value,
	// or, when Value is nil, the identity's absent version (0 until a
	// Clear or Forget; see the package documentation).
	Version int64
}

// Exists reports whether the state holds a value.
func (s State) Exists() bool { return s.Value != nil }

// Store keeps the messages and state of many identities: the storage port.
// See the package documentation for the contract every implementation
// follows; package storetest checks it.
type Store interface {
	Messages
	States
	// Forget removes everything the backend holds for id — messages,
	// state and Clear marks, in every namespace the backend keeps (a Redis
	// key prefix, a table prefix) — and nothing of any other identity. It
	// first draws a fresh absent version for id's user bucket (or Redis
	// slot), so a commit that read id's state before Forget conflicts (see
	// the package documentation).
	// It is the call for a user's request to be forgotten.
	Forget(ctx context.Context, id memstack.Identity) error
}

// States keeps small named values per identity.
type States interface {
	// GetState returns the value stored under name for id and its
	// version, or, if there is none, a nil Value and id's absent version
	// (see the package documentation).
	GetState(ctx context.Context, id memstack.Identity, name string) (State, error)
	// PutState stores value under name for id if the current version is
	// expect — for an absent value, the absent version GetState reported
	// — and returns the new version; otherwise it stores nothing and
	// returns an error wrapping ErrConflict. A nil value deletes the entry
	// and returns the absent version the name has afterwards.
	PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error)
}

// Messages is the message half of the port.
type Messages interface {
	// Append stores msgs, in order, as one unit: afterwards either all of
	// them are stored, after every message already stored for id, or none
	// is and an error is returned. Appending no messages is a no-op.
	//
	// Under an append key (WithAppendKey) the unit is stored at most once
	// per identity and namespace: an Append whose key id already has —
	// from an earlier Append, another client's or a retry's — stores
	// nothing and returns nil, also when both run at the same moment (see
	// "One transcript" in the package documentation). An invalid key is
	// an error wrapping ErrInvalidArgument, and nothing is stored.
	Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error
	// Last returns the newest n messages of id, oldest first (fewer when
	// fewer are stored). n < 1 is an error.
	Last(ctx context.Context, id memstack.Identity, n int) ([]Record, error)
	// Tail returns, oldest first (in Seq order), every system message of
	// id together with the newest n non-system messages of id whose Seq
	// is greater than after (all of them when fewer are stored; after <= 0
	// means from the first message), read at one point in time, so it
	// never shows half of an Append. It is what a window shows — the
	// pinned system messages and the newest turns — and costs O(what it
	// returns), however many messages id has. n < 1 is an error wrapping
	// ErrInvalidArgument; pass math.MaxInt for every message after after.
	Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]Record, error)
	// All returns every stored message of id, oldest first.
	All(ctx context.Context, id memstack.Identity) ([]Record, error)
	// Stat returns the count and sequence bounds of id's messages.
	Stat(ctx context.Context, id memstack.Identity) (Stat, error)
	// RemovePrefix removes every non-system message of id whose Seq is at
	// most through, and returns how many it removed. System messages stay.
	// A backend may remove a long prefix in several steps, oldest first
	// (redisstore does, 1,000 messages at a time, so the server is never
	// blocked for long): a reader meanwhile may see part of it gone, never
	// a gap; after an error, calling again finishes the removal.
	RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error)
	// Clear removes every message of id, system messages included, and
	// every state value of id, in this store's namespace, and gives id a
	// fresh absent version there, in one atomic step. Other identities
	// are untouched.
	Clear(ctx context.Context, id memstack.Identity) error
}

// MultiStat is implemented by a Store that can read the Stats of many
// identities in one round trip: a Recall searching a user's conversations
// checks every conversation its load shows with it, so a load over a
// networked store costs a round trip, not one per conversation.
// redisstore (a pipeline) and pgstore (a batch) implement it; the
// in-process stores need not. Package storetest checks it.
type MultiStat interface {
	// StatMany returns the Stat of each of ids, in the order of ids (an
	// identity given twice gets its Stat twice). Each Stat is what Stat
	// would have returned at some moment during the call; the Stats of
	// different identities need not be of one moment. Whatever Stat
	// refuses (a closed store, a done ctx) StatMany refuses, naming the
	// identity, and returns no Stat.
	StatMany(ctx context.Context, ids []memstack.Identity) ([]Stat, error)
}

// MultiAppender is implemented by a Store that can append to several
// identities in one atomic step. A Recall searching a user's
// conversations records each saved turn in the user's recall journal: with
// a MultiAppender the turn and its journal entry are one write, not two,
// and no reader ever sees the entry without the turn. sqlitestore (where
// writes are serialized, so a second write would cost a save nearly as
// much again), pgstore (one transaction) and redisstore (one MULTI/EXEC,
// for a client of one server) implement it; the in-memory store needs
// not. Package storetest checks it.
//
// A store that cannot append a call's batches in one step (redisstore
// over a Redis Cluster, whose identities live on different nodes) returns
// an error wrapping errors.ErrUnsupported and stores nothing; the caller
// then appends the batches one by one.
type MultiAppender interface {
	// AppendBatches stores each batch as Append would store its Messages
	// for its ID under its Key (an append key, "" for none: see
	// WithAppendKey; the append key in ctx, if any, is not used), all in
	// one atomic step: afterwards every batch is stored (a batch whose key
	// its identity has already stores nothing, as with Append) or none
	// is, and an error is returned. Every message is dated
	// storekit.AppendTime(ctx). A batch with no messages is skipped. A bad
	// batch (an invalid key, a message that cannot be stored) is an error
	// wrapping ErrInvalidArgument where Append's would, naming the batch,
	// and nothing is stored.
	AppendBatches(ctx context.Context, batches ...Batch) error
}

// ChangeFeed is implemented by a Store that can tell which identities of
// a scope were appended to after a point, kept by its appends themselves.
// A Recall searching a user's conversations needs to learn, on each load,
// which of them other replicas saved to: over a ChangeFeed that follows
// the scope it asks the store, and a save writes nothing more than a
// conversation's save would; over another store each save also records
// itself in the scope's recall journal (an entry under a derived
// identity).
//
// sqlitestore follows every scope: its Seqs come from one AUTOINCREMENT
// for the whole file and its writes are serialized, so Seqs are committed
// in increasing order and "appended after mark" is a read of its
// per-identity stat rows. redisstore follows a user's conversations on
// one server that keeps no Cluster slots and evicts no keys, for a store
// without a TTL (its append script also scores the conversation in a
// per-user sorted set, in the same atomic step), not a tenant's.
// PostgreSQL's and the in-memory store's appends to different identities
// commit concurrently, so a greater Seq may become visible before a
// smaller one: they have no feed. Package storetest checks it.
type ChangeFeed interface {
	// Follows reports whether Changed answers for scopes like scope (a
	// user's, or a tenant's every user's) in this store's configuration.
	// It is fixed for the life of the Store: a reader that finds it false
	// follows the scope another way.
	Follows(scope Scope) bool
	// Changed returns the identities within scope appended to in this
	// store's namespace after mark (for mark 0, every one the feed holds:
	// sqlitestore's every identity with messages, redisstore's every one
	// appended to since Stores kept feeds), ordered by Key, and next, the
	// mark to pass to the next call. It may name more: redisstore keeps
	// one feed per user for every namespace of its key prefix. Nothing is
	// lost between calls: an Append that Changed did not report gets a
	// mark greater than next, so the next call, given next, returns its
	// identity. next is never below mark. Removals
	// (Clear, Forget, RemovePrefix) are not changes: a reader learns of
	// them from Stat. A scope the store does not follow is an error
	// wrapping errors.ErrUnsupported; a bad scope one wrapping
	// ErrInvalidArgument.
	Changed(ctx context.Context, scope Scope, mark int64) (ids []memstack.Identity, next int64, err error)
}

// Batch is what MultiAppender.AppendBatches appends to one identity.
type Batch struct {
	ID       memstack.Identity
	Messages []llms.ChatMessage
	// Key is the batch's append key (WithAppendKey), "" for none.
	Key string
}

// ProcessState is implemented by a Store whose state values live in
// process memory only while its messages may outlive the process — History,
// over a langchaingo history that may be persistent. A memory that moves
// messages into its state refuses such a store: memories.Summary under a
// retention folds messages into its summary and removes them, so after a
// restart they would be gone.
type ProcessState interface {
	// StateInProcess reports whether the store keeps its state values in
	// process memory only.
	StateInProcess() bool
}

// WithAppendKey returns a copy of ctx under which an Append stores its
// unit at most once per identity and namespace: key names the unit (see
// Messages.Append and "One transcript" in the package documentation). It
// must be 1 to 200 bytes of printable ASCII, like a state name
// (storekit.CheckAppendKey); an empty key means none. Memories set it for
// every save, from memstack.WithSaveKey; call it yourself only when you
// append to a store directly.
func WithAppendKey(ctx context.Context, key string) context.Context {
	return kit.WithAppendKey(ctx, key)
}

// ErrInvalidArgument is wrapped by errors about bad arguments (n < 1, a nil
// message, an identity a store cannot serve).
var ErrInvalidArgument = kit.ErrInvalidArgument

// ErrCorrupt is wrapped by the errors of reads (Tail, Last, All, Export)
// that meet a stored value that is not a message the codec could have
// written (storekit.DecodeMessage, storekit.DecodeRecord). A backend that
// meets one returns the error (naming the identity and Seq, never the
// value) and keeps serving every other message and identity.
var ErrCorrupt = kit.ErrCorrupt

// ErrConflict is wrapped by PutState's error when the stored version is not
// the expected one: another writer updated the value first.
var ErrConflict = errors.New("store: state version conflict")

// ErrOutcomeUnknown is wrapped by the error of a write whose outcome the
// store cannot tell: the write reached, or may have reached, the server
// (a Redis script, a PostgreSQL transaction with its COMMIT) and no reply
// came — a deadline or a cancellation during the call, a dropped
// connection, a failover — so it may or may not have been applied, and
// may still be applied after the call returned. The error wraps the cause
// too, so errors.Is(err, context.DeadlineExceeded) or
// errors.Is(err, context.Canceled) still holds.
//
// Retry it to make it happen exactly once: an Append under the same
// append key (WithAppendKey; a memory's SaveContext under the same
// memstack.WithSaveKey) stores its unit once however many of the tries
// landed, within the time the backend remembers the key (see "One
// transcript" in the package documentation). An Append without a key may
// store its unit twice if retried. Read the state again before retrying a
// PutState: a retry with the same expect conflicts if the first try
// landed. Clear, Forget and RemovePrefix may simply be called again.
//
// An error without it means the write was not applied. A call whose
// context was already done, or that failed before anything was sent,
// never returns it; nor do the in-process stores (InMemory and
// sqlitestore), which know the outcome of every write.
var ErrOutcomeUnknown = errors.New("store: write outcome unknown (no reply came: it may have been applied)")
