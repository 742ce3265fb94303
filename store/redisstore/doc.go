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
//	<prefix>:{<identity key>}:<namespace>:msgs     list, one element per message
//	<prefix>:{<identity key>}:<namespace>:state    hash, state name → "<version>|<value>"
//	<prefix>:{<identity key>}:<namespace>:cleared  string, the Clear mark (a version)
//	<prefix>:{<identity key>}:seq                  string, the last Seq handed out
//	<prefix>:{<identity key>}:nss                  set, the namespaces holding data or a mark
//	<prefix>:{<slot tag>}:forgotten                string, the forgotten version of one slot
//
// The last key is not any identity's: there is one per Redis Cluster hash
// slot that a Forget has touched, shared by every identity whose key hashes
// to that slot. Its slot tag is the first of f0, f1, f2, … that hashes to
// the slot (CRC-16/XMODEM mod 16384, as Redis Cluster hashes tags), so the
// scripts of an identity read it on the identity's own node; a tag has no
// ':' and names no identity. See "Absent versions" for what the cleared and
// forgotten keys hold.
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
// version; Clear deletes the namespace's keys and sets its mark; Forget sets
// the slot's forgotten version and deletes every key of the identity.
// Last(n) is one LRANGE of the list's tail (O(n)), All one LRANGE, Stat a
// script reading the list's length and the Seqs of its ends (O(1), without
// sending message bodies back), GetState a script reading the value or,
// for an absent one, the absent version. Every call is one round trip
// (Forget two).
//
// A window memory reads the same newest messages on every turn, so a Store
// keeps the messages it decoded in a small LRU cache keyed by the exact
// stored value (WithDecodeCache): a hit is always what decoding would give,
// and nothing needs invalidating when Redis changes.
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
// The forgotten version is per slot rather than one key for the whole
// prefix: that is what keeps it in the identity's slot on a Cluster. One
// store-wide key would sit in another slot, so PutState could only read it
// in a command of its own, and a Forget falling between that read and the
// compare-and-set would let a commit that read before Forget store its
// value after it. The trade-off: a Forget changes the absent version of
// the identities sharing its slot (about one in 16384) rather than of
// every identity — which the contract needs only of the forgotten one, and
// which refuses fewer unrelated first commits — and a forgotten key tells
// whoever can read the keys that some identity of that slot was forgotten,
// and when. A mark expires with the namespace's other keys (WithTTL); the
// forgotten keys never expire, and if one is lost (evicted, FLUSHDB) the
// next Forget draws a number at least the clock, so it is still new.
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
// the forgotten identity's counter + 1, its marks + 1). Counters of
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
// (messages, state, Clear mark) to d and extends that of the shared seq and
// nss keys to at least d, so those never expire before the data they
// describe. A namespace without a TTL keeps its keys and the shared keys
// forever (it removes their expiry when it writes). An expired mark is
// harmless: the absent version moves to the slot's forgotten version, so a
// commit that read the mark conflicts and reads again.
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
