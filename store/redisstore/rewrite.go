package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/storekit"
	"github.com/tmc/langchaingo/llms"
)

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
