package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
)

// adminConn connects to the shared test server as its superuser.
func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, testsvc.Postgres(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// withDSN returns dsn with its user and database replaced (an empty user
// keeps the DSN's).
func withDSN(t *testing.T, dsn, user, database string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	if user != "" {
		u.User = url.User(user)
	}
	u.Path = "/" + database
	return u.String()
}

// freshDatabase creates a database of its own for the test, owned by
// owner ("" for the superuser), dropped when the test ends, and returns
// its DSN for owner.
func freshDatabase(t *testing.T, owner string) string {
	t.Helper()
	admin := adminConn(t)
	ctx := context.Background()
	name := strings.TrimSuffix(freshPrefix("db"), "_")
	ddl := "CREATE DATABASE " + name
	if owner != "" {
		ddl += " OWNER " + owner
	}
	_, err := admin.Exec(ctx, ddl)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := admin.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)")
		assert.NoError(t, err)
	})
	return withDSN(t, testsvc.Postgres(t), owner, name)
}

// freshRole creates a login role for the test, dropped when it ends (with
// whatever it owns or was granted).
func freshRole(t *testing.T, what string) string {
	t.Helper()
	admin := adminConn(t)
	name := strings.TrimSuffix(freshPrefix(what), "_")
	_, err := admin.Exec(context.Background(), "CREATE ROLE "+name+" LOGIN")
	require.NoError(t, err)
	t.Cleanup(func() {
		// Runs after the databases of the test are dropped (cleanups run
		// last in, first out, and the role is made first); DROP OWNED
		// takes back its grants in this database.
		for _, q := range []string{"DROP OWNED BY " + name, "DROP ROLE " + name} {
			_, err := admin.Exec(context.Background(), q)
			assert.NoError(t, err)
		}
	})
	return name
}

// TestServerDefaultIsolation runs concurrent appends and compare-and-set
// loops against servers whose default isolation is not PostgreSQL's read
// committed, set for the database or for the role (ALTER … SET
// default_transaction_isolation): the store sets the isolation each
// transaction needs, so nothing is lost, no append fails, and the only
// error a compare-and-set loser sees is store.ErrConflict.
func TestServerDefaultIsolation(t *testing.T) {
	tests := []struct {
		name, level string
		role        bool // ALTER ROLE rather than ALTER DATABASE
	}{
		{"database repeatable read", "repeatable read", false},
		{"database serializable", "serializable", false},
		{"role repeatable read", "repeatable read", true},
		{"role serializable", "serializable", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			admin := adminConn(t)
			var dsn string
			if tt.role {
				role := freshRole(t, "iso")
				_, err := admin.Exec(ctx, "ALTER ROLE "+role+" SET default_transaction_isolation = '"+tt.level+"'")
				require.NoError(t, err)
				dsn = freshDatabase(t, role)
			} else {
				dsn = freshDatabase(t, "")
				u, err := url.Parse(dsn)
				require.NoError(t, err)
				_, err = admin.Exec(ctx, "ALTER DATABASE "+strings.TrimPrefix(u.Path, "/")+" SET default_transaction_isolation = '"+tt.level+"'")
				require.NoError(t, err)
			}
			// The setting is in force for the store's sessions.
			c, err := pgx.Connect(ctx, dsn)
			require.NoError(t, err)
			var level string
			require.NoError(t, c.QueryRow(ctx, "SHOW default_transaction_isolation").Scan(&level))
			require.NoError(t, c.Close(ctx))
			require.Equal(t, tt.level, level)

			prefix := freshPrefix("iso")
			var stores [2]*pgstore.Store
			for i := range stores {
				s, err := pgstore.Open(ctx, dsn, pgstore.WithTablePrefix(prefix))
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Close() })
				stores[i] = s
			}
			t.Run("appends", func(t *testing.T) { concurrentAppends(t, stores) })
			t.Run("compare-and-set", func(t *testing.T) { concurrentCompareAndSet(t, stores) })
		})
	}
}

// concurrentAppends has 16 writers, over two pools, append 10 turns each
// (160 appends) to one conversation at once: every append succeeds and
// every turn is stored once, whole, in its writer's order.
func concurrentAppends(t *testing.T, stores [2]*pgstore.Store) {
	t.Helper()
	const writers, turns = 16, 10
	id := memstack.Identity{Tenant: "acme", User: "iso", Conversation: "appends"}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := make(chan struct{})
	for w := range writers {
		s := stores[w%2]
		wg.Go(func() {
			<-start
			for n := range turns {
				text := fmt.Sprintf("w%02d t%02d", w, n)
				if err := s.Append(context.Background(), id, human(text), ai(text)); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if !assert.Zero(t, len(errs), "concurrent appends failed") {
		t.Logf("%d of %d appends failed; the first: %v", len(errs), writers*turns, errs[0])
	}

	rs, err := stores[0].All(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 2*writers*turns, len(rs), "every turn is stored")
	next := map[string]int{}
	for i := 0; i < len(rs); i += 2 {
		if i > 0 {
			require.Greater(t, rs[i].Seq, rs[i-1].Seq)
		}
		require.Greater(t, rs[i+1].Seq, rs[i].Seq)
		h, a := rs[i].Message, rs[i+1].Message
		require.Equal(t, llms.ChatMessageTypeHuman, h.GetType())
		require.Equal(t, h.GetContent(), a.GetContent(), "a turn's messages are adjacent")
		w, n, ok := strings.Cut(h.GetContent(), " t")
		require.True(t, ok)
		turn, err := strconv.Atoi(n)
		require.NoError(t, err)
		require.Equal(t, next[w], turn, "writer %s's turns keep its order", w)
		next[w]++
	}
	st, err := stores[1].Stat(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, statOf(rs), st)
}

// concurrentCompareAndSet has 8 goroutines, over two pools, increment one
// counter 15 times each with a compare-and-set loop: a loser sees
// store.ErrConflict and nothing else, and no increment is lost.
func concurrentCompareAndSet(t *testing.T, stores [2]*pgstore.Store) {
	t.Helper()
	const workers, increments = 8, 15
	id := memstack.Identity{Tenant: "acme", User: "iso", Conversation: "counter"}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		other     []error
		conflicts int
	)
	start := make(chan struct{})
	for w := range workers {
		s := stores[w%2]
		wg.Go(func() {
			<-start
			ctx := context.Background()
			for range increments {
				for {
					st, err := s.GetState(ctx, id, "counter")
					if err != nil {
						mu.Lock()
						other = append(other, err)
						mu.Unlock()
						return
					}
					n := 0
					if st.Exists() {
						n, _ = strconv.Atoi(string(st.Value))
					}
					_, err = s.PutState(ctx, id, "counter", []byte(strconv.Itoa(n+1)), st.Version)
					if err == nil {
						break
					}
					mu.Lock()
					if errors.Is(err, store.ErrConflict) {
						conflicts++
						mu.Unlock()
						continue
					}
					other = append(other, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("%d compare-and-set loops failed with something other than ErrConflict; the first: %v", len(other), other[0])
	}
	st, err := stores[0].GetState(context.Background(), id, "counter")
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(workers*increments), string(st.Value), "no increment is lost")
	t.Logf("%d compare-and-set conflicts", conflicts)
}
