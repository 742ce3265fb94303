package memories

import (
	"fmt"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// RecallScope is whose conversations a Recall searches (WithRecallScope).
type RecallScope int

// The scopes a Recall can search.
const (
	// RecallScopeUser searches every conversation of the identity's user
	// (same tenant, same user), the current one included: a user who
	// comes back in a new conversation gets the relevant past of the
	// earlier ones. The default, over a store that can list a user's
	// conversations (store.Users: every store of memstack).
	RecallScopeUser RecallScope = iota
	// RecallScopeConversation searches the current conversation only.
	RecallScopeConversation
	// RecallScopeTenant searches every conversation of every user of the
	// identity's tenant: knowledge a tenant's users share (the agent's
	// past decisions). Opt in only: it shows one user's turns to another.
	// Its journal, under {Tenant, "", RecallJournalConversation +
	// "-tenant"}, names per save the user and the conversation saved to
	// (never the text); a user-wide ForgetScope removes the user's turns
	// from every load but not those names, a tenant-wide one removes it.
	RecallScopeTenant
)

// String returns "user", "conversation" or "tenant".
func (s RecallScope) String() string {
	switch s {
	case RecallScopeConversation:
		return "conversation"
	case RecallScopeTenant:
		return "tenant"
	}
	return "user"
}

// WithRecallScope sets whose conversations a Recall searches:
// RecallScopeUser (the default), RecallScopeConversation or
// RecallScopeTenant (see Recall, "Across conversations"). Any other value
// is an error, and so is RecallScopeUser or RecallScopeTenant over a store
// that cannot list conversations (one that does not implement
// store.Users, such as store.FromHistory); without this option a Recall
// over such a store searches the conversation. Replicas sharing a store
// (and a vector store) should agree on the scope: a durable index
// records, per conversation, the scope its vectors were written under,
// and a replica of another scope embeds the conversation again under its
// own.
func WithRecallScope(s RecallScope) RecallOption {
	return recallOpt(func(c *config) {
		if s != RecallScopeUser && s != RecallScopeConversation && s != RecallScopeTenant {
			c.bad("WithRecallScope(%d): the scope must be RecallScopeUser, RecallScopeConversation or RecallScopeTenant", int(s))
			return
		}
		c.recall.scope, c.recall.scopeSet = s, true
	})
}

// RecallJournalConversation is the Conversation part of the identity
// {Tenant, User, RecallJournalConversation} under which a Recall searching
// a user's conversations keeps the user's recall journal, over a store
// without a change feed (store.ChangeFeed; sqlitestore and redisstore on
// one server have one and get no journal): one small message per save naming the conversation saved
// to (never the turn's text), so that every replica finds, with one Stat,
// the turns other replicas saved to the user's other conversations. A tenant-wide Recall
// keeps its journal under {Tenant, "", RecallJournalConversation +
// "-tenant"}. It is derived data: store.Forget of a conversation leaves it
// (it names no text), a user-wide ForgetScope removes it (storekit.DerivedOf
// names it).
const RecallJournalConversation = store.UserRecallJournalConversation

// RecallOtherConversation marks, in string mode, a run of units a scoped
// Recall shows from another conversation than the load's, after the run's
// date: "[8 May 2023, another conversation]" (or, with dates off,
// "[another conversation]").
const RecallOtherConversation = "another conversation"

// scoped reports whether m searches more than the conversation.
func (m *Recall) scoped() bool { return m.scope != RecallScopeConversation }

// checkScopeID refuses the identities a scoped Recall keeps its journal
// under.
func (m *Recall) checkScopeID(id identity) error {
	if m.scoped() && storekit.Derived(id) {
		return fmt.Errorf("%w: conversation %q is reserved for memstack's derived data", ErrInvalidIdentity, id.Conversation)
	}
	return nil
}
