package store

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/internal/kit"
)

// Scope names whose data a user-wide call of Users reaches: every
// conversation of one user of a tenant, or of every user of a tenant.
// Build one with UserScope or TenantScope.
type Scope struct {
	// Tenant is the tenant.
	Tenant string
	// User is the user, when AllUsers is not set.
	User string
	// AllUsers widens the scope to every user of Tenant (User must be "").
	AllUsers bool
}

// UserScope is every conversation of user in tenant.
func UserScope(tenant, user string) Scope { return Scope{Tenant: tenant, User: user} }

// TenantScope is every conversation of every user of tenant.
func TenantScope(tenant string) Scope { return Scope{Tenant: tenant, AllUsers: true} }

// Check returns an error wrapping ErrInvalidArgument if the scope is not
// one UserScope or TenantScope builds.
func (s Scope) Check() error {
	if s.AllUsers && s.User != "" {
		return fmt.Errorf("%w: scope of every user of tenant %q also names user %q", ErrInvalidArgument, s.Tenant, s.User)
	}
	return nil
}

// Contains reports whether id lies within the scope.
func (s Scope) Contains(id memstack.Identity) bool {
	return id.Tenant == s.Tenant && (s.AllUsers || id.User == s.User)
}

// KeyPrefix returns the prefix that the Key (memstack.Identity.Key) of
// every identity within the scope starts with, and no other key does:
// "tenant:user:" or "tenant:", each part escaped as Key escapes it. A key
// part never contains ':', so a backend keyed by Key finds a scope with a
// prefix match (in SQL, a range: key >= p AND key < p with its last ':'
// replaced by ';').
func (s Scope) KeyPrefix() string {
	k := memstack.Identity{Tenant: s.Tenant, User: s.User}.Key() // "t:u:"
	if s.AllUsers {
		return k[:strings.IndexByte(k, ':')+1] // "t:"
	}
	return k
}

// String describes the scope, for errors and logs.
func (s Scope) String() string {
	if s.AllUsers {
		return fmt.Sprintf("tenant %q (every user)", s.Tenant)
	}
	return fmt.Sprintf("user %q of tenant %q", s.User, s.Tenant)
}

// Users is implemented by stores that can find, export and forget
// everything they hold for a user or a tenant — what a "forget me" or
// an access request needs — in every namespace the backend keeps (as
// Forget reaches them), whatever the namespace of the Store value it is
// called on. All four backends of memstack implement it; package storetest
// checks it.
type Users interface {
	// Identities returns every identity within scope that the backend
	// holds anything for — messages, state values or a Clear mark — in
	// any namespace, ordered by Key.
	Identities(ctx context.Context, scope Scope) ([]memstack.Identity, error)
	// Export returns everything the backend holds for the identities
	// within scope, in every namespace.
	Export(ctx context.Context, scope Scope) (Export, error)
	// ForgetScope removes everything of every identity within scope, in
	// every namespace — messages, state and Clear marks — and nothing of
	// any other identity, and returns how many identities it removed. Like
	// Forget, it first moves the absent version of every identity it
	// removes (the user's bucket, every bucket for a tenant, or one per
	// Redis Cluster slot), so commits that read before it conflict. A
	// backend that cannot remove the whole scope in one step removes it in
	// storekit.ForgetOrder, derived identities last, and then forgets
	// every identity storekit.DerivedOf names for the scope's users, also
	// those it did not find: a commit deriving state from the user's conversations
	// while it ran (a per-user Facts extraction) then lands before that
	// forget and is removed, or conflicts. A failure part-way leaves some
	// identities forgotten and the rest whole; calling it again finishes.
	ForgetScope(ctx context.Context, scope Scope) (int, error)
}

// UserFactsConversation is the Conversation of the derived identity
// {Tenant, User, UserFactsConversation} under which a Facts memory with
// memories.WithFactsPerUser keeps a user's facts (memories re-exports it).
const UserFactsConversation = "\x00memstack-user-facts"

// UserRecallJournalConversation is the Conversation of the derived identity
// {Tenant, User, UserRecallJournalConversation} under which a
// memories.Recall searching a user's conversations keeps the user's recall
// journal (memories re-exports it as RecallJournalConversation).
const UserRecallJournalConversation = "\x00memstack-recall-journal"

// UserSummariesConversation is the Conversation of the derived identity
// {Tenant, User, UserSummariesConversation} under which a memories.Summary
// with WithEarlierSummaries keeps the summaries of a user's conversations
// (memories re-exports it).
const UserSummariesConversation = "\x00memstack-user-summaries"

// The derived identities storekit.DerivedOf names use the same strings.
var _ = map[bool]int{false: 0, UserFactsConversation == kit.UserFactsConversation: 1}
var _ = map[bool]int{false: 0, UserRecallJournalConversation == kit.UserRecallJournalConversation: 1}
var _ = map[bool]int{false: 0, UserSummariesConversation == kit.UserSummariesConversation: 1}

// Export is everything a backend holds for the identities of a Scope.
type Export struct {
	// Scope is what was exported.
	Scope Scope
	// Identities holds one entry per identity, ordered by Key.
	Identities []IdentityExport
}

// IdentityExport is what a backend holds for one identity.
type IdentityExport struct {
	// Identity is the identity exported.
	Identity memstack.Identity
	// Namespaces holds one entry per namespace with data for the
	// identity, ordered by name.
	Namespaces []NamespaceExport
}

// NamespaceExport is what one namespace holds for one identity.
type NamespaceExport struct {
	// Namespace is the namespace's name ("" for a store with only one,
	// such as InMemory).
	Namespace string
	// Messages are the stored messages, oldest first.
	Messages []Record
	// States are the state values by name (absent versions and Clear
	// marks are not state values and are not listed).
	States map[string]State
	// Cleared is set when the namespace holds a Clear mark for the
	// identity (it was cleared, and may hold nothing else).
	Cleared bool
}

// wire forms of an export: messages in the codec's JSON.
type exportJSON struct {
	Tenant     string             `json:"tenant"`
	User       *string            `json:"user,omitempty"`
	Exported   string             `json:"exported_at"`
	Identities []identityJSONForm `json:"identities"`
}

type identityJSONForm struct {
	Tenant       string          `json:"tenant"`
	User         string          `json:"user"`
	Conversation string          `json:"conversation"`
	Namespaces   []namespaceJSON `json:"namespaces"`
}

type namespaceJSON struct {
	Namespace string               `json:"namespace"`
	Cleared   bool                 `json:"cleared,omitempty"`
	Messages  []messageJSON        `json:"messages"`
	States    map[string]stateJSON `json:"states"`
}

type messageJSON struct {
	Seq     int64           `json:"seq"`
	Message json.RawMessage `json:"message"`
}

type stateJSON struct {
	Version int64 `json:"version"`
	// Value is the value as text when it is valid UTF-8 (memories keep
	// JSON), else nil and Bytes holds it (base64).
	Value *string `json:"value,omitempty"`
	Bytes []byte  `json:"bytes,omitempty"`
}

// WriteJSON writes the export as one indented JSON document: the scope,
// the time of writing (now), and per identity and namespace the messages
// in the codec's form (storekit.EncodeMessageAt: type tag, fields, "at" time) and
// the state values (as text when valid UTF-8, else base64 bytes).
func (e Export) WriteJSON(w io.Writer) error {
	out := exportJSON{Tenant: e.Scope.Tenant, Exported: time.Now().UTC().Format(time.RFC3339), Identities: []identityJSONForm{}}
	if !e.Scope.AllUsers {
		u := e.Scope.User
		out.User = &u
	}
	for _, ie := range e.Identities {
		f := identityJSONForm{Tenant: ie.Identity.Tenant, User: ie.Identity.User, Conversation: ie.Identity.Conversation, Namespaces: []namespaceJSON{}}
		for _, ne := range ie.Namespaces {
			n := namespaceJSON{Namespace: ne.Namespace, Cleared: ne.Cleared, Messages: []messageJSON{}, States: map[string]stateJSON{}}
			for _, r := range ne.Messages {
				raw, err := kit.EncodeMessageAt(r.Message, r.Time)
				if err != nil {
					return fmt.Errorf("store: exporting message Seq %d of %s: %w", r.Seq, ie.Identity.Key(), err)
				}
				n.Messages = append(n.Messages, messageJSON{Seq: r.Seq, Message: raw})
			}
			for name, st := range ne.States {
				sj := stateJSON{Version: st.Version}
				if v := string(st.Value); utf8.ValidString(v) {
					sj.Value = &v
				} else {
					sj.Bytes = st.Value
				}
				n.States[name] = sj
			}
			f.Namespaces = append(f.Namespaces, n)
		}
		out.Identities = append(out.Identities, f)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("store: writing the export of %s: %w", e.Scope, err)
	}
	return nil
}
