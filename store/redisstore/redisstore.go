package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
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
	// evicting is set when the server may evict keys (WithEvictionAllowed):
	// Forget then finds the identity's keys with SCAN as well as through
	// the nss set, which eviction may have removed.
	evicting bool
	closed   atomic.Bool
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
	sys                  string // the index of the system messages in msgs
	seq, nss             string
	ops, opq             string // the identity's recent write tokens
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
		sys:       base + s.ns + ":sys",
		seq:       base + "seq",
		nss:       base + "nss",
		ops:       base + "ops",
		opq:       base + "opq",
		forgotten: s.prefix + ":{" + slotTag(hashSlot(key)) + "}:forgotten",
	}
}

// all returns the keys every prelude script takes, in its KEYS order.
func (k keys) all() []string {
	return []string{k.msgs, k.state, k.seq, k.nss, k.cleared, k.forgotten, k.ops, k.opq, k.sys}
}

// inNamespace returns the msgs, state, cleared and sys keys of namespace
// ns.
func (k keys) inNamespace(ns string) (msgs, state, cleared, sys string) {
	return k.base + ns + ":msgs", k.base + ns + ":state", k.base + ns + ":cleared", k.base + ns + ":sys"
}

// tokenWindow is how long a write's token is kept after the write: a
// retry of the write's script that reaches the server within it changes
// nothing. Every write call is bounded by maxWriteCall, well within the
// window, so that no retry can start later.
const (
	tokenWindow  = 2 * time.Minute
	maxWriteCall = time.Minute
)

// newToken returns a fresh write token: 96 random bits, 16 characters of
// URL-safe base64.
func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// appendKeyToken returns the write token of an Append under append key
// key in namespace ns: the same for every Append of the identity under
// that key in that namespace, so the first one's run is recorded under it
// and every later one — another client's, a retry's, a race's loser —
// stores nothing (see "Exactly once" in the package documentation). The
// ops hash is the identity's, shared by its namespaces, so the token names
// the namespace; it cannot collide with another namespace's (namespaces
// have no ':') nor with a random token (base64url, no ':').
func appendKeyToken(ns, key string) string { return "k:" + ns + ":" + key }

// runWrite runs the script of one write with a fresh token as its first
// ARGV, under a context bounded by maxWriteCall: go-redis may send the
// script again (a lost reply, a dropped connection), and the token makes
// every run after the first a no-op that returns the first run's reply.
func (s *Store) runWrite(ctx context.Context, script *redis.Script, ks []string, args ...any) ([]any, error) {
	return s.runWriteAs(ctx, newToken(), script, ks, args...)
}

// runWriteAs is runWrite with the given token. Its error wraps
// store.ErrOutcomeUnknown when the script may have run (see writeOutcome).
func (s *Store) runWriteAs(ctx context.Context, token string, script *redis.Script, ks []string, args ...any) ([]any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing was sent
	}
	wctx := ctx
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > maxWriteCall {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, maxWriteCall)
		defer cancel()
	}
	res, err := script.Run(wctx, s.client, ks, append([]any{token}, args...)...).Slice()
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		err = fmt.Errorf("%w: a write is given at most %v (%w)", wctx.Err(), maxWriteCall, err)
	}
	return res, writeOutcome(err)
}

// writeOutcome returns the error of a write script's run, wrapping
// store.ErrOutcomeUnknown unless the error proves that no run of the
// script changed anything. Only an error reply raised inside the script
// does (Redis names the script in it, "@user_script"): that run found no
// write token of an earlier one — a script that finds one returns its
// reply — and Redis runs one script at a time, so no earlier attempt of
// the call ran either. Every other error may follow a run whose reply was
// lost: a deadline or a cancellation while the script was on its way or
// running, a broken connection, and also errors of a later attempt, since
// go-redis sends the script again on a new connection when one breaks
// (MaxRetries), and that attempt may fail to connect, time out, or get an
// error reply that is not the script's (BUSY, READONLY after a failover,
// LOADING, CLUSTERDOWN). The caller checks ctx before the script is sent,
// so a context already done never gets here.
func writeOutcome(err error) error {
	if err == nil {
		return nil
	}
	var reply redis.Error
	if errors.As(err, &reply) && strings.Contains(reply.Error(), "@user_script") {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrOutcomeUnknown, err)
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

// Append implements store.Store: the messages get consecutive Seqs and are
// pushed by one script, so the turn is stored whole or not at all. Every
// message is dated storekit.AppendTime(ctx), taken once, by this process (not
// by the Redis server's clock, which only draws Seqs). A retry of the
// script after a lost reply stores nothing more (its write token; see the
// package documentation, "Exactly once"). Under an append key
// (store.WithAppendKey) the token is derived from the key and the
// namespace, so an Append under a key the identity used in this namespace
// in the last two minutes stores nothing and returns nil, whichever client
// made it, also when both run at once; an invalid key is an error
// wrapping store.ErrInvalidArgument. An error wrapping
// store.ErrOutcomeUnknown (a deadline, a broken connection) means the
// turn may have been stored: retry under the same append key (see
// "Failures" in the package documentation).
func (s *Store) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	const op = "Append"
	if err := s.begin(ctx, op, id); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	at := storekit.AppendTime(ctx)
	if err := storekit.CheckTime(at); err != nil {
		return fmt.Errorf("redisstore: %s of %q: %w", op, id.Key(), err)
	}
	token := newToken()
	if key, keyed, err := storekit.CheckAppendKeyOf(ctx); err != nil {
		return fmt.Errorf("redisstore: %s of %q: %w", op, id.Key(), err)
	} else if keyed {
		token = appendKeyToken(s.ns, key)
	}
	args := make([]any, 0, 2+len(msgs))
	args = append(args, s.ns, s.ttlArg)
	elems, err := encodeElements(op, id, at, msgs)
	if err != nil {
		return err
	}
	args = append(args, elems...)
	res, err := s.runWriteAs(ctx, token, appendScript, s.keysOf(id).all(), args...)
	if err != nil {
		return s.fail(ctx, op, id, err)
	}
	if st := status(res); st != "ok" {
		return s.corruptStatus(op, id, st)
	}
	return nil
}

// encodeElements encodes msgs as list elements without their Seqs:
// "<flag>|<message>", the flag 's' for a system message, else 'm'. A nil
// message is an error wrapping store.ErrInvalidArgument naming its place.
func encodeElements(op string, id memstack.Identity, at time.Time, msgs []llms.ChatMessage) ([]any, error) {
	out := make([]any, 0, len(msgs))
	for i, m := range msgs {
		data, err := storekit.EncodeMessageAt(m, at) // a nil message is an ErrInvalidArgument
		if err != nil {
			return nil, fmt.Errorf("redisstore: %s of %q: message %d of %d: %w", op, id.Key(), i+1, len(msgs), err)
		}
		flag := byte('m')
		if m.GetType() == llms.ChatMessageTypeSystem {
			flag = 's'
		}
		elem := make([]byte, 2+len(data))
		elem[0], elem[1] = flag, '|'
		copy(elem[2:], data)
		out = append(out, elem)
	}
	return out, nil
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

// Tail implements store.Store with one script (tailScript), so it reads
// one point in time and never half of an Append: the system messages come
// from the namespace's index of them, the newest n others from reading
// back from the list's tail, so it reads O(what it returns) elements
// however long the list is. The first Tail of a list written before the
// index existed reads the list once to build it (see the package
// documentation, "System messages and Tail").
func (s *Store) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	rs, _, err := s.tail(ctx, id, n, after)
	return rs, err
}

// tail is Tail; it also returns how many list elements the script read,
// for tests of its cost.
func (s *Store) tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, int64, error) {
	const op = "Tail"
	if err := s.begin(ctx, op, id); err != nil {
		return nil, 0, err
	}
	if n < 1 {
		return nil, 0, fmt.Errorf("%w: redisstore: Tail(n=%d) of %q: n must be at least 1", store.ErrInvalidArgument, n, id.Key())
	}
	k := s.keysOf(id)
	res, err := tailScript.Run(ctx, s.client, []string{k.msgs, k.sys}, strconv.Itoa(n), strconv.FormatInt(after, 10)).Slice()
	if err != nil {
		return nil, 0, s.fail(ctx, op, id, err)
	}
	switch status(res) {
	case "ok":
	case "corrupt":
		i, _ := res[len(res)-1].(int64)
		return nil, 0, s.corrupt(op, id, fmt.Sprintf("message at list index %d has no valid Seq or role flag", i))
	case "corrupt-index":
		i, _ := res[len(res)-1].(int64)
		return nil, 0, s.corrupt(op, id, fmt.Sprintf("element %d of the index of system messages has no valid Seq or system flag (Clear rebuilds it)", i))
	}
	if len(res) != 4 {
		return nil, 0, s.fail(ctx, op, id, fmt.Errorf("unexpected script reply with %d elements", len(res)))
	}
	read, _ := res[3].(int64)
	var parts [2][]store.Record
	for i := range parts {
		elems, _ := res[1+i].([]any)
		vals := make([]string, len(elems))
		for j, e := range elems {
			vals[j], _ = e.(string)
		}
		// The script checked every head, so no error names a list index.
		if parts[i], err = s.decode(op, id, vals, 0); err != nil {
			return nil, 0, err
		}
	}
	return storekit.MergeBySeq(parts[0], parts[1]), read, nil
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
	return s.decodeIn(op, id, s.ns, vals, first)
}

// decodeIn is decode for the elements of namespace ns.
func (s *Store) decodeIn(op string, id memstack.Identity, ns string, vals []string, first int) ([]store.Record, error) {
	out := make([]store.Record, len(vals))
	for i, v := range vals {
		r, err := s.parseElementIn(op, id, ns, v, first+i)
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
	return s.parseElementIn(op, id, s.ns, v, pos)
}

// parseElementIn is parseElement for an element of namespace ns.
func (s *Store) parseElementIn(op string, id memstack.Identity, ns, v string, pos int) (store.Record, error) {
	if r, ok := s.cache.get(v); ok {
		return r, nil
	}
	bar := strings.IndexByte(v, '|')
	if bar <= 0 || bar > 19 {
		return store.Record{}, s.corruptIn(op, id, ns, fmt.Sprintf("message at list index %d has no Seq", pos))
	}
	seq, err := strconv.ParseInt(v[:bar], 10, 64)
	// Only the canonical decimal form this package writes is accepted
	// ("5", not "+5" or "005").
	if err != nil || seq < 1 || strconv.FormatInt(seq, 10) != v[:bar] {
		return store.Record{}, s.corruptIn(op, id, ns, fmt.Sprintf("message at list index %d has no valid Seq", pos))
	}
	rest := v[bar+1:]
	if len(rest) < 2 || rest[1] != '|' || (rest[0] != 's' && rest[0] != 'm') {
		return store.Record{}, s.corruptIn(op, id, ns, fmt.Sprintf("message Seq %d has no role flag", seq))
	}
	r, err := storekit.DecodeRecord(id, seq, []byte(rest[2:]))
	if err != nil {
		return store.Record{}, fmt.Errorf("redisstore: %s in namespace %q: %w", op, ns, err)
	}
	if (r.Message.GetType() == llms.ChatMessageTypeSystem) != (rest[0] == 's') {
		return store.Record{}, s.corruptIn(op, id, ns, fmt.Sprintf("message Seq %d: role flag %q does not match its %s message", seq, rest[0], r.Message.GetType()))
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

// removeChunk is the most non-system messages one script of RemovePrefix
// removes: each script holds the server for about a millisecond, so a
// large removal never stalls other clients for long.
const removeChunk = 1000

// RemovePrefix implements store.Store: the non-system messages with Seq <=
// through go, the system ones stay in order. It removes them in chunks of
// at most removeChunk messages, one script each, so removing 100,000
// messages does not block the server for the whole removal (readers may
// see the oldest of them gone before the rest). A chunk's cost is
// O(removeChunk + the system messages at the head of the list); through is
// capped at the newest Seq when the first chunk runs, so messages appended
// meanwhile are never removed. Every chunk carries its own write token,
// so a retried chunk neither removes more nor counts twice. An error
// part-way returns how many were removed so far with the error; calling
// RemovePrefix again finishes the job.
func (s *Store) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	const op = "RemovePrefix"
	if err := s.begin(ctx, op, id); err != nil {
		return 0, err
	}
	k := s.keysOf(id)
	ks := []string{k.msgs, k.ops, k.opq, k.sys}
	limit := strconv.Itoa(removeChunk)
	total := 0
	for {
		res, err := s.runWrite(ctx, removeChunkScript, ks, strconv.FormatInt(through, 10), limit)
		if err != nil {
			return total, s.fail(ctx, op, id, err)
		}
		str, _ := res[len(res)-1].(string)
		if status(res) != "ok" {
			n, _ := res[len(res)-1].(int64)
			return total, s.corrupt(op, id, fmt.Sprintf("message at list index %d has no valid Seq or role flag", n))
		}
		var removed, more int
		var capped int64
		if _, err := fmt.Sscanf(str, "%d %d %d", &removed, &more, &capped); err != nil {
			return total, s.fail(ctx, op, id, fmt.Errorf("unexpected script reply %q", str))
		}
		total += removed
		if more == 0 {
			return total, nil
		}
		through = capped
		if err := ctx.Err(); err != nil {
			return total, s.fail(ctx, op, id, err)
		}
	}
}

// Clear implements store.Store with one script: it deletes the identity's
// messages and state in this namespace and sets the namespace's Clear mark
// to a fresh number from the identity's counter, which becomes the absent
// version of every state name there. Under WithTTL the mark expires with
// the conversation, so the same script raises the slot's forgotten version
// to the mark: afterwards the absent version never falls below it, and a
// commit that read before the Clear conflicts however late it comes. Seqs
// go on from the shared counter. A retry of the script after a lost reply
// changes nothing (its write token), so it never deletes what others wrote
// since.
func (s *Store) Clear(ctx context.Context, id memstack.Identity) error {
	const op = "Clear"
	if err := s.begin(ctx, op, id); err != nil {
		return err
	}
	res, err := s.runWrite(ctx, clearScript, s.keysOf(id).all(), s.ns, s.ttlArg)
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

// Forget implements store.Store: in one script it moves the forgotten
// version of the identity's hash slot to a fresh number and deletes every
// key of the identity under this store's prefix — messages (and their
// index), state and Clear mark of every namespace, the Seq counter, the
// namespace set and the write tokens — and nothing else. A PutState that read the
// identity's state before Forget then conflicts (forgetScript explains why
// both must be one step). If the Seq counter is ahead of the server's clock (a
// burst of appends just now), Forget first waits until the clock passes
// it, so no Seq is ever handed out twice.
//
// The namespaces come from the identity's nss set; on a server that may
// evict keys (WithEvictionAllowed), which may have evicted that set,
// Forget also finds the identity's keys with SCAN (see the package
// documentation, "Production settings").
func (s *Store) Forget(ctx context.Context, id memstack.Identity) error {
	const op = "Forget"
	if err := s.begin(ctx, op, id); err != nil {
		return err
	}
	var f *held
	if s.evicting {
		found, err := s.scan(ctx, s.identityPattern(id), s.keysOf(id).seq)
		if err != nil {
			return s.fail(ctx, op, id, fmt.Errorf("finding the identity's keys: %w", err))
		}
		f = found[id.Key()]
	}
	return s.forget(ctx, op, id, f)
}

// forget runs the Forget script of id over the namespaces of its nss set,
// this store's and those of f (what a SCAN found of id, nil if none), and
// f's other keys.
func (s *Store) forget(ctx context.Context, op string, id memstack.Identity, f *held) error {
	k := s.keysOf(id)
	for attempt := 1; ; attempt++ {
		members, err := s.client.SMembers(ctx, k.nss).Result()
		if err != nil {
			return s.fail(ctx, op, id, err)
		}
		nss := map[string]bool{s.ns: true}
		for _, ns := range members {
			nss[ns] = true
		}
		var other []string
		if f != nil {
			for ns := range f.namespaces {
				nss[ns] = true
			}
			for ns := range f.indexed {
				nss[ns] = true
			}
			other = f.other
		}
		names := make([]string, 0, len(nss))
		for ns := range nss {
			names = append(names, ns)
		}
		sort.Strings(names)
		ks := make([]string, 0, 5+4*len(names)+len(other))
		ks = append(ks, k.seq, k.nss, k.forgotten, k.ops, k.opq)
		args := make([]any, len(names))
		for i, ns := range names {
			m, st, c, sys := k.inNamespace(ns)
			ks = append(ks, m, st, c, sys)
			args[i] = ns
		}
		ks = append(ks, other...)
		if err := ctx.Err(); err != nil {
			return s.fail(ctx, op, id, err) // nothing was sent
		}
		res, err := forgetScript.Run(ctx, s.client, ks, args...).Slice()
		if err != nil {
			return s.fail(ctx, op, id, writeOutcome(err))
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
	if err := storekit.CheckStateName(name); err != nil {
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
	version, value, ok := parseStateValue(str)
	if !ok {
		return store.State{}, s.corrupt(op, id, fmt.Sprintf("state %q has no valid version", name))
	}
	return store.State{Value: value, Version: version}, nil
}

// PutState implements store.Store: a compare-and-set in one script, whose
// current version for an absent value is the absent version, read in the
// same script. New versions come from the identity's Seq counter, so they
// are never reused. A nil value deletes and returns the absent version. A
// retry of the script after a lost reply returns the version the first run
// wrote, not a conflict with itself (its write token).
func (s *Store) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	const op = "PutState"
	if err := s.begin(ctx, op, id); err != nil {
		return 0, err
	}
	if err := storekit.CheckStateName(name); err != nil {
		return 0, err
	}
	mode := "put"
	if value == nil {
		mode = "del"
	}
	res, err := s.runWrite(ctx, putStateScript, s.keysOf(id).all(),
		s.ns, s.ttlArg, name, strconv.FormatInt(expect, 10), mode, value)
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

// Rewrite implements store.Rewriter with one script, atomic like every
// other write: it removes every message with Seq <= through (system
// messages included), with reset deletes the namespace's state and sets a
// fresh Clear mark as Clear does, and appends msgs behind Seqs drawn after
// that mark, dated storekit.AppendTime(ctx). It is what AsHistory's
// SetMessages calls, so langchaingo's window memories keep the state and
// the Seqs of the messages they keep. Its cost is O(removed + appended);
// removing the whole list frees it in the background (UNLINK). A retry of
// the script after a lost reply changes nothing (its write token).
func (s *Store) Rewrite(ctx context.Context, id memstack.Identity, through int64, reset bool, msgs ...llms.ChatMessage) (int, error) {
	const op = "Rewrite"
	if err := s.begin(ctx, op, id); err != nil {
		return 0, err
	}
	at := storekit.AppendTime(ctx)
	if len(msgs) > 0 {
		if err := storekit.CheckTime(at); err != nil {
			return 0, fmt.Errorf("redisstore: %s of %q: %w", op, id.Key(), err)
		}
	}
	elems, err := encodeElements(op, id, at, msgs)
	if err != nil {
		return 0, err
	}
	flag := "0"
	if reset {
		flag = "1"
	}
	args := make([]any, 0, 4+len(elems))
	args = append(args, s.ns, s.ttlArg, strconv.FormatInt(through, 10), flag)
	args = append(args, elems...)
	res, err := s.runWrite(ctx, rewriteScript, s.keysOf(id).all(), args...)
	if err != nil {
		return 0, s.fail(ctx, op, id, err)
	}
	switch status(res) {
	case "ok":
		str, _ := res[len(res)-1].(string)
		n, err := strconv.Atoi(str)
		if err != nil || n < 0 {
			return 0, s.fail(ctx, op, id, fmt.Errorf("unexpected count %q in the script's reply", str))
		}
		return n, nil
	case "corrupt":
		n, _ := res[len(res)-1].(int64)
		return 0, s.corrupt(op, id, fmt.Sprintf("message at list index %d has no valid Seq", n))
	}
	return 0, s.corruptStatus(op, id, status(res))
}
