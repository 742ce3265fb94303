// Package memstack is a library of conversation-memory types for
// langchaingo (github.com/tmc/langchaingo) agents and chains.
//
// An LLM agent needs several views of a conversation at once: the last few
// turns, the whole transcript, and (in later layers) a running summary, the
// durable facts about the user and the past exchanges that matter for this
// question. memstack gives each view as a type that implements langchaingo's
// schema.Memory, and combined.Memory stacks any of them — memstack's,
// langchaingo's or your own — behind one schema.Memory, so the stack drops
// into chains.NewConversation, chains.NewLLMChain and agents.NewExecutor with
// no other change.
//
// # Packages
//
//   - memstack (this package): Identity, and how it travels in a context.
//   - memories: the memory types — Buffer (the full transcript), RecentN
//     (the last n messages) and TokenWindow (the newest messages within a
//     token budget).
//   - combined: Memory, which stacks memories.
//   - store: the storage port every memory keeps its messages through, its
//     in-memory backend, and an adapter over a langchaingo
//     schema.ChatMessageHistory.
//   - adapter: langchaingo's conventions (key selection, rendering, chat
//     message contents) in one place.
//   - tokens: token counting (offline cl100k_base by default).
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
//	full := memories.NewBuffer(memories.WithMemoryKey("chat_history"))
//	recent, _ := memories.NewRecentN(3, memories.WithMemoryKey("recent"))
//	mem, _ := combined.New([]schema.Memory{full, recent})
//
//	_ = mem.AddMessage(ctx, llms.SystemChatMessage{Content: "You are terse."})
//	_ = mem.SaveContext(ctx, map[string]any{"input": "Hello"}, map[string]any{"text": "Hi!"})
//	vars, _ := mem.LoadMemoryVariables(ctx, nil) // vars["chat_history"], vars["recent"]
//
//	chain := chains.NewConversation(llm, recent) // any memstack memory is a schema.Memory
//
// See the runnable examples in this package's documentation and
// examples/quickstart.
package memstack
