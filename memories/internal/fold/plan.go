package fold

import (
	"context"
	"fmt"
	"math"

	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
)

// plan is one fold: the batch of messages and the state it builds on.
type foldPlan struct {
	prev    State
	version int64
	batch   []llms.ChatMessage
	through int64
}

// plan returns the fold due for id, or nil if none is.
func (x *Engine) plan(ctx context.Context, id identity) (*foldPlan, error) {
	// The state before the messages: the fold commits with the version
	// read here, so a Clear or Forget after this read — by this process
	// or another replica — makes the commit conflict, and one before it
	// is seen by the read of the messages below. Read the other way
	// round, a Clear in between would hand the fold the cleared messages
	// and the cleared state's new version, and the commit would bring the
	// cleared text back. (A fold committed by another writer in between
	// makes the commit conflict too.) The messages read are those after
	// the covered Seq only (Tail), so a plan costs what a load shows.
	prev, version, err := x.readState(ctx, id)
	if err != nil {
		return nil, err
	}
	recs, err := x.cfg.Store.Tail(ctx, id, math.MaxInt, prev.Through)
	if err != nil {
		return nil, fmt.Errorf("reading the messages of %s: %w", id.Key(), err)
	}
	_, rest := conv.SplitSystem(recs, recMessage)
	var cut int
	if x.cfg.MaxTokens > 0 {
		if cut, err = x.tokenCut(id, rest); err != nil {
			return nil, err
		}
	} else if len(rest) > x.cfg.MaxMessages {
		cut = batchEnd(rest, max(x.cfg.BatchSize, len(rest)-x.cfg.MaxMessages), false)
	}
	if cut == 0 {
		return nil, nil
	}
	return &foldPlan{prev: prev, version: version, batch: conv.Messages(rest[:cut], recMessage), through: rest[cut-1].Seq}, nil
}

// tokenCut returns how many of the oldest messages of rest to fold in token
// mode: 0 while they are within t tokens, else enough that about t/2 remain.
// A bad count (tokens.Count) is an error: nothing is folded.
func (x *Engine) tokenCut(id identity, rest []store.Record) (int, error) {
	t := x.cfg.MaxTokens
	costs := make([]int, len(rest))
	total := 0
	for i, r := range rest {
		c, err := x.cfg.Cost(id, r)
		if err != nil {
			return 0, fmt.Errorf("counting the tokens of message Seq %d of %s: %w", r.Seq, id.Key(), err)
		}
		costs[i] = c
		total = min(total+c, math.MaxInt/2)
	}
	if total <= t {
		return 0, nil
	}
	k, left := 0, total
	for k < len(rest) && left > t/2 {
		left -= costs[k]
		k++
	}
	return batchEnd(rest, k, true), nil
}

// batchEnd returns where a batch of the oldest messages of rest that should
// hold at least k messages ends (the number of messages in it), or 0 for no
// batch. The end is an exchange boundary (just before a human message) at
// or after k; if rest has no human message after its first, any tool
// group boundary (conv.GroupStarts), which keeps a tool call with its
// results. The newest message is never included. With back set, when no
// boundary lies at or after k, the latest boundary before k is used
// instead.
func batchEnd(rest []store.Record, k int, back bool) int {
	if len(rest) < 2 {
		return 0
	}
	k = min(max(k, 1), len(rest)-1)
	ok := func(c int) bool { return conv.OpensExchange(rest[c].Message) }
	if !conv.HasExchangeStart(rest[1:], recMessage) {
		starts := conv.GroupStarts(rest, recMessage)
		ok = func(c int) bool { return starts[c] == c }
	}
	for c := k; c < len(rest); c++ {
		if ok(c) {
			return c
		}
	}
	if back {
		for c := k - 1; c > 0; c-- {
			if ok(c) {
				return c
			}
		}
	}
	return 0
}
