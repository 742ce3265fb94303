// Package redisstore is the Redis backend of memstack's storage port: a
// store.Store that keeps messages and state in Redis through
// github.com/redis/go-redis/v9, so several agent replicas can share the
// memory of the same users.
//
// # Starting a server
//
// Any Redis 5 or newer (standalone, Sentinel or Cluster) works, with
// maxmemory-policy noeviction (Redis's default; see "Production
// settings"). For a local one:
//
//	apt-get install redis-server                      # Debian, Ubuntu
//	redis-server --port 6379 --bind 127.0.0.1 --save "" --appendonly no  # keeps nothing on disk
//
// then
//
//	s, err := redisstore.Open(ctx, "127.0.0.1:6379")          // or "redis://…"
//	mem, _ := memories.NewRecentN(10, memories.WithStore(s))
//
// or pass a client you configured yourself (TLS, Cluster, Sentinel) to New.
//
// # Key layout
//
// Every key of one identity carries the identity's key (memstack.Identity.Key)
// in one hash tag, so all of them live in one Redis Cluster slot and every
// multi-key script runs on one node:
//
//	<prefix>:{<identity key>}:<namespace>:msgs     list, one element per message
//	<prefix>:{<identity key>}:<namespace>:sys      list, a marker, then a copy of each system element of msgs
//	<prefix>:{<identity key>}:<namespace>:state    hash, state name → "<version>|<value>"
//	<prefix>:{<identity key>}:<namespace>:cleared  string, the Clear mark (a version)
//	<prefix>:{<identity key>}:seq                  string, the last Seq handed out
//	<prefix>:{<identity key>}:nss                  set, the namespaces holding data or a mark
//	<prefix>:{<identity key>}:ops                  hash, recent write tokens → their replies
//	<prefix>:{<identity key>}:opq                  list, "<ms> <token>", oldest first
//	<prefix>:{<slot tag>}:forgotten                string, the forgotten version of one slot
//	<prefix>:feed{<tenant>:<user>:}               sorted set, a user's conversations by their last append's mark
//	<prefix>:feedn{<tenant>:}                      string, the last mark handed out in the tenant
//
// The last two are a user's change feed (store.ChangeFeed, see Changed):
// each append of a Store that keeps feeds scores its identity key in the
// user's set, in the same script, with a mark that only grows
// (max(last mark+1, the server's clock in microseconds), from the
// tenant's counter), so a Recall that searches the user's conversations
// learns on a load which of them other replicas appended to without each
// save writing a journal entry. One set serves every namespace of the
// prefix. Forget takes the identity out of it in the same script as it
// deletes the identity's keys, and ForgetScope deletes the sets of the
// scope's users (and, for a tenant, the counter), whatever the options of
// the Store they are called on. A Store keeps feeds on one server that
// keeps no Cluster slots (not under a Cluster or Ring client, nor a server
// in cluster mode: the set lives in another slot than the conversations),
// evicts no keys (without WithEvictionAllowed: an evicted set would lose
// changes), and without a TTL (a set would name conversations that
// expired); elsewhere a Recall falls back to its journal.
//
// Rolling out, and mixing options. A Store that keeps feeds writes no
// journal entry for a user-scoped Recall, and one that keeps none (an
// earlier version of this package, or other options) writes no feed: so
// while replicas of both kinds serve one user, each may miss the other's
// saves until the conversation's next save. Give every replica of a
// deployment the same options, and restart them together when upgrading
// across the version that added feeds.
//
// The forgotten key is not any identity's: there is one per Redis Cluster hash
// slot that a Forget, or a Clear under a TTL, has touched (at most 16,384
// per prefix), shared by every identity whose key hashes to that slot. Its slot tag is the first of f0, f1, f2, … that hashes to
// the slot (CRC-16/XMODEM mod 16384, as Redis Cluster hashes tags), so the
// scripts of an identity read it on the identity's own node; a tag has no
// ':' and names no identity. See "Absent versions" for what the cleared and
// forgotten keys hold.
//
// The ops and opq keys make writes exactly once under client retries (see
// "Exactly once"); they expire two minutes after the identity's last
// write, whatever its TTL.
//
// The prefix (WithKeyPrefix, default "memstack") names the store; the
// namespace (WithNamespace, default "default") names one layer within it,
// such as "recent" or "facts", so memories on different layers share one
// Redis without sharing messages. Identity.Key percent-encodes every byte
// outside [A-Za-z0-9._-], so it never contains '{' or '}' and the hash tag
// is always exactly the identity key; the prefix may not contain braces
// either, so the first '{' of every key opens that tag.
//
// A list element is "<seq>|<flag>|<message>": the Seq in decimal, 's' for a
// system message or 'm' for any other, and the message as
// storekit.EncodeMessageAt writes it — with its time, storekit.AppendTime of the
// Append (memstack.WithTime, else this process's clock), as the JSON's last
// field, "at". The flag lets the trimming script keep system messages
// without decoding JSON; the scripts read only the "<seq>|<flag>|" head of
// an element, never the JSON, so the time changed none of them. Elements
// written before memstack recorded times have no "at" and read back with a
// zero store.Record.Time.
//
// # Atomicity and cost
//
// Every write is one Lua script, so it is atomic and other clients see all of
// it or none of it: Append assigns the Seqs of a whole turn and pushes its
// messages; PutState compares and sets a version; Clear deletes the
// namespace's keys and sets its mark; Rewrite (store.Rewriter, what
// AsHistory's SetMessages uses) removes a prefix of the list, system
// messages included, optionally resets the state as Clear does, and
// appends a turn; Forget deletes every key of the identity and sets the
// slot's forgotten version. RemovePrefix is the exception: it drops the
// non-system messages with Seq <= through and puts the system ones back in
// order in chunks of at most 1,000 messages, one script each, so removing
// 100,000 messages holds the server for about a millisecond at a time
// rather than for the whole removal (hundreds of milliseconds, during which
// every other client waits); a reader may see the oldest messages gone
// before the rest, and an error part-way leaves the rest for the next call.
// Last(n) is one LRANGE of the list's tail (O(n)), Tail(n) one script
// (see "System messages and Tail"), All one LRANGE, Stat a script reading
// the list's length and the Seqs of its ends (O(1), without sending
// message bodies back), GetState a script reading the value or, for an
// absent one, the absent version. Every call is one round trip
// (Forget two, RemovePrefix one per chunk).
//
// # System messages and Tail
//
// Tail returns every system message and the newest n others, and must
// cost what it returns: system messages may sit anywhere in the list (a
// prompt from the first turn, long since followed by 100,000 others), so
// finding them must not scan it. Each namespace therefore keeps an index,
// the sys key: a list holding a marker, "0|i|<head Seq>|<tail Seq>" (Seq
// 0, which no message has), then a copy of every system element of the
// msgs list, in the list's order. Every script that changes the list
// changes the index in the same step and sets the marker to the Seqs at
// the list's two ends: Append and Rewrite copy the system messages they
// push, Rewrite drops those it removes, RemovePrefix keeps every system
// message (so the index keeps its elements) and deletes the index when it
// empties the list, Clear and Forget delete it, and a write that sets a
// TTL sets the index's too, so it expires with the list. Tail is one
// script: it checks the marker against the list's ends (O(1)), reads the
// index whole and the list backwards from its tail, in pages no larger
// than the messages still missing, stopping at the first Seq <= after, so
// it reads the system messages, the n messages it returns and the system
// ones among them, and never half of an Append. The copies cost the
// memory of the system messages once more.
//
// Migration: a list written before the index existed has no sys key.
// Writes leave it so (their cost is what it was; one that removes the
// whole list starts a new index), and the first Tail reads the list once,
// O(its length), and builds the index in the same script; every later
// Tail costs what it returns. Lists that windows already trimmed read the
// same way. If that write fails (a full server under noeviction refuses
// it), Tail still answers, and the next one tries again. During a rolling
// upgrade, replicas still on the build before the index change the list
// without it; each such change of the system messages moves an end of the
// list (an append, a prefix removed, the list deleted), so the marker no
// longer matches: Tail then rebuilds the index (O(the list's length) once
// more) and a write of this build deletes it, so Tail is right throughout.
// Those replicas' Forget does not know the sys key and leaves it behind:
// run ForgetScope for such users again once every replica is upgraded. An
// index whose list is gone (an eviction, a TTL expiring a millisecond
// apart) is ignored by Tail and replaced by the next write; a list whose
// index was evicted is indexed again by the next Tail.
//
// A window memory reads the same newest messages on every turn, so a Store
// keeps the messages it decoded in a small LRU cache keyed by the exact
// stored value (WithDecodeCache): a hit is always what decoding would give,
// and nothing needs invalidating when Redis changes.
//
// # Exactly once
//
// go-redis sends a command again when its connection breaks before the
// reply arrives (MaxRetries, 3 by default), but the server may have run
// the command already: a reply lost to a network fault or a proxy
// restart would make a plain script run twice. Every write call therefore draws a random token (96 bits) and
// sends it with each attempt of its script; the script's first run records
// the token and its reply in the identity's ops hash, in the same atomic
// step as the write, and a later run with the same token changes nothing
// and returns that reply. So a turn is never stored twice, a PutState
// whose reply was lost returns the version it wrote (not ErrConflict
// against itself, which would make its caller apply the update twice), and
// a retried RemovePrefix chunk or Rewrite reports the count it removed.
// Clear is guarded the same way (a second run would delete what was written
// in between). Forget takes no token: a second run is one more Forget,
// which leaves what one leaves. That covers go-redis's own retries, which
// send the call's token again; a caller that retries a call after an
// error sends a new one, unless it appends under an append key (below):
// see "Failures" for the errors after which a write may have been applied
// (store.ErrOutcomeUnknown).
//
// Append keys (store.WithAppendKey) use the same machinery. An Append under
// key k sends the token "k:<namespace>:<k>" instead of a random one: the
// first Append of the identity under k in the namespace records it with
// its turn, in one script, and every later one — another layer's, another
// replica's, a retry after an error, or one racing with it (scripts run one
// at a time) — finds it and stores nothing, returning nil; a retry after a
// lost reply works as for any write. The ops hash is the identity's, shared
// by its namespaces, hence the namespace in the token: a key used in one
// namespace stores its turn in another too. A random token has no ':', so
// none is ever mistaken for a key's. A key is remembered for two minutes
// after its Append, as tokens are (what store's "One transcript" allows),
// through Clear, not through Forget. An invalid key (storekit.CheckAppendKey)
// is an error wrapping store.ErrInvalidArgument, and nothing is stored.
//
// Tokens are kept for two minutes (the opq list drops the oldest as new
// ones come, and both keys expire two minutes after the last write), about
// 100 bytes per write; every write call is bounded to one minute (a
// shorter ctx deadline wins), so no retry can reach the server after its
// token is gone. Reads are retried freely. The token and the write are one
// script, so they are replicated, persisted and lost together: after a
// failover a retry either finds the token or finds the write not done.
//
// # Forgetting a user
//
// Store implements store.Users: Identities lists every conversation of a
// user or a tenant that holds messages, state or a Clear mark in any
// namespace of the key prefix (an index of system messages is a copy, not
// data: an identity with only that left is not listed); Export returns all
// of it (one script per namespace, so each is read in one step);
// ForgetScope runs Forget on each of them. They find the identities with SCAN, MATCH on the key layout
// (<prefix>:{<tenant>:<user>:*, the prefix escaped for the glob; identity
// keys never contain glob characters), in batches of 1,000 keys per call,
// on every master of a cluster: not through an index, which eviction could
// remove. Their cost is O(keys in the database). ForgetScope deletes every
// key SCAN found of each identity, bookkeeping keys (tokens, the index of
// system messages) included, so afterwards no key under the prefix names
// the user, and it moves the forgotten
// version of each identity's slot in the same step, so a commit that read
// before it conflicts. Last it forgets the user's derived identities
// (storekit.DerivedOf), also when SCAN did not find them, which moves their
// slots' forgotten versions: a per-user Facts extraction in flight cannot
// land its facts after the forget; then it deletes the change feeds of the
// scope's users (a feed names conversations). Writes racing with it may create
// conversations it does not find: call it when the user's traffic has
// stopped, or again.
//
// # Absent versions
//
// A state name with no value has a version too (see package store,
// "Cleared means gone, across replicas"): in a namespace with a Clear mark
// it is the mark; else it is the forgotten version of the identity's slot;
// else (no Forget ever touched the slot) 0. Clear sets the mark to a fresh
// number, in the script that deletes the messages and state; Forget sets
// the slot's forgotten version to a fresh number and deletes every key of
// the identity, marks included, in one script too; GetState and PutState
// read the value, the mark and the forgotten version in one script. All of
// these keys are in the identity's slot, so each of those steps is atomic
// on a Redis Cluster as well as on one server: a PutState whose expect was
// read before a Clear or Forget runs wholly before it (and what it stored
// is removed) or wholly after it, and then conflicts, since the new mark or
// forgotten version is greater than every version, mark and forgotten
// version any earlier read returned.
//
// An absent version never goes back, also when a mark expires (WithTTL).
// A mark that expires leaves the forgotten version as the absent version,
// and that could be what a commit from before the Clear expects — 0, or
// the forgotten version it read — so that commit, however late it comes,
// would store what the Clear removed. So every write that gives a mark an
// expiry (a write under WithTTL: Clear, Rewrite with reset, Append and
// PutState, which refresh the expiry) first raises the slot's forgotten
// version to at least the mark, in the same script: when the mark is gone,
// the absent version is at least the mark, above every version a reader
// from before the Clear holds, and its commit conflicts however long it
// took. A mark without a TTL never expires and needs no such step. The
// forgotten version is thus the floor of the slot's absent versions: at
// least every mark that may expire and every forgotten version drawn in
// the slot. Marks written by the build before this rule (which did not
// raise it) are raised by the first write of their namespace under a TTL;
// a commit racing with such an older Clear can still land if no write of
// the namespace comes before the mark expires (once, during an upgrade).
//
// The forgotten version is per slot rather than one key for the whole
// prefix: that is what keeps it in the identity's slot on a Cluster. One
// store-wide key would sit in another slot, so PutState could only read it
// in a command of its own, and a Forget falling between that read and the
// compare-and-set would let a commit that read before Forget store its
// value after it. The trade-off: a Forget, or a Clear under a TTL, changes
// the absent version of the identities sharing its slot (about one in
// 16384) that have no mark of their own, rather than of every identity —
// which the contract needs only of the cleared or forgotten one, and which
// refuses fewer unrelated first commits (a refused first commit is read
// again and retried) — and a forgotten key tells whoever can read the keys
// that some identity of that slot was forgotten or cleared, and when. A
// mark expires with the namespace's other keys (WithTTL); the forgotten
// keys never expire, so their memory is bounded by the number of slots,
// whatever the number of identities. If one is lost (evicted, FLUSHDB)
// the next Forget draws a number at least the clock, so it is still new,
// but an absent version may go back until then (see "Production
// settings").
//
// # Sequence numbers
//
// Seqs, state versions and Clear marks come from one counter per identity
// (the seq key), shared by all namespaces of the prefix. Each new number is
//
//	max(counter + 1, the Redis server's clock in microseconds,
//	    the namespace's Clear mark + 1, the slot's forgotten version + 1)
//
// (the clock from the TIME command, inside the script), so Seqs increase
// strictly within an identity and are never handed out twice even after
// Forget deletes the counter or it expires with a TTL: the next number is
// again at least the clock, which has moved past every number handed out
// before. The counter only runs ahead of the clock during bursts of more
// than one number per microsecond; Forget waits (up to 2 s) until the clock
// has passed the counter before it deletes it. This holds as long as the
// server's clock does not step back by more than that across a Forget or a
// TTL expiry. A forgotten version is max(its previous value + 1, the clock,
// the forgotten identity's counter + 1, its marks + 1); a write under a TTL
// raises it to the namespace's mark when it is below (see "Absent
// versions"). Counters of
// different identities are apart, so a forgotten version can equal a
// version another identity of the slot drew only if that identity's
// counter was running ahead of the clock (a burst of appends) at that very
// moment, and it could then pass for that name's absent version only once
// its value is deleted or expires where there is no mark. Numbers are
// about 1.8e15 today, exact in the float64 that Lua computes with until
// the year 2255.
//
// # TTL
//
// WithTTL(d) makes a conversation expire d after its last write: every
// Append, PutState and Clear sets the expiry of the namespace's keys
// (messages and their index, state, Clear mark) to d and extends that of
// the shared seq and nss keys to at least d, so those never expire before the data they
// describe. A namespace without a TTL keeps its keys and the shared keys
// forever (it removes their expiry when it writes). An expired mark does
// not undo its Clear: the absent version moves to the slot's forgotten
// version, which the write that gave the mark its expiry raised to at
// least the mark, so a commit that read before the Clear conflicts
// however late it comes (see "Absent versions"). The token keys (ops,
// opq) keep their own two-minute expiry.
//
// # Failures
//
// New pings the server, bounded by its ctx, and fails with an error naming
// the address (with go-redis's default retries an address where nothing
// listens fails after about 2 s, or at ctx's deadline if that is sooner). Every method returns an error naming the operation and the
// identity's key when Redis fails; when the server comes back the same Store
// works again (go-redis reconnects by itself). go-redis bounds network I/O by
// the ctx deadline only when the client has ContextTimeoutEnabled set, which
// Open does; for a client of your own, set it too, or its ReadTimeout and
// WriteTimeout bound each call instead. go-redis retries a command whose
// connection broke (MaxRetries); the write tokens make such retries
// harmless (see "Exactly once").
//
// A write whose reply never came may have been applied: its error wraps
// store.ErrOutcomeUnknown, together with the cause (errors.Is(err,
// context.DeadlineExceeded) still holds). That is the error of every
// write — Append, PutState, Clear, Rewrite, a chunk of RemovePrefix,
// Forget — whose script was sent, or may have been, without a reply that
// tells: a deadline or a cancellation while the script waited behind
// other commands or ran (the server runs a script it has received even
// when the client has given up on it), a connection that broke, and any
// error of go-redis's last attempt after an earlier one may have run (a
// failure to connect, a timeout, a reply such as BUSY or READONLY that is
// not the script's). Retry such an Append under the same append key
// (store.WithAppendKey; memories under the same memstack.WithSaveKey):
// its token is the key's, so the turn is stored once whichever tries
// landed, and in whatever order they reach the server, within the two
// minutes the key is kept. An Append without a key has a random token,
// and a retry of it may store the turn twice. Read the state again before
// retrying a PutState. An error that does not wrap it changed nothing:
// the checks before anything is sent (a context already done, a closed
// store, an invalid argument), an error reply from within the script
// (Redis names the script in it; a script that ran found no token of an
// earlier run, so no earlier try ran), or a reply that reports corrupt
// data. A stored value that is not what this package writes is an error wrapping
// store.ErrCorrupt that names the identity and the Seq (or the list
// position, when the Seq itself is unreadable); it never panics, and the
// other data stays readable.
//
// # Production settings
//
// Persistence decides what a crash loses, and what it brings back:
//
//   - AOF with appendfsync everysec (appendonly yes): a crash of the
//     redis-server process normally loses nothing acknowledged; a crash of
//     the machine (power, kernel) loses the last second or two of writes.
//     This is the setting to use. appendfsync always loses nothing acknowledged
//     even then, at the cost of an fsync per write; appendfsync no leaves
//     the flush to the kernel (about 30 s on Linux).
//   - RDB snapshots only (save points, no AOF): a crash loses every write
//     since the last snapshot — minutes of turns and state — and, worse for
//     a "forget me" request, undoes every Forget and ForgetScope since then:
//     the forgotten user's data is back after the restart. Use RDB for
//     backups, beside AOF.
//   - No persistence (save "", appendonly no): a restart empties the store.
//     Seqs stay unique (they follow the server's clock), but every
//     conversation is gone: only for a store used as a cache.
//
// Restoring a backup, or failing over to a replica that had not received
// the last writes (replication is asynchronous), brings back what was
// forgotten after that point too: keep a log of forget requests and run
// them again after a restore or a failover (ForgetScope is idempotent).
// min-replicas-to-write with min-replicas-max-lag bounds that window (the
// master refuses writes while too few replicas are within the lag). Seqs
// and versions need the servers' clocks not to step back by more than a
// few seconds across a failover or a Forget (see "Sequence numbers").
//
// Eviction: set maxmemory-policy noeviction, Redis's default, and size
// maxmemory with room to spare. New reads the policy (CONFIG GET, on every
// master of a cluster) and refuses a server that may evict keys — any
// allkeys-* or volatile-* policy — or whose policy it cannot read (CONFIG
// refused, as on some managed services), with an error wrapping
// ErrEvictionPolicy, unless WithEvictionAllowed is given. Eviction removes
// whole keys without telling anyone: a conversation vanishes, an evicted
// nss set would make Forget miss namespaces, an evicted Clear mark or
// forgotten version would let a commit that read before a Clear or Forget
// land after it, an evicted token would let a retry write twice. With
// WithEvictionAllowed the store accepts that, and Forget also finds the
// identity's keys with SCAN on its node (O(keys on that node) per Forget,
// in bounded batches) instead of trusting the nss set; ForgetScope and
// Identities always scan. At maxmemory under noeviction, writes that add
// data fail with Redis's OOM error (wrapped, naming the call); Clear and
// Forget still run, since they delete before they write, so memory can be
// freed and users forgotten on a full server.
//
// Cluster: every key of one identity carries the identity's hash tag, and
// the forgotten key of its slot a tag chosen to hash to the same slot, so
// every script touches one slot and runs on one node (no CROSSSLOT);
// identities spread over the cluster by their keys. SCAN for the store.Users
// calls runs on every master (for Forget with WithEvictionAllowed, on the
// master of the identity's slot). Resharding is transparent: go-redis
// follows MOVED and ASK, and a script re-sent after a redirection runs once
// (the redirected attempt did not run). Give a cluster client
// ContextTimeoutEnabled, as Open does for its own client.
//
// Access: an ACL user needs the prefix's keys and these commands (the
// scripts' own commands are checked too, TIME among them; CONFIG GET only
// without WithEvictionAllowed):
//
//	ACL SETUSER memstack on >… ~<prefix>:* resetchannels -@all +@read +@write +@scripting +@connection +time +config|get
//
// Scripts read the server's clock with TIME, so Redis must replicate
// scripts by their effects, the default since Redis 5.
package redisstore
