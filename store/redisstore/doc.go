// Package redisstore is the Redis backend of memstack's storage port: a
// store.Store that keeps messages and state in Redis through
// github.com/redis/go-redis/v9, so several agent replicas can share the
// memory of the same users.
//
// # Starting a server
//
// Any Redis 5 or newer (standalone, Sentinel or Cluster) works. For a
// local one:
//
//	apt-get install redis-server                      # Debian, Ubuntu
//	redis-server --port 6379 --bind 127.0.0.1 --save "" --appendonly no
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
//	<prefix>:{<identity key>}:<namespace>:msgs   list, one element per message
//	<prefix>:{<identity key>}:<namespace>:state  hash, state name → "<version>|<value>"
//	<prefix>:{<identity key>}:seq                string, the last Seq handed out
//	<prefix>:{<identity key>}:nss                set, the namespaces holding data
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
// store.EncodeMessageAt writes it — with its time, store.AppendTime of the
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
// messages; RemovePrefix drops the non-system messages with Seq <= through
// and puts the system ones back in order; PutState compares and sets a
// version; Clear and Forget delete keys. Last(n) is one LRANGE of the list's
// tail (O(n)), All one LRANGE, Stat a script reading the list's length and
// the Seqs of its ends (O(1), without sending message bodies back). Every
// call is one round trip (Forget two).
//
// A window memory reads the same newest messages on every turn, so a Store
// keeps the messages it decoded in a small LRU cache keyed by the exact
// stored value (WithDecodeCache): a hit is always what decoding would give,
// and nothing needs invalidating when Redis changes.
//
// # Sequence numbers
//
// Seqs and state versions come from one counter per identity (the seq key),
// shared by all namespaces of the prefix. Each new number is
//
//	max(counter + 1, the Redis server's clock in microseconds)
//
// (the clock from the TIME command, inside the script), so Seqs increase
// strictly within an identity and are never handed out twice even after
// Forget deletes the counter or it expires with a TTL: the next number is
// again at least the clock, which has moved past every number handed out
// before. The counter only runs ahead of the clock during bursts of more
// than one number per microsecond; Forget waits (up to 2 s) until the clock
// has passed the counter before it deletes it. This holds as long as the
// server's clock does not step back by more than that across a Forget or a
// TTL expiry. Numbers are about 1.8e15 today, exact in the float64 that Lua
// computes with until the year 2255.
//
// # TTL
//
// WithTTL(d) makes a conversation expire d after its last write: every
// Append and PutState sets the expiry of the namespace's keys to d and
// extends that of the shared seq and nss keys to at least d, so those never
// expire before the data they describe. A namespace without a TTL keeps its
// keys and the shared keys forever (it removes their expiry when it writes).
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
// connection broke (MaxRetries); if the connection broke after Redis ran an
// Append but before the reply arrived, such a retry stores the turn twice.
// A stored value that is not what this package writes is an error wrapping
// store.ErrCorrupt that names the identity and the Seq (or the list
// position, when the Seq itself is unreadable); it never panics, and the
// other data stays readable.
package redisstore
