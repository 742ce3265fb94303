package kit

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/memstack/memstack"
	"github.com/tmc/langchaingo/llms"
)

// AppendTime returns the time a backend dates the messages of an Append
// called with ctx: memstack.TimeFrom(ctx) when the caller gave one, else
// time.Now(); without its monotonic clock reading either way.
func AppendTime(ctx context.Context) time.Time {
	if t, ok := memstack.TimeFrom(ctx); ok {
		return t
	}
	return time.Now().Round(0)
}

type appendKey struct{}

// WithAppendKey returns a copy of ctx carrying the append key key.
func WithAppendKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, appendKey{}, key)
}

// AppendKey returns the append key ctx carries (see WithAppendKey) and
// whether there was a non-empty one.
func AppendKey(ctx context.Context) (string, bool) {
	if ctx == nil {
		return "", false
	}
	k, ok := ctx.Value(appendKey{}).(string)
	return k, ok && k != ""
}

// CheckAppendKey returns an error naming the problem if key cannot be an
// append key: it must be 1 to 200 bytes of printable ASCII, like a state
// name.
func CheckAppendKey(key string) error {
	if key == "" || len(key) > 200 {
		return fmt.Errorf("%w: append key %q must be 1 to 200 bytes long", ErrInvalidArgument, key)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return fmt.Errorf("%w: append key %q: byte %d is not printable ASCII", ErrInvalidArgument, key, i)
		}
	}
	return nil
}

// CheckAppendKeyOf returns ctx's append key and whether it has one, or
// an error if the key it carries is invalid.
func CheckAppendKeyOf(ctx context.Context) (string, bool, error) {
	k, ok := AppendKey(ctx)
	if !ok {
		return "", false, nil
	}
	if err := CheckAppendKey(k); err != nil {
		return "", false, err
	}
	return k, true, nil
}

// CheckStateName returns an error naming the problem if name cannot be a
// state name: it must be 1 to 200 bytes of printable ASCII.
func CheckStateName(name string) error {
	if name == "" || len(name) > 200 {
		return fmt.Errorf("%w: state name %q must be 1 to 200 bytes long", ErrInvalidArgument, name)
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return fmt.Errorf("%w: state name %q: byte %d is not printable ASCII", ErrInvalidArgument, name, i)
		}
	}
	return nil
}

// UserFactsConversation is store.UserFactsConversation.
const UserFactsConversation = "\x00memstack-user-facts"

// UserRecallJournalConversation is store.UserRecallJournalConversation.
const UserRecallJournalConversation = "\x00memstack-recall-journal"

// UserSummariesConversation is store.UserSummariesConversation.
const UserSummariesConversation = "\x00memstack-user-summaries"

// DerivedOf returns the derived identities memstack may keep for user of
// tenant.
func DerivedOf(tenant, user string) []memstack.Identity {
	return []memstack.Identity{
		{Tenant: tenant, User: user, Conversation: UserFactsConversation},
		{Tenant: tenant, User: user, Conversation: UserRecallJournalConversation},
		{Tenant: tenant, User: user, Conversation: UserSummariesConversation},
	}
}

// ForgetBuckets is how many buckets the absent versions that Forget and
// ForgetScope move are kept in.
const ForgetBuckets = 4096

// ForgetBucket returns the bucket, in [0, ForgetBuckets), of the absent
// version that a Forget of an identity of user in tenant moves.
func ForgetBucket(tenant, user string) int {
	h := fnv.New64a()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(user))
	return int(h.Sum64() % ForgetBuckets)
}

// Derived reports whether id's Conversation starts with a NUL byte.
func Derived(id memstack.Identity) bool {
	return strings.HasPrefix(id.Conversation, "\x00")
}

// ForgetOrder orders identities for ForgetScope in place: every derived
// identity (Derived) after the others, each group by Key.
func ForgetOrder(ids []memstack.Identity) {
	sort.SliceStable(ids, func(i, j int) bool {
		if di, dj := Derived(ids[i]), Derived(ids[j]); di != dj {
			return dj
		}
		return ids[i].Key() < ids[j].Key()
	})
}

// MergeBySeq merges two lists, each in Seq order (seq gives an element's
// Seq), into one in Seq order; an element in both is kept once.
func MergeBySeq[R any](a, b []R, seq func(R) int64) []R {
	out := make([]R, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && seq(a[i]) < seq(b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || seq(b[j]) < seq(a[i]):
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// TailOf returns what Tail returns for a conversation whose records, in
// Seq order, are rs (seq and msg give a record's Seq and message).
func TailOf[R any](rs []R, n int, after int64, seq func(R) int64, msg func(R) llms.ChatMessage) []R {
	var sys, tail []R
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i]
		if msg(r).GetType() == llms.ChatMessageTypeSystem {
			sys = append(sys, r)
		} else if seq(r) > after && len(tail) < n {
			tail = append(tail, r)
		}
	}
	slices.Reverse(sys)
	slices.Reverse(tail)
	return MergeBySeq(sys, tail, seq)
}
