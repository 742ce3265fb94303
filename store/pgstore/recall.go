package pgstore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
	"github.com/memstack/memstack/store/storekit"
)

// The recall index (schema version 5; see store.RecallSearcher and
// package indexkit), what sqlitestore keeps: per conversation its
// indexkit.Conv state, its unit entries by chunk and the units each day
// opened, and the postings by (term, group of a user's conversations,
// chunk) — sqlitestore keeps them by conversation; see Posting rows below.
// Identity keys may be longer than a B-tree entry, so rows name a
// conversation by its id_hash and the scopes it belongs to by the SHA-256
// of their key prefixes (scope_t of "tenant:", scope_u of
// "tenant:user:"): the postings' primary key (ns, term, scope_t, scope_u,
// grp, chunk) makes a tenant's and a user's postings of a term one key
// range each, and a conversation's its group's part of it. The meta row
// records whether the index is on and complete (tables migrated from
// version 3 or 4 are indexed in the background once it is on).
//
// Writes. While the index is on, an Append is one transaction in two
// round trips instead of one: the first takes the identity's lock, reads
// the conversation's index state and inserts the messages (returning
// their Seqs, which the server draws); the second appends the index
// entries (one statement per table, arrays unnested) and commits — and a
// conversation's first indexed append takes, in between, its user's
// numbering lock and reads the user's greatest conversation number (two
// more round trips). A Store that last
// saw the index off appends in one round trip with a guard statement
// that fails the transaction if the index is on by then (another process
// turned it on): the Append then runs again the indexed way, so no
// message is ever stored unindexed in a database that keeps the index.
// RemovePrefix and Rewrite, rarer, run as interactive transactions.

// recallSQL holds the recall index's statements, built from the prefix.
type recallSQL struct {
	conv, units, posts, days, meta   string   // table names
	create                           []string // to version 4
	toV5                             []string // version 4 to 5
	enable, readMeta, guard          string
	readState, writeState            string
	nextConv                         string // a new conversation's number in its user
	upUnits, upPosts, upDays         string
	count                            string
	deleteConv                       []string // of (id_hash, ns)
	deleteAll                        []string // of id_hash, every namespace
	groupRows, setPosts, deletePosts string   // a group's rows (locked, in order), by key
	deleteConvRows                   []string // of (id_hash, ns): deleteConv but the posting rows
	ownRows, upStrip, deleteEmpty    string   // a reindex's posting rows
	lockPostsOf                      string   // of id_hash[], every namespace
	// Returning variants of the append statements (their Seqs).
	appendFirst, insertMessage, appendKeyed, insertAfter string
	readMessages, readMessage                            string
	unitChunks                                           string
	setUnits, deleteUnits                                string
	deleteThrough                                        string
	deleteDays                                           string
	missing, complete                                    string
	searchConvs, searchRows                              [3]string // by scope level: tenant, user, conversation
	dated                                                [3]string
}

// Scope levels of the search statements.
const (
	levelTenant = iota
	levelUser
	levelConv
)

func buildRecallSQL(prefix string, q queries) recallSQL {
	name := func(s string) string { return pgx.Identifier{prefix + s}.Sanitize() }
	r := recallSQL{
		conv: name("recall_conv"), units: name("recall_units"), posts: name("recall_posts"),
		days: name("recall_days"), meta: name("recall_meta"),
	}
	// Version 4's postings table, which version 5 replaces.
	terms := name("recall_terms")
	r.create = []string{
		"CREATE TABLE IF NOT EXISTS " + r.conv + ` (
	id_hash bytea NOT NULL,
	ns      text  NOT NULL,
	scope_t bytea NOT NULL,
	scope_u bytea NOT NULL,
	id_key  text  NOT NULL,
	state   bytea NOT NULL,
	PRIMARY KEY (id_hash, ns))`,
		"CREATE INDEX IF NOT EXISTS " + name("recall_conv_scope") + " ON " + r.conv + " (ns, scope_t, scope_u)",
		"CREATE TABLE IF NOT EXISTS " + r.units + ` (
	id_hash bytea  NOT NULL,
	ns      text   NOT NULL,
	chunk   bigint NOT NULL,
	data    bytea  NOT NULL,
	PRIMARY KEY (id_hash, ns, chunk))`,
		"CREATE TABLE IF NOT EXISTS " + terms + ` (
	ns      text   NOT NULL,
	term    text   COLLATE "C" NOT NULL,
	scope_t bytea  NOT NULL,
	scope_u bytea  NOT NULL,
	id_hash bytea  NOT NULL,
	chunk   bigint NOT NULL,
	data    bytea  NOT NULL,
	PRIMARY KEY (ns, term, scope_t, scope_u, id_hash, chunk))`,
		"CREATE INDEX IF NOT EXISTS " + name("recall_terms_conv") + " ON " + terms + " (id_hash, ns, chunk)",
		"CREATE TABLE IF NOT EXISTS " + r.days + ` (
	ns      text    NOT NULL,
	scope_t bytea   NOT NULL,
	scope_u bytea   NOT NULL,
	day     integer NOT NULL,
	id_hash bytea   NOT NULL,
	chunk   bigint  NOT NULL,
	data    bytea   NOT NULL,
	PRIMARY KEY (ns, scope_t, scope_u, day, id_hash, chunk))`,
		"CREATE INDEX IF NOT EXISTS " + name("recall_days_conv") + " ON " + r.days + " (id_hash, ns, day)",
		"CREATE TABLE IF NOT EXISTS " + r.meta + ` (
	id       integer NOT NULL PRIMARY KEY CHECK (id = 1),
	enabled  boolean NOT NULL,
	complete boolean NOT NULL)`,
		"INSERT INTO " + r.meta + " (id, enabled, complete) VALUES (1, false, false) ON CONFLICT (id) DO NOTHING",
	}
	c := pgx.Identifier{prefix + "conversations"}.Sanitize()
	m := pgx.Identifier{prefix + "messages"}.Sanitize()
	// A database without messages has nothing to index: complete.
	complete := "NOT EXISTS (SELECT FROM " + c + " WHERE count > 0)"
	// Version 5: the postings of a user's conversations in groups (see
	// postGroup), and each conversation's number in its user. The index
	// kept so far is dropped and rebuilt from the messages by the
	// backfill (a conversation with no state row is the backfill's), so
	// until it completes a Recall indexes in process.
	r.toV5 = []string{
		"ALTER TABLE " + r.conv + " ADD COLUMN IF NOT EXISTS convno integer",
		"CREATE TABLE IF NOT EXISTS " + r.posts + ` (
	ns      text    NOT NULL,
	term    text    COLLATE "C" NOT NULL,
	scope_t bytea   NOT NULL,
	scope_u bytea   NOT NULL,
	grp     integer NOT NULL,
	chunk   bigint  NOT NULL,
	data    bytea   NOT NULL,
	PRIMARY KEY (ns, term, scope_t, scope_u, grp, chunk))`,
		// The rows of a group (Clear, Forget, RemovePrefix): grp first, so
		// that a search by terms, which names no group, never reads it.
		"CREATE INDEX IF NOT EXISTS " + name("recall_posts_group") + " ON " + r.posts + " (grp, scope_u, ns, chunk)",
		"DROP TABLE IF EXISTS " + terms,
		"DELETE FROM " + r.conv,
		"DELETE FROM " + r.units,
		"DELETE FROM " + r.days,
		"UPDATE " + r.meta + " SET complete = " + complete,
	}
	r.enable = "UPDATE " + r.meta + " SET enabled = true, complete = " + complete + " WHERE NOT enabled"
	r.readMeta = "SELECT enabled, complete FROM " + r.meta + " WHERE id = 1"
	// The guard of a write that does not index: division by zero (22012)
	// when the index is on.
	r.guard = "SELECT 1 / (CASE WHEN enabled THEN 0 ELSE 1 END) FROM " + r.meta + " WHERE id = 1"
	r.readState = "SELECT state, convno FROM " + r.conv + " WHERE id_hash = $1 AND ns = $2"
	r.writeState = "INSERT INTO " + r.conv + " AS r (id_hash, ns, scope_t, scope_u, id_key, state, convno) VALUES ($1, $2, $3, $4, $5, $6, $7)" +
		" ON CONFLICT (id_hash, ns) DO UPDATE SET state = EXCLUDED.state, convno = EXCLUDED.convno"
	r.nextConv = "SELECT coalesce(max(convno) + 1, 0) FROM " + r.conv + " WHERE ns = $1 AND scope_t = $2 AND scope_u = $3"
	r.upUnits = "INSERT INTO " + r.units + " AS r (id_hash, ns, chunk, data)" +
		" SELECT $1::bytea, $2::text, u.chunk, u.data FROM unnest($3::bigint[], $4::bytea[]) AS u (chunk, data)" +
		" ON CONFLICT (id_hash, ns, chunk) DO UPDATE SET data = r.data || EXCLUDED.data"
	r.upPosts = "INSERT INTO " + r.posts + " AS r (ns, term, scope_t, scope_u, grp, chunk, data)" +
		" SELECT $1::text, u.term, $2::bytea, $3::bytea, $4::integer, u.chunk, u.data FROM unnest($5::text[], $6::bigint[], $7::bytea[]) AS u (term, chunk, data)" +
		` ORDER BY u.term COLLATE "C", u.chunk` + // the rows locked in order (Posting rows)
		" ON CONFLICT (ns, term, scope_t, scope_u, grp, chunk) DO UPDATE SET data = r.data || EXCLUDED.data"
	r.upDays = "INSERT INTO " + r.days + " AS r (ns, scope_t, scope_u, day, id_hash, chunk, data)" +
		" SELECT $1::text, $2::bytea, $3::bytea, u.day, $4::bytea, u.chunk, u.data FROM unnest($5::integer[], $6::bigint[], $7::bytea[]) AS u (day, chunk, data)" +
		" ON CONFLICT (ns, scope_t, scope_u, day, id_hash, chunk) DO UPDATE SET data = r.data || EXCLUDED.data"
	r.count = "SELECT count FROM " + c + " WHERE id_hash = $1 AND ns = $2"
	// Taking a conversation's entries out of its group's posting rows (the
	// conversation's row of r.conv, matched by cond, names its user, group
	// and number), run before that row is deleted: the rows are locked
	// first, in the order every writer of them locks them (Posting rows,
	// below), then the rows left with none are deleted and the others
	// rewritten without them. An entry at i (1-based) is 16 bytes: the
	// conversation's number, its Seq and the count, big-endian, so they
	// compare as bytes.
	lockOrder := ` ORDER BY p.ns COLLATE "C", p.scope_u, p.grp, p.term, p.chunk FOR UPDATE OF p`
	size := strconv.Itoa(postEntrySize)
	// The entries (e.i) of a row's data col; own, whether entry e.i is of
	// the numbers num (a condition on its 4 first bytes) — or cut short (a
	// row damaged outside the store), which goes with them, so Clear and
	// Forget leave no bytes of the conversation's; kept, the data without
	// them (NULL for none).
	entries := func(col string) string { return " FROM generate_series(1, length(" + col + "), " + size + ") AS e (i)" }
	own := func(col, num string) string {
		return "(length(" + col + ") - e.i < " + strconv.Itoa(postEntrySize-1) + " OR substr(" + col + ", e.i, 4) " + num + ")"
	}
	kept := func(col, num string) string {
		return "(SELECT string_agg(substr(" + col + ", e.i, " + size + "), ''::bytea ORDER BY e.i)" + entries(col) + " WHERE NOT " + own(col, num) + ")"
	}
	// The posting rows (p) of the groups of the conversations (c) that
	// cond names.
	groupsOf := func(cond string) string {
		return cond + " AND p.ns = c.ns AND p.scope_t = c.scope_t AND p.scope_u = c.scope_u AND p.grp = " + groupSQL("c.convno")
	}
	posts := func(cond string) []string {
		where := " WHERE " + groupsOf(cond)
		gone := own("p.data", "= int4send(c.convno)")
		return []string{
			"SELECT FROM " + r.posts + " p, " + r.conv + " c" + where + " AND EXISTS (SELECT" + entries("p.data") + " WHERE " + gone + ")" + lockOrder,
			"DELETE FROM " + r.posts + " p USING " + r.conv + " c" + where + " AND NOT EXISTS (SELECT" + entries("p.data") + " WHERE NOT " + gone + ")",
			"UPDATE " + r.posts + " p SET data = " + kept("p.data", "= int4send(c.convno)") + " FROM " + r.conv + " c" + where +
				" AND EXISTS (SELECT" + entries("p.data") + " WHERE " + gone + ")",
		}
	}
	r.deleteConv = posts("c.id_hash = $1 AND c.ns = $2")
	r.deleteAll = posts("c.id_hash = $1")
	for _, t := range []string{r.conv, r.units, r.days} {
		r.deleteConvRows = append(r.deleteConvRows, "DELETE FROM "+t+" WHERE id_hash = $1 AND ns = $2")
		r.deleteAll = append(r.deleteAll, "DELETE FROM "+t+" WHERE id_hash = $1")
	}
	r.deleteConv = append(r.deleteConv, r.deleteConvRows...)
	r.lockPostsOf = "SELECT FROM " + r.posts + " p, " + r.conv + " c WHERE " + groupsOf("c.id_hash = ANY($1::bytea[])") + lockOrder
	// A reindex takes its old entries out and appends its new ones in one
	// upsert of the rows of both, in order (removing first, then
	// appending, would lock rows out of order): the keys of the group's
	// rows with its entries ($5, its number), then the upsert, whose
	// existing rows keep what is not of the numbers $8 (BE bytes), then
	// the rows it left empty deleted.
	ofGroup := "ns = $1 AND scope_t = $2 AND scope_u = $3 AND grp = $4"
	r.ownRows = "SELECT term, chunk FROM " + r.posts + " p WHERE " + ofGroup + " AND EXISTS (SELECT" + entries("p.data") + " WHERE " + own("p.data", "= int4send($5::integer)") + ")"
	r.upStrip = strings.Replace(r.upPosts, "DO UPDATE SET data = r.data || EXCLUDED.data",
		"DO UPDATE SET data = coalesce("+kept("r.data", "= ANY($8::bytea[])")+", ''::bytea) || EXCLUDED.data", 1)
	r.deleteEmpty = "DELETE FROM " + r.posts + " WHERE " + ofGroup + " AND data = ''::bytea AND (term, chunk) IN (SELECT * FROM unnest($5::text[], $6::bigint[]))" // its rows only, locked
	// A prefix removal filters its group's rows in Go (a long
	// conversation's trim reads its rows once, where the SQL filter above
	// would scan every entry three times): its rows of chunks up to $5,
	// locked in order (a group's order is (term, chunk)), then the rows
	// changed, by key.
	r.groupRows = "SELECT term, chunk, data FROM " + r.posts + " WHERE " + ofGroup + ` AND chunk <= $5 ORDER BY term COLLATE "C", chunk FOR UPDATE`
	r.setPosts = "UPDATE " + r.posts + " p SET data = u.data FROM unnest($5::text[], $6::bigint[], $7::bytea[]) AS u (term, chunk, data) WHERE " +
		ofGroup + " AND p.term = u.term AND p.chunk = u.chunk"
	r.deletePosts = "DELETE FROM " + r.posts + " p USING unnest($5::text[], $6::bigint[]) AS u (term, chunk) WHERE " + ofGroup + " AND p.term = u.term AND p.chunk = u.chunk"
	// The append statements of queries, returning each message's Seq (none
	// when a keyed unit is already stored).
	r.appendFirst = strings.Replace(q.appendFirst, " INSERT INTO "+c, " , c AS (INSERT INTO "+c, 1) + ") SELECT seq FROM i"
	r.appendKeyed = strings.Replace(q.appendKeyed, " INSERT INTO "+c, " , c AS (INSERT INTO "+c, 1) + ") SELECT seq FROM i"
	r.insertMessage = q.insertMessage + " RETURNING seq"
	r.insertAfter = q.insertAfter + " RETURNING seq"
	r.readMessages = "SELECT seq, body FROM " + m + " WHERE id_hash = $1 AND ns = $2 AND id_key = $3 ORDER BY seq"
	r.readMessage = "SELECT body FROM " + m + " WHERE id_hash = $1 AND ns = $2 AND seq = $3"
	r.unitChunks = "SELECT chunk, data FROM " + r.units + " WHERE id_hash = $1 AND ns = $2 ORDER BY chunk"
	r.setUnits = "UPDATE " + r.units + " SET data = $4 WHERE id_hash = $1 AND ns = $2 AND chunk = $3"
	r.deleteUnits = "DELETE FROM " + r.units + " WHERE id_hash = $1 AND ns = $2 AND chunk = $3"
	r.deleteThrough = "DELETE FROM " + r.units + " WHERE id_hash = $1 AND ns = $2 AND chunk <= $3"
	r.deleteDays = "DELETE FROM " + r.days + " WHERE id_hash = $1 AND ns = $2 AND chunk < $3"
	// Conversations with messages and no index state, after ($1, $2).
	r.missing = "SELECT c.id_hash, c.ns, c.id_key FROM " + c + " c WHERE c.count > 0 AND (c.id_hash, c.ns) > ($1::bytea, $2::text)" +
		" AND NOT EXISTS (SELECT FROM " + r.conv + " r WHERE r.id_hash = c.id_hash AND r.ns = c.ns) ORDER BY c.id_hash, c.ns LIMIT 64"
	r.complete = "UPDATE " + r.meta + " SET complete = true WHERE id = 1"
	// Each level's parameters: $1 ns, $2 scope_t, then $3 scope_u (user
	// and conversation), then $4 id_hash (conversation); the terms, or the
	// days, follow them.
	where := [3]string{
		"ns = $1 AND scope_t = $2",
		"ns = $1 AND scope_t = $2 AND scope_u = $3",
		"ns = $1 AND scope_t = $2 AND scope_u = $3 AND id_hash = $4",
	}
	group := "grp = (SELECT " + groupSQL("convno") + " FROM " + r.conv + " WHERE id_hash = $4 AND ns = $1)"
	for l, w := range where {
		next := func(i int) string { return "$" + strconv.Itoa(l+2+i) }
		r.searchConvs[l] = "SELECT id_hash, id_key, state, convno, scope_u FROM " + r.conv + " WHERE " + w
		// The posting rows of the query's terms (each term one key range
		// of the primary key: a user's are its groups' rows; a
		// conversation's, its group's), then the unit entries of the
		// conversations of the groups they name: one statement, so one
		// snapshot, and the postings are read once (term is NULL on a
		// unit row, whose second column is its conversation's id_hash;
		// a posting row's is its user's scope_u). Rows come in any order:
		// indexkit.Search orders each conversation's entries. The unit
		// rows are looked up by key from an array (not a join, which a
		// generic plan of a cached statement may answer with a scan of
		// the whole units table).
		pw := strings.TrimSuffix(w, " AND id_hash = $4")
		if l == levelConv {
			pw += " AND " + group
		}
		r.searchRows[l] = "WITH t AS MATERIALIZED (SELECT term, scope_u, grp, data FROM " + r.posts + " WHERE " + pw + " AND term = ANY(" + next(1) + "::text[]))" +
			" SELECT term, scope_u, data FROM t UNION ALL SELECT NULL, u.id_hash, u.data FROM " + r.units + " u" +
			" WHERE u.ns = $1 AND u.id_hash = ANY(ARRAY(SELECT c.id_hash FROM " + r.conv + " c WHERE " +
			strings.NewReplacer("ns =", "c.ns =", "scope_t", "c.scope_t", "scope_u", "c.scope_u", "id_hash", "c.id_hash").Replace(w) +
			" AND (c.scope_u, " + groupSQL("c.convno") + ") IN (SELECT DISTINCT scope_u, grp FROM t)))"
		r.dated[l] = "SELECT c.id_key, d.data FROM " + r.days + " d JOIN " + r.conv + " c ON c.id_hash = d.id_hash AND c.ns = d.ns WHERE " +
			strings.NewReplacer("ns =", "d.ns =", "scope_t", "d.scope_t", "scope_u", "d.scope_u", "id_hash", "d.id_hash").Replace(w) +
			" AND d.day >= " + next(1) + " AND d.day <= " + next(2)
	}
	return r
}

// Posting rows (version 5). The postings of a user's conversations are
// kept in groups: conversation n of a user (its number, r.conv's convno,
// given when it is first indexed: one more than the user's greatest)
// is in group groupOf(n) (postGroup conversations a group), and a posting row holds a term's postings
// of one group's conversations in one chunk (indexkit.ChunkSize of each
// conversation's messages), each entry postEntrySize bytes: the
// conversation's number, the message's Seq and the term's count, all
// big-endian. A user's search reads a row per term and group that has
// it, not per conversation: a user with a thousand conversations that
// all hold a query's words costs a thousand-odd rows of its postings
// instead of thirteen thousand, on pages of their own.
//
// Conversations of a group share rows, and their writes run at once
// (each under its own identity's lock): every transaction locks the
// posting rows it changes in one order — (ns, scope_u, grp, term, chunk):
// an append's statements go by group in that order, each inserting its
// rows in (term, chunk) order (postRows.queue, upPosts), and a removal
// first locks the rows it will change in that order (the SELECT … FOR
// UPDATE before its DELETE and UPDATE; ForgetScope locks those of a
// whole chunk of identities at once, lockPostsOf; a prefix removal reads
// its rows FOR UPDATE in order, groupRows), and a reindex, which removes
// and adds, does both in one ordered upsert (upStrip) — so no two wait
// for each other in a cycle. Numbering a new conversation takes its user's
// advisory lock (userLock) before it reads the greatest number, with no
// posting row held yet.
const (
	postGroup     = 8
	postStride    = 32
	postEntrySize = 4 + 8 + 4
)

// groupOf is conversation n's group: of each postGroup·postStride
// consecutive numbers, the postGroup equal modulo postStride, so that
// the postStride newest conversations of a user — those most likely to
// be written at the same moment — are in groups of their own and share
// no row (a user with a thousand conversations has 128 groups).
func groupOf(n int32) int32 {
	return n/(postGroup*postStride)*postStride + n%postStride
}

// groupSQL is groupOf in SQL, of the integer expression col.
func groupSQL(col string) string {
	st := strconv.Itoa(postStride)
	return "(" + col + " / " + strconv.Itoa(postGroup*postStride) + " * " + st + " + " + col + " % " + st + ")"
}

// groupEntries converts indexkit postings (Seq and count, little-endian)
// of conversation convno into posting-row entries.
func groupEntries(data []byte, convno int32) []byte {
	n := len(data) / 12
	out := make([]byte, 0, n*postEntrySize)
	for i := 0; i+12 <= len(data); i += 12 {
		out = binary.BigEndian.AppendUint32(out, uint32(convno))
		out = binary.BigEndian.AppendUint64(out, binary.LittleEndian.Uint64(data[i:]))
		out = binary.BigEndian.AppendUint32(out, binary.LittleEndian.Uint32(data[i+8:]))
	}
	return out
}

// userLock is the advisory lock of the numbering of k's user's
// conversations (newConvNumber).
func (s *Store) userLock(k ident) int64 {
	i := strings.IndexByte(k.key, ':')
	j := i + 1 + strings.IndexByte(k.key[i+1:], ':')
	return lockKey("recall-user", s.prefix, k.key[:j+1])
}

// WithRecallIndex turns on the recall index of the tables under the
// prefix (store.RecallSearcher; package indexkit): once any Store opened
// them with it, every Store of this build writing them — in any process,
// with the option or without — keeps the index in the transactions of its
// writes, and a memories.Recall over any of them with the default index
// searches the database instead of building an index in its process. It
// stays on. Messages stored before are indexed in the background, a
// conversation per transaction, by every Store of the database that saw
// the index incomplete (each resumes where the rows show the work
// stopped); until then SearchRecall returns store.ErrRecallNotReady and
// Recall indexes in process. It is off by default because an Append then
// takes two round trips instead of one and writes its messages' postings
// (about three times the rows' bytes); see the package documentation, The
// recall index.
func WithRecallIndex() Option {
	return func(c *config) error {
		c.recall = true
		return nil
	}
}

// derivedKey reports whether the identity key names a derived identity
// (storekit.Derived: memstack's own, such as a user's facts or a recall
// journal), which the index leaves out: a search never counts or returns
// one, as memories.Recall's in-process index never holds one.
func derivedKey(key string) bool {
	id, err := memstack.ParseKey(key)
	return err == nil && storekit.Derived(id)
}

// scopeHashes returns the hashes of the tenant and user scopes of the
// identity key (tenant:user:conversation, each part escaped so it holds
// no ':'): SHA-256 of "tenant:" and of "tenant:user:", the key prefixes of
// store.Scope.
func scopeHashes(key string) (t, u []byte) {
	i := strings.IndexByte(key, ':')
	j := i + 1 + strings.IndexByte(key[i+1:], ':')
	ht, hu := sha256.Sum256([]byte(key[:i+1])), sha256.Sum256([]byte(key[:j+1]))
	return ht[:], hu[:]
}

// scopeArgs returns the search statements' level and the arguments of
// its scope for in.
func (s *Store) scopeArgs(in store.RecallScope) (int, []any) {
	if in.Conversation != nil {
		k := identOf(*in.Conversation)
		t, u := scopeHashes(k.key)
		return levelConv, []any{s.ns, t, u, k.hash}
	}
	p := in.Scope.KeyPrefix()
	t := sha256.Sum256([]byte(p[:strings.IndexByte(p, ':')+1]))
	if in.Scope.AllUsers {
		return levelTenant, []any{s.ns, t[:]}
	}
	u := sha256.Sum256([]byte(p))
	return levelUser, []any{s.ns, t[:], u[:]}
}

// errCorruptIndex wraps store.ErrCorrupt for an index row that does not
// decode (not a message: the index is rebuilt from the messages).
var errCorruptIndex = fmt.Errorf("%w (an index row, not a message)", store.ErrCorrupt)

// sqlstateDivisionByZero is the guard's failure: the index is on.
const sqlstateDivisionByZero = "22012"

// recallLock is the advisory lock that orders the guard against the
// enable: a guarded write holds it shared until it commits; the enable
// takes it exclusively, so it waits for every guarded write in flight
// and then reads (in a new statement, a new snapshot) what they wrote.
func (s *Store) recallLock() int64 { return lockKey("recall", s.prefix) }

// writeGuarded is every write that keeps the index: indexed, the
// indexed way, while this Store knows the index on; else one write
// (s.write) of lock's statements (the identities' locks), the guard (the
// recall lock shared, then r.guard) and plain's statements — run again
// as indexed when the guard finds the index on.
func (s *Store) writeGuarded(ctx context.Context, indexed func() error, lock, plain func(b *pgx.Batch)) error {
	if s.indexOn.Load() {
		return indexed()
	}
	err := s.write(ctx, func(b *pgx.Batch) {
		lock(b)
		b.Queue("SELECT pg_advisory_xact_lock_shared($1)", s.recallLock())
		b.Queue(s.q.recall.guard)
		plain(b)
	})
	if s.indexTurnedOn(err) {
		return indexed()
	}
	return err
}

// indexTurnedOn reports whether err is the guard's failure (r.guard):
// the write did not index, and the index is on. It records that the index
// is on, so the write runs again the indexed way.
func (s *Store) indexTurnedOn(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == sqlstateDivisionByZero {
		s.indexOn.Store(true)
		return true
	}
	return false
}

// indexRows queues in b the statements that append w's entries (and the
// days of the units it opened, whose Seqs are among seqs, dated at) to
// the rows of k, conversation number convno of its user, in namespace
// ns, then the state st. Its postings go to posts when it is not nil
// (queued by its queue, with other conversations' of a transaction),
// else at once.
func (s *Store) indexRows(b *pgx.Batch, ns string, k ident, convno int32, w indexkit.Writes, seqs []int64, at []time.Time, st indexkit.Conv, posts *postRows) {
	r := &s.q.recall
	t, u := scopeHashes(k.key)
	if len(w.Units) > 0 {
		chunks, data := make([]int64, len(w.Units)), make([][]byte, len(w.Units))
		for i, c := range w.Units {
			chunks[i], data[i] = c.Chunk, c.Data
		}
		b.Queue(r.upUnits, k.hash, ns, chunks, data)
	}
	if len(w.Terms) > 0 {
		own := posts
		if own == nil {
			own = &postRows{}
		}
		own.add(ns, t, u, convno, w.Terms)
		if posts == nil {
			own.queue(b, r)
		}
	}
	if rows := indexkit.DayRows(w.Opened, seqs, at); len(rows) > 0 {
		days, chunks, data := make([]int32, len(rows)), make([]int64, len(rows)), make([][]byte, len(rows))
		for i, d := range rows {
			days[i], chunks[i], data[i] = d.Day, d.Chunk, d.Data
		}
		b.Queue(r.upDays, ns, t, u, k.hash, days, chunks, data)
	}
	state, _ := st.MarshalBinary()
	b.Queue(r.writeState, k.hash, ns, t, u, k.key, state, convno)
}

// postRows gathers the postings a transaction appends, by posting row,
// so that each row is written once by one statement per group however
// many of the group's conversations the transaction indexes (a row
// updated again in one transaction leaves a dead version each time).
type postRows struct {
	groups []*postGroupRows
	byKey  map[string]*postGroupRows
}

// postGroupRows are one group's rows of a transaction.
type postGroupRows struct {
	ns     string
	t, u   []byte
	grp    int32
	terms  []string
	chunks []int64
	data   [][]byte
	at     map[termChunk]int
	strip  [][]byte // numbers (BE) whose entries the rows lose first
}

// termChunk names a posting row of a group.
type termChunk struct {
	term  string
	chunk int64
}

// group returns the rows of conversation convno's group.
func (p *postRows) group(ns string, t, u []byte, convno int32) *postGroupRows {
	key := ns + "\x00" + string(u) + "\x00" + strconv.Itoa(int(groupOf(convno)))
	g := p.byKey[key]
	if g == nil {
		if p.byKey == nil {
			p.byKey = map[string]*postGroupRows{}
		}
		g = &postGroupRows{ns: ns, t: t, u: u, grp: groupOf(convno), at: map[termChunk]int{}}
		p.byKey[key] = g
		p.groups = append(p.groups, g)
	}
	return g
}

// row returns the index of the row (term, chunk) in g, added if new.
func (g *postGroupRows) row(term string, chunk int64) int {
	k := termChunk{term, chunk}
	i, ok := g.at[k]
	if !ok {
		i = len(g.terms)
		g.at[k] = i
		g.terms, g.chunks, g.data = append(g.terms, term), append(g.chunks, chunk), append(g.data, []byte{})
	}
	return i
}

// add adds the postings of conversation convno of the user with scope
// hashes t and u.
func (p *postRows) add(ns string, t, u []byte, convno int32, terms []indexkit.TermChunk) {
	g := p.group(ns, t, u, convno)
	for _, c := range terms {
		i := g.row(c.Term, c.Chunk)
		g.data[i] = append(g.data[i], groupEntries(c.Data, convno)...)
	}
}

// strip makes the rows (terms, chunks) of conversation convno's group
// lose its entries before they get the ones added (a reindex).
func (p *postRows) strip(ns string, t, u []byte, convno int32, terms []string, chunks []int64) {
	g := p.group(ns, t, u, convno)
	for i := range terms {
		g.row(terms[i], chunks[i])
	}
	g.strip = append(g.strip, binary.BigEndian.AppendUint32(nil, uint32(convno)))
}

// queue queues the statements (upPosts) that append the rows gathered:
// by group in the order of (ns, scope_u, grp), each group's rows in the
// order of (term, chunk) — the order every writer locks posting rows in.
func (p *postRows) queue(b *pgx.Batch, r *recallSQL) {
	slices.SortFunc(p.groups, func(x, y *postGroupRows) int {
		return cmp.Or(strings.Compare(x.ns, y.ns), bytes.Compare(x.u, y.u), cmp.Compare(x.grp, y.grp))
	})
	for _, g := range p.groups {
		if len(g.strip) == 0 {
			b.Queue(r.upPosts, g.ns, g.t, g.u, g.grp, g.terms, g.chunks, g.data)
			continue
		}
		b.Queue(r.upStrip, g.ns, g.t, g.u, g.grp, g.terms, g.chunks, g.data, g.strip)
		b.Queue(r.deleteEmpty, g.ns, g.t, g.u, g.grp, g.terms, g.chunks)
	}
	p.groups, p.byKey = nil, nil
}

// numbering is a transaction's numbering of new conversations: the next
// number of each user it numbered one of, and the users' numbering locks
// it holds.
type numbering struct {
	next   map[string]int32 // by scope_u
	locked map[int64]bool   // userLock keys
}

func newNumbering() *numbering {
	return &numbering{next: map[string]int32{}, locked: map[int64]bool{}}
}

// convNumber returns k's number in its user (namespace ns): its index
// row's, else a new one (newConvNumber), read through q.
func (s *Store) convNumber(ctx context.Context, q querier, ns string, k ident, nb *numbering) (int32, error) {
	var state []byte
	var n *int32
	err := scanOne(ctx, q, s.q.recall.readState, []any{k.hash, ns}, &state, &n)
	if err == nil && n != nil {
		return *n, nil
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("recall index: reading the number of %s: %w", k.key, err)
	}
	return s.newConvNumber(ctx, q, ns, k, nb)
}

// newConvNumber gives k a number in its user (namespace ns): one more
// than the greatest of the user's conversations (0 for its first), read
// through q, or than the last given in this transaction (nb.next).
// Before it reads, the transaction holds the user's numbering lock
// (userLock; taken here unless nb says it is held), so no number is given
// twice: the transaction holds no posting row yet (its postings are
// written after), so it waits for no one who waits for it; a transaction
// that numbers conversations of several users (appendIndexed) takes
// their locks before, in order.
func (s *Store) newConvNumber(ctx context.Context, q querier, ns string, k ident, nb *numbering) (int32, error) {
	t, u := scopeHashes(k.key)
	n, ok := nb.next[string(u)]
	if !ok {
		if l := s.userLock(k); !nb.locked[l] {
			rows, err := q.Query(ctx, "SELECT pg_advisory_xact_lock($1)", l)
			if err == nil {
				rows.Close()
				err = rows.Err()
			}
			if err != nil {
				return 0, fmt.Errorf("recall index: numbering %s: %w", k.key, err)
			}
			nb.locked[l] = true
		}
		var got int64
		if err := scanOne(ctx, q, s.q.recall.nextConv, []any{ns, t, u}, &got); err != nil {
			return 0, fmt.Errorf("recall index: numbering %s: %w", k.key, err)
		}
		if got > math.MaxInt32 {
			got = math.MaxInt32
		}
		n = int32(got)
	}
	if n == math.MaxInt32 {
		return 0, fmt.Errorf("recall index: numbering %s: its user has %d conversations numbered, as many as the index holds", k.key, n)
	}
	nb.next[string(u)] = n + 1
	return n, nil
}

// indexPart is one identity's messages of an indexed append.
type indexPart struct {
	k      ident
	unit   string
	bodies [][]byte
	system []bool
	index  []indexkit.Message
}

// appendIndexed stores parts (their identities' locks, sorted, are locks)
// as Append and AppendBatches do, with their index entries, in one
// transaction of two round trips (see The recall index above): the
// first inserts the messages and reads the identities' index states, the
// second appends the entries and commits. The outcome of a transaction
// whose reply was lost is unknown, as write's.
func (s *Store) appendIndexed(ctx context.Context, locks []int64, parts []indexPart, at time.Time) error {
	return s.writeTx(ctx, func(conn *pgx.Conn, b *pgx.Batch) (func(b *pgx.Batch) error, error) {
		r := &s.q.recall
		for _, l := range locks {
			b.Queue("SELECT pg_advisory_xact_lock($1)", l)
		}
		var on bool
		b.Queue(r.readMeta).QueryRow(func(row pgx.Row) error {
			var complete bool
			return row.Scan(&on, &complete)
		})
		// Each identity's state and count, before its appends.
		type conv struct {
			k      ident
			state  []byte
			convno *int32
			count  int64
			seqs   []int64
			msgs   []indexkit.Message
			system []bool
		}
		var convs []*conv
		byKey := map[string]*conv{}
		for _, p := range parts {
			if byKey[p.k.key] != nil {
				continue
			}
			c := &conv{k: p.k}
			byKey[p.k.key] = c
			convs = append(convs, c)
			b.Queue(r.readState, p.k.hash, s.ns).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					if err := rows.Scan(&c.state, &c.convno); err != nil {
						return err
					}
				}
				return rows.Err()
			})
			b.Queue(r.count, p.k.hash, s.ns).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					if err := rows.Scan(&c.count); err != nil {
						return err
					}
				}
				return rows.Err()
			})
		}
		for _, p := range parts {
			c := byKey[p.k.key]
			var got []int64
			n := len(p.bodies)
			collect := func(rows pgx.Rows) error {
				for rows.Next() {
					var seq int64
					if err := rows.Scan(&seq); err != nil {
						return err
					}
					got = append(got, seq)
				}
				if err := rows.Err(); err != nil {
					return err
				}
				if len(got) == n {
					// Every message of the part was stored (a keyed unit
					// already stored stores none).
					c.seqs = append(c.seqs, got...)
					c.msgs = append(c.msgs, p.index...)
				}
				return nil
			}
			first, rest, update := r.appendFirst, r.insertMessage, s.q.updateConv
			args := []any{p.k.hash, s.ns, p.k.key, p.system[0], p.bodies[0]}
			if p.unit != "" {
				first, rest, update = r.appendKeyed, r.insertAfter, s.q.updateAfter
				args = append(args, p.unit)
			}
			b.Queue(first, args...).Query(collect)
			for i := 1; i < n; i++ {
				b.Queue(rest, p.k.hash, s.ns, p.k.key, p.system[i], p.bodies[i]).Query(collect)
			}
			b.Queue(update, p.k.hash, s.ns, p.k.key, n)
		}
		return func(b *pgx.Batch) error {
			if !on {
				return nil
			}
			nb := newNumbering()
			var posts postRows
			defer posts.queue(b, r)
			// The numbering locks of the users with a conversation to
			// number, taken first, in order: taken as each conversation
			// comes, in the parts' order, two AppendBatches over the same
			// users in two orders would wait for each other.
			var numbering []int64
			for _, c := range convs {
				if len(c.seqs) > 0 && !derivedKey(c.k.key) && (c.state == nil && c.count == 0 || c.state != nil && c.convno == nil) {
					numbering = append(numbering, s.userLock(c.k))
				}
			}
			slices.Sort(numbering)
			for _, l := range slices.Compact(numbering) {
				if _, err := conn.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", l); err != nil {
					return err
				}
				nb.locked[l] = true
			}
			for _, c := range convs {
				if len(c.seqs) == 0 || derivedKey(c.k.key) {
					continue
				}
				var st indexkit.Conv
				var convno int32
				switch {
				case c.state == nil && c.count > 0:
					// Stored before the index: the backfill's.
					continue
				case c.state == nil:
					st = indexkit.NewConv()
					var err error
					if convno, err = s.newConvNumber(ctx, conn, s.ns, c.k, nb); err != nil {
						return err
					}
				case c.convno == nil:
					// A state with no number (not written by this
					// version): indexed afresh.
					if err := s.reindex(ctx, conn, b, s.ns, c.k, nb, &posts); err != nil {
						return err
					}
					continue
				default:
					convno = *c.convno
					if err := st.UnmarshalBinary(c.state); err != nil {
						// A state that does not decode is rebuilt from the
						// messages, the new ones included.
						if err := s.reindex(ctx, conn, b, s.ns, c.k, nb, &posts); err != nil {
							return err
						}
						continue
					}
				}
				w, err := st.Add(c.seqs, c.msgs)
				if err != nil {
					return fmt.Errorf("recall index: %w", err)
				}
				times := make([]time.Time, len(c.seqs))
				for i := range times {
					times[i] = at
				}
				s.indexRows(b, s.ns, c.k, convno, w, c.seqs, times, st, &posts)
			}
			return nil
		}, nil
	})
}

// writeTx runs a transaction of two batches on one connection, at read
// committed, retried as write retries: first's statements (after BEGIN),
// whose callbacks scan their results, then the statements the function
// first returns queues (it may also query conn, inside the transaction)
// and COMMIT. Errors and the unknown outcome of a lost reply are as
// write's.
func (s *Store) writeTx(ctx context.Context, first func(conn *pgx.Conn, b *pgx.Batch) (func(b *pgx.Batch) error, error)) error {
	return s.retry(ctx, func() error {
		pc, err := s.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer pc.Release()
		conn := pc.Conn()
		b := &pgx.Batch{}
		b.BeginTx(pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		then, err := first(conn, b)
		if err != nil {
			return err
		}
		br := conn.SendBatch(ctx, b)
		tx := br.Tx()
		err = br.Close()
		if err == nil {
			b2 := &pgx.Batch{}
			if err = then(b2); err == nil {
				b2.Queue("COMMIT")
				err = conn.SendBatch(ctx, b2).Close()
				if err == nil {
					// Committed: tx does not know it (the COMMIT was not
					// its own), so no Rollback, which would send a
					// ROLLBACK and could fail after the commit.
					return nil
				}
				if mayHaveCommitted(err) {
					err = fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
				}
			}
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if rerr := tx.Rollback(rctx); err == nil && rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			err = rerr
		}
		return err
	})
}

// interactive runs fn in a read committed transaction of its own
// connection, retried as write retries; a COMMIT whose reply was lost
// leaves the outcome unknown (store.ErrOutcomeUnknown).
func (s *Store) interactive(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.retry(ctx, func() error {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return err
		}
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			_ = tx.Rollback(rctx)
		}()
		if err := fn(tx); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			if mayHaveCommitted(err) {
				return fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
			}
			return err
		}
		return nil
	})
}

// querier runs a query: a connection or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// indexed reports, in tx, whether k's rows are to be kept in the index:
// the index is on and k has an index state, or had no messages (a
// conversation that predates the index is the backfill's). It returns the
// state (NewConv for a new one); a state that does not decode is
// ErrCorrupt.
func (s *Store) indexed(ctx context.Context, tx querier, k ident) (on bool, st indexkit.Conv, ok bool, err error) {
	r := &s.q.recall
	var complete bool
	if err := scanOne(ctx, tx, r.readMeta, nil, &on, &complete); err != nil {
		return false, st, false, fmt.Errorf("recall index: reading whether it is on: %w", err)
	}
	if !on || derivedKey(k.key) {
		return on, st, false, nil
	}
	var data []byte
	found := false
	var convno *int32
	if err := scanOne(ctx, tx, r.readState, []any{k.hash, s.ns}, &data, &convno); err == nil {
		found = true
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return true, st, false, fmt.Errorf("recall index: reading the state of %s: %w", k.key, err)
	}
	if found {
		if err := st.UnmarshalBinary(data); err != nil {
			return true, st, true, fmt.Errorf("%w: recall index: the state of %s: %w", errCorruptIndex, k.key, err)
		}
		return true, st, true, nil
	}
	var count int64
	if err := scanOne(ctx, tx, r.count, []any{k.hash, s.ns}, &count); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return true, st, false, fmt.Errorf("recall index: reading the message count: %w", err)
	}
	return true, indexkit.NewConv(), count == 0, nil
}

// scanOne scans the first row of query into dest: pgx.ErrNoRows if
// there is none.
func scanOne(ctx context.Context, q querier, query string, args []any, dest ...any) error {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// reindex queues in b the statements that index k's stored messages
// afresh, in namespace ns (read now through q, in the transaction): Rewrite, a corrupt
// index, and the backfill. A stored message that does not decode is left
// out (it cannot be shown either).
func (s *Store) reindex(ctx context.Context, q querier, b *pgx.Batch, ns string, k ident, nb *numbering, posts *postRows) error {
	if derivedKey(k.key) {
		for _, d := range s.q.recall.deleteConv {
			b.Queue(d, k.hash, ns)
		}
		return nil // never indexed: its messages are not read
	}
	if nb == nil {
		nb = newNumbering()
	}
	// Its number, kept (read before the deletes below run).
	convno, err := s.convNumber(ctx, q, ns, k, nb)
	if err != nil {
		return err
	}
	// Its group's rows with its entries (only its own writes, which hold
	// its identity's lock, add entries of its number): they lose them in
	// the upsert that appends its new ones (postRows.strip), locked in
	// order with the others.
	t, u := scopeHashes(k.key)
	rows, err := q.Query(ctx, s.q.recall.ownRows, ns, t, u, groupOf(convno), convno)
	if err != nil {
		return fmt.Errorf("recall index: reading the postings of %s: %w", k.key, err)
	}
	var terms []string
	var chunks []int64
	var term string
	var chunk int64
	if _, err := pgx.ForEachRow(rows, []any{&term, &chunk}, func() error {
		terms, chunks = append(terms, term), append(chunks, chunk)
		return nil
	}); err != nil {
		return fmt.Errorf("recall index: reading the postings of %s: %w", k.key, err)
	}
	for _, d := range s.q.recall.deleteConvRows {
		b.Queue(d, k.hash, ns)
	}
	id, err := memstack.ParseKey(k.key)
	if err != nil {
		return fmt.Errorf("recall index: %w", err)
	}
	rows, err = q.Query(ctx, s.q.recall.readMessages, k.hash, ns, k.key)
	if err != nil {
		return fmt.Errorf("recall index: reading the messages of %s: %w", k.key, err)
	}
	var seqs []int64
	var msgs []llms.ChatMessage
	var at []time.Time
	var seq int64
	var body []byte
	_, err = pgx.ForEachRow(rows, []any{&seq, &body}, func() error {
		if rec, err := storekit.DecodeRecord(id, seq, body); err == nil {
			seqs, msgs, at = append(seqs, seq), append(msgs, rec.Message), append(at, rec.Time)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recall index: reading the messages of %s: %w", k.key, err)
	}
	st := indexkit.NewConv()
	w, err := st.Add(seqs, indexkit.Prepare(msgs))
	if err != nil {
		return fmt.Errorf("recall index: %w", err)
	}
	own := posts
	if own == nil {
		own = &postRows{}
	}
	own.strip(ns, t, u, convno, terms, chunks)
	s.indexRows(b, ns, k, convno, w, seqs, at, st, own)
	if posts == nil {
		own.queue(b, &s.q.recall)
	}
	return nil
}

// sendAll sends b through q and reads every result.
func sendAll(ctx context.Context, q querier, b *pgx.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	return q.SendBatch(ctx, b).Close()
}

// trimIndex takes the messages a prefix removal removed (non-system, Seq
// <= through) out of k's index, in tx, after the removal: the chunks they
// fill are deleted, the one they share with later messages filtered, and
// the state recomputed from the entries left. Rows that do not decode
// make it index the conversation afresh.
func (s *Store) trimIndex(ctx context.Context, tx pgx.Tx, k ident, st indexkit.Conv, through int64) error {
	b := &pgx.Batch{}
	err := s.trimIndexRows(ctx, tx, b, k, st, through)
	if errors.Is(err, store.ErrCorrupt) {
		b = &pgx.Batch{}
		err = s.reindex(ctx, tx, b, s.ns, k, nil, nil)
	}
	if err != nil {
		return err
	}
	return sendAll(ctx, tx, b)
}

func (s *Store) trimIndexRows(ctx context.Context, tx pgx.Tx, b *pgx.Batch, k ident, st indexkit.Conv, through int64) error {
	r := &s.q.recall
	convno, err := s.convNumber(ctx, tx, s.ns, k, newNumbering())
	if err != nil {
		return err
	}
	chunks, err := blobs[int64](ctx, tx, r.unitChunks, k.hash, s.ns)
	if err != nil {
		return fmt.Errorf("recall index: reading unit entries: %w", err)
	}
	var all []byte
	emptied, prefix := int64(-1), true
	last := int64(-1) // the last chunk the removal changed
	for _, c := range chunks {
		kept, err := indexkit.DropThrough(c.data, false, through)
		if err != nil {
			return fmt.Errorf("%w: recall index of %s, chunk %d: %w", errCorruptIndex, k.key, c.key, err)
		}
		all = append(all, kept...)
		if len(kept) != len(c.data) {
			last = max(last, c.key)
		}
		switch {
		case len(kept) == len(c.data):
			prefix = false
			continue
		case len(kept) == 0 && prefix:
			emptied = c.key
			continue
		}
		prefix = false
		if len(kept) == 0 {
			b.Queue(r.deleteUnits, k.hash, s.ns, c.key)
		} else {
			b.Queue(r.setUnits, k.hash, s.ns, c.key, kept)
		}
	}
	if emptied >= 0 {
		b.Queue(r.deleteThrough, k.hash, s.ns, emptied)
	}
	if last >= 0 {
		// Its postings of the messages removed, out of its group's rows
		// of the chunks they were in.
		if err := s.trimPosts(ctx, tx, b, k, convno, through, last); err != nil {
			return err
		}
	}
	b.Queue(r.deleteDays, k.hash, s.ns, (through+1)/indexkit.DaySeqs)
	st, err = indexkit.Rebuild(all, st.Msgs)
	if err != nil {
		return fmt.Errorf("%w: recall index of %s: %w", errCorruptIndex, k.key, err)
	}
	var w indexkit.Writes
	var seqs []int64
	var at []time.Time
	// A unit the removal cut now starts at its first message left: filed
	// under that message's day (again, if it opened the unit).
	first, ok, err := indexkit.FirstOpened(all, st)
	if err != nil {
		return fmt.Errorf("%w: recall index of %s: %w", errCorruptIndex, k.key, err)
	}
	if ok {
		var body []byte
		if err := scanOne(ctx, tx, r.readMessage, []any{k.hash, s.ns, first.Seq}, &body); err != nil {
			return fmt.Errorf("recall index: reading the first message left: %w", err)
		}
		id, err := memstack.ParseKey(k.key)
		if err != nil {
			return fmt.Errorf("recall index: %w", err)
		}
		if rec, err := storekit.DecodeRecord(id, first.Seq, body); err == nil {
			w.Opened, seqs, at = []indexkit.Opened{first}, []int64{first.Seq}, []time.Time{rec.Time}
		}
	}
	s.indexRows(b, s.ns, k, convno, w, seqs, at, st, nil)
	return nil
}

// trimPosts queues in b the updates and deletes that take conversation
// convno's postings with Seq <= through out of its group's rows of
// chunks up to last, read (and locked, in order) through tx. An entry
// cut short (a row damaged outside the store) goes too.
func (s *Store) trimPosts(ctx context.Context, tx pgx.Tx, b *pgx.Batch, k ident, convno int32, through, last int64) error {
	r := &s.q.recall
	t, u := scopeHashes(k.key)
	grp := groupOf(convno)
	rows, err := tx.Query(ctx, r.groupRows, s.ns, t, u, grp, last)
	if err != nil {
		return fmt.Errorf("recall index: reading postings: %w", err)
	}
	var setT, delT []string
	var setC, delC []int64
	var setD [][]byte
	var term string
	var chunk int64
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&term, &chunk, &data}, func() error {
		kept := make([]byte, 0, len(data))
		for i := 0; i+postEntrySize <= len(data); i += postEntrySize {
			e := data[i : i+postEntrySize]
			if int32(binary.BigEndian.Uint32(e)) == convno && int64(binary.BigEndian.Uint64(e[4:])) <= through {
				continue
			}
			kept = append(kept, e...)
		}
		switch {
		case len(kept) == len(data):
		case len(kept) == 0:
			delT, delC = append(delT, term), append(delC, chunk)
		default:
			setT, setC, setD = append(setT, term), append(setC, chunk), append(setD, kept)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recall index: reading postings: %w", err)
	}
	if len(setT) > 0 {
		b.Queue(r.setPosts, s.ns, t, u, grp, setT, setC, setD)
	}
	if len(delT) > 0 {
		b.Queue(r.deletePosts, s.ns, t, u, grp, delT, delC)
	}
	return nil
}

// blobRow is a row of a key and a blob value.
type blobRow[K any] struct {
	key  K
	data []byte
}

// blobs runs query and returns its (key, blob) rows.
func blobs[K any](ctx context.Context, q querier, query string, args ...any) ([]blobRow[K], error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []blobRow[K]
	var row blobRow[K]
	_, err = pgx.ForEachRow(rows, []any{&row.key, &row.data}, func() error {
		out = append(out, row)
		row.data = nil // Scan allocates a fresh slice for the next row
		return nil
	})
	return out, err
}

// removeIndexed is RemovePrefix and Rewrite with the index kept: in one
// transaction, under the identity's lock, the removal (the statement
// removal, which returns how many messages it removed), the index trimmed
// or rebuilt, then more (Rewrite's appends) and, when rebuild is set, the
// conversation indexed afresh from what the transaction left.
func (s *Store) removeIndexed(ctx context.Context, k ident, removal string, through int64, more func(b *pgx.Batch), appends, rebuild bool) (int64, error) {
	var removed int64
	err := s.interactive(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.identityLock(k)); err != nil {
			return err
		}
		on, st, ok, err := s.indexed(ctx, tx, k)
		corrupt := errors.Is(err, store.ErrCorrupt)
		if err != nil && !corrupt {
			return err
		}
		if err := scanOne(ctx, tx, removal, []any{k.hash, s.ns, k.key, through}, &removed); err != nil {
			return err
		}
		b := &pgx.Batch{}
		if more != nil {
			more(b)
		}
		if err := sendAll(ctx, tx, b); err != nil {
			return err
		}
		if !on || !ok && !corrupt {
			return nil
		}
		if removed == 0 && !appends {
			return nil // nothing changed (sqlitestore's early return)
		}
		if rebuild || corrupt {
			b := &pgx.Batch{}
			if err := s.reindex(ctx, tx, b, s.ns, k, nil, nil); err != nil {
				return err
			}
			return sendAll(ctx, tx, b)
		}
		if removed == 0 {
			return nil
		}
		return s.trimIndex(ctx, tx, k, st, through)
	})
	return removed, err
}

// queueDeleteIndex queues the deletes of k's index rows: in this store's
// namespace (Clear), or in every namespace (Forget).
// The posting rows they change are locked first, in order (see Posting
// rows).
func (s *Store) queueDeleteIndex(b *pgx.Batch, k ident, everyNamespace bool) {
	if everyNamespace {
		for _, d := range s.q.recall.deleteAll {
			b.Queue(d, k.hash)
		}
		return
	}
	for _, d := range s.q.recall.deleteConv {
		b.Queue(d, k.hash, s.ns)
	}
}

// backfillBatch is how many conversations one backfill pass lists.
// afterBackfillTx, if not nil, is called after each conversation the
// backfill indexed (tests stop a backfill part-way with it).
var afterBackfillTx func()

// backfill indexes every conversation of the tables (every namespace)
// with messages and no index state — those stored before the index was
// turned on — one transaction each, under the identity's lock, then
// records the index complete. Appends meanwhile index the conversations
// that have a state (or had no messages) and leave the others to it.
// Several processes may run it at once: a conversation another indexed
// meanwhile is seen to have a state and skipped. It stops when ctx is
// done or a transaction fails; any Store that opens the tables later
// starts it again, and it resumes where the rows show it stopped.
func (s *Store) backfill(ctx context.Context) error {
	r := &s.q.recall
	after := [2]any{[]byte{}, ""}
	for {
		rows, err := s.pool.Query(ctx, r.missing, after[0], after[1])
		if err != nil {
			return err
		}
		type conv struct {
			hash []byte
			ns   string
			key  string
		}
		var got []conv
		var c conv
		_, err = pgx.ForEachRow(rows, []any{&c.hash, &c.ns, &c.key}, func() error {
			got = append(got, c)
			c.hash = nil
			return nil
		})
		if err != nil {
			return err
		}
		if len(got) == 0 {
			if _, err := s.pool.Exec(ctx, r.complete); err != nil {
				return err
			}
			s.recallReady.Store(true)
			return nil
		}
		for _, c := range got {
			k := identOfKey(c.key)
			err := s.interactive(ctx, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.identityLock(k)); err != nil {
					return err
				}
				var state []byte
				var convno *int32
				err := scanOne(ctx, tx, r.readState, []any{k.hash, c.ns}, &state, &convno)
				if err == nil {
					return nil // indexed meanwhile
				}
				if !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				// Still stored? (Forgotten or cleared since the listing:
				// nothing to index, and no state row to leave behind.)
				var count int64
				if err := scanOne(ctx, tx, r.count, []any{k.hash, c.ns}, &count); errors.Is(err, pgx.ErrNoRows) || err == nil && count == 0 {
					return nil
				} else if err != nil {
					return err
				}
				b := &pgx.Batch{}
				if err := s.reindex(ctx, tx, b, c.ns, k, nil, nil); err != nil {
					return err
				}
				return sendAll(ctx, tx, b)
			})
			if err != nil {
				return err
			}
			if afterBackfillTx != nil {
				afterBackfillTx()
			}
			after = [2]any{c.hash, c.ns}
		}
	}
}

// startRecall turns the index on when the configuration asks, and starts
// the backfill when the index is on and not complete.
func (s *Store) startRecall(ctx context.Context, enable bool) error {
	r := &s.q.recall
	if enable {
		err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.recallLock()); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, r.enable)
			return err
		})
		if err != nil {
			return fmt.Errorf("pgstore: turning the recall index on (tables with prefix %q on %s): %w", s.prefix, s.addr, err)
		}
	}
	var on, complete bool
	if err := s.pool.QueryRow(ctx, r.readMeta).Scan(&on, &complete); err != nil {
		return fmt.Errorf("pgstore: reading whether the recall index is on (tables with prefix %q on %s): %w", s.prefix, s.addr, err)
	}
	s.indexOn.Store(on)
	if !on {
		return nil
	}
	if complete {
		s.recallReady.Store(true)
		return nil
	}
	bctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stopBackfill = func() { cancel(); <-done }
	go func() {
		defer close(done)
		if err := s.backfill(bctx); err != nil && bctx.Err() == nil {
			// Retried by the next Store that opens the tables;
			// SearchRecall names it meanwhile.
			s.backfillErr.Store(&err)
		}
	}()
	return nil
}

// ready reports whether the index is on and complete, reading the meta
// row until it is (it never becomes off or incomplete again).
func (s *Store) ready(ctx context.Context) (bool, error) {
	if s.recallReady.Load() {
		return true, nil
	}
	var on, complete bool
	err := s.retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.q.recall.readMeta).Scan(&on, &complete)
	})
	if err != nil {
		return false, err
	}
	if on {
		s.indexOn.Store(true)
	}
	if on && complete {
		s.recallReady.Store(true)
	}
	return on && complete, nil
}

// checkRecall checks a RecallSearcher call's scope and the index's
// readiness; it returns the description of the call for errors.
func (s *Store) checkRecall(ctx context.Context, op string, in store.RecallScope) (string, error) {
	what := op + " of " + in.String()
	if in.Conversation != nil {
		if err := s.check(ctx, op, *in.Conversation); err != nil {
			return what, err
		}
	} else if err := s.checkScope(ctx, op, in.Scope); err != nil {
		return what, err
	}
	return what, nil
}

// notReady is the error of a search while the index is not complete.
func (s *Store) notReady(ctx context.Context, what string) error {
	ok, err := s.ready(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: %s on %s: %w", what, s.addr, err)
	}
	if ok {
		return nil
	}
	if e := s.backfillErr.Load(); e != nil {
		return fmt.Errorf("pgstore: %s: %w (indexing the older messages stopped: %v; the next Open goes on)", what, store.ErrRecallNotReady, *e)
	}
	return fmt.Errorf("pgstore: %s: %w", what, store.ErrRecallNotReady)
}

// SearchRecall implements store.RecallSearcher, reading in one round trip
// and one snapshot (a read-only repeatable read transaction): the index
// state of every conversation of the scope, the postings of the query's
// terms (one key range each) and the unit entries of the conversations
// they name; then it scores in Go (indexkit.Search). Its cost grows with
// the scope's conversations and the postings of the query's terms, not
// with the messages stored.
func (s *Store) SearchRecall(ctx context.Context, in store.RecallScope, q indexkit.Query) ([]store.RecallHit, error) {
	what, err := s.checkRecall(ctx, "SearchRecall", in)
	if err != nil {
		return nil, err
	}
	if q.K < 1 {
		return nil, fmt.Errorf("%w: pgstore: %s: k=%d: k must be at least 1", store.ErrInvalidArgument, what, q.K)
	}
	if _, err := indexkit.Search(indexkit.Query{Terms: []string{"x"}, Kind: q.Kind, Near: q.Near, K: 1}, nil); err != nil {
		return nil, fmt.Errorf("%w: pgstore: %s: %w", store.ErrInvalidArgument, what, err)
	}
	if err := s.notReady(ctx, what); err != nil {
		return nil, err
	}
	if len(q.Terms) == 0 {
		return nil, nil
	}
	level, args := s.scopeArgs(in)
	var hits []store.RecallHit
	err = s.retry(ctx, func() error {
		var err error
		hits, err = s.searchRecall(ctx, level, args, q)
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrCorrupt) {
			return nil, fmt.Errorf("pgstore: %s: %w", what, err)
		}
		return nil, fmt.Errorf("pgstore: %s on %s: %w", what, s.addr, err)
	}
	return hits, nil
}

func (s *Store) searchRecall(ctx context.Context, level int, args []any, q indexkit.Query) ([]store.RecallHit, error) {
	r := &s.q.recall
	convArgs := args
	termArgs := append(slices.Clone(args), q.Terms)
	at := map[string]int{} // term → its index in q.Terms
	for i, t := range q.Terms {
		at[t] = i
	}
	convs := map[string]*indexkit.ConvData{} // by id_hash
	type numbered struct {
		user   string // scope_u
		convno int32
	}
	byNumber := map[numbered]*indexkit.ConvData{}
	var order []string
	var corrupt error
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	b.Queue(r.searchConvs[level], convArgs...).Query(func(rows pgx.Rows) error {
		var hash, state, user []byte
		var key string
		var convno *int32
		_, err := pgx.ForEachRow(rows, []any{&hash, &key, &state, &convno, &user}, func() error {
			d := &indexkit.ConvData{ID: key, Postings: make([][]byte, len(q.Terms))}
			if err := d.State.UnmarshalBinary(state); err != nil && corrupt == nil {
				corrupt = fmt.Errorf("%w: recall index: the state of %s: %w", errCorruptIndex, key, err)
			}
			if convno == nil && corrupt == nil {
				corrupt = fmt.Errorf("%w: recall index: %s has no number", errCorruptIndex, key)
			}
			convs[string(hash)] = d
			if convno != nil {
				byNumber[numbered{string(user), *convno}] = d
			}
			order = append(order, string(hash))
			return nil
		})
		return err
	})
	b.Queue(r.searchRows[level], termArgs...).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		// A posting row's entries go to their conversations (a
		// conversation-scoped search reads its group's rows: the others'
		// entries are skipped), each as indexkit's posting: Seq and count,
		// little-endian.
		add := func(term, second, data []byte, unit bool) {
			if unit {
				if d := convs[string(second)]; d != nil {
					d.Units = append(d.Units, data...)
				}
				return
			}
			i, ok := at[string(term)]
			if !ok {
				return
			}
			if len(data)%postEntrySize != 0 {
				if corrupt == nil {
					corrupt = fmt.Errorf("%w: recall index: a posting row of %d bytes, not a multiple of %d", errCorruptIndex, len(data), postEntrySize)
				}
				return
			}
			key := numbered{user: string(second)}
			var d *indexkit.ConvData
			for j := 0; j < len(data); j += postEntrySize {
				// Entries come in runs of one conversation's.
				if n := int32(binary.BigEndian.Uint32(data[j:])); j == 0 || n != key.convno {
					key.convno = n
					d = byNumber[key]
				}
				if d != nil {
					d.Postings[i] = binary.LittleEndian.AppendUint64(d.Postings[i], binary.BigEndian.Uint64(data[j+4:]))
					d.Postings[i] = binary.LittleEndian.AppendUint32(d.Postings[i], binary.BigEndian.Uint32(data[j+12:]))
				}
			}
		}
		// A text's raw value is its bytes, and so is a bytea's in binary
		// format (the default query mode): read in place, not copied per
		// row. (The simple protocol sends bytea as text: scanned.)
		fd := rows.FieldDescriptions()
		raw := len(fd) == 3 && fd[1].Format == pgx.BinaryFormatCode && fd[2].Format == pgx.BinaryFormatCode
		var term pgtype.Text
		var second, data []byte
		for rows.Next() {
			if raw {
				v := rows.RawValues()
				add(v[0], v[1], v[2], v[0] == nil)
				continue
			}
			if err := rows.Scan(&term, &second, &data); err != nil {
				return err
			}
			add([]byte(term.String), second, data, !term.Valid)
		}
		return rows.Err()
	})
	b.Queue("COMMIT")
	br := s.pool.SendBatch(ctx, b)
	err := br.Close()
	// The pool's connection goes back with the transaction's end (after
	// the COMMIT, Rollback only releases it).
	if tx := br.Tx(); tx != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		_ = tx.Rollback(rctx)
		cancel()
	}
	if err != nil {
		return nil, err
	}
	if corrupt != nil {
		return nil, corrupt
	}
	data := make([]indexkit.ConvData, 0, len(order))
	for _, h := range order {
		data = append(data, *convs[h])
	}
	// By identity key, as sqlitestore reads them: the scope's totals are
	// float sums, whose last bits follow their order.
	slices.SortFunc(data, func(a, b indexkit.ConvData) int { return strings.Compare(a.ID, b.ID) })
	found, err := indexkit.Search(q, data)
	if err != nil {
		return nil, fmt.Errorf("%w: recall index: %w", errCorruptIndex, err)
	}
	hits := make([]store.RecallHit, len(found))
	for i, h := range found {
		id, err := memstack.ParseKey(h.ID)
		if err != nil {
			return nil, fmt.Errorf("%w: recall index: %w", errCorruptIndex, err)
		}
		hits[i] = store.RecallHit{ID: id, Seq: h.Seq, Score: h.Score, From: h.From, To: h.To}
	}
	return hits, nil
}

var _ store.RecallSearcher = (*Store)(nil)

// RecallDated implements store.RecallSearcher: the day rows of the scope
// in the day range, one statement.
func (s *Store) RecallDated(ctx context.Context, in store.RecallScope, kind indexkit.Kind, from, to int32) ([]store.RecallHit, error) {
	what, err := s.checkRecall(ctx, "RecallDated", in)
	if err != nil {
		return nil, err
	}
	if kind != indexkit.Turns && kind != indexkit.Exchanges {
		return nil, fmt.Errorf("%w: pgstore: %s: unknown unit kind %d", store.ErrInvalidArgument, what, int(kind))
	}
	if from > to {
		return nil, fmt.Errorf("%w: pgstore: %s: days %d to %d: the first is after the last", store.ErrInvalidArgument, what, from, to)
	}
	if err := s.notReady(ctx, what); err != nil {
		return nil, err
	}
	level, args := s.scopeArgs(in)
	args = append(args, from, to)
	seen := map[string][]int64{}
	var keys []string
	err = s.retry(ctx, func() error {
		clear(seen)
		keys = keys[:0]
		rows, err := s.pool.Query(ctx, s.q.recall.dated[level], args...)
		if err != nil {
			return err
		}
		var key string
		var data []byte
		_, err = pgx.ForEachRow(rows, []any{&key, &data}, func() error {
			seqs, err := indexkit.OpenedSeqs(data, kind)
			if err != nil {
				return fmt.Errorf("%w: recall index: the units of a day of %s: %w", errCorruptIndex, key, err)
			}
			if _, ok := seen[key]; !ok {
				keys = append(keys, key)
			}
			seen[key] = append(seen[key], seqs...)
			return nil
		})
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrCorrupt) {
			return nil, fmt.Errorf("pgstore: %s: %w", what, err)
		}
		return nil, fmt.Errorf("pgstore: %s on %s: %w", what, s.addr, err)
	}
	slices.Sort(keys)
	var out []store.RecallHit
	for _, key := range keys {
		id, err := memstack.ParseKey(key)
		if err != nil {
			return nil, fmt.Errorf("pgstore: %s: %w: recall index: %w", what, errCorruptIndex, err)
		}
		seqs := seen[key]
		slices.Sort(seqs)
		for _, seq := range slices.Compact(seqs) {
			out = append(out, store.RecallHit{ID: id, Seq: seq})
		}
	}
	return out, nil
}
