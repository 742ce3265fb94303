package sqlitestore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/sqlitestore"
)

// appDB opens a database the way an application would, with its own
// table in it.
func appDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestNew puts a Store over a database the application opened and uses
// for its own tables: the Store shares the file with them and with Stores
// from Open, and closing it leaves the database open and usable.
func TestNew(t *testing.T) {
	cases := []struct {
		name string
		dsn  string
		// conns caps the application's pool (0: no cap).
		conns int
	}{
		{"plain BEGIN", "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)", 0},
		{"BEGIN IMMEDIATE", "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_txlock=immediate", 0},
		{"synchronous FULL and foreign keys", "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)", 0},
		{"pool of one connection", "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			path := filepath.Join(t.TempDir(), "app.db")
			db := appDB(t, "file:"+path+c.dsn)
			if c.conns > 0 {
				db.SetMaxOpenConns(c.conns)
			}
			_, err := db.ExecContext(ctx, `CREATE TABLE notes (body TEXT)`)
			require.NoError(t, err)
			_, err = db.ExecContext(ctx, `INSERT INTO notes VALUES ('before')`)
			require.NoError(t, err)

			s, err := sqlitestore.New(db, sqlitestore.WithNamespace("buffer"))
			require.NoError(t, err)
			assert.Equal(t, "buffer", s.Namespace())
			require.NoError(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: "h"}, llms.AIChatMessage{Content: "a"}))
			v := create(t, s, alice, "summary", "s")
			_, err = s.Rewrite(ctx, alice, 0, false, llms.HumanChatMessage{Content: "h2"})
			require.NoError(t, err)
			st, err := s.Stat(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, 3, st.Count)
			ex, err := s.Export(ctx, store.UserScope("acme", "alice"))
			require.NoError(t, err)
			require.Len(t, ex.Identities, 1)

			// A Store from Open on the same file sees it, and the other
			// way round.
			o := open(t, path, sqlitestore.WithNamespace("buffer"))
			rs, err := o.All(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, []string{"h", "a", "h2"}, contents(rs))
			require.NoError(t, o.Append(ctx, bob, llms.HumanChatMessage{Content: "from Open"}))
			rs, err = s.All(ctx, bob)
			require.NoError(t, err)
			assert.Equal(t, []string{"from Open"}, contents(rs))

			require.NoError(t, s.Close())
			require.NoError(t, s.Close(), "Close is idempotent")
			assert.ErrorIs(t, s.Append(ctx, alice, llms.HumanChatMessage{Content: "x"}), sqlitestore.ErrClosed)
			_, err = s.Stat(ctx, alice)
			assert.ErrorIs(t, err, sqlitestore.ErrClosed)

			// The application's database is open and its data whole.
			require.NoError(t, db.PingContext(ctx))
			_, err = db.ExecContext(ctx, `INSERT INTO notes VALUES ('after')`)
			require.NoError(t, err)
			var notes, messages int
			require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM notes`).Scan(&notes))
			require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM memstack_messages`).Scan(&messages))
			assert.Equal(t, 2, notes)
			assert.Equal(t, 4, messages)

			// A new Store over the same database finds everything.
			s2, err := sqlitestore.New(db, sqlitestore.WithNamespace("buffer"))
			require.NoError(t, err)
			defer s2.Close()
			rs, err = s2.All(ctx, alice)
			require.NoError(t, err)
			assert.Equal(t, []string{"h", "a", "h2"}, contents(rs))
			assert.Equal(t, store.State{Value: []byte("s"), Version: v}, getState(t, s2, alice, "summary"))
			n, err := s2.ForgetScope(ctx, store.TenantScope("acme"))
			require.NoError(t, err)
			assert.Equal(t, 2, n)
		})
	}
}

// fakeDriver is a database/sql driver that is not modernc.org/sqlite's.
type fakeDriver struct{}

func (fakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("fake driver: no connections")
}

func init() { sql.Register("sqlitestore-test-fake", fakeDriver{}) }

// TestNewRefuses: New refuses, naming the problem and its fix, a database
// it cannot serve and options that configure a database Open opens, and
// writes nothing to the file when it does.
func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	fake, err := sql.Open("sqlitestore-test-fake", "")
	require.NoError(t, err)
	defer fake.Close()
	good := func(t *testing.T) *sql.DB {
		return appDB(t, "file:"+filepath.Join(t.TempDir(), "good.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	}
	cases := []struct {
		name string
		db   func(t *testing.T) *sql.DB
		opts []sqlitestore.Option
		want []string
	}{
		{"nil db", func(*testing.T) *sql.DB { return nil }, nil, []string{"db is nil"}},
		{"another driver", func(*testing.T) *sql.DB { return fake }, nil, []string{"sqlitestore_test.fakeDriver", "modernc.org/sqlite"}},
		{"rollback journal", func(t *testing.T) *sql.DB {
			return appDB(t, "file:"+filepath.Join(dir, "delete.db")+"?_pragma=busy_timeout(5000)")
		}, nil, []string{`journal mode "delete"`, "needs WAL", "_pragma=journal_mode(WAL)", "delete.db"}},
		{"in memory", func(t *testing.T) *sql.DB {
			return appDB(t, "file::memory:?_pragma=busy_timeout(5000)")
		}, nil, []string{`journal mode "memory"`, "in-memory database"}},
		{"no busy timeout", func(t *testing.T) *sql.DB {
			return appDB(t, "file:"+filepath.Join(dir, "nobusy.db")+"?_pragma=journal_mode(WAL)")
		}, nil, []string{"no busy timeout", "_pragma=busy_timeout(5000)", "nobusy.db"}},
		{"query only", func(t *testing.T) *sql.DB {
			return appDB(t, "file:"+filepath.Join(dir, "ro.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=query_only(1)")
		}, nil, []string{"query_only"}},
		{"WithSynchronous", good, []sqlitestore.Option{sqlitestore.WithSynchronous("FULL")}, []string{"WithSynchronous configure a database Open opens"}},
		{"WithMmapSize", good, []sqlitestore.Option{sqlitestore.WithMmapSize(0)}, []string{"WithMmapSize configure a database Open opens"}},
		{"Open's options", good, []sqlitestore.Option{sqlitestore.WithBusyTimeout(time.Second), sqlitestore.WithMaxOpenConns(2)},
			[]string{"WithBusyTimeout, WithMaxOpenConns configure a database Open opens"}},
		{"nil option", good, []sqlitestore.Option{nil}, []string{"New: nil option"}},
		{"empty namespace", good, []sqlitestore.Option{sqlitestore.WithNamespace("")}, []string{"WithNamespace"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := c.db(t)
			s, err := sqlitestore.New(db, c.opts...)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.ErrorIs(t, err, store.ErrInvalidArgument)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			if db == nil || db == fake {
				return
			}
			var tables int
			require.NoError(t, db.QueryRowContext(context.Background(),
				`SELECT count(*) FROM sqlite_schema WHERE name LIKE 'memstack%'`).Scan(&tables))
			assert.Zero(t, tables, "a refused database is left alone")
			require.NoError(t, db.PingContext(context.Background()), "and open")
		})
	}
}

// TestNewHonoursLocks: a Store from New over a database without
// _txlock waits for another connection's write lock like one from Open,
// gives up when its ctx ends, and loses no compare-and-set between two
// such Stores.
func TestNewHonoursLocks(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(20)"
	a, err := sqlitestore.New(appDB(t, dsn))
	require.NoError(t, err)
	defer a.Close()
	b, err := sqlitestore.New(appDB(t, dsn))
	require.NoError(t, err)
	defer b.Close()

	conn, err := rawDB(t, path).Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	_, err = a.PutState(short, alice, "n", []byte("x"), 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = conn.ExecContext(ctx, `ROLLBACK`)
	require.NoError(t, err)
	assert.Equal(t, store.State{}, getState(t, b, alice, "n"), "the timed-out PutState stored nothing")

	const rounds = 50
	done := make(chan error, 2)
	for _, s := range []*sqlitestore.Store{a, b} {
		go func() {
			for range rounds {
				for {
					st, err := s.GetState(ctx, alice, "n")
					if err != nil {
						done <- err
						return
					}
					// One byte more per increment.
					if _, err := s.PutState(ctx, alice, "n", append([]byte{'+'}, st.Value...), st.Version); err == nil {
						break
					} else if !errors.Is(err, store.ErrConflict) {
						done <- err
						return
					}
				}
			}
			done <- nil
		}()
	}
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	assert.Len(t, getState(t, a, alice, "n").Value, 2*rounds, "no increment is lost")
}
