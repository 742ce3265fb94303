// Package pgstore is the PostgreSQL backend of memstack's storage port: a
// store.Store kept in the tables of a PostgreSQL database, through a pgx v5
// connection pool, for memory shared by several processes that must survive
// restarts. It also implements store.Rewriter (one atomic trim-and-append,
// which store.AsHistory's SetMessages uses) and store.Users (list, export
// and forget every conversation of a user or a tenant).
//
// # Starting a server
//
// Any PostgreSQL 12 or newer works. For a local one on Debian or Ubuntu:
//
//	apt-get install postgresql
//	pg_ctlcluster 15 main start
//	su postgres -c "psql -c \"ALTER USER postgres PASSWORD 'secret'\""
//
// then Open(ctx, "postgres://postgres:secret@127.0.0.1:5432/postgres"). Or
// with Docker: docker run -e POSTGRES_PASSWORD=secret -p 127.0.0.1:5432:5432 postgres:16.
// The tests start their own throwaway server (internal/testsvc).
//
// # Schema
//
// The store keeps one sequence and four tables named after the table
// prefix (WithTablePrefix, default "memstack_"):
//
//	memstack_schema         (id = 1) primary key, version: the schema version, SchemaVersion
//	memstack_seq            one counter for every Seq, state version and absent version
//	memstack_messages       (id_hash, ns, seq) primary key, id_key, system, body, unit;
//	                        partial indexes memstack_messages_system and _unit
//	memstack_conversations  (id_hash, ns) primary key, id_key, count, first_seq, last_seq;
//	                        scope indexes memstack_conversations_tenant and _user
//	memstack_state          (id_hash, ns, name) primary key, id_key, version, value;
//	                        also the reserved rows of absent versions (see State);
//	                        scope indexes memstack_state_tenant and _user
//
// and, from version 4, the recall index's five (see The recall index; as
// version 5 keeps them):
//
//	memstack_recall_conv   (id_hash, ns) primary key, scope_t, scope_u, id_key, state,
//	                       convno (version 5: the conversation's number in its user);
//	                       index memstack_recall_conv_scope (ns, scope_t, scope_u)
//	memstack_recall_units  (id_hash, ns, chunk) primary key, data
//	memstack_recall_posts  (ns, term, scope_t, scope_u, grp, chunk) primary key, data;
//	                       index memstack_recall_posts_group (grp, scope_u, ns, chunk)
//	                       (version 5; version 4 had memstack_recall_terms instead,
//	                       with a row per conversation, id_hash for grp)
//	memstack_recall_days   (ns, scope_t, scope_u, day, id_hash, chunk) primary key, data;
//	                       index memstack_recall_days_conv (id_hash, ns, day)
//	memstack_recall_meta   (id = 1) primary key, enabled, complete
//
// id_key is memstack.Identity.Key; id_hash is its SHA-256, which is what the
// primary keys hold, so identities of any length (a B-tree entry is
// limited to about 2.7 kB) are served by the same index. Every query also
// compares id_key itself. ns is the namespace (WithNamespace, default
// "default"), so several memory layers can share the tables. The scope
// indexes are hash indexes on the key's tenant and tenant-and-user parts,
// computed from id_key by the server:
//
//	USING hash ((split_part(id_key, ':', 1) || ':'))
//	USING hash ((split_part(id_key, ':', 1) || ':' || split_part(id_key, ':', 2) || ':'))
//
// which are store.Scope.KeyPrefix of a tenant's and a user's scope, so the
// Users methods find a user's conversations without reading the tables
// (hash, not B-tree: a key part may be longer than a B-tree entry). The
// partial indexes of the messages table hold the system messages, which
// Tail reads, and the append keys (see Tail and append keys):
//
//	memstack_messages_system  (id_hash, ns, seq) WHERE system
//	memstack_messages_unit    UNIQUE (id_hash, ns, unit) WHERE unit IS NOT NULL
//
// unit (text COLLATE "C") is the append key of a keyed Append, on the
// first message of its unit, and NULL on every other row.
//
// Schema versions: version 1 is the sequence and the three data tables, as
// every build before the schema table created them; version 2 adds the
// schema table and the four scope indexes; version 3 adds the unit column
// and the two partial indexes; version 4 adds the recall index's tables,
// empty and off (creating them reads no other table, so the migration is
// quick on any database); version 5 keeps the index's postings by groups
// of a user's conversations (recall_posts, replacing recall_terms) and
// numbers each conversation in its user (recall_conv's convno): the
// migration drops the index's rows, so an index that was on is rebuilt
// from the messages by the background backfill (see The recall index),
// and until it is done a Recall indexes in process. A build of version 4
// still running on the tables fails its Clear, Forget and ForgetScope,
// with the index on or off, and its appends with the index on: their
// statements name the table version 5 drops, so the transaction changes
// nothing and the caller gets the error (its appends with the index off
// still work). Stop every process of an older build before the first
// Store of this one opens the tables. Every build names the columns it writes,
// so a build of version 1 (which checks no version) or 2 keeps working on
// newer tables during a rolling upgrade, and the indexes cover what it
// writes; but a build before version 3 knows no append keys, so a turn it
// appends is stored whatever key it carries.
//
// The forgotten versions of the buckets of users (see State) changed no
// table, index or column, so the schema version stayed 3: they are rows
// of the state table that no caller's key can be, added by the first
// Forget of a bucket's user, and the store-wide row older builds moved
// still counts. Tables older builds wrote need no migration, and older
// builds keep working on tables this build wrote: their Users methods
// skip the rows (their keys are empty), and none deletes one. But an
// older build reads only the store-wide row, which this build moves only
// in a tenant's ForgetScope: while builds of both kinds run on the tables
// (a rolling upgrade), a first commit by an older build racing with this
// build's Forget of the identity, or ForgetScope of its user, may land
// after it and outlive it. Finish the upgrade before relying on such
// forgets.
//
// New and Open read the version, under a transaction-scoped advisory lock
// of the prefix, in one transaction, and then:
//
//   - tables at SchemaVersion are used as they are: no DDL runs, so a role
//     with only DML grants opens them (see Roles);
//   - tables of a newer version are refused with an error wrapping
//     ErrSchemaVersion that names both versions: a newer build migrated
//     them, and this one could misread or fail to fill them;
//   - absent tables are created, and older tables (version 1, detected by
//     their messages table and the missing schema table, or 2) are
//     migrated, one version after the other, in that same transaction;
//     WithoutDDL refuses both instead, with an error wrapping
//     ErrSchemaVersion.
//
// So stores opening at the same moment, from several pools or processes,
// neither fail on each other nor migrate twice. The migration's CREATE
// INDEX (plain, as CONCURRENTLY cannot run in a transaction) blocks writes
// to the table it indexes while it builds, which on a large table takes a
// while; its ALTER TABLE … ADD COLUMN unit rewrites nothing (the column is
// nullable, with no default) and holds its lock only for a moment. For
// large tables, build the indexes first, outside the migration: ALTER
// TABLE memstack_messages ADD COLUMN IF NOT EXISTS unit text COLLATE "C",
// then CREATE [UNIQUE] INDEX CONCURRENTLY with the names and definitions
// above; the migration's IF NOT EXISTS then skips them. A CONCURRENTLY
// build that failed leaves an invalid index of its name behind, which IF
// NOT EXISTS would skip too: drop it and build it again first. The tables belong to the store: rows changed
// behind its back (a conversation's messages without its conversations
// row, a reserved state row — a Clear mark, a forgotten version) make
// Stat, RemovePrefix or the state's versions wrong.
//
// # Roles
//
// Creating or migrating the schema needs a role with CREATE on the schema
// the tables go in (the first schema of its search_path; PostgreSQL 15 no
// longer grants CREATE on public to everyone) that owns the tables it
// migrates (CREATE INDEX and ALTER need ownership). Using tables already at
// SchemaVersion needs only DML:
//
//	USAGE on the schema
//	SELECT, INSERT, UPDATE, DELETE on memstack_messages, memstack_conversations, memstack_state
//	    and the recall index's memstack_recall_conv, _units, _terms, _days and _meta
//	SELECT on memstack_schema (Open reads the version)
//	USAGE on the sequence memstack_seq (nextval, currval)
//
// and nothing else: advisory locks, pg_advisory_xact_lock, need no grant.
// A typical deployment creates the schema once with an owner role — a
// migration step that runs Open, or the first start of the application —
// and runs the application as a role with the grants above:
//
//	CREATE ROLE memstack_owner LOGIN;
//	GRANT CREATE ON SCHEMA public TO memstack_owner;
//	-- as memstack_owner: pgstore.Open(ctx, ownerDSN), then Close
//	CREATE ROLE memstack_app LOGIN;
//	GRANT USAGE ON SCHEMA public TO memstack_app;
//	GRANT SELECT, INSERT, UPDATE, DELETE ON memstack_messages, memstack_conversations,
//	    memstack_state, memstack_schema, memstack_recall_conv, memstack_recall_units,
//	    memstack_recall_posts, memstack_recall_days, memstack_recall_meta TO memstack_app;
//	GRANT USAGE ON SEQUENCE memstack_seq TO memstack_app;
//
// The application role opens the tables without any option; WithoutDDL
// makes sure it never tries DDL (a newer build would otherwise try to
// migrate on its first start, and fail on the missing privilege with an
// error that says so). A migration that adds a table needs its grant too
// (ALTER DEFAULT PRIVILEGES FOR ROLE memstack_owner … GRANT … ON TABLES
// makes that automatic; version 3 adds none, version 4 the recall
// index's five, which every Store reads when it opens the tables, and
// version 5 memstack_recall_posts). A role without the privileges gets an error from
// Open naming the statement that failed, the server's permission error
// (SQLSTATE 42501) and what the role needs.
//
// # The recall index
//
// The recall_* tables can hold memories.Recall's lexical index beside the
// messages (package indexkit; store.RecallSearcher): the same rows, the
// same ranking (BM25 with the neighbour weighting, scored in Go from the
// postings read) and the same conformance case as sqlitestore's. It is
// off until a Store opens the tables with WithRecallIndex; from then on
// every Store writing them keeps it in the transactions of its writes —
// Append and AppendBatches add their messages' entries, Clear, Forget and
// ForgetScope delete a conversation's rows with its messages, RemovePrefix
// trims them, Rewrite indexes the conversation afresh — and a Recall with
// the default index over any Store of the tables searches them, so a turn
// one process saved is found by another's next load with no process
// state shared. Conversations stored before it was turned on are indexed
// in the background, one transaction each, resumably (SearchRecall
// returns store.ErrRecallNotReady until they are all indexed). Derived
// identities (memstack's own: a user's facts, a recall journal) are not
// indexed. Rows name a conversation by id_hash and its tenant's and
// user's scopes by the SHA-256 of "tenant:" and "tenant:user:"
// (scope_t, scope_u).
//
// The postings of a user's conversations are kept by groups: the first
// time a conversation is indexed it gets a number in its user (one more
// than the user's greatest), and a group holds eight of them: of each
// 256 numbers of a user, the eight equal modulo 32, so that a user's 32
// newest conversations never share a row. A row of recall_posts holds a term's postings in one group's conversations, in
// one chunk of their messages (128 of each conversation's): 16-byte
// entries of the conversation's number, the message's Seq and the term's
// count. So the postings of a term in a tenant or a user are one range of
// the primary key, a row per group that has the term — a user with a
// thousand conversations that all hold a query's thirteen words costs
// about 1,600 rows, not the 13,000 a row per conversation would, and
// those rows are on pages of their own, not scattered among every
// conversation's — and a conversation's are its group's rows of the term
// (its entries taken, the others skipped). A search reads, in one round
// trip and one snapshot, the states of the scope's conversations, the
// posting rows of the query's terms and the unit entries of the
// conversations of the groups they name. Conversations of a group share
// rows, and appends to them run at once (each under its own identity's
// lock; rows updated by two wait for each other only on those rows):
// every write locks the posting rows it changes in one order, (ns,
// scope_u, grp, term, chunk), so none waits for another in a cycle, and a
// new conversation's number is given under an advisory lock of its user,
// taken before the transaction holds any posting row, so it is never
// given twice. Clear, Forget and ForgetScope take a conversation's
// entries out of its group's rows in SQL (a row left with none is
// deleted), RemovePrefix its entries up to the cut, in the chunks it cut
// (filtered in Go); a Rewrite's reindex takes its old entries out in the
// same ordered upsert that adds its new ones; an append adds its entries
// to the rows, each row once per transaction however many of the group's
// conversations it indexes.
//
// What it costs: with the index on an Append takes two round trips (the
// messages, whose Seqs the server draws, and their entries) instead of
// one — four for a conversation's first indexed append, which takes its
// user's numbering lock and reads the user's greatest conversation
// number in between — and writes each message's postings (16 bytes per distinct term)
// into (term, chunk) rows by appending to them (bytea ||), so the bytes
// it writes grow with its messages, not with the conversation; a Store
// that last saw the index off appends in one round trip with a guard
// that makes the transaction fail if the index is on, and then runs it
// again the indexed way (the guard holds an advisory lock shared, which
// turning the index on takes exclusively before it reads what is stored)
// — so no message a build of this version writes is ever stored
// unindexed in tables that keep the index. Builds before schema version 4
// know no index: one still running on the tables (a Store opened before
// the migration, a build of version 1, which checks no version) stores
// its messages unindexed, so finish upgrading every process before
// turning the index on.
//
// # Messages
//
// A message is stored as storekit.EncodeMessageAt's JSON in a bytea column,
// not in jsonb or text: PostgreSQL's text types cannot hold a NUL character
// and jsonb rejects \u0000, while the contract requires any valid string to
// round-trip byte for byte. The JSON carries the message's time (its "at"
// field: storekit.AppendTime of the Append, which a caller sets with
// memstack.WithTime), with its UTC offset, which a timestamptz column
// would not keep; so times need no column. Rows written before memstack
// recorded times have no "at" and read back with a zero
// store.Record.Time. The system column pins system messages: RemovePrefix
// is DELETE … WHERE seq <= through AND NOT system.
//
// # Tail and append keys
//
// Tail is one statement, so it reads one snapshot and never half of an
// Append: a UNION ALL of the identity's system messages, read through
// memstack_messages_system, and of the newest n others with Seq > after,
// read backwards on the primary key from the newest message (skipping the
// system rows it meets, and no lower than the conversation's first Seq,
// as All), ordered by Seq. Neither part reads the rest of the
// conversation, so Tail touches the pages of what it returns, however
// long the conversation is (TestTailCostsWhatItReturns checks the plans
// PostgreSQL runs, custom and generic).
//
// Under an append key (store.WithAppendKey, checked before anything is
// sent), Append's first INSERT writes the key into the first message's
// unit column, ON CONFLICT (id_hash, ns, unit) WHERE unit IS NOT NULL DO
// NOTHING: when the identity has the key in the namespace, the row is not
// inserted, nor the conversations row touched. Every later statement of
// that Append (the unit's other messages, then the conversation's count
// and last Seq) runs only if the row of the Seq the session drew last
// (currval) is stored: the unit's previous message, which is there
// exactly when the first one was inserted (a skipped INSERT has drawn its
// Seq, which then no row holds, and Seqs may skip). So an Append under a
// stored key stores nothing, changes no counter and returns nil, in the
// same one round trip. Appends of one identity run one after the other
// under its advisory lock, and the unique index makes an insert of a key
// that another transaction is inserting wait for it and then conflict,
// from any pool or process. A transaction the server rolled back (see
// below) stored nothing, key included, so its rerun stores the unit once;
// after a lost reply the outcome is unknown (the error wraps
// store.ErrOutcomeUnknown), and the caller's retry under the same key
// stores the unit only if the lost one did not.
//
// A key lives as long as its row: RemovePrefix keeps it with a system
// message and removes it with another, and Rewrite, Clear, Forget and
// ForgetScope remove it with the row (at least as long as package store
// requires). Rewrite appends with no key.
//
// # Transactions
//
// Every write of an identity's rows (Append, RemovePrefix, Rewrite, Clear,
// Forget, PutState) is one transaction, sent as one batch in one round
// trip: BEGIN ISOLATION LEVEL READ COMMITTED, a transaction-scoped advisory
// lock for the identity (pg_advisory_xact_lock on a 64-bit hash of the
// table prefix and the identity key), the statements, COMMIT. The store
// sets the isolation level itself, so it does not depend on
// default_transaction_isolation: a server, database or role that defaults
// to repeatable read or serializable changes nothing. The design relies on
// read committed: each statement sees what was committed when it started,
// so the statements after the lock see everything the lock's previous
// holder committed (a repeatable read snapshot would date from before the
// lock was granted). Reads (Last, All, Stat, GetState, Identities) are
// single statements, which see one snapshot at any isolation level; Export
// is one repeatable read, read-only transaction, so an export is one
// snapshot.
//
// Append inserts one row per message, each drawing its Seq with nextval,
// and keeps the conversation's row in memstack_conversations (count, first
// and last Seq); a turn is therefore stored whole or not at all. The lock
// makes appends to one identity take their Seqs one after the other: a
// second appender draws its values only after the first has committed, so
// Seqs increase in append (commit) order even with many appenders in many
// processes, and a reader never sees a higher Seq before a lower one.
// Writes to different identities do not wait for each other (two
// identities share a lock only on a 64-bit hash collision, which costs
// waiting, never correctness). Because every Seq and version comes from
// one sequence, none is reused after RemovePrefix, Clear or Forget. The
// sequence must keep CACHE 1 (the default): per-session caching would hand
// out Seqs out of order.
//
// Single-row inserts, rather than one multi-row INSERT … SELECT FROM unnest,
// are deliberate: PostgreSQL keeps one generic plan for each of them, while
// it re-plans an INSERT over array parameters on every call, which costs
// more than the extra statements.
//
// Retries: a transaction the server rolls back for a serialization failure
// (SQLSTATE 40001) or a deadlock (40P01) changed nothing, so the store runs
// it again, up to 4 times in all, a few random milliseconds apart; reads
// too. After the last try PutState reports an error wrapping
// store.ErrConflict (and the server's), so a caller's compare-and-set loop
// retries; the other calls report the server's error. The store's own
// read committed transactions under its advisory locks cause neither;
// they come from elsewhere (triggers, other sessions locking the tables,
// recovery conflicts of reads on a hot standby). Nothing else is ever run
// twice: when a connection
// breaks after a batch was sent — a lost reply, a server crash, a
// failover — the outcome is unknown and the call returns the error (pgx
// and pgxpool never resend a query either). So a write is applied at most
// once, and exactly once when the call returned nil. storetest.RunFaults,
// run by this package's tests through a proxy that loses replies, checks
// it.
//
// The error of a write whose transaction may have committed wraps
// store.ErrOutcomeUnknown, and the cause with it (errors.Is(err,
// context.DeadlineExceeded) still holds): the batch, COMMIT included, was
// sent, and no reply said how it ended — a connection that broke or timed
// out, a context that ended while the server ran it and no answer to the
// cancel request (see Cancellation), a FATAL from a server shutting down
// (which may follow the COMMIT's own reply), an error reading a
// statement's result while the COMMIT went on. Retry such an Append under
// the same append key (store.WithAppendKey; memories under the same
// memstack.WithSaveKey): it stores the turn only if the first try did
// not, also when that try commits after the retry. An Append without a
// key may store its turn twice if retried; a retried PutState conflicts
// when its first try landed, so read the state again. A write whose error
// does not wrap it stored nothing: an error the server reported (at
// severity ERROR: the transaction was rolled back, a cancelled one
// included), no connection to be had from the pool (nothing was sent), a
// context already done, a closed store, an invalid argument, or a failure
// preparing the statements (nothing ran).
//
// # Cancellation
//
// Every method honours ctx: a context that is already done changes
// nothing and returns its error. When the context ends while the server
// runs a call's statements, a pool made by Open asks the server to cancel
// them (a cancel request, after 10 ms) and waits up to a second for its
// answer — the transaction rolled back, or it committed — so the outcome
// is settled when the call returns: an error means nothing was stored,
// unless the server did not answer within the second (then the connection
// is closed and the outcome is unknown: the error wraps
// store.ErrOutcomeUnknown). Dropping the connection at once, pgx's
// default, would leave the server running what it has received, a COMMIT
// included, after the call had failed. A pool given to New keeps its own
// context handling (pgconn.Config.BuildContextWatcherHandler;
// pgconn.CancelRequestContextWatcherHandler does the same); with pgx's
// default, a write whose context ends while the server runs it returns an
// error wrapping store.ErrOutcomeUnknown.
//
// # State
//
// A state value is a row of memstack_state. Absent versions (package
// store, "Cleared means gone, across replicas") live in the same table, in
// reserved rows no caller can reach:
//
//   - a Clear mark is the row of the identity and namespace named "" (which
//     storekit.CheckStateName rejects, so GetState and PutState never touch
//     it), with an empty value; its version is the identity's absent
//     version in that namespace. Clear sets it to a fresh version, also for
//     an identity with no rows; Forget deletes it with the identity's other
//     rows.
//   - a forgotten version is kept per bucket of users: storekit.ForgetBucket
//     hashes an identity's tenant and user into one of
//     storekit.ForgetBuckets (4096) buckets, and bucket b's forgotten version
//     is the row with an empty id_hash (no SHA-256 is empty), ns ""
//     (WithNamespace rejects it) and name "#b", created by the first
//     Forget of one of its users. A Forget moves its identity's bucket to
//     a fresh version, a user's ForgetScope the user's bucket, a tenant's
//     every bucket; none deletes a bucket's row, as they delete by the
//     identity's hash. One row per bucket serves every namespace under the
//     table prefix: all that Forget reaches.
//   - the store-wide forgotten version of builds before buckets is the row
//     with an empty id_hash, ns "" and name "", which every Forget and
//     ForgetScope of those builds moved. This build moves it only in a
//     tenant's ForgetScope, with every bucket.
//
// The absent version of a name is the identity's mark in the namespace,
// else the greater of its bucket's forgotten version and the store-wide
// one, else 0 (no Clear, no Forget of a user of the bucket yet): three
// primary-key lookups. Marks and forgotten versions are drawn from
// memstack_seq like every version, so none is ever reused, and each
// forgotten version only grows (its fresh version is drawn after the
// upsert holds the row's lock), so their greatest only grows too. So a
// Forget of one user moves the absent version of the users of one bucket
// (one in 4096, the user's) and a first commit of theirs racing with it
// conflicts once; every other user's first commit lands. Tables where an
// older build forgot someone keep working: its store-wide row counts for
// every identity until the identity's bucket moves past it.
//
// GetState is one statement: the value, its version and the absent
// version come from one snapshot. PutState is one statement, after the
// identity's advisory lock: the current version is the value's, else the
// absent version; only when it is expect is the value upserted with the
// next value of the sequence (or, for a nil value, deleted, returning the
// absent version). Every statement that reads an absent version takes the
// bucket's row name as a parameter, computed by the client. Clear is, in
// one transaction under the same lock, the deletes of the identity's
// messages, conversations row and state values in the namespace and the
// upsert of its mark; Forget is the upsert of its bucket's row, then the
// deletes of every row of the identity under the table prefix, marks
// included. Because PutState, Clear and Forget of one identity hold its
// lock in turn, a PutState racing a Clear or Forget, from any pool or
// process, either commits before it, and is removed by it, or runs after
// it, and then conflicts unless it expected the new absent version (see
// PutState for why a row lock would not do, and for the forgotten
// versions moved under another identity's lock or none).
//
// # Rewrite and Users
//
// Rewrite is one transaction under the identity's lock: the delete of the
// messages with Seq <= through (system ones too), with reset the deletes
// and mark of Clear's state step, then Append's statements. Identities
// reads the scope indexes of the conversations and state tables (an
// identity with a conversations row but no message left, no value and no
// mark holds nothing and is not listed); Export reads the identities' rows
// by id_hash in one snapshot. None of them reaches another table prefix:
// a prefix is a store of its own.
//
// # Forgetting a user
//
// ForgetScope cannot hold the locks of every identity of a user at once,
// so it runs in steps. It first moves the forgotten version of the user's
// bucket (a tenant's: of every bucket and the store-wide one, in one
// statement), so a commit that read any absent version of the scope
// before conflicts; then lists the scope; then deletes every row of its
// identities — every namespace under the table prefix, emptied
// conversations rows included — in transactions of up to 64 identities,
// derived ones (storekit.Derived) last, each taking their advisory locks in
// ascending order, so it never deadlocks with another ForgetScope or with
// a single identity's write. Last, it forgets every identity of
// storekit.DerivedOf for the scope's user (for a tenant, for every user it
// listed), also when none was listed: as Forget does, under each
// identity's lock, it moves the user's bucket and deletes the identity's
// rows. That is what keeps a user's facts from outliving the forget: a
// per-user Facts extraction in flight may commit to the facts identity
// after the listing (it re-reads the state after the first step and
// retries), when there was nothing to list. Its PutState takes the same
// lock as this last step, so it lands before it and is deleted, or runs
// after it and conflicts (the version it read is older); a commit that
// reads after it finds the user's conversations gone, which Facts checks
// before committing. ForgetScope returns how many identities held
// something: listed so, or, for the last step's, holding rows it removed.
// An identity written after the listing, other than a derived one, is a
// write after the forget and is kept.
//
// # Failures
//
// Calls wrap their errors with the operation and the identity key, never
// message content. A stored value that does not decode is an error wrapping
// store.ErrCorrupt naming the identity and Seq; other identities stay
// readable. When the server goes away calls fail; pgxpool replaces broken
// connections, so the same Store works again once the server is back. Close
// on a store from Open closes its pool; calls after Close return ErrClosed.
//
// Durability is the server's: the store never changes synchronous_commit,
// so an Append that returned nil is committed as durably as the server is
// configured to commit.
//
// # Performance
//
// A store from Open uses pgxpool's default pool size (the larger of 4 and
// the number of CPUs) unless the DSN sets pool_max_conns. Every call is one
// round trip, but Export (five) and ForgetScope (two, one per 64
// identities, and one per 64 users for their derived identities: three
// for a user with up to 64 conversations).
// On a 2-core machine with client and server on loopback, 32 concurrent
// conversations saving a turn and loading Last(10) each time reach several
// thousand saves per second (see the benchmark table in docs/benchmarks.md and
// BenchmarkPostgres).
//
// Stat reads the conversation's row, so it costs the same for ten
// messages or ten thousand; memories call it on every load. Last(n) is an
// index scan of n rows, Tail(n) one of the system rows and one of n rows
// (see Tail and append keys); All reads every row. An Append reads no older
// row: the first message's INSERT also creates the conversations row, or
// sets its first Seq when the conversation holds no message, and a last
// UPDATE adds the count and sets the last Seq (currval). Its cost
// therefore stays flat after a RemovePrefix of a large prefix, whose index
// entries stay behind until VACUUM (BenchmarkAppendAfterRemovePrefix), as
// the cost of an append that looked up the first Seq with min(seq) over
// those entries did not. All, RemovePrefix and Rewrite start their scans
// at the conversation's first Seq, so they skip those entries too —
// except the entries between a system message pinned below them and the
// messages kept, which All and RemovePrefix step over until VACUUM
// removes them.
package pgstore
