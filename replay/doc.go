// Package replay imports existing conversation histories into a memstack
// stack: it replays each past conversation of a user through the stack's
// layers at the times its messages were said, so every layer derives its
// state — the transcript, a summary, facts, the recall index — as if the
// conversations had happened with memstack in place. Importing the same
// input again stores nothing new.
//
// # The steps
//
// Read the histories, build the stack the application uses (on the
// store it uses, in the namespace it uses), and import them as one user:
//
//	f, err := os.Open("ana.jsonl")
//	...
//	convs, err := replay.Read(f) // JSON Lines, or memstack's own export
//	...
//	user := memstack.Identity{Tenant: "acme", User: "ana"}
//	stats, err := replay.Import(ctx, mem, user, convs, replay.SkipStored(st)) // st: the stack's store
//
// The command `memstack import` does the same with the stack memstack's
// README recommends (RecentN, Summary, Facts per user and Recall on one
// store); an application with another layout calls Import with its own
// stack.
//
// # Input: JSON Lines
//
// ReadJSONL reads one JSON object per line:
//
//	{"conversation": "c-17", "role": "user", "content": "I moved to Oslo", "time": "2025-03-02T10:15:00Z"}
//	{"conversation": "c-17", "role": "assistant", "content": "Noted!", "time": "2025-03-02T10:15:04Z"}
//
// Every field is required ("content" may be empty). "conversation" names
// the conversation (it becomes Identity.Conversation; it may not start
// with "\x00", which memstack keeps for derived data). "role" is "human"
// or "user" (a human message), "ai" or "assistant" (an AI message), or
// "system", in any letter case. "time" is an RFC 3339 time. Other fields
// are ignored; blank lines are skipped; a line may be up to 1 MiB long.
//
// Conversations come out in the order of their first line, and a
// conversation's messages in file order, which must also be time order:
// a message dated before the previous message of its conversation is an
// error (sort the file first — replay does not reorder what it is given,
// since two messages at one time have only their file order). Every error
// names the line and the field at fault, never a message's content; a
// file with an error yields no conversations.
//
// # Input: memstack's export
//
// FromExport takes what store.Users.Export returns (ReadExport reads
// what `memstack export` writes): one Conversation per conversation of the
// export, with the messages of one namespace — the one named, or, with
// "", for each conversation the namespace holding the most of its
// messages (the first by name on a tie): the namespaces of one store are
// memory layers that, on a stack sharing one store, hold the same
// transcript. Derived identities (Conversation starting with "\x00":
// per-user facts, summaries, the recall journal) are skipped: the stack
// derives them again. State values are not imported either, for the same
// reason. ExportOwner tells whose conversations an export holds, to
// import them as that user; an export of several users (a tenant's) is
// refused by FromExport.
//
// Read detects the format: a JSON document with an "identities" key is an
// export (read with namespace ""), anything else is JSON Lines.
//
// # How Import saves
//
// For each conversation, in order, Import walks its messages. A human
// message followed by a plain AI message (one with no tool or function
// calls) is one exchange, saved with mem.SaveContext(ctx,
// {"input": human}, {"output": answer}) — a memory that takes the only
// entry, or the entries named "input" and "output", as memstack's and
// langchaingo's memories do by default, reads them. The exchange is dated with the human
// message's time (memstack.WithTime): a store dates a saved turn with one
// time, so the answer is stored at its question's time. Every other
// message — a human message without a plain answer, an AI message
// without a question, a system message, a tool call, a tool result —
// goes through the memory's AddMessage(ctx, llms.ChatMessage) method with
// its own time, if the memory has one (every memstack memory and
// combined.Memory have it); otherwise it is counted in Stats.Skipped. A
// message without a time (an export of messages saved before memstack
// recorded times) is dated when it is imported.
//
// Every save runs under the identity {user.Tenant, user.User,
// conversation} (memstack.WithIdentity) and with a save key
// (memstack.WithSaveKey) that Import derives from the tenant, the user,
// the conversation, the message's position in it, its type, its fields
// and its time. The keys are the same on every import of the same input,
// and a memstack memory stores a unit at most once per key, so a second
// import of the same input stores no message twice, and the layers derive
// nothing new from it. Three limits:
//
//   - A memory that is not memstack's (langchaingo's own) ignores save
//     keys: it stores every message again on every import.
//   - A store remembers a key only as long as it says (package store, "One
//     transcript"): SQLite, PostgreSQL and the in-memory store as long as
//     the unit's first message is stored, Redis for two minutes. Give
//     Import SkipStored(the store) — the memstack import command does —
//     and it also leaves out every message the conversation already holds
//     (same type, text and time), on every backend and at any time; a
//     re-import after a retention removed some of the messages still
//     stores those again.
//   - A change to a message (its text, its time, its position) makes a new
//     key: the changed message is stored next to the old one.
//
// Import honours ctx between saves. The first failure stops it, with an
// error naming the conversation and the message's index (from 0) that
// wraps the memory's error: the conversations before it, and the
// messages of its conversation before the failing one, stay stored; a
// second import with the same input after fixing the cause resumes
// without storing them twice.
package replay
