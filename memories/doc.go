// Package memories holds memstack's memory types. Each implements
// langchaingo's schema.Memory and fmt.Stringer, so it drops into
// chains.NewConversation, chains.NewLLMChain (chain.Memory) and
// agents.NewExecutor (agents.WithMemory) with no other change:
//
//   - Buffer: the full transcript, rendered incrementally.
//   - RecentN: the last n messages, system messages pinned, tool calls
//     grouped with their results; it reads only those.
//   - TokenWindow: the newest messages that fit in a token budget, same
//     rules.
//   - Summary: a running summary of everything older (from any
//     summarizer.Summarizer: an llms.Model, or the offline extractive
//     summarizer) plus the recent messages raw; one model call per batch,
//     never per exchange, optionally in the background.
//   - Facts: durable facts extracted from the conversation (package
//     extract: built-in patterns, your own rules, or an llms.Model), each
//     with the messages it came from and when it became valid; a new value
//     supersedes the old one, which is kept.
//   - Recall: the past turns most relevant to the current input, dated, as
//     many as a token budget leaves room for (BM25 with Snowball stemming,
//     each turn scored with its neighbours' words, by default; vector or
//     hybrid retrieval with WithVector/WithHybrid).
//
// Under combined.WithTokenBudget every type loads as items
// (layer.Itemizer), so a budget drops whole messages, facts or turns, in
// the drop order each type's LoadItems documents; and every type records
// its loads on the observe.Recorder in its context (package observe).
//
// # Shared behaviour
//
// Identity: every call keys its state by the memstack.Identity in its
// context (memstack.WithIdentity); a call with none uses the default identity
// (WithDefaultIdentity; the zero Identity unless set), or fails with
// memstack.ErrNoIdentity under WithRequireIdentity. Clear clears only the
// identity in its context.
//
// Clear across replicas: cleared means gone. Once Clear (of any memory
// value on the store, in any process) or store.Forget has returned,
// nothing it removed comes back — not from a background Summary fold, a
// Facts extraction or a Recall indexing call that was in flight, here or
// in another replica, when it ran. Each of them reads its state (and the
// version guarding it) before the messages it works from, and commits with
// a compare-and-set on that version; a Clear or Forget moves the version
// even of an absent state (package store, "Cleared means gone"), so the
// commit conflicts and is dropped, its model call wasted but nothing
// stored. Facts also checks, before each commit, that the exchange's
// messages are still stored; Recall takes back the vector-store documents
// it added for messages cleared meanwhile (when the vector store can
// delete them: retrieval.Remover). Within one process Clear also cancels
// the identity's running model call. What a Clear cannot reach: a vector
// store that cannot delete keeps the cleared documents (Recall never
// shows them), and store.Forget does not touch vector stores at all —
// call the Recall's Clear too. Facts kept per user (WithFactsPerUser)
// belong to the user: Facts.Clear and a user-wide ForgetScope remove
// them, a store-level Clear or Forget of one conversation does not.
//
// Saving: SaveContext takes the user's message from the inputs map and the
// model's answer from the outputs map, choosing keys exactly as langchaingo's
// memory.GetInputValue does (see package adapter). Both maps are validated
// before anything is written, so an exchange (a human message and the
// answer after it) is stored whole or not at all; an error names the
// offending key and never includes the values. AddMessage
// stores a single message of any role: that is how system prompts and tool
// messages enter memory.
//
// Loading: in string mode (the default) the variable is rendered exactly
// like llms.GetBufferString with the configured prefixes (default "Human"
// and "AI"), so prompts written for langchaingo's memories work unchanged;
// WithReturnMessages loads a []llms.ChatMessage instead, a fresh copy the
// caller may change.
//
// Time: every message a memory saves is stored with the time of its save
// (store.Record.Time): the time the caller gave with memstack.WithTime —
// to import an existing history, or replay one, at the times its
// exchanges were said — else now (Facts: its WithClock clock). The time
// travels in the context like the identity, so a chain needs no change:
//
//	for _, turn := range history {
//		ctx := memstack.WithTime(ctx, turn.At)
//		err := mem.SaveContext(ctx, turn.Inputs, turn.Outputs)
//		...
//	}
//
// One save dates all its messages alike. Facts are valid from the time of
// the messages they came from (Facts, Fact.Line); observe reports carry
// each item's stored time (observe.Item.Time) and each save's
// (observe.Report.At). Messages stored before memstack recorded times have
// a zero time.
//
// Storage: each memory keeps its messages in a store.Store (WithStore); the
// default is an in-memory store of its own. One store for a whole stack —
// one SQLite file, one Redis, one PostgreSQL database, in one namespace —
// is a supported configuration, and the natural one: the store keeps one
// transcript per conversation that every layer over it reads (package
// store, "One transcript"). The rule that makes it safe: a memory never
// removes a message another layer may read. RecentN, TokenWindow and
// Summary are views — a load reads the pinned system messages and the
// newest messages (store.Messages.Tail), so it costs what it shows however
// long the conversation — and remove nothing; Buffer, Facts and Recall
// read everything and remove nothing. Retention is the user's choice:
// WithRetention(KeepLast(n)) lets a RecentN, TokenWindow or Summary remove
// older messages, and combined.New refuses it where another layer on the
// same store reads them. An exchange saved by several layers on one store
// is stored once (memstack.WithSaveKey: combined.Memory sets it for every
// save; a retried save with the same key stores nothing twice), and each
// layer keeps what it derives — a summary, facts, an index — in a state
// value of its own (SummaryStateName, FactsStateName, RecallStateName), so
// two Summary, two Facts or two Recall layers need stores (or namespaces)
// of their own (combined.New says so) — or, for two Recalls,
// WithRecallStateName; two windows or two Buffers can share one. Layers on different stores each keep their copy. A
// langchaingo memory over store.AsHistory of the same store cannot share
// it: it stores every exchange again and its windows remove messages
// (combined.New refuses it).
//
// Options are typed (see Option): each type has an option interface
// (BufferOption, RecentNOption, TokenWindowOption, SummaryOption,
// FactsOption, RecallOption), a shared option satisfies all of them and a
// type's own option only its type's, so an option given to a type it does
// not apply to does not compile.
//
// Errors: every constructor, NewBuffer included, rejects bad arguments
// and option values with an error wrapping ErrInvalidOption that names the
// option. (langchaingo's NewConversationBuffer has no error result because
// none of its options can fail; memstack's can, so NewBuffer has one.) No
// constructor or method panics on bad input.
//
// Concurrency: every memory is safe for concurrent use; a cancelled
// context is honoured before any work is done.
package memories
