package store

import (
	"context"

	"github.com/memstack/memstack"
	"github.com/tmc/langchaingo/llms"
)

// Rewriter is implemented by stores that can rewrite a conversation in one
// atomic step. AsHistory's SetMessages uses it, so langchaingo's window
// memories (which call SetMessages to drop their oldest messages) keep a
// conversation's state and the Seqs of the messages they keep, and never
// leave a half-written history behind. All four backends of memstack
// implement it; package storetest checks it.
type Rewriter interface {
	// Rewrite removes every message of id with Seq <= through — system
	// messages included, unlike RemovePrefix — and appends msgs as one
	// unit after the messages it keeps, all in one atomic step: a reader
	// sees the conversation from before or from after, and a failure
	// (a nil message, a cancelled ctx) changes nothing. With reset it
	// also removes id's state values and moves its absent version, as
	// Clear does (the state described messages that are gone). Appended
	// messages get new Seqs, greater than every Seq before, dated
	// storekit.AppendTime(ctx). It returns how many messages it removed.
	Rewrite(ctx context.Context, id memstack.Identity, through int64, reset bool, msgs ...llms.ChatMessage) (int, error)
}
