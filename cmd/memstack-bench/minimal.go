package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/tmc/langchaingo/llms"
	_ "modernc.org/sqlite" // the driver sqlitestore uses

	"github.com/memstack/memstack/store/storetest"
)

// The stores' own overhead: storetest.Measure's work — a turn of two
// messages appended as one write, then the newest 10 read — done with each
// driver's minimal commands against the same kind of server, in the same
// run, so a store's saves per second and load p50 can be set against what
// the database itself costs. The minimal versions keep only what the work
// needs: a message is its role and text, a conversation is a number, and
// there are no Seqs handed out by the store, no versions, no namespaces,
// no idempotency tokens, no change feed and no retention.

// minimalSQLite is the work over database/sql and modernc.org/sqlite: a
// table with an index on (conversation, Seq), a transaction of two INSERTs
// per turn, and a SELECT … ORDER BY seq DESC LIMIT n. It opens its file
// in dir with sqlitestore's defaults (WAL, synchronous=NORMAL, a 5 s busy
// timeout, 16 connections), and takes one writer at a time in process, as
// a program using SQLite from many goroutines does (SQLite has one
// writer; waiting on its busy handler instead costs far more).
func minimalSQLite(ctx context.Context, dir string) (storetest.Workload, func(), error) {
	path := filepath.Join(dir, "minimal.db")
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_busy_timeout=5000&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate", path))
	if err != nil {
		return storetest.Workload{}, nil, err
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	release := func() { _ = db.Close(); _ = os.Remove(path) }
	var writer sync.Mutex
	if _, err := db.ExecContext(ctx, `CREATE TABLE m (seq INTEGER PRIMARY KEY AUTOINCREMENT, conv INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL);
CREATE INDEX m_conv ON m (conv, seq)`); err != nil {
		release()
		return storetest.Workload{}, nil, fmt.Errorf("creating the minimal SQLite table: %w", err)
	}
	return storetest.Workload{
		Append: func(ctx context.Context, c int, msgs ...llms.ChatMessage) error {
			writer.Lock()
			defer writer.Unlock()
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			for _, m := range msgs {
				if _, err := tx.ExecContext(ctx, `INSERT INTO m (conv, role, content) VALUES (?, ?, ?)`, c, string(m.GetType()), m.GetContent()); err != nil {
					return err
				}
			}
			return tx.Commit()
		},
		Last: func(ctx context.Context, c, n int) (int, error) {
			rows, err := db.QueryContext(ctx, `SELECT role, content FROM m WHERE conv = ? ORDER BY seq DESC LIMIT ?`, c, n)
			if err != nil {
				return 0, err
			}
			defer func() { _ = rows.Close() }()
			return countRows(rows)
		},
	}, release, nil
}

// minimalRedis is the work over go-redis: one RPUSH of the turn's two
// messages (role and text joined by a newline) per turn, and one LRANGE
// of the newest n.
func minimalRedis(ctx context.Context, addr string) (storetest.Workload, func(), error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return storetest.Workload{}, nil, err
	}
	key := func(conv int) string { return fmt.Sprintf("minimal:%d", conv) }
	return storetest.Workload{
		Append: func(ctx context.Context, conv int, msgs ...llms.ChatMessage) error {
			vals := make([]any, len(msgs))
			for i, m := range msgs {
				vals[i] = string(m.GetType()) + "\n" + m.GetContent()
			}
			return c.RPush(ctx, key(conv), vals...).Err()
		},
		Last: func(ctx context.Context, conv, n int) (int, error) {
			got, err := c.LRange(ctx, key(conv), int64(-n), -1).Result()
			return len(got), err
		},
		Forget: func(ctx context.Context, conv int) error { return c.Del(ctx, key(conv)).Err() },
	}, func() { _ = c.Close() }, nil
}

// minimalPostgres is the work over pgx's pool (its default size, as
// pgstore's): a table with an index on (conversation, Seq), one
// multi-row INSERT per turn, and a SELECT … ORDER BY seq DESC LIMIT n.
func minimalPostgres(ctx context.Context, dsn string) (storetest.Workload, func(), error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return storetest.Workload{}, nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE minimal_m (seq bigserial PRIMARY KEY, conv int NOT NULL, role text NOT NULL, content text NOT NULL);
CREATE INDEX minimal_m_conv ON minimal_m (conv, seq)`); err != nil {
		pool.Close()
		return storetest.Workload{}, nil, fmt.Errorf("creating the minimal PostgreSQL table: %w", err)
	}
	release := func() {
		_, _ = pool.Exec(context.Background(), `DROP TABLE minimal_m`)
		pool.Close()
	}
	return storetest.Workload{
		Append: func(ctx context.Context, c int, msgs ...llms.ChatMessage) error {
			q, args := `INSERT INTO minimal_m (conv, role, content) VALUES `, []any{c}
			for i, m := range msgs {
				if i > 0 {
					q += ", "
				}
				q += fmt.Sprintf("($1, $%d, $%d)", 2*i+2, 2*i+3)
				args = append(args, string(m.GetType()), m.GetContent())
			}
			_, err := pool.Exec(ctx, q, args...)
			return err
		},
		Last: func(ctx context.Context, c, n int) (int, error) {
			rows, err := pool.Query(ctx, `SELECT role, content FROM minimal_m WHERE conv = $1 ORDER BY seq DESC LIMIT $2`, c, n)
			if err != nil {
				return 0, err
			}
			defer rows.Close()
			return countRows(rows)
		},
	}, release, nil
}

// countRows reads rows' role and content columns to the end (database/sql's
// rows or pgx's) and returns how many there were.
func countRows(rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}) (int, error) {
	got := 0
	for rows.Next() {
		var role, content string
		if err := rows.Scan(&role, &content); err != nil {
			return got, err
		}
		got++
	}
	return got, rows.Err()
}
