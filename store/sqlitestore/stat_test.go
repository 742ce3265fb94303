package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
)

// statRow is one conversation's count and Seq bounds as a query of the
// file gives them.
type statRow struct {
	NS, Identity   string
	Count          int
	FirstSeq, Last int64
}

// countedQuery is what memstack_stat holds; countingQuery computes the
// same from the messages.
const (
	countedQuery  = `SELECT ns, identity, count, first_seq, last_seq FROM memstack_stat ORDER BY ns, identity`
	countingQuery = `SELECT ns, identity, count(*), min(seq), max(seq) FROM memstack_messages GROUP BY ns, identity ORDER BY ns, identity`
)

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func statRows(t *testing.T, db queryer, q string) []statRow {
	t.Helper()
	out, err := readStatRows(db, q)
	require.NoError(t, err)
	return out
}

func readStatRows(db queryer, q string) ([]statRow, error) {
	rows, err := db.QueryContext(context.Background(), q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []statRow{}
	for rows.Next() {
		var r statRow
		if err := rows.Scan(&r.NS, &r.Identity, &r.Count, &r.FirstSeq, &r.Last); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// statOf is the Stat that All's records imply.
func statOf(rs []store.Record) store.Stat {
	if len(rs) == 0 {
		return store.Stat{}
	}
	return store.Stat{Count: len(rs), FirstSeq: rs[0].Seq, LastSeq: rs[len(rs)-1].Seq}
}

// statStores is what the memstack_stat tests write with: two namespaces
// of one file, each through Open, and the first once more through New (a
// Store over a database the test opened).
func statStores(t *testing.T, path string) []*sqlitestore.Store {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	n, err := sqlitestore.New(db, sqlitestore.WithNamespace("a"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close() })
	return []*sqlitestore.Store{
		open(t, path, sqlitestore.WithNamespace("a")),
		open(t, path, sqlitestore.WithNamespace("b")),
		n,
	}
}

// statOp runs one random write on a random conversation through a random
// Store, the way memories use a store: appends, trims, rewrites, clears,
// forgets.
func statOp(ctx context.Context, rng *rand.Rand, ss []*sqlitestore.Store, ids []memstack.Identity, w int) (string, error) {
	s := ss[rng.IntN(len(ss))]
	id := ids[rng.IntN(len(ids))]
	text := fmt.Sprint("w", w)
	msg := func() llms.ChatMessage {
		if rng.IntN(5) == 0 {
			return llms.SystemChatMessage{Content: text}
		}
		return llms.HumanChatMessage{Content: text}
	}
	switch k := rng.IntN(20); {
	case k < 10:
		msgs := make([]llms.ChatMessage, 1+rng.IntN(3))
		for i := range msgs {
			msgs[i] = msg()
		}
		return "Append", s.Append(ctx, id, msgs...)
	case k < 14:
		st, err := s.Stat(ctx, id)
		if err != nil || st.Count == 0 {
			return "Stat", err
		}
		_, err = s.RemovePrefix(ctx, id, st.FirstSeq+rng.Int64N(st.LastSeq-st.FirstSeq+1))
		return "RemovePrefix", err
	case k < 17:
		st, err := s.Stat(ctx, id)
		if err != nil {
			return "Stat", err
		}
		through := []int64{0, st.FirstSeq, (st.FirstSeq + st.LastSeq) / 2, st.LastSeq, math.MaxInt64}[rng.IntN(5)]
		msgs := make([]llms.ChatMessage, rng.IntN(3))
		for i := range msgs {
			msgs[i] = msg()
		}
		_, err = s.Rewrite(ctx, id, through, rng.IntN(2) == 0, msgs...)
		return "Rewrite", err
	case k < 18:
		return "Clear", s.Clear(ctx, id)
	case k < 19:
		return "Forget", s.Forget(ctx, id)
	default:
		_, err := s.ForgetScope(ctx, store.UserScope(id.Tenant, id.User))
		return "ForgetScope", err
	}
}

// TestStatIsCountedInTheFile: after every kind of write, through Open and
// New, memstack_stat holds for each conversation exactly what its
// messages give (count, first and last Seq) and nothing for a conversation
// without messages, and Stat agrees with All.
func TestStatIsCountedInTheFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	ss := statStores(t, path)
	db := rawDB(t, path)
	ids := []memstack.Identity{alice, bob, {Tenant: "acme", User: "alice", Conversation: "c2"}}
	rng := rand.New(rand.NewPCG(1, 2))
	ops := map[string]int{}
	for i := range 200 {
		op, err := statOp(ctx, rng, ss, ids, i)
		require.NoError(t, err, "op %d: %s", i, op)
		ops[op]++
		require.Equal(t, statRows(t, db, countingQuery), statRows(t, db, countedQuery), "after op %d (%s)", i, op)
		for _, s := range ss {
			for _, id := range ids {
				rs, err := s.All(ctx, id)
				require.NoError(t, err)
				st, err := s.Stat(ctx, id)
				require.NoError(t, err)
				require.Equal(t, statOf(rs), st, "after op %d (%s): Stat of %s in %s", i, op, id.Key(), s.Namespace())
			}
		}
	}
	t.Logf("ops: %v", ops)
	for _, op := range []string{"Append", "RemovePrefix", "Rewrite", "Clear", "Forget", "ForgetScope"} {
		assert.Positive(t, ops[op], "the test ran %s", op)
	}
}

// TestStatConsistentWhileWriting: while goroutines write through three
// Stores, a reader that reads memstack_stat and the messages in one read
// transaction (one snapshot of the file) always finds them in agreement,
// and a Store reader that sees the same Stat before and after an All
// finds All agreeing with it.
func TestStatConsistentWhileWriting(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	ss := statStores(t, path)
	db := rawDB(t, path)
	ids := []memstack.Identity{alice, bob}
	stop := make(chan struct{})
	var readers, writers sync.WaitGroup
	snapshots, agreed := 0, 0
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if !assert.NoError(t, err) {
				return
			}
			counted, err1 := readStatRows(tx, countedQuery)
			counting, err2 := readStatRows(tx, countingQuery)
			if !assert.NoError(t, tx.Rollback()) || !assert.NoError(t, err1) || !assert.NoError(t, err2) ||
				!assert.Equal(t, counting, counted, "one snapshot of the file") {
				return
			}
			snapshots++
		}
	})
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, s := range ss {
				for _, id := range ids {
					before, err1 := s.Stat(ctx, id)
					rs, err2 := s.All(ctx, id)
					after, err3 := s.Stat(ctx, id)
					if !assert.NoError(t, errors.Join(err1, err2, err3)) {
						return
					}
					// Seqs are never reused, so a conversation with
					// messages that shows the same Stat before and after
					// had no write in between (an empty one might have
					// been appended to and cleared).
					if before == after && before.Count > 0 {
						if !assert.Equal(t, before, statOf(rs), "Stat and All of %s in %s", id.Key(), s.Namespace()) {
							return
						}
						agreed++
					}
				}
			}
		}
	})
	for w := range 4 {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 60 {
				op, err := statOp(ctx, rng, ss, ids, w*1000+i)
				if !assert.NoError(t, err, "writer %d, op %d: %s", w, i, op) {
					return
				}
			}
		})
	}
	writers.Wait()
	time.Sleep(20 * time.Millisecond)
	close(stop)
	readers.Wait()
	assert.Equal(t, statRows(t, db, countingQuery), statRows(t, db, countedQuery))
	assert.Positive(t, snapshots)
	assert.Positive(t, agreed)
	t.Logf("%d snapshots and %d Stat/All pairs agreed", snapshots, agreed)
}
