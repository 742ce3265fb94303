package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/redis/go-redis/v9"
)

// ErrClosed is wrapped by the error of every call on a Store after Close.
var ErrClosed = errors.New("redisstore: store is closed")

// Store is a store.Store kept in Redis. See the package documentation for
// the key layout, the scripts and the failure behaviour. It is safe for
// concurrent use by many goroutines and, through Redis, by many processes.
type Store struct {
	client redis.UniversalClient
	own    bool   // Close closes client: Open made it
	addr   string // for error messages
	ns     string
	prefix string
	ttlArg string // TTL in milliseconds, "0" for none
	cache  *decodeCache
	// evicting is set when the server may evict keys (WithEvictionAllowed):
	// Forget then finds the identity's keys with SCAN as well as through
	// the nss set, which eviction may have removed.
	evicting bool
	// slotted is set when the client's server keeps keys in Cluster
	// slots: a Cluster or Ring client, or a one-endpoint client of a
	// server in cluster mode, which refuses a script whose keys are in
	// several slots. A user's change feed is then not kept (see feeds).
	slotted bool
	ttl     bool // the store has a TTL (WithTTL)
	closed  atomic.Bool
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Rewriter = (*Store)(nil)
	_ store.Users    = (*Store)(nil)
	_ io.Closer      = (*Store)(nil)
)

// Namespace returns the store's namespace (WithNamespace): the layer whose
// messages and state Clear, Append and the other calls of one identity
// touch. Forget and the store.Users calls reach every namespace of the key
// prefix.
func (s *Store) Namespace() string { return s.ns }

// New returns a Store that uses client, after checking the options,
// pinging the server and reading its maxmemory-policy. The ping is bounded
// by ctx: an unreachable server makes New fail by ctx's deadline at the
// latest, with an error naming the address. A server whose policy may
// evict keys, or whose policy cannot be read, is refused with an error
// wrapping ErrEvictionPolicy unless WithEvictionAllowed is given (see the
// package documentation, "Production settings"). Close does not close
// client: the caller owns it.
//
// For ctx deadlines to bound every call's network I/O, give the client
// ContextTimeoutEnabled (see the package documentation).
func New(ctx context.Context, client redis.UniversalClient, opts ...Option) (*Store, error) {
	return newStore(ctx, client, false, opts)
}

// minPoolSize is the smallest connection pool Open gives its client.
const minPoolSize = 64

// Open connects to the Redis server at addr — host:port, or a redis:// or
// rediss:// URL as redis.ParseURL reads it — and returns a Store over it.
// The client Open makes honours ctx deadlines (ContextTimeoutEnabled) and
// has a pool of at least 64 connections unless the URL sets pool_size;
// Close closes it. An unreachable server is an error naming addr, returned by
// ctx's deadline at the latest.
func Open(ctx context.Context, addr string, opts ...Option) (*Store, error) {
	var ro *redis.Options
	if strings.Contains(addr, "://") {
		var err error
		if ro, err = redis.ParseURL(addr); err != nil {
			return nil, fmt.Errorf("%w: redisstore: Open: address %q: %v", store.ErrInvalidArgument, addr, err)
		}
	} else {
		if addr == "" {
			return nil, fmt.Errorf("%w: redisstore: Open: empty address", store.ErrInvalidArgument)
		}
		ro = &redis.Options{Addr: addr}
	}
	ro.ContextTimeoutEnabled = true
	if ro.PoolSize == 0 {
		// go-redis's default is 10 per CPU; memories of many concurrent
		// conversations wait less for a connection with a few more.
		ro.PoolSize = max(minPoolSize, 10*runtime.GOMAXPROCS(0))
	}
	client := redis.NewClient(ro)
	s, err := newStore(ctx, client, true, opts)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return s, nil
}

func newStore(ctx context.Context, client redis.UniversalClient, own bool, opts []Option) (*Store, error) {
	cfg := config{ns: DefaultNamespace, prefix: DefaultKeyPrefix, cacheSize: DefaultDecodeCacheSize}
	for i, o := range opts {
		if o == nil {
			cfg.bad("option %d of %d is nil", i+1, len(opts))
			continue
		}
		o(&cfg)
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: redisstore: nil context", store.ErrInvalidArgument)
	}
	if client == nil {
		return nil, fmt.Errorf("%w: redisstore: New: client is nil", store.ErrInvalidArgument)
	}
	s := &Store{
		client: client,
		own:    own,
		addr:   addrOf(client),
		ns:     cfg.ns,
		prefix: cfg.prefix,
		ttlArg: strconv.FormatInt(cfg.ttl.Milliseconds(), 10),
		cache:  newDecodeCache(cfg.cacheSize),
		// Without the option the policy check below refuses any server
		// that may evict; with it, assume it does.
		evicting: cfg.evictionAllowed,
	}
	if err := s.ping(ctx); err != nil {
		return nil, err
	}
	if !cfg.evictionAllowed {
		if err := s.checkEvictionPolicy(ctx); err != nil {
			return nil, err
		}
	}
	s.ttl = cfg.ttl > 0
	slotted, err := s.checkSlots(ctx)
	if err != nil {
		return nil, err
	}
	s.slotted = slotted
	return s, nil
}

// checkSlots reports whether the server keeps keys in Cluster slots: true
// for a Cluster or Ring client; for a client of one endpoint, whether the
// server refuses, with CROSSSLOT, a read of two keys in different slots
// (two keys under the prefix, which a least-privileged ACL user may read;
// neither exists). A server that refuses the read for another reason is
// taken as slotted: no change feed is kept, which is always safe.
func (s *Store) checkSlots(ctx context.Context) (bool, error) {
	if _, single := s.client.(*redis.Client); !single {
		return true, nil
	}
	err := s.client.Exists(ctx, s.prefix+":probe{a}", s.prefix+":probe{b}").Err()
	var rerr redis.Error
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &rerr) && ctx.Err() == nil:
		return true, nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", cerr, err)
	}
	return false, fmt.Errorf("redisstore: connecting to Redis at %s: %w", s.addr, err)
}

// ping checks the server, returning by ctx's deadline even when the client
// does not honour ctx (a client without ContextTimeoutEnabled waits for its
// own timeouts; its goroutine then finishes in the background).
func (s *Store) ping(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.client.Ping(ctx).Err() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return fmt.Errorf("redisstore: connecting to Redis at %s: %w", s.addr, err)
	}
	return nil
}

// addrOf names the server(s) of client for error messages.
func addrOf(client redis.UniversalClient) string {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	case *redis.Ring:
		addrs := make([]string, 0, len(c.Options().Addrs))
		for _, a := range c.Options().Addrs {
			addrs = append(addrs, a)
		}
		sort.Strings(addrs)
		return strings.Join(addrs, ",")
	}
	return fmt.Sprintf("(%T)", client)
}

// Close marks the store closed: every later call returns an error wrapping
// ErrClosed. It closes the Redis client if Open made it, and leaves a
// client given to New open. Closing twice is a no-op.
func (s *Store) Close() error {
	if s == nil || !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	if s.own {
		if err := s.client.Close(); err != nil {
			return fmt.Errorf("redisstore: closing the client of %s: %w", s.addr, err)
		}
	}
	return nil
}

// String describes the store (address, prefix, namespace, TTL).
func (s *Store) String() string {
	if s == nil {
		return "redisstore.Store(nil)"
	}
	return fmt.Sprintf("redisstore.Store(addr=%s, prefix=%q, namespace=%q, ttl=%sms)", s.addr, s.prefix, s.ns, s.ttlArg)
}

// begin checks what every method checks first: the store, ctx and whether
// ctx is done.
func (s *Store) begin(ctx context.Context, op string, id memstack.Identity) error {
	if s == nil || s.client == nil {
		return fmt.Errorf("%w: redisstore: %s on a nil or zero Store (use New or Open)", store.ErrInvalidArgument, op)
	}
	if ctx == nil {
		return fmt.Errorf("%w: redisstore: %s of %q: nil context", store.ErrInvalidArgument, op, id.Key())
	}
	if s.closed.Load() {
		return fmt.Errorf("redisstore: %s of %q: %w", op, id.Key(), ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: %s of %q: %w", op, id.Key(), err)
	}
	return nil
}

// fail wraps an error from Redis, naming the operation, the identity and
// the namespace; when ctx is done the error also wraps ctx.Err(), so
// errors.Is(err, context.DeadlineExceeded) holds whatever go-redis returned.
func (s *Store) fail(ctx context.Context, op string, id memstack.Identity, err error) error {
	return s.failIn(ctx, op, id, s.ns, err)
}

// failIn is fail for namespace ns (Export reads namespaces other than the
// store's).
func (s *Store) failIn(ctx context.Context, op string, id memstack.Identity, ns string, err error) error {
	if s.closed.Load() && !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w (%w)", ErrClosed, err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", cerr, err)
	}
	return fmt.Errorf("redisstore: %s of %q in namespace %q on %s: %w", op, id.Key(), ns, s.addr, err)
}

// corrupt returns an error wrapping store.ErrCorrupt about something stored
// for id that this package could not have written. what names the value
// (a Seq, a list position, a state name), never its content.
func (s *Store) corrupt(op string, id memstack.Identity, what string) error {
	return s.corruptIn(op, id, s.ns, what)
}

// corruptIn is corrupt for namespace ns.
func (s *Store) corruptIn(op string, id memstack.Identity, ns, what string) error {
	return fmt.Errorf("redisstore: %s: %w: %s of identity %q in namespace %q", op, store.ErrCorrupt, what, id.Key(), ns)
}

// corruptStatus is the error for a script's "corrupt-…" status: a shared
// value of the identity that this package could not have written.
func (s *Store) corruptStatus(op string, id memstack.Identity, status string) error {
	switch status {
	case "corrupt-mark":
		return s.corrupt(op, id, "the Clear mark")
	case "corrupt-forgotten":
		return s.corrupt(op, id, "the forgotten version of the hash slot")
	}
	return s.corrupt(op, id, "the sequence counter")
}
