package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/jackc/pgx/v5"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// Rewrite implements store.Rewriter: in one transaction under the
// identity's lock, in one round trip, the messages of id with Seq <=
// through (system ones included) are removed from this store's namespace,
// with reset its state values there are removed and its Clear mark moved
// to a fresh version (as Clear does), and msgs are appended as Append
// appends them. A reader sees the conversation from before or from after;
// a message that cannot be stored, or a done ctx, changes nothing.
func (s *Store) Rewrite(ctx context.Context, id memstack.Identity, through int64, reset bool, msgs ...llms.ChatMessage) (int, error) {
	if err := s.check(ctx, "Rewrite", id); err != nil {
		return 0, err
	}
	at := storekit.AppendTime(ctx)
	if len(msgs) > 0 {
		if err := storekit.CheckTime(at); err != nil {
			return 0, fmt.Errorf("pgstore: Rewrite of identity %q: %w", id.Key(), err)
		}
	}
	bodies, system, err := encodeTurn(msgs, at)
	if err != nil {
		return 0, fmt.Errorf("pgstore: Rewrite of identity %q: %w", id.Key(), err)
	}
	k := identOf(id)
	var removed int64
	more := func(b *pgx.Batch) {
		if reset {
			s.queueReset(b, k)
		}
		s.queueAppend(b, k, "", bodies, system)
	}
	// With the recall index on, the conversation is indexed afresh in the
	// same transaction (O(its messages): Rewrite is rare, AsHistory's
	// wholesale changes).
	indexed := func() (err error) {
		removed, err = s.removeIndexed(ctx, k, s.q.rewrite, through, more, len(bodies) > 0, true)
		return err
	}
	err = s.writeGuarded(ctx, indexed, func(b *pgx.Batch) { s.lockIdentity(b, k) }, func(b *pgx.Batch) {
		b.Queue(s.q.rewrite, k.hash, s.ns, k.key, through).QueryRow(func(r pgx.Row) error { return r.Scan(&removed) })
		more(b)
	})
	if err != nil {
		return 0, s.wrap("Rewrite", k, err)
	}
	return int(removed), nil
}

// scoped is an identity a scope query found.
type scoped struct {
	id   memstack.Identity
	k    ident
	held bool // it holds messages, a state value or a Clear mark
}

// scope returns every identity within sc with a row in the conversations
// or state table of any namespace under the table prefix, ordered by Key,
// read through the scope indexes (see the package documentation, Users)
// by q, which is the pool or a transaction.
func (s *Store) scope(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sc store.Scope) ([]scoped, error) {
	sql := s.q.scopeUser
	if sc.AllUsers {
		sql = s.q.scopeTenant
	}
	rows, err := q.Query(ctx, sql, sc.KeyPrefix())
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (scoped, error) {
		var (
			key  string
			held bool
		)
		if err := r.Scan(&key, &held); err != nil {
			return scoped{}, err
		}
		id, err := memstack.ParseKey(key)
		if err != nil {
			return scoped{}, fmt.Errorf("%w: identity key %q: %w", store.ErrCorrupt, key, err)
		}
		return scoped{id: id, k: identOfKey(key), held: held}, nil
	})
	if err != nil {
		return nil, err
	}
	// By Key, byte for byte, whatever the database's collation.
	sort.Slice(found, func(i, j int) bool { return found[i].k.key < found[j].k.key })
	return found, nil
}

func (s *Store) checkScope(ctx context.Context, op string, sc store.Scope) error {
	if err := s.checkCtx(ctx, fmt.Sprintf("%s(%s)", op, sc)); err != nil {
		return err
	}
	if err := sc.Check(); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return nil
}

func (s *Store) wrapScope(op string, sc store.Scope, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s(%s): %w (%w)", op, sc, ErrClosed, err)
	}
	return fmt.Errorf("pgstore: %s(%s) on %s: %w", op, sc, s.addr, err)
}

// Identities implements store.Users: one statement over the scope
// indexes of the conversations and state tables, every namespace under
// the table prefix.
func (s *Store) Identities(ctx context.Context, sc store.Scope) ([]memstack.Identity, error) {
	if err := s.checkScope(ctx, "Identities", sc); err != nil {
		return nil, err
	}
	var found []scoped
	err := s.retry(ctx, func() error {
		var err error
		found, err = s.scope(ctx, s.pool, sc)
		return err
	})
	if err != nil {
		return nil, s.wrapScope("Identities", sc, err)
	}
	out := []memstack.Identity{}
	for _, f := range found {
		if f.held {
			out = append(out, f.id)
		}
	}
	return out, nil
}

// Export implements store.Users: the identities, their messages and
// their state in every namespace under the table prefix, read in one
// repeatable read, read-only transaction, so the export is one snapshot
// of the store. The export is built in memory.
func (s *Store) Export(ctx context.Context, sc store.Scope) (store.Export, error) {
	if err := s.checkScope(ctx, "Export", sc); err != nil {
		return store.Export{}, err
	}
	var out store.Export
	err := s.retry(ctx, func() error {
		var err error
		out, err = s.export(ctx, sc)
		return err
	})
	if err != nil {
		return store.Export{}, s.wrapScope("Export", sc, err)
	}
	return out, nil
}

func (s *Store) export(ctx context.Context, sc store.Scope) (store.Export, error) {
	out := store.Export{Scope: sc, Identities: []store.IdentityExport{}}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return out, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	found, err := s.scope(ctx, tx, sc)
	if err != nil {
		return out, err
	}
	byKey := map[string]map[string]*store.NamespaceExport{}
	var hashes [][]byte
	for _, f := range found {
		if f.held {
			byKey[f.k.key] = map[string]*store.NamespaceExport{}
			hashes = append(hashes, f.k.hash)
		}
	}
	ns := func(key, name string) *store.NamespaceExport {
		nss, ok := byKey[key]
		if !ok {
			return nil // a hash's row of another key: not ours
		}
		if nss[name] == nil {
			nss[name] = &store.NamespaceExport{Namespace: name, Messages: []store.Record{}, States: map[string]store.State{}}
		}
		return nss[name]
	}
	if len(hashes) > 0 {
		rows, err := tx.Query(ctx, s.q.exportMessages, hashes)
		if err != nil {
			return out, err
		}
		var (
			key, name string
			seq       int64
			body      []byte
		)
		_, err = pgx.ForEachRow(rows, []any{&key, &name, &seq, &body}, func() error {
			ne := ns(key, name)
			if ne == nil {
				return nil
			}
			id, _ := memstack.ParseKey(key) // parsed by scope already
			r, err := storekit.DecodeRecord(id, seq, bytes.Clone(body))
			if err != nil {
				return &decodeError{err}
			}
			ne.Messages = append(ne.Messages, r)
			return nil
		})
		if err != nil {
			return out, err
		}
		var (
			version int64
			value   []byte
			state   string
		)
		rows, err = tx.Query(ctx, s.q.exportStates, hashes)
		if err != nil {
			return out, err
		}
		_, err = pgx.ForEachRow(rows, []any{&key, &name, &state, &version, &value}, func() error {
			ne := ns(key, name)
			if ne == nil {
				return nil
			}
			if state == "" { // the namespace's Clear mark
				ne.Cleared = true
				return nil
			}
			v := bytes.Clone(value)
			if v == nil {
				v = []byte{}
			}
			ne.States[state] = store.State{Value: v, Version: version}
			return nil
		})
		if err != nil {
			return out, err
		}
	}
	for _, f := range found {
		nss, ok := byKey[f.k.key]
		if !ok {
			continue
		}
		ie := store.IdentityExport{Identity: f.id, Namespaces: []store.NamespaceExport{}}
		for _, name := range slices.Sorted(maps.Keys(nss)) {
			ie.Namespaces = append(ie.Namespaces, *nss[name])
		}
		out.Identities = append(out.Identities, ie)
	}
	storekit.SortExport(&out)
	return out, nil
}

// forgetChunk is how many identities ForgetScope removes in one
// transaction.
const forgetChunk = 64

// ForgetScope implements store.Users, in four steps:
//
//  1. one transaction moves the forgotten version of the scope's user's
//     bucket (storekit.ForgetBucket) — for a tenant, of every bucket and the
//     store-wide one — to a fresh version, so every commit that read an
//     absent version of the scope before conflicts;
//  2. one statement finds every identity within scope that has a row
//     under the table prefix (the scope indexes);
//  3. all their rows — messages, conversations rows, state values and
//     Clear marks, every namespace — are removed in transactions of up to
//     64 identities, each holding those identities' advisory locks, taken
//     in ascending order so that two ForgetScopes never deadlock; derived
//     identities (storekit.Derived) go last;
//  4. last, every identity of storekit.DerivedOf for the scope's user (for a
//     tenant, for every user step 2 found) is forgotten as Forget forgets
//     one, found or not: in transactions of up to 64 of them, each under
//     their advisory locks, the forgotten versions of their users'
//     buckets move (in ascending order) and their rows are removed.
//
// Step 4 is what keeps a user's derived state from outliving the forget:
// a commit to a derived identity (the user's facts, from an extraction
// in flight) that read after step 1 and found it empty was not listed in
// step 2. PutState takes the same identity lock, so it either lands
// before step 4, which removes it, or runs after it and conflicts (the
// version it read is older), unless it read after step 4 — and then its
// source messages, which steps 2 and 3 removed, are gone, which a memory
// checks before it commits.
//
// A failure part-way leaves the identities of the transactions that
// committed forgotten and the others whole; calling it again finishes. It
// returns how many identities held anything (messages, a value or a Clear
// mark) — found so in step 2, or, for step 4's, holding rows it removed;
// identities with nothing but an emptied conversations row are removed
// too, uncounted.
func (s *Store) ForgetScope(ctx context.Context, sc store.Scope) (int, error) {
	if err := s.checkScope(ctx, "ForgetScope", sc); err != nil {
		return 0, err
	}
	err := s.write(ctx, func(b *pgx.Batch) {
		if sc.AllUsers {
			b.Queue(s.q.setForgottenEvery)
		} else {
			b.Queue(s.q.setForgotten, bucketName(sc.Tenant, sc.User))
		}
	})
	if err != nil {
		return 0, s.wrapScope("ForgetScope", sc, fmt.Errorf("drawing a forgotten version: %w", err))
	}
	var found []scoped
	err = s.retry(ctx, func() error {
		var err error
		found, err = s.scope(ctx, s.pool, sc)
		return err
	})
	if err != nil {
		return 0, s.wrapScope("ForgetScope", sc, err)
	}
	// The users' derived identities of step 4, found or not; a found one
	// is left to step 4 (with whether it held anything).
	users := map[string]bool{sc.User: !sc.AllUsers}
	for _, f := range found {
		users[f.id.User] = true
	}
	var derived []scoped
	at := map[string]int{}
	for _, u := range slices.Sorted(maps.Keys(users)) {
		if !users[u] {
			continue
		}
		for _, id := range storekit.DerivedOf(sc.Tenant, u) {
			if _, dup := at[id.Key()]; !dup {
				at[id.Key()] = len(derived)
				derived = append(derived, scoped{id: id, k: identOf(id)})
			}
		}
	}
	listed := make([]scoped, 0, len(found))
	for _, f := range found {
		if i, ok := at[f.k.key]; ok {
			derived[i].held = f.held
			continue
		}
		listed = append(listed, f)
	}
	// Derived identities (the user's facts) go last: see storekit.ForgetOrder.
	slices.SortStableFunc(listed, func(a, b scoped) int {
		switch da, db := storekit.Derived(a.id), storekit.Derived(b.id); {
		case da == db:
			return 0
		case da:
			return 1
		}
		return -1
	})
	forgotten := 0
	for chunk := range slices.Chunk(listed, forgetChunk) {
		err := s.write(ctx, func(b *pgx.Batch) {
			s.queueLocks(b, chunk)
			for _, f := range chunk {
				s.queueForget(b, f.k, nil)
			}
		})
		if err != nil {
			return forgotten, s.wrapScope("ForgetScope", sc, fmt.Errorf("removing the rows of identity %q and %d more: %w",
				chunk[0].k.key, len(chunk)-1, err))
		}
		for _, f := range chunk {
			if f.held {
				forgotten++
			}
		}
	}
	for chunk := range slices.Chunk(derived, forgetChunk) {
		var buckets []int
		for _, d := range chunk {
			buckets = append(buckets, storekit.ForgetBucket(d.id.Tenant, d.id.User))
		}
		slices.Sort(buckets)
		buckets = slices.Compact(buckets)
		removed := make([]int64, len(chunk))
		err := s.write(ctx, func(b *pgx.Batch) {
			clear(removed) // a run the server rolled back counted nothing
			s.queueLocks(b, chunk)
			for _, bucket := range buckets {
				b.Queue(s.q.setForgotten, bucketNameOf(bucket))
			}
			for i, d := range chunk {
				s.queueForget(b, d.k, &removed[i])
			}
		})
		if err != nil {
			return forgotten, s.wrapScope("ForgetScope", sc, fmt.Errorf("forgetting the derived identity %q and %d more: %w",
				chunk[0].k.key, len(chunk)-1, err))
		}
		for i, d := range chunk {
			if d.held || removed[i] > 0 {
				forgotten++
			}
		}
	}
	return forgotten, nil
}

// queueLocks queues the advisory locks of the identities of chunk, in
// ascending order and each once, so that transactions taking several
// never deadlock with each other or with a single identity's write.
func (s *Store) queueLocks(b *pgx.Batch, chunk []scoped) {
	locks := make([]int64, len(chunk))
	hashes := make([][]byte, len(chunk))
	for i, f := range chunk {
		locks[i], hashes[i] = s.identityLock(f.k), f.k.hash
	}
	slices.Sort(locks)
	for _, l := range slices.Compact(locks) {
		b.Queue("SELECT pg_advisory_xact_lock($1)", l)
	}
	// Then the recall index's posting rows of their groups, in the order
	// every writer locks them (see Posting rows in recall.go).
	b.Queue(s.q.recall.lockPostsOf, hashes)
}
