package pgstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// ErrClosed is wrapped by the error of every call on a closed Store.
var ErrClosed = errors.New("pgstore: store is closed")

// DefaultConnectTimeout bounds each connection attempt of a pool made by
// Open when the DSN sets no connect_timeout, so a server that drops packets
// cannot hang a call whose context has no deadline.
const DefaultConnectTimeout = 10 * time.Second

// Store is a store.Store in PostgreSQL. It is safe for concurrent use by
// many goroutines and many processes. See the package documentation.
type Store struct {
	pool    *pgxpool.Pool
	ownPool bool
	addr    string
	prefix  string
	ns      string
	closed  atomic.Bool
	q       queries
	// The recall index (recall.go): indexOn, the tables kept it at this
	// Store's last look; recallReady, it is complete; stopBackfill stops
	// a background backfill and waits for it; backfillErr, why it stopped.
	indexOn      atomic.Bool
	recallReady  atomic.Bool
	stopBackfill func()
	backfillErr  atomic.Pointer[error]
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Rewriter = (*Store)(nil)
	_ store.Users    = (*Store)(nil)
	// storetest.Namespaced, without importing the test kit.
	_ interface{ Namespace() string } = (*Store)(nil)
)

// New returns a Store over pool, after checking the schema version of its
// tables and creating or migrating them if needed (see the package
// documentation, Schema). The caller keeps ownership of pool: Close does
// not close it. New fails, with an error naming the server's address, when
// the server cannot be reached before ctx is done, and with an error
// wrapping ErrSchemaVersion when the tables are of a newer schema (or, with
// WithoutDDL, not at this build's).
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore.New: pool is nil", store.ErrInvalidArgument)
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: pgstore.New: nil context", store.ErrInvalidArgument)
	}
	c, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	return newStore(ctx, pool, false, c)
}

// Open connects to the server named by dsn (a PostgreSQL URL or key=value
// string, as pgxpool.ParseConfig accepts, pool settings such as
// pool_max_conns included) with a pool of its own, checks, creates or
// migrates the schema as New does and returns the Store; Close closes the
// pool. A DSN without connect_timeout gets DefaultConnectTimeout. An
// unreachable server is an error naming its host:port, returned no later
// than ctx is done. When a call's context ends while the server runs its
// statements, the pool's connections ask the server to cancel them and
// wait for its answer, so the call's outcome is settled when it returns
// (see the package documentation, Cancellation).
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	if ctx == nil {
		return nil, fmt.Errorf("%w: pgstore.Open: nil context", store.ErrInvalidArgument)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse errors redact the password.
		return nil, fmt.Errorf("pgstore: parsing the DSN: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.ConnConfig.BuildContextWatcherHandler = settleOnCancel
	c, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: creating a pool for %s: %w", poolAddr(cfg), err)
	}
	s, err := newStore(ctx, pool, true, c)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// The context handling of the connections of a pool made by Open (see
// the package documentation, Cancellation).
const (
	// cancelRequestDelay is how long a call whose context is done lets
	// the server go on before asking it to cancel: a statement about to
	// finish finishes.
	cancelRequestDelay = 10 * time.Millisecond
	// cancelDeadline bounds the wait for the server's answer once the
	// context is done: then the connection is closed, and the outcome of
	// a write in flight is unknown.
	cancelDeadline = time.Second
)

// settleOnCancel is the pgconn context handler of Open's pools: when a
// call's context is done while the server runs its statements, the
// client asks the server to cancel them (a cancel request) and reads its
// answer — the transaction rolled back, or committed — instead of
// dropping the connection at once, which would leave the server running
// the statements it has received, a COMMIT included, after the call has
// returned.
func settleOnCancel(c *pgconn.PgConn) ctxwatch.Handler {
	return &pgconn.CancelRequestContextWatcherHandler{Conn: c, CancelRequestDelay: cancelRequestDelay, DeadlineDelay: cancelDeadline}
}

func newStore(ctx context.Context, pool *pgxpool.Pool, own bool, c config) (*Store, error) {
	s := &Store{
		pool:    pool,
		ownPool: own,
		addr:    poolAddr(pool.Config()),
		prefix:  c.prefix,
		ns:      c.ns,
		q:       buildQueries(c.prefix),
	}
	if err := s.prepareSchema(ctx, !c.withoutDDL); err != nil {
		return nil, err
	}
	if err := s.startRecall(ctx, c.recall); err != nil {
		return nil, err
	}
	return s, nil
}

// poolAddr names the server of cfg as host:port (or the socket directory).
func poolAddr(cfg *pgxpool.Config) string {
	cc := cfg.ConnConfig
	if len(cc.Host) > 0 && cc.Host[0] == '/' {
		return fmt.Sprintf("unix socket %s/.s.PGSQL.%d", cc.Host, cc.Port)
	}
	return net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
}

// Namespace returns the store's namespace (WithNamespace): the one Clear,
// Append and the reads work in. Forget and the Users methods reach every
// namespace under the table prefix.
func (s *Store) Namespace() string { return s.ns }

// Close marks the store closed and, if Open made its pool, closes the pool.
// Calls after Close return ErrClosed. Close is safe to call more than once.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.stopBackfill != nil {
		s.stopBackfill()
	}
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// check returns the error a call must return before touching the server.
func (s *Store) check(ctx context.Context, op string, id memstack.Identity) error {
	if ctx == nil {
		return fmt.Errorf("%w: pgstore: %s of identity %q: nil context", store.ErrInvalidArgument, op, id.Key())
	}
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s of identity %q: %w", op, id.Key(), ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %s of identity %q: %w", op, id.Key(), err)
	}
	return nil
}

func (s *Store) wrap(op string, id ident, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s of identity %q: %w (%w)", op, id.key, ErrClosed, err)
	}
	return fmt.Errorf("pgstore: %s of identity %q on %s: %w", op, id.key, s.addr, err)
}
