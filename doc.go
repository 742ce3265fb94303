// Package memstack is a library of conversation-memory types for
// langchaingo (github.com/tmc/langchaingo) agents and chains.
//
// An LLM agent needs several views of one conversation at once: the last
// few turns, the whole transcript, a running summary of everything older,
// the durable facts about the user and the past exchanges that matter for
// this question. memstack gives each view as a type that implements
// langchaingo's schema.Memory, and combined.Memory stacks any of them —
// memstack's, langchaingo's or your own — behind one schema.Memory, so the
// stack drops into chains.NewConversation, chains.NewLLMChain and
// agents.NewExecutor with no other change. Each layer keeps its data in the
// store that fits it (in memory, SQLite, Redis or PostgreSQL), and every
// call is scoped by the identity of the user and conversation.
//
// # This package
//
// Package memstack holds what travels in a call's context.Context. Identity
// names whose conversation a call belongs to (Tenant, User, Conversation);
// WithIdentity puts one in a context, and every memory keys all of its
// state by it. Identity.Key is the injective storage key (ParseKey inverts
// it), Identity.Hash and Identity.KeyedHash the digests that reports use
// instead of the user's name, and ErrNoIdentity the error of a memory that
// requires an identity when the context has none. WithTime dates the
// messages saved with a context (to import or replay a history), and
// WithSaveKey names a save so that it stores its messages at most once per
// store — how the layers of a stack on one store keep one transcript, and
// how a retried save stores nothing twice.
//
// # The other packages
//
// memories holds the memory types, each a schema.Memory: Buffer (the full
// transcript, rendered incrementally), RecentN (the last n messages),
// TokenWindow (the newest messages within a token budget), Summary (a
// running summary of everything older, one model call per batch), Facts
// (durable facts about the user; a new value supersedes the old one, which
// is kept) and Recall (the past turns most relevant to the current input,
// dated, from every conversation of the user: a returning user's new
// conversation recalls the earlier ones).
// The options live there too, typed per memory type: the shared ones
// (WithMemoryKey, WithStore, …) serve every type, and an option of another
// type does not compile.
//
// combined stacks memories: combined.New merges the variables of its
// children, runs them concurrently, and with combined.WithTokenBudget keeps
// the whole stack within one token budget by dropping whole items of the
// lowest-priority layers first.
//
// layer is the contract between a memory and the stack that holds it, in
// a package that memories and combined both import: what a layer offers a
// token budget (layer.Itemizer: its variable as items kept or dropped
// whole) and how it uses its stores (layer.StoreUser). A memory of your own
// implements it by importing this package alone, and a budget then trims
// it item by item.
//
// adapter is the one place that knows langchaingo's conventions: which
// entry of a chain's input and output maps is the user's message and which
// the model's answer, how messages render into a prompt's history string
// (byte for byte llms.GetBufferString), and how they become role-separated
// llms.MessageContent for a chat model.
//
// summarizer turns messages into a running summary for memories.Summary:
// summarizer.New over any llms.Model, whose answers are checked before they
// are kept, or summarizer.NewExtractive, which needs no model.
//
// extract finds durable facts in messages for memories.Facts:
// extract.NewPatterns (built-in rules for the common user facts and the
// decisions of a conversation, plus your own; no model) or extract.NewLLM
// over any llms.Model.
//
// retrieval ranks past turns for a query, the indexes behind
// memories.Recall: BM25 with Snowball stemming (no model), a vector index
// over any langchaingo embeddings.Embedder and vectorstores.VectorStore
// (retrieval.NewChromem is an embedded one), and a hybrid of two by
// reciprocal-rank fusion.
//
// store is the storage port every memory keeps its messages and state
// through: the store.Store interface and its contract, the in-memory
// backend memories use by default, store.FromHistory and store.AsHistory
// (to and from a langchaingo schema.ChatMessageHistory), and store.Users
// (list, export and forget every conversation of a user or a tenant). The
// persistent backends are modules of their own, so a program pays only for
// the driver it uses: store/sqlitestore (one SQLite file; pure Go, no cgo),
// store/redisstore (Redis, standalone or Cluster, through go-redis) and
// store/pgstore (PostgreSQL, through pgx). store/storetest is the
// conformance kit every backend passes: storetest.Run runs it against your
// own store with one call, and storetest.RunFaults loses replies on the
// wire.
//
// replay imports histories a team already has — JSON Lines of
// {conversation, role, content, time}, or memstack's own export — through
// a stack's layers at their original times, so every layer derives its
// state; importing the same history twice stores each message once.
//
// tokens counts tokens for the memories and the budget: tokens.CL100K
// (OpenAI's cl100k_base, computed offline from a table embedded in the
// package) by default, or any tokens.Counter.
//
// observe reports what every layer did on each call — the items it
// injected and dropped with the reason and score, tokens, duration, model
// and embedding calls — to a Go func (observe.SinkFunc) or log/slog
// (observe.Slog); it costs nothing when off. observe/otelobserve, a module
// of its own, turns the reports into OpenTelemetry spans and metrics.
//
// # Commands
//
// cmd/memstack answers a user's data requests against a store named by a
// DSN: it lists a user's or a tenant's conversations, exports everything
// held for them as JSON, forgets them, and imports a user's past
// conversations (package replay) through the recommended stack. cmd/memstack-bench measures the
// memories and stores next to langchaingo's own memories, and
// cmd/memstack-recall measures recall on LoCoMo's long conversations. Each
// is a module of its own.
//
// # Identity
//
// Every memory keys its state by the Identity in the call's context, so one
// memory value serves many tenants, users and conversations:
//
//	ctx = memstack.WithIdentity(ctx, memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c7"})
//	out, err := chains.Run(ctx, chain, "What did we settle on?")
//
// A call with no identity uses the memory's default identity (the zero
// Identity unless memories.WithDefaultIdentity sets another): one shared
// conversation, which is what plain langchaingo use expects. With
// memories.WithRequireIdentity a call without one fails with ErrNoIdentity.
// Identity.Key documents the injective mapping from identity to storage key.
//
// # Example
//
//	full, _ := memories.NewBuffer(memories.WithMemoryKey("chat_history"))
//	recent, _ := memories.NewRecentN(3, memories.WithMemoryKey("recent"))
//	mem, _ := combined.New([]schema.Memory{full, recent})
//
//	_ = mem.AddMessage(ctx, llms.SystemChatMessage{Content: "You are terse."})
//	_ = mem.SaveContext(ctx, map[string]any{"input": "Hello"}, map[string]any{"text": "Hi!"})
//	vars, _ := mem.LoadMemoryVariables(ctx, nil) // vars["chat_history"], vars["recent"]
//
//	chain := chains.NewConversation(llm, recent) // any memstack memory is a schema.Memory
//
// See the runnable examples in this package's documentation, the
// repository's examples directory (examples/quickstart first) and the
// repository's README, which links to the guides under docs/.
package memstack
