package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/indexkit"
)

// RecallSearcher is implemented by a Store that keeps memories.Recall's
// lexical index beside its messages (package indexkit): each Append
// writes the index rows of its messages in its own transaction, and
// Clear, Forget, ForgetScope, RemovePrefix and Rewrite remove them in
// theirs, so every process that reads the database searches what every
// process saved, and a search never returns a unit that is not stored.
// sqlitestore and pgstore implement it; the index is on for a file (for a
// database's tables under a prefix) once a Store opens it with their
// WithRecallIndex. A Recall over such a store with the default
// index searches it while it is on and complete (see memories.Recall, "The
// index in the database"); otherwise, and over other stores, it builds an
// in-process index.
type RecallSearcher interface {
	// SearchRecall returns the q.K best units of the conversation or
	// scope in for the query q (see indexkit.Search for the ranking),
	// best first, in this Store's namespace. While the store keeps no
	// index, or the index of messages stored before it was turned on is
	// still being built (see the backend's documentation), it returns an
	// error wrapping ErrRecallNotReady. A bad query (an unknown unit kind, a weight
	// outside [0, 1]) is an error wrapping ErrInvalidArgument.
	SearchRecall(ctx context.Context, in RecallScope, q indexkit.Query) ([]RecallHit, error)
	// RecallDated returns the units of kind in the conversation or scope
	// in whose first message was saved on a day from through to
	// (indexkit.DayKey numbers, in each message's own location: a day is
	// from == to, a month yyyymm01 through yyyymm31), ordered by
	// conversation key and Seq, with Score 0: what a question naming a
	// date brings, hit or not. A unit no longer stored may be among them
	// (a reader checks each against the messages). Errors as
	// SearchRecall's.
	RecallDated(ctx context.Context, in RecallScope, kind indexkit.Kind, from, to int32) ([]RecallHit, error)
}

// RecallScope is what a SearchRecall searches: one conversation, or the
// conversations of a Scope.
type RecallScope struct {
	// Conversation, if not nil, is the one conversation searched.
	Conversation *memstack.Identity
	// Scope is searched when Conversation is nil.
	Scope Scope
}

// String describes the scope, for errors.
func (s RecallScope) String() string {
	if s.Conversation != nil {
		return "conversation " + s.Conversation.Key()
	}
	return s.Scope.String()
}

// RecallHit is a unit SearchRecall found: its conversation, the Seq of
// its first message still stored and its score.
type RecallHit struct {
	ID    memstack.Identity
	Seq   int64
	Score float64
	// From and To are the unit's stretch of its conversation when the
	// query asked for one (indexkit.Query.Reach; see indexkit.Hit): a
	// RangeReader's SeqRange{ID, From, To} reads the units around it.
	// Both are 0 otherwise: without Reach, when no stretch is known (a
	// unit of it has no index entry), and for RecallDated's units.
	From, To int64
}

// ErrRecallNotReady is wrapped by SearchRecall's error while the store
// keeps no recall index (sqlitestore or pgstore without WithRecallIndex) or it is not
// complete (older messages still being indexed): search another way
// meanwhile. It wraps errors.ErrUnsupported.
var ErrRecallNotReady = fmt.Errorf("store: no complete recall index (it is off, or still being built): %w", errors.ErrUnsupported)

// SeqRange names the messages of one identity whose Seq is at least From
// and below To.
type SeqRange struct {
	ID       memstack.Identity
	From, To int64
}

// RangeReader is implemented by a Store that reads stretches of
// conversations by Seq, many in one round trip: a Recall over a
// RecallSearcher reads, of each other conversation its load shows, the
// units around the hits (RecallHit.From and To), not the conversation.
// sqlitestore and pgstore implement it; package storetest checks it.
type RangeReader interface {
	// ReadRanges returns, for each range, the messages of its ID whose
	// Seq lies in [From, To), system messages included, oldest first:
	// out[i] is ranges[i]'s (empty when To <= From or none is stored).
	// All the ranges are read at one point in time, so none shows half
	// of an Append.
	ReadRanges(ctx context.Context, ranges []SeqRange) ([][]Record, error)
}
