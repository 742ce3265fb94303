// Package adk makes memstack the memory of Google's Agent Development Kit
// for Go (google.golang.org/adk/v2): a memory.Service (MemoryService) that
// keeps what a user's sessions said and recalls the relevant past in any
// later session, and a session.Service (SessionService) that keeps ADK's
// sessions, events and state — both over memstack's stores: in process,
// SQLite, Redis or PostgreSQL. It is a module of its own, so only programs
// that use ADK get ADK's dependencies.
//
// # Wiring
//
// Open one store and give it to both services and to the runner:
//
//	st, err := sqlitestore.Open(ctx, "agent.db")
//	if err != nil { … }
//	sessions, err := adk.NewSessionService(st)
//	if err != nil { … }
//	mem, err := adk.NewMemoryService(st)
//	if err != nil { … }
//	r, err := runner.New(runner.Config{
//		AppName:           "travel",
//		Agent:             agent, // an llmagent with preloadmemorytool.New() or loadmemorytool.New()
//		SessionService:    sessions,
//		MemoryService:     mem,
//		AutoCreateSession: true, // or sessions.Create the session first
//	})
//	for _, err := range r.Run(ctx, "ana", id, msg, agent.RunConfig{}) { … }
//
// After a session (or after each turn), add it to memory:
//
//	got, err := sessions.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: id})
//	if err != nil { … }
//	err = mem.AddSessionToMemory(ctx, got.Session)
//
// and the next session of the same user, whatever its ID, finds what was
// settled: preloadmemorytool searches with the user's message and puts the
// entries in the model's instructions; loadmemorytool lets the model
// search. One store for both services is the normal configuration; each
// may also have its own (another SQLite file, Redis for sessions and
// PostgreSQL for memory).
//
// # Identity
//
// ADK's AppName is memstack's tenant, UserID the user, and the session ID
// the conversation: the memory of session s of user u in app a is the
// conversation memstack.Identity{Tenant: a, User: u, Conversation: s},
// the one memstack's langchaingo memories would use for it: on the same
// store a memories.Recall and the windows (RecentN, TokenWindow, Buffer)
// read it as it is, and a Summary or Facts takes its turns in at their
// next save (they derive only on their own saves). The MemoryService
// keeps its own Recall's bookkeeping under RecallStateName, so a chain's
// memories.Recall with a vector index of its own can share the store.
// Give no layer on that store a retention (memories.WithRetention): it
// would remove turns SearchMemory searches. A search covers every
// conversation of {a, u} and nothing of any other user or app. The
// session itself lives under derived identities (a
// leading NUL), which no memory layer indexes or shows: its record under
// SessionIdentity(a, u, s), its events under {a, u,
// EventsConversationPrefix + generation + ":" + s}, where the generation
// is a random name drawn when the session was created (so a session
// deleted and created again under its ID never shows the old one's
// events); the user's state under {a, u, "\x00adk-user-state"} and the
// app's under {a, "", "\x00adk-app-state"}.
//
// # What is stored
//
// SessionService: a session is a state value (its own state, its creation
// and update times, its generation) and its events, one message each (the
// event as JSON, llms.GenericChatMessage with Role "adk-event"), dated
// with the event's Timestamp; app and user state are one state value
// each, updated key by key with compare-and-set, so replicas never lose
// each other's updates. "temp:" keys are never stored (they stay on the
// session value for the invocation). Partial (streaming) events are not
// stored. What is accepted reads back as it was given, with JSON's types
// (numbers as float64, as with ADK's database service): an event over
// WithMaxEventBytes (default 8 MiB of JSON), or holding a string that is
// not UTF-8 or an integer beyond ±2^53 anywhere (also in a json.Number,
// a math/big value or raw JSON), is refused with an error wrapping
// ErrInvalidEvent, and nothing of it is stored.
//
// Replicas share sessions safely. AppendEvent moves the session's record
// by compare-and-set from the version the session value was read at, so
// of two replicas appending to one session value the second gets
// ErrStaleSession and stores nothing, as with ADK's database service.
// Create first reserves the ID (a record marked pending, which Get, List
// and AppendEvent do not see), then updates the app's and the user's
// state, then makes the record whole: of two Creates of one ID the second
// stops before it changes any state, and a Create that fails leaves no
// session (a reservation left by a process that died is taken over after
// a minute). Delete turns the record into a tombstone (by compare-and-set,
// so a session created again meanwhile is not the one removed), removes
// the events, then the tombstone; a Delete that fails part-way is
// finished by the next Delete or Create of the ID. An AppendEvent that
// stored its event while the session was deleted removes it again (also
// when its caller has gone) and returns ErrSessionNotFound. A store
// cannot write two state values at once: a failure between them
// (Create's app and user state, AppendEvent's event and deltas) returns
// an error that says what was applied, and calling again finishes.
//
// Costs, in store calls (round trips on a network store): AppendEvent
// four (read the record, claim it, store the event, check the session
// still exists), and two more for each of the app's and the user's state
// its delta changes (ADK's database service does it in one transaction);
// Get reads the record, the events it returns and the two scopes' state;
// List reads the user's (or app's) identities and a record per session.
//
// MemoryService: the text of each event, as memstack messages (see
// AddSessionToMemory): a user's text is an llms.HumanChatMessage, a model's
// an llms.AIChatMessage, a function call an AIChatMessage with ToolCalls and
// each function response an llms.ToolChatMessage — adjacent, so memstack's
// windows and Recall's turns keep a call with its results. Thoughts,
// images, audio, files and code are not text a user said or was told and
// are left out (an event with nothing else adds nothing). Each message is
// dated with its event's Timestamp.
//
// # Idempotent adds
//
// ADK may add a session many times during its life. AddSessionToMemory
// keeps, on the conversation, the keys of the events it added (an event's
// ID, time and content, as the event reads back from JSON, so the runner's
// session value and a Get of it give the same keys) and adds only the
// others; every message is also stored under a save key made of its
// event's key, so two adds at once, or an add retried after a lost reply,
// store it once (as long as the store remembers save keys: SQLite,
// PostgreSQL and in process while the message is stored, redisstore two
// minutes; an add that failed after storing some messages and is retried
// later than that on Redis may store those again). Adding the same
// session again, a longer version of it, or a window of it (Get with
// NumRecentEvents) stores each event once, in the order the adds first
// see them. A session deleted and created again
// under the same ID adds its new events; after a Clear of the
// conversation the session is added again whole (and an add that a Clear
// interrupts does not store twice what it stored after the Clear). An add
// reads and writes that record whole, about 27 bytes an event: it costs
// what the session it is given costs. It needs event IDs: an event with
// text and no ID is refused (ErrInvalidEvent), and every event is checked
// before anything is stored.
//
// # Search
//
// SearchMemory is memories.Recall's search (Recall.Search) across the
// user's conversations: BM25 with each turn scored with its neighbours'
// words by default, vector or hybrid retrieval with WithRecallOptions
// (memories.WithVector, memories.WithHybrid), dates in questions ("what
// did we settle on 14 May 2026?": a date with its year; a day and month
// alone are words like any other). Over sqlitestore or pgstore opened
// WithRecallIndex it searches the database's index, so a replica that
// starts cold reads only what it shows. It returns one entry per turn,
// best first, as many as WithTokenBudget (default DefaultTokenBudget
// tokens) holds: Author "user", the agent that said it (kept in a small
// state value per event time, so a search reads only the authors of what
// it shows), or "model" for a turn another writer stored, Timestamp the
// event's, ID "session/Seq", and CustomMetadata "session_id", "seq" and
// "score". A tool call's entry holds the call and its result as
// FunctionCall and FunctionResponse parts and, for readers of text
// (preloadmemorytool shows text parts only), as a text part too.
//
// # Forgetting and exporting a user
//
// ADK's memory.Service has no delete. MemoryService.ForgetUser removes
// everything the store holds for a user of an app — the memory of every
// session, the sessions, the user's state — and nothing of anyone else;
// ExportUser returns it all. The memstack command does the same for the
// store from a shell: "memstack forget -store DSN -tenant APP -user USER
// -yes" and "memstack export …"; it cannot reach a vector store given
// with WithRecallOptions (WithVector, WithHybrid), whose vectors of the
// user may stay (never shown: their turns are gone) until a Recall that
// indexed them notices or ForgetUser runs for the user: forget such users
// through ForgetUser.
//
// # Tools
//
// The calls and results of the tools in DefaultSkipTools (ADK's memory
// tools, the hand-over between agents) are not added: a load_memory
// result is memory already, and adding it would copy the memory into
// itself at every search. WithSkipTools changes the list.
package adk
