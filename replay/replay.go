package replay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/memstack/memstack/internal/jsonerr"
	"io"
	"strings"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// MaxLineBytes is the longest line ReadJSONL accepts, without its newline.
const MaxLineBytes = 1 << 20

// ErrInput is wrapped by every error about the input of ReadJSONL, Read,
// FromExport and Import (not by the memory's own errors).
var ErrInput = errors.New("replay: invalid input")

// Conversation is one past conversation: its ID (the Conversation of the
// identity it is imported under) and its messages in order, each with its
// time (Seq is not used by Import).
type Conversation struct {
	// ID names the conversation.
	ID string
	// Messages are the conversation's messages, oldest first.
	Messages []store.Record
}

// Stats counts what Import did.
type Stats struct {
	// Conversations is the number of conversations walked to the end.
	Conversations int
	// Exchanges is the number of human–AI exchanges saved with SaveContext.
	Exchanges int
	// Messages is the number of messages given to the memory: two per
	// exchange, one per AddMessage.
	Messages int
	// Skipped is the number of messages not given to the memory because it
	// has no AddMessage method.
	Skipped int
	// Present is the number of messages not given to the memory because
	// the store SkipStored names holds them already.
	Present int
}

// Option configures Import.
type Option func(*options)

type options struct {
	stored store.Messages
}

// SkipStored makes Import read each conversation's messages from s (the
// store the memory keeps them in) once, before replaying it, and leave out
// every message s holds already — the same type, text and time, as many
// times as it holds it — so that a re-import stores nothing again whatever
// the store remembers of save keys (Redis only for minutes) and whatever a
// retention removed of the layers' derived state's inputs. An exchange is
// left out only when both its messages are stored. The memstack import
// command uses it.
func SkipStored(s store.Messages) Option {
	return func(o *options) { o.stored = s }
}

// signature is how SkipStored compares messages: type, text and time.
func signature(msg llms.ChatMessage, at time.Time) string {
	t := ""
	if !at.IsZero() {
		t = at.UTC().Format(time.RFC3339Nano)
	}
	return string(msg.GetType()) + "\x00" + msg.GetContent() + "\x00" + t
}

// line is one JSON Lines record; pointers tell a missing field.
type line struct {
	Conversation *string `json:"conversation"`
	Role         *string `json:"role"`
	Content      *string `json:"content"`
	Time         *string `json:"time"`
}

// ReadJSONL reads JSON Lines of {"conversation", "role", "content",
// "time"} (see the package documentation) into conversations, in the order
// of their first line.
func ReadJSONL(r io.Reader) ([]Conversation, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), MaxLineBytes+1) // +1: a final line without newline
	var convs []Conversation
	index := map[string]int{}
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if len(sc.Bytes()) > MaxLineBytes {
			return nil, fmt.Errorf("%w: line %d is longer than %d bytes", ErrInput, n, MaxLineBytes)
		}
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("%w: line %d: %s", ErrInput, n, lineProblem(err))
		}
		for _, f := range []struct {
			name string
			v    *string
		}{{"conversation", l.Conversation}, {"role", l.Role}, {"content", l.Content}, {"time", l.Time}} {
			if f.v == nil {
				return nil, fmt.Errorf("%w: line %d: no %q field", ErrInput, n, f.name)
			}
		}
		conv := *l.Conversation
		if conv == "" {
			return nil, fmt.Errorf("%w: line %d: field \"conversation\" is empty", ErrInput, n)
		}
		if storekit.Derived(memstack.Identity{Conversation: conv}) {
			return nil, fmt.Errorf("%w: line %d: field \"conversation\" starts with \\x00, which memstack keeps for derived data", ErrInput, n)
		}
		var msg llms.ChatMessage
		switch strings.ToLower(*l.Role) {
		case "human", "user":
			msg = llms.HumanChatMessage{Content: *l.Content}
		case "ai", "assistant":
			msg = llms.AIChatMessage{Content: *l.Content}
		case "system":
			msg = llms.SystemChatMessage{Content: *l.Content}
		default:
			return nil, fmt.Errorf("%w: line %d: field \"role\" (%d bytes) is none of human, user, ai, assistant and system", ErrInput, n, len(*l.Role))
		}
		at, err := time.Parse(time.RFC3339Nano, *l.Time)
		if err == nil {
			err = storekit.CheckTime(at)
		}
		if err != nil || at.IsZero() {
			return nil, fmt.Errorf("%w: line %d: field \"time\" (%d bytes) is not an RFC 3339 time memstack can store", ErrInput, n, len(*l.Time))
		}
		i, ok := index[conv]
		if !ok {
			i = len(convs)
			index[conv] = i
			convs = append(convs, Conversation{ID: conv})
		}
		c := &convs[i]
		if k := len(c.Messages); k > 0 && at.Before(c.Messages[k-1].Time) {
			return nil, fmt.Errorf("%w: line %d: field \"time\" is before the time of the previous message of its conversation (the file must be in time order)", ErrInput, n)
		}
		c.Messages = append(c.Messages, store.Record{Seq: int64(len(c.Messages) + 1), Message: msg, Time: at})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: line %d is longer than %d bytes", ErrInput, n+1, MaxLineBytes)
		}
		return nil, fmt.Errorf("replay: reading line %d: %w", n+1, err)
	}
	return convs, nil
}

// FromExport returns the conversations of an export (see the package
// documentation): per identity, in the export's order, the messages of
// namespace, or with namespace "" of the identity's namespace holding the
// most messages. Derived identities and identities without messages in
// the namespace are skipped; an export of more than one user is an error
// (see ExportOwner).
func FromExport(e store.Export, namespace string) ([]Conversation, error) {
	if _, err := ExportOwner(e); err != nil {
		return nil, err
	}
	var convs []Conversation
	for _, ie := range e.Identities {
		if storekit.Derived(ie.Identity) {
			continue
		}
		var pick *store.NamespaceExport
		for i := range ie.Namespaces {
			ne := &ie.Namespaces[i]
			switch {
			case namespace != "":
				if ne.Namespace == namespace {
					pick = ne
				}
			case pick == nil || len(ne.Messages) > len(pick.Messages) ||
				len(ne.Messages) == len(pick.Messages) && ne.Namespace < pick.Namespace:
				pick = ne
			}
		}
		if pick == nil || len(pick.Messages) == 0 {
			continue
		}
		convs = append(convs, Conversation{ID: ie.Identity.Conversation, Messages: append([]store.Record(nil), pick.Messages...)})
	}
	return convs, nil
}

// ExportOwner returns the tenant and the user (Conversation "") whose
// conversations e holds — its scope's, for an export of one user — so that
// they can be imported as exported: Import(ctx, mem, owner, convs). An
// export whose conversations (derived identities aside) belong to more
// than one user is an error wrapping ErrInput; an export of a tenant with
// one user's conversations gives that user.
func ExportOwner(e store.Export) (memstack.Identity, error) {
	owner := memstack.Identity{Tenant: e.Scope.Tenant, User: e.Scope.User}
	seen := false
	for _, ie := range e.Identities {
		if storekit.Derived(ie.Identity) {
			continue
		}
		u := memstack.Identity{Tenant: ie.Identity.Tenant, User: ie.Identity.User}
		if !seen && e.Scope.AllUsers {
			owner = u
		}
		if u != owner {
			return memstack.Identity{}, fmt.Errorf("%w: the export holds the conversations of more than one user (%s): import each user's export", ErrInput, e.Scope)
		}
		seen = true
	}
	return owner, nil
}

// Read reads either format: a JSON document with an "identities" key is
// memstack's export (store.ReadExport, then FromExport with namespace
// ""), anything else is JSON Lines (ReadJSONL).
func Read(r io.Reader) ([]Conversation, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("replay: reading: %w", err)
	}
	var doc map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if dec.Decode(&doc) == nil {
		if _, ok := doc["identities"]; ok {
			e, err := store.ReadExport(bytes.NewReader(data))
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrInput, err)
			}
			return FromExport(e, "")
		}
	}
	return ReadJSONL(bytes.NewReader(data))
}

// messageAdder is what Import gives single messages to.
type messageAdder interface {
	AddMessage(ctx context.Context, msg llms.ChatMessage) error
}

// Import replays convs through mem as the conversations of user (Tenant
// and User; its Conversation must be ""), at their original times, with
// save keys that make a second import of the same input store nothing
// (see the package documentation).
func Import(ctx context.Context, mem schema.Memory, user memstack.Identity, convs []Conversation, opts ...Option) (Stats, error) {
	var st Stats
	var o options
	for _, opt := range opts {
		if opt == nil {
			return st, fmt.Errorf("%w: an option is nil", ErrInput)
		}
		opt(&o)
	}
	if mem == nil {
		return st, fmt.Errorf("%w: the memory is nil", ErrInput)
	}
	if user.Conversation != "" {
		return st, fmt.Errorf("%w: the user identity names conversation %q: give only the tenant and the user", ErrInput, user.Conversation)
	}
	adder, canAdd := mem.(messageAdder)
	for ci, c := range convs {
		if storekit.Derived(memstack.Identity{Conversation: c.ID}) {
			return st, fmt.Errorf("%w: conversation %d (%q) starts with \\x00, which memstack keeps for derived data", ErrInput, ci, c.ID)
		}
		id := memstack.Identity{Tenant: user.Tenant, User: user.User, Conversation: c.ID}
		cctx := memstack.WithIdentity(ctx, id)
		// present counts the messages the store holds already (SkipStored).
		var present map[string]int
		if o.stored != nil {
			recs, err := o.stored.All(ctx, id)
			if err != nil {
				return st, fmt.Errorf("replay: conversation %q: reading what is stored: %w", c.ID, err)
			}
			present = make(map[string]int, len(recs))
			for _, r := range recs {
				present[signature(r.Message, r.Time)]++
			}
		}
		// stored reports whether the store holds every message of sigs
		// (of distinct types: never the same signature twice), and counts
		// them as seen.
		stored := func(sigs ...string) bool {
			for _, sg := range sigs {
				if present[sg] == 0 {
					return false
				}
			}
			for _, sg := range sigs {
				present[sg]--
			}
			return true
		}
		for i := 0; i < len(c.Messages); i++ {
			if err := ctx.Err(); err != nil {
				return st, fmt.Errorf("replay: conversation %q, message %d: %w", c.ID, i, err)
			}
			r := c.Messages[i]
			if r.Message == nil {
				return st, fmt.Errorf("%w: conversation %q, message %d is nil", ErrInput, c.ID, i)
			}
			if h, ok := r.Message.(llms.HumanChatMessage); ok && i+1 < len(c.Messages) {
				if a, ok := c.Messages[i+1].Message.(llms.AIChatMessage); ok && len(a.ToolCalls) == 0 && a.FunctionCall == nil {
					// One Append dates both messages with the question's time.
					if stored(signature(h, r.Time), signature(a, r.Time)) {
						st.Present += 2
						i++
						continue
					}
					key := saveKey(id, i, r, c.Messages[i+1])
					sctx := memstack.WithSaveKey(memstack.WithTime(cctx, r.Time), key)
					if err := mem.SaveContext(sctx, map[string]any{"input": h.Content}, map[string]any{"output": a.Content}); err != nil {
						return st, fmt.Errorf("replay: conversation %q, message %d (an exchange): %w", c.ID, i, err)
					}
					st.Exchanges++
					st.Messages += 2
					i++
					continue
				}
			}
			if stored(signature(r.Message, r.Time)) {
				st.Present++
				continue
			}
			if !canAdd {
				st.Skipped++
				continue
			}
			sctx := memstack.WithSaveKey(memstack.WithTime(cctx, r.Time), saveKey(id, i, r))
			if err := adder.AddMessage(sctx, r.Message); err != nil {
				return st, fmt.Errorf("replay: conversation %q, message %d: %w", c.ID, i, err)
			}
			st.Messages++
		}
		st.Conversations++
	}
	return st, nil
}

// saveKey derives the save key of the message at index i of conversation
// id (and of the answer saved with it, if any): "imp1-" and the first 16
// bytes of a SHA-256 over length-prefixed fields — the tenant, the user,
// the conversation, the index, and per message its type, its encoding
// (every field) and its time.
func saveKey(id memstack.Identity, i int, msgs ...store.Record) string {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte(id.Tenant))
	field([]byte(id.User))
	field([]byte(id.Conversation))
	binary.BigEndian.PutUint64(n[:], uint64(i))
	h.Write(n[:])
	for _, r := range msgs {
		field([]byte(r.Message.GetType()))
		b, err := storekit.EncodeMessage(r.Message)
		if err != nil {
			b = fmt.Appendf(nil, "%T %+v", r.Message, r.Message)
		}
		field(b)
		t, _ := r.Time.MarshalText()
		field(t)
	}
	return "imp1-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// lineProblem describes why a line is not a record, without quoting it: a
// field of the wrong JSON type, or not a JSON object at all.
func lineProblem(err error) string {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) && typ.Field != "" {
		return fmt.Sprintf("field %q is a JSON %s, want a string", typ.Field, typ.Value)
	}
	return "not a JSON object (" + jsonerr.Problem(err) + ")"
}
