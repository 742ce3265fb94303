package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/redis/go-redis/v9"
	"github.com/tmc/langchaingo/llms"
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
	closed atomic.Bool
}

var (
	_ store.Store = (*Store)(nil)
	_ io.Closer   = (*Store)(nil)
)

// New returns a Store that uses client, after checking the options and
// pinging the server. The ping is bounded by ctx: an unreachable server
// makes New fail by ctx's deadline at the latest, with an error naming the
// address. Close does not close client: the caller owns it.
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
	}
	if err := s.ping(ctx); err != nil {
		return nil, err
	}
	return s, nil
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

// keys are the Redis keys of one identity (see the package documentation).
type keys struct {
	base                 string // <prefix>:{<identity key>}:
	msgs, state, cleared string
	seq, nss             string
	forgotten            string // the forgotten key of the identity's hash slot
}

func (s *Store) keysOf(id memstack.Identity) keys {
	key := id.Key()
	base := s.prefix + ":{" + key + "}:"
	return keys{
		base:      base,
		msgs:      base + s.ns + ":msgs",
		state:     base + s.ns + ":state",
		cleared:   base + s.ns + ":cleared",
		seq:       base + "seq",
		nss:       base + "nss",
		forgotten: s.prefix + ":{" + slotTag(hashSlot(key)) + "}:forgotten",
	}
}

// all returns the keys every prelude script takes, in its KEYS order.
func (k keys) all() []string {
	return []string{k.msgs, k.state, k.seq, k.nss, k.cleared, k.forgotten}
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
	if s.closed.Load() && !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w (%w)", ErrClosed, err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", cerr, err)
	}
	return fmt.Errorf("redisstore: %s of %q in namespace %q on %s: %w", op, id.Key(), s.ns, s.addr, err)
}

// corrupt returns an error wrapping store.ErrCorrupt about something stored
// for id that this package could not have written. what names the value
// (a Seq, a list position, a state name), never its content.
func (s *Store) corrupt(op string, id memstack.Identity, what string) error {
	return fmt.Errorf("redisstore: %s: %w: %s of identity %q in namespace %q", op, store.ErrCorrupt, what, id.Key(), s.ns)
}

// Append implements store.Store: the messages get consecutive Seqs and are
// pushed by one script, so the turn is stored whole or not at all. Every
// message is dated store.AppendTime(ctx), taken once, by this process (not
// by the Redis server's clock, which only draws Seqs).
func (s *Store) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	const op = "Append"
	if err := s.begin(ctx, op, id); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	at := store.AppendTime(ctx)
	if err := store.CheckTime(at); err != nil {
		return fmt.Errorf("redisstore: %s of %q: %w", op, id.Key(), err)
	}
	args := make([]any, 0, 2+len(msgs))
	args = append(args, s.ns, s.ttlArg)
	for i, m := range msgs {
		data, err := store.EncodeMessageAt(m, at) // a nil message is an ErrInvalidArgument
		if err != nil {
			return fmt.Errorf("redisstore: %s of %q: message %d of %d: %w", op, id.Key(), i+1, len(msgs), err)
		}
		flag := byte('m')
		if m.GetType() == llms.ChatMessageTypeSystem {
			flag = 's'
		}
		elem := make([]byte, 2+len(data))
		elem[0], elem[1] = flag, '|'
		copy(elem[2:], data)
		args = append(args, elem)
	}
	k := s.keysOf(id)
	res, err := appendScript.Run(ctx, s.client, k.all(), args...).Slice()
	if err != nil {
		return s.fail(ctx, op, id, err)
	}
	if st := status(res); st != "ok" {
		return s.corruptStatus(op, id, st)
	}
	return nil
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

// status returns the first element of a script's table reply.
func status(res []any) string {
	if len(res) == 0 {
		return ""
	}
	st, _ := res[0].(string)
	return st
}

// Last implements store.Store with one LRANGE of the list's tail: O(n).
func (s *Store) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	const op = "Last"
	if err := s.begin(ctx, op, id); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: redisstore: Last(n=%d) of %q: n must be at least 1", store.ErrInvalidArgument, n, id.Key())
	}
	vals, err := s.client.LRange(ctx, s.keysOf(id).msgs, -int64(n), -1).Result()
	if err != nil {
		return nil, s.fail(ctx, op, id, err)
	}
	return s.decode(op, id, vals, -len(vals))
}

// All implements store.Store with one LRANGE.
func (s *Store) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	const op = "All"
	if err := s.begin(ctx, op, id); err != nil {
		return nil, err
	}
	vals, err := s.client.LRange(ctx, s.keysOf(id).msgs, 0, -1).Result()
	if err != nil {
		return nil, s.fail(ctx, op, id, err)
	}
	return s.decode(op, id, vals, 0)
}

// decode turns list elements into records; first is the list index of
// vals[0] (negative: counted from the tail), for error messages.
func (s *Store) decode(op string, id memstack.Identity, vals []string, first int) ([]store.Record, error) {
	out := make([]store.Record, len(vals))
	for i, v := range vals {
		r, err := s.parseElement(op, id, v, first+i)
		if err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

// parseElement decodes one "<seq>|<flag>|<message>" list element at list
// index pos.
func (s *Store) parseElement(op string, id memstack.Identity, v string, pos int) (store.Record, error) {
	if r, ok := s.cache.get(v); ok {
		return r, nil
	}
	bar := strings.IndexByte(v, '|')
	if bar <= 0 || bar > 19 {
		return store.Record{}, s.corrupt(op, id, fmt.Sprintf("message at list index %d has no Seq", pos))
	}
	seq, err := strconv.ParseInt(v[:bar], 10, 64)
	// Only the canonical decimal form this package writes is accepted
	// ("5", not "+5" or "005").
	if err != nil || seq < 1 || strconv.FormatInt(seq, 10) != v[:bar] {
		return store.Record{}, s.corrupt(op, id, fmt.Sprintf("message at list index %d has no valid Seq", pos))
	}
	rest := v[bar+1:]
	if len(rest) < 2 || rest[1] != '|' || (rest[0] != 's' && rest[0] != 'm') {
		return store.Record{}, s.corrupt(op, id, fmt.Sprintf("message Seq %d has no role flag", seq))
	}
	r, err := store.DecodeRecord(id, seq, []byte(rest[2:]))
	if err != nil {
		return store.Record{}, fmt.Errorf("redisstore: %s in namespace %q: %w", op, s.ns, err)
	}
	if (r.Message.GetType() == llms.ChatMessageTypeSystem) != (rest[0] == 's') {
		return store.Record{}, s.corrupt(op, id, fmt.Sprintf("message Seq %d: role flag %q does not match its %s message", seq, rest[0], r.Message.GetType()))
	}
	s.cache.put(v, r)
	return r, nil
}

// Stat implements store.Store with a script reading the list's length and
// the Seqs at its ends: O(1), no message bodies sent back.
func (s *Store) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	const op = "Stat"
	if err := s.begin(ctx, op, id); err != nil {
		return store.Stat{}, err
	}
	res, err := statScript.Run(ctx, s.client, []string{s.keysOf(id).msgs}).Slice()
	if err != nil {
		return store.Stat{}, s.fail(ctx, op, id, err)
	}
	if len(res) != 3 {
		return store.Stat{}, s.fail(ctx, op, id, fmt.Errorf("unexpected script reply with %d elements", len(res)))
	}
	count, _ := res[0].(int64)
	if count == 0 {
		return store.Stat{}, nil
	}
	var seqs [2]int64
	for i, where := range []string{"head", "tail"} {
		str, _ := res[1+i].(string)
		v, err := strconv.ParseInt(str, 10, 64)
		if err != nil || v < 1 {
			return store.Stat{}, s.corrupt(op, id, "the message at the list's "+where+" has no valid Seq")
		}
		seqs[i] = v
	}
	return store.Stat{Count: int(count), FirstSeq: seqs[0], LastSeq: seqs[1]}, nil
}

// RemovePrefix implements store.Store with one script: the non-system
// messages with Seq <= through go, the system ones stay in order. Its cost
// is O(number of messages with Seq <= through).
func (s *Store) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	const op = "RemovePrefix"
	if err := s.begin(ctx, op, id); err != nil {
		return 0, err
	}
	res, err := removePrefixScript.Run(ctx, s.client, []string{s.keysOf(id).msgs}, strconv.FormatInt(through, 10)).Slice()
	if err != nil {
		return 0, s.fail(ctx, op, id, err)
	}
	n, _ := res[len(res)-1].(int64)
	if status(res) != "ok" {
		return 0, s.corrupt(op, id, fmt.Sprintf("message at list index %d has no valid Seq or role flag", n))
	}
	return int(n), nil
}

// Clear implements store.Store with one script: it deletes the identity's
// messages and state in this namespace and sets the namespace's Clear mark
// to a fresh number from the identity's counter, which becomes the absent
// version of every state name there. Seqs go on from the shared counter.
func (s *Store) Clear(ctx context.Context, id memstack.Identity) error {
	const op = "Clear"
	if err := s.begin(ctx, op, id); err != nil {
		return err
	}
	res, err := clearScript.Run(ctx, s.client, s.keysOf(id).all(), s.ns, s.ttlArg).Slice()
	if err != nil {
		return s.fail(ctx, op, id, err)
	}
	if st := status(res); st != "ok" {
		return s.corruptStatus(op, id, st)
	}
	return nil
}

// maxForgetAttempts bounds Forget's optimistic retries (a namespace
// appearing between reading the namespace set and deleting).
const maxForgetAttempts = 50

// Forget implements store.Store: in one script it first moves the
// forgotten version of the identity's hash slot to a fresh number, then
// deletes every key of the identity under this store's prefix — messages,
// state and Clear mark of every namespace, the Seq counter and the
// namespace set — and nothing else. A PutState that read the identity's
// state before Forget then conflicts (forgetScript explains why the order
// matters). If the Seq counter is ahead of the server's clock (a burst of
// appends just now), Forget first waits until the clock passes it, so no
// Seq is ever handed out twice.
func (s *Store) Forget(ctx context.Context, id memstack.Identity) error {
	const op = "Forget"
	if err := s.begin(ctx, op, id); err != nil {
		return err
	}
	k := s.keysOf(id)
	for attempt := 1; ; attempt++ {
		nss, err := s.client.SMembers(ctx, k.nss).Result()
		if err != nil {
			return s.fail(ctx, op, id, err)
		}
		if !slices.Contains(nss, s.ns) {
			nss = append(nss, s.ns)
		}
		ks := make([]string, 0, 3+3*len(nss))
		ks = append(ks, k.seq, k.nss, k.forgotten)
		args := make([]any, len(nss))
		for i, ns := range nss {
			ks = append(ks, k.base+ns+":msgs", k.base+ns+":state", k.base+ns+":cleared")
			args[i] = ns
		}
		res, err := forgetScript.Run(ctx, s.client, ks, args...).Slice()
		if err != nil {
			return s.fail(ctx, op, id, err)
		}
		switch status(res) {
		case "ok":
			return nil
		case "wait":
			str, _ := res[len(res)-1].(string)
			us, _ := strconv.ParseInt(str, 10, 64)
			t := time.NewTimer(time.Duration(min(max(us, 1), 2_000_000)) * time.Microsecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return s.fail(ctx, op, id, ctx.Err())
			case <-t.C:
			}
		}
		if attempt >= maxForgetAttempts {
			return s.fail(ctx, op, id, fmt.Errorf("gave up after %d attempts: namespaces or Seqs kept changing", attempt))
		}
	}
}

// GetState implements store.Store with one script: the value and its
// version, or, when the name has none, the absent version (the Clear mark,
// else the slot's forgotten version, else 0), read in one step.
func (s *Store) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	const op = "GetState"
	if err := s.begin(ctx, op, id); err != nil {
		return store.State{}, err
	}
	if err := store.CheckStateName(name); err != nil {
		return store.State{}, err
	}
	res, err := getStateScript.Run(ctx, s.client, s.keysOf(id).all(), name).Slice()
	if err != nil {
		return store.State{}, s.fail(ctx, op, id, err)
	}
	var str string
	if len(res) == 2 {
		str, _ = res[1].(string)
	}
	switch status(res) {
	case "absent":
		v, err := strconv.ParseInt(str, 10, 64)
		if err != nil || v < 0 {
			return store.State{}, s.fail(ctx, op, id, fmt.Errorf("unexpected absent version %q in the script's reply", str))
		}
		return store.State{Version: v}, nil
	case "value":
	default:
		return store.State{}, s.corruptStatus(op, id, status(res))
	}
	bar := strings.IndexByte(str, '|')
	var version int64
	if bar > 0 && bar <= 19 {
		version, err = strconv.ParseInt(str[:bar], 10, 64)
	}
	if bar <= 0 || bar > 19 || err != nil || version < 1 {
		return store.State{}, s.corrupt(op, id, fmt.Sprintf("state %q has no valid version", name))
	}
	value := []byte(str[bar+1:])
	if value == nil {
		value = []byte{} // a present value is never nil, empty or not
	}
	return store.State{Value: value, Version: version}, nil
}

// PutState implements store.Store: a compare-and-set in one script, whose
// current version for an absent value is the absent version, read in the
// same script. New versions come from the identity's Seq counter, so they
// are never reused. A nil value deletes and returns the absent version.
func (s *Store) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	const op = "PutState"
	if err := s.begin(ctx, op, id); err != nil {
		return 0, err
	}
	if err := store.CheckStateName(name); err != nil {
		return 0, err
	}
	mode := "put"
	if value == nil {
		mode = "del"
	}
	k := s.keysOf(id)
	res, err := putStateScript.Run(ctx, s.client, k.all(),
		s.ns, s.ttlArg, name, strconv.FormatInt(expect, 10), mode, value).Slice()
	if err != nil {
		return 0, s.fail(ctx, op, id, err)
	}
	switch status(res) {
	case "ok":
		str, _ := res[len(res)-1].(string)
		v, err := strconv.ParseInt(str, 10, 64)
		if err != nil || v < 0 {
			return 0, s.fail(ctx, op, id, fmt.Errorf("unexpected version %q in the script's reply", str))
		}
		return v, nil
	case "conflict":
		cur, _ := res[len(res)-1].(string)
		return 0, fmt.Errorf("redisstore: %s: %w: state %q of %q in namespace %q is at version %s, not %d",
			op, store.ErrConflict, name, id.Key(), s.ns, cur, expect)
	case "corrupt":
		return 0, s.corrupt(op, id, fmt.Sprintf("state %q has no valid version", name))
	}
	return 0, s.corruptStatus(op, id, status(res))
}
