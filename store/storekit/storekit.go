package storekit

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/internal/kit"
	"github.com/tmc/langchaingo/llms"
)

// EncodeMessage returns the storage form of msg without a time: a JSON
// object with a version ("v": 1), an explicit type tag ("type": "human",
// "ai", "system", "generic", "function" or "tool") and exactly the fields
// of that langchaingo message type:
//
//	{"v":1,"type":"human","content":"Hi"}
//	{"v":1,"type":"ai","content":"","reasoning_content":"…","function_call":{"name":"f","arguments":"{}"},
//	 "tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{…}"}}]}
//	{"v":1,"type":"generic","content":"…","role":"critic","name":"bob"}
//	{"v":1,"type":"function","content":"…","name":"f"}
//	{"v":1,"type":"tool","content":"…","id":"call_1"}
//
// It is EncodeMessageAt(msg, time.Time{}): the value has no "at" field and
// decodes (DecodeRecord) with a zero store.Record.Time. Backends store messages
// with EncodeMessageAt, dated AppendTime(ctx).
//
// DecodeMessage(EncodeMessage(m)) equals m (reflect.DeepEqual), including
// a nil versus an empty ToolCalls slice and a nil versus a set FunctionCall.
// A pointer to one of the six message types is encoded as the message it
// points to and decodes as the value type, as store.InMemory stores it.
//
// Every string must be valid UTF-8 (JSON cannot carry other bytes; the
// encoder refuses rather than silently replace them); the error names the
// field, never its content, and wraps store.ErrInvalidArgument. NUL and other
// control characters are fine: they are escaped (\u0000), so the encoded
// value never contains a NUL byte and fits a text column — but not
// PostgreSQL's jsonb, which rejects \u0000; store it as text or bytea.
// Any other message type (a caller's own llms.ChatMessage implementation)
// is an error naming its Go type, wrapping store.ErrInvalidArgument.
//
// The format is stable: backends written by different engineers (SQLite,
// Redis, PostgreSQL) share it, and values written today must decode later.
func EncodeMessage(msg llms.ChatMessage) ([]byte, error) { return kit.EncodeMessage(msg) }

// EncodeMessageAt is EncodeMessage for a message saved at time at: the
// value gains an "at" field, the last one, holding at in RFC 3339 with
// nanoseconds (time.RFC3339Nano: trailing zeros of the fraction, and a
// fraction of zero, left out) and at's own UTC offset ("Z" for UTC):
//
//	{"v":1,"type":"human","content":"Hi","at":"2023-05-08T10:30:00.123456789+02:00"}
//	{"v":1,"type":"ai","content":"Hello!","at":"2023-05-08T08:30:00Z"}
//
// DecodeRecord gives the time back as store.Record.Time: the same instant
// (time.Time.Equal) with the same UTC offset — not the location's name,
// which RFC 3339 does not carry, nor a monotonic clock reading. A zero at
// writes no "at" field, exactly as EncodeMessage. A time RFC 3339 cannot
// hold (see CheckTime) is an error wrapping store.ErrInvalidArgument.
//
// The field was added to version 1 of the format without changing "v":
// values written without it (before memstack recorded times) still decode,
// with a zero Time, and a decoder that predates the field ignores it.
func EncodeMessageAt(msg llms.ChatMessage, at time.Time) ([]byte, error) {
	return kit.EncodeMessageAt(msg, at)
}

// DecodeMessage is the inverse of EncodeMessage and EncodeMessageAt,
// without the time (DecodeRecord returns it). A value EncodeMessageAt
// could not have written — not JSON, trailing data, another version, an
// unknown type tag (the error names it), a missing field, a field of
// another message type, an "at" field that is not an RFC 3339 time — is an
// error wrapping store.ErrCorrupt; DecodeMessage never panics. Its errors never
// include the message's content (nor the malformed time). Object keys the
// format does not define are ignored: a change to the format that matters
// changes the version ("v") instead.
func DecodeMessage(data []byte) (llms.ChatMessage, error) { return kit.DecodeMessage(data) }

// DecodeRecord decodes the stored message data of id with sequence number
// seq into a store.Record: the message, and the time EncodeMessageAt wrote as
// store.Record.Time (zero for a value without one, such as every value stored
// before memstack recorded times). The time's location follows from its
// offset: time.UTC for a zero offset, time.Local for the offset Local has
// at that instant, else an unnamed fixed zone of that offset — the same
// *time.Location for every value with that offset, so Records decoded
// from one value are reflect.DeepEqual. Its
// error wraps DecodeMessage's (and so store.ErrCorrupt) and names the identity
// (its Key) and the Seq, which is what a backend reports for a corrupt row
// or value.
func DecodeRecord(id memstack.Identity, seq int64, data []byte) (store.Record, error) {
	msg, at, err := kit.Decode(data)
	if err != nil {
		return store.Record{}, fmt.Errorf("store: message Seq %d of identity %q: %w", seq, id.Key(), err)
	}
	return store.Record{Seq: seq, Message: msg, Time: at}, nil
}

// CheckTime returns an error wrapping store.ErrInvalidArgument, naming the
// problem, if t cannot be the time of a stored message: RFC 3339, the form
// the backends keep it in, holds the years 0 to 9999 and UTC offsets of
// whole minutes under 24 hours. The zero time (no time) is fine. A backend
// calls it on AppendTime(ctx) before storing anything, so an Append
// dated with such a time (memstack.WithTime) stores nothing and fails.
func CheckTime(t time.Time) error { return kit.CheckTime(t) }

// AppendTime returns the time a backend dates the messages of an Append
// called with ctx: memstack.TimeFrom(ctx) when the caller gave one, else
// time.Now(); without its monotonic clock reading either way.
func AppendTime(ctx context.Context) time.Time { return kit.AppendTime(ctx) }

// AppendKey returns the append key ctx carries (see store.WithAppendKey) and
// whether there was a non-empty one.
func AppendKey(ctx context.Context) (string, bool) { return kit.AppendKey(ctx) }

// CheckAppendKey returns an error naming the problem if key cannot be an
// append key: it must be 1 to 200 bytes of printable ASCII, like a state
// name.
func CheckAppendKey(key string) error { return kit.CheckAppendKey(key) }

// CheckAppendKeyOf returns ctx's append key and whether it has one, or
// an error if the key it carries is invalid: what a backend's Append
// calls first.
func CheckAppendKeyOf(ctx context.Context) (string, bool, error) { return kit.CheckAppendKeyOf(ctx) }

// CheckStateName returns an error naming the problem if name cannot be a
// state name: it must be 1 to 200 bytes of printable ASCII.
func CheckStateName(name string) error { return kit.CheckStateName(name) }

// CloneMessage returns a copy of msg that shares no mutable memory with it:
// an AI message's tool calls and function call are copied, so neither the
// caller nor the store can change the other's message afterwards. Other
// langchaingo message types are plain values and are returned as they are;
// so are message types this package does not know.
func CloneMessage(msg llms.ChatMessage) llms.ChatMessage { return kit.CloneMessage(msg) }

// MergeBySeq merges two record lists, each in Seq order, into one in Seq
// order (a record in both is kept once): how a backend that reads the
// system messages and the newest ones apart builds Tail's answer.
func MergeBySeq(a, b []store.Record) []store.Record { return kit.MergeBySeq(a, b, recordSeq) }

// TailOf returns what Tail returns for a conversation whose records, in
// Seq order, are rs: for stores that read every record anyway (store.History).
func TailOf(rs []store.Record, n int, after int64) []store.Record {
	return kit.TailOf(rs, n, after, recordSeq, recordMessage)
}

func recordSeq(r store.Record) int64                { return r.Seq }
func recordMessage(r store.Record) llms.ChatMessage { return r.Message }

// ForgetBuckets is how many buckets the absent versions that Forget and
// ForgetScope move are kept in (see ForgetBucket).
const ForgetBuckets = 4096

// The implementations in store/internal/kit use the same number.
var _ [0]struct{} = [ForgetBuckets - kit.ForgetBuckets]struct{}{}

// ForgetBucket returns the bucket, in [0, ForgetBuckets), of the absent
// version that a Forget of an identity of user in tenant moves: a hash of
// the tenant and the user, so every conversation of a user and the user's
// derived identities share it, and a Forget of one user leaves the first
// commits of almost every other user alone (one in ForgetBuckets shares
// the bucket and sees a commit conflict once). The bucket names no one:
// many users share each.
func ForgetBucket(tenant, user string) int { return kit.ForgetBucket(tenant, user) }

// Derived reports whether id's Conversation starts with a NUL byte: by
// memstack's convention such an identity holds state derived from the
// user's other conversations (memories.UserFactsConversation, the facts
// a Facts memory keeps per user). ForgetScope removes derived identities
// after every other one of the scope, so a commit racing with it that
// derives state from a conversation not yet removed lands before its
// derived identity is removed, and goes with it.
func Derived(id memstack.Identity) bool { return kit.Derived(id) }

// DerivedOf returns the derived identities memstack may keep for user of
// tenant (see Derived): ForgetScope forgets each of them, last, also when
// it finds nothing stored under it, so that the forget moves their absent
// versions and a commit that derived state from the user's conversations
// while the forget ran conflicts instead of landing after it.
func DerivedOf(tenant, user string) []memstack.Identity { return kit.DerivedOf(tenant, user) }

// ForgetOrder orders identities for ForgetScope in place: every derived
// identity (Derived) after the others, each group by Key.
func ForgetOrder(ids []memstack.Identity) { kit.ForgetOrder(ids) }

// SortExport orders an export as store.Users.Export returns it: identities by
// Key, namespaces by name. Backends that gather an export out of order
// call it last.
func SortExport(e *store.Export) {
	sort.Slice(e.Identities, func(i, j int) bool { return e.Identities[i].Identity.Key() < e.Identities[j].Identity.Key() })
	for _, ie := range e.Identities {
		sort.Slice(ie.Namespaces, func(i, j int) bool { return ie.Namespaces[i].Namespace < ie.Namespaces[j].Namespace })
	}
}
