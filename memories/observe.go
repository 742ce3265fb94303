package memories

import (
	"context"
	"strconv"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
)

// Observability (package observe): a memory records what a load injected
// and left out on the observe.Recorder in its context — put there by
// combined.WithObserver or observe.Wrap. With no Recorder, FromContext
// returns nil and each memory skips recording after one nil check, so
// recording costs nothing when it is off. Items are messages (Kind
// "message", ID the Seq, Time the time the message was saved:
// store.Record.Time) or a Summary's summary (Kind "summary", ID the Seq
// of the newest message it covers, no Time); windows report the messages
// before the window as dropped with observe.ReasonWindow; TokenWindow
// reports tokens; Summary reports one LLM call per summarizer call (none
// for the offline summarizer.Extractive). Every save that stores messages
// notes the time it dated them with (observe.Report.At: the caller's
// memstack.WithTime, else now).

// ResolveIdentity returns the identity a call with ctx works on: the
// identity in ctx, else the memory's default identity, or
// memstack.ErrNoIdentity under WithRequireIdentity (and the construction
// error of a memory built with a bad option). It implements
// observe.IdentityResolver, which observers use to report the identity's
// hash.
func (b *base) ResolveIdentity(ctx context.Context) (memstack.Identity, error) {
	if b.err != nil {
		return memstack.Identity{}, b.err
	}
	if id, ok := memstack.IdentityFrom(ctx); ok {
		return id, nil
	}
	if b.cfg.requireID {
		return memstack.Identity{}, memstack.ErrNoIdentity
	}
	return b.cfg.defaultID, nil
}

var (
	_ observe.IdentityResolver = (*base)(nil)
	_ observe.IdentityHasher   = (*base)(nil)
)

// HashIdentity implements observe.IdentityHasher: the identity's keyed
// hash with WithHashKey, else memstack.Identity.Hash.
func (b *base) HashIdentity(id memstack.Identity) string {
	if len(b.cfg.hashKey) > 0 {
		return id.KeyedHash(b.cfg.hashKey)
	}
	return id.Hash()
}

// redact is observe.RedactWith with the memory's hash of id.
func (b *base) redact(err error, id memstack.Identity) error {
	return observe.RedactWith(err, id, b.HashIdentity(id))
}

// Kinds of the items memories report and load.
const (
	kindMessage = "message"
	kindSummary = "summary"
)

func seqID(seq int64) string { return strconv.FormatInt(seq, 10) }

// recordMessages notes recs as injected (with their token costs when cost
// is not nil) and adds the costs to the recorder's tokens.
func recordMessages(rec *observe.Recorder, cost func(store.Record) int, recs ...[]store.Record) {
	n := 0
	for _, rs := range recs {
		n += len(rs)
	}
	items := make([]observe.Item, 0, n)
	total := 0
	for _, rs := range recs {
		for _, r := range rs {
			it := observe.Item{Kind: kindMessage, ID: seqID(r.Seq), Time: r.Time}
			if cost != nil {
				it.Tokens = cost(r)
				total += it.Tokens
			}
			items = append(items, it)
		}
	}
	rec.Injected(items...)
	if cost != nil {
		rec.Tokens(total)
	}
}

// recordOutside notes the messages before a window as dropped with
// observe.ReasonWindow.
func recordOutside(rec *observe.Recorder, cost func(store.Record) int, outside []store.Record) {
	if len(outside) == 0 {
		return
	}
	items := make([]observe.Item, len(outside))
	for i, r := range outside {
		items[i] = observe.Item{Kind: kindMessage, ID: seqID(r.Seq), Reason: observe.ReasonWindow, Time: r.Time}
		if cost != nil {
			items[i].Tokens = cost(r)
		}
	}
	rec.Dropped(items...)
}

// recordSeqs notes the messages with the given Seqs, stored at the given
// times (times[i] is seqs[i]'s), as injected.
func recordSeqs(rec *observe.Recorder, seqs []int64, times []time.Time) {
	items := make([]observe.Item, len(seqs))
	for i, seq := range seqs {
		items[i] = observe.Item{Kind: kindMessage, ID: seqID(seq), Time: times[i]}
	}
	rec.Injected(items...)
}
