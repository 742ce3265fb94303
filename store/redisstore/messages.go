package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
	"github.com/tmc/langchaingo/llms"
)

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
	key, _, err := storekit.CheckAppendKeyOf(ctx)
	if err != nil {
		return fmt.Errorf("redisstore: %s of %q: %w", op, id.Key(), err)
	}
	token, args, err := s.appendArgs(op, id, at, key, msgs)
	if err != nil {
		return err
	}
	res, err := s.runWriteAs(ctx, token, appendScript, s.appendKeys(id), args...)
	if err != nil {
		return s.fail(ctx, op, id, err)
	}
	if st := status(res); st != "ok" {
		return s.corruptStatus(op, id, st)
	}
	return nil
}

// AppendBatches implements store.MultiAppender for a client of one Redis
// server (a *redis.Client: a standalone server, or Sentinel's failover
// client): each batch is Append's script, with its own write token (its
// append key's, or a fresh one), and the scripts run in one MULTI/EXEC
// transaction, so no other client sees one batch without the others, and
// a retry after a lost reply stores nothing twice (each script finds its
// token). A Redis Cluster or Ring client keeps identities on different
// nodes, and a server in cluster mode refuses a transaction across slots:
// AppendBatches then returns an error wrapping errors.ErrUnsupported
// and stores nothing (the caller appends the batches one by one). Redis
// transactions do not roll back: if a batch finds its identity's keys
// corrupt, the call fails with store.ErrCorrupt naming it, and the batches
// before it in the call stay stored.
func (s *Store) AppendBatches(ctx context.Context, batches ...store.Batch) error {
	const op = "AppendBatches"
	if len(batches) == 0 {
		return s.begin(ctx, op, memstack.Identity{})
	}
	for _, b := range batches {
		if err := s.begin(ctx, op, b.ID); err != nil {
			return err
		}
	}
	c, ok := s.client.(*redis.Client)
	if !ok || s.slotted {
		return fmt.Errorf("redisstore: %s: %w: a %T of a server that keeps Cluster slots may keep the identities apart; append them one by one", op, errors.ErrUnsupported, s.client)
	}
	at := storekit.AppendTime(ctx)
	if err := storekit.CheckTime(at); err != nil {
		return fmt.Errorf("redisstore: %s of %q: %w", op, batches[0].ID.Key(), err)
	}
	type part struct {
		id    memstack.Identity
		token string
		args  []any
	}
	var parts []part
	for i, b := range batches {
		if b.Key != "" {
			if err := storekit.CheckAppendKey(b.Key); err != nil {
				return fmt.Errorf("redisstore: %s: batch %d of %d (%q): %w", op, i+1, len(batches), b.ID.Key(), err)
			}
		}
		if len(b.Messages) == 0 {
			continue
		}
		token, args, err := s.appendArgs(op, b.ID, at, b.Key, b.Messages)
		if err != nil {
			return err
		}
		parts = append(parts, part{b.ID, token, append([]any{token}, args...)})
	}
	if len(parts) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, maxWriteCall)
	defer cancel()
	cmds := make([]*redis.Cmd, len(parts))
	run := func() error {
		_, err := c.TxPipelined(wctx, func(p redis.Pipeliner) error {
			for i, pt := range parts {
				cmds[i] = appendScript.EvalSha(wctx, p, s.appendKeys(pt.id), pt.args...)
			}
			return nil
		})
		return err
	}
	// Every batch runs the same script, so a server that does not know
	// it (a restart, SCRIPT FLUSH) refuses them all and runs none: load
	// it and run the transaction again.
	err := s.loadingScript(wctx, appendScript, run)
	for i, pt := range parts {
		res, cerr := cmds[i].Slice()
		if cerr != nil {
			if err == nil {
				err = cerr
			}
			return s.fail(ctx, op, pt.id, writeOutcome(err))
		}
		if st := status(res); st != "ok" {
			return s.corruptStatus(op, pt.id, st)
		}
	}
	if err != nil {
		return s.fail(ctx, op, parts[0].id, writeOutcome(err))
	}
	return nil
}

var _ store.MultiAppender = (*Store)(nil)

// appendArgs returns the write token of an append of msgs to id dated at
// under append key key ("" for none: a fresh token) and the append
// script's arguments after the token (with appendKeys, its KEYS).
func (s *Store) appendArgs(op string, id memstack.Identity, at time.Time, key string, msgs []llms.ChatMessage) (string, []any, error) {
	token := newToken()
	if key != "" {
		token = appendKeyToken(s.ns, key)
	}
	elems, err := encodeElements(op, id, at, msgs)
	if err != nil {
		return "", nil, err
	}
	member := ""
	if s.feeds() {
		member = id.Key()
	}
	return token, append([]any{s.ns, s.ttlArg, member}, elems...), nil
}

// loadingScript calls run, which sends script by its hash; when the
// server does not know the script (a restart, SCRIPT FLUSH) it loads it
// and calls run again. run must send nothing that ran when the server
// refused the script (a pipeline or transaction of that script only).
func (s *Store) loadingScript(ctx context.Context, script *redis.Script, run func() error) error {
	err := run()
	if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return err
	}
	if lerr := script.Load(ctx, s.client).Err(); lerr != nil {
		return fmt.Errorf("loading a script the server did not know: %w", lerr)
	}
	return run()
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
	return s.parseStat(ctx, op, id, res)
}

// StatMany implements store.MultiStat: one pipeline of statScript, one
// reply per identity, so a Recall's load checks the conversations it
// shows in one round trip. (The script is loaded first when the server
// does not know it yet.)
func (s *Store) StatMany(ctx context.Context, ids []memstack.Identity) ([]store.Stat, error) {
	const op = "StatMany"
	for _, id := range ids {
		if err := s.begin(ctx, op, id); err != nil {
			return nil, err
		}
	}
	if len(ids) == 0 {
		return []store.Stat{}, nil
	}
	var cmds []*redis.Cmd
	err := s.loadingScript(ctx, statScript, func() error {
		pipe := s.client.Pipeline()
		cmds = make([]*redis.Cmd, len(ids))
		for i, id := range ids {
			cmds[i] = statScript.EvalSha(ctx, pipe, []string{s.keysOf(id).msgs})
		}
		_, err := pipe.Exec(ctx)
		return err
	})
	if err != nil {
		failed := ids[0] // the first identity whose read failed names the error
		for i, c := range cmds {
			if c.Err() != nil {
				failed = ids[i]
				break
			}
		}
		return nil, s.fail(ctx, op, failed, err)
	}
	out := make([]store.Stat, len(ids))
	for i, id := range ids {
		res, err := cmds[i].Slice()
		if err != nil {
			return nil, s.fail(ctx, op, id, err)
		}
		if out[i], err = s.parseStat(ctx, op, id, res); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseStat reads statScript's reply for id.
func (s *Store) parseStat(ctx context.Context, op string, id memstack.Identity, res []any) (store.Stat, error) {
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

var _ store.MultiStat = (*Store)(nil)

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
