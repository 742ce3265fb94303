package memories

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/internal/stackmemo"
	"github.com/memstack/memstack/layer"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
	"github.com/tmc/langchaingo/llms"
)

// base holds what every memory type shares: configuration, identity
// resolution, validation of a turn and rendering of the loaded variable.
type base struct {
	cfg config
	err error // construction error; every method returns it
	// checkID, if set, vets the identity of every call (Facts with
	// WithFactsPerUser reserves one conversation name).
	checkID func(memstack.Identity) error
}

// newBase configures a memory from opts, each applied by apply (the method
// of the constructor's option interface); a bad option is b.err.
func newBase[O any](opts []O, apply func(O, *config)) base {
	cfg := newConfig(opts, apply)
	return base{cfg: cfg, err: errors.Join(cfg.errs...)}
}

var errNilContext = errors.New("memstack: nil context")

// begin checks the memory, the context and the identity; every method
// starts with it.
func (b *base) begin(ctx context.Context) (memstack.Identity, error) {
	if b.err != nil {
		return memstack.Identity{}, b.err
	}
	if ctx == nil {
		return memstack.Identity{}, errNilContext
	}
	if err := ctx.Err(); err != nil {
		return memstack.Identity{}, fmt.Errorf("memstack: %w", err)
	}
	id, ok := memstack.IdentityFrom(ctx)
	if !ok {
		if b.cfg.requireID {
			return memstack.Identity{}, memstack.ErrNoIdentity
		}
		id = b.cfg.defaultID
	}
	if b.checkID != nil {
		if err := b.checkID(id); err != nil {
			return memstack.Identity{}, err
		}
	}
	return id, nil
}

// GetMemoryKey returns the memory key (default "history").
func (b *base) GetMemoryKey(context.Context) string { return b.cfg.memoryKey }

// MemoryVariables returns the one variable the memory loads: its memory key.
func (b *base) MemoryVariables(context.Context) []string { return []string{b.cfg.memoryKey} }

// turn validates a chain call's maps and returns the two messages to store.
func (b *base) turn(ctx context.Context, inputs, outputs map[string]any) (memstack.Identity, []llms.ChatMessage, error) {
	id, err := b.begin(ctx)
	if err != nil {
		return id, nil, err
	}
	human, ai, err := adapter.Turn(inputs, outputs, b.cfg.inputKey, b.cfg.outputKey)
	if err != nil {
		return id, nil, err
	}
	return id, []llms.ChatMessage{llms.HumanChatMessage{Content: human}, llms.AIChatMessage{Content: ai}}, nil
}

// message validates a single message for AddMessage and returns it in the
// form to store (see adapter.Normalize).
func (b *base) message(ctx context.Context, msg llms.ChatMessage) (memstack.Identity, llms.ChatMessage, error) {
	id, err := b.begin(ctx)
	if err != nil {
		return id, nil, err
	}
	msg, err = adapter.Normalize(msg)
	return id, msg, err
}

// append stores msgs for id as one unit, dated storekit.AppendTime(ctx) — the
// caller's memstack.WithTime, else now — and notes that time on the
// call's Recorder (observe.Report.At). The time is fixed here and handed
// to the store in ctx, so the report and the stored messages agree.
//
// Under a save key (memstack.WithSaveKey) the store is given an append key
// derived from the save key and the messages (appendKeyFor), so the
// layers of a stack sharing a store, or a save retried with the same key,
// store the messages once; saves with the same key but other messages (a
// layer reading other input keys) are kept apart.
func (b *base) append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	at, err := b.appendQuiet(ctx, id, msgs...)
	if err != nil {
		return err
	}
	observe.FromContext(ctx).SavedAt(at)
	return nil
}

// appendQuiet is append without the report: for what a layer stores
// besides the caller's messages (Recall's journal). It returns the time
// the messages were stored with.
func (b *base) appendQuiet(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) (time.Time, error) {
	at := storekit.AppendTime(ctx)
	sctx := memstack.WithTime(ctx, at)
	if key, ok := memstack.SaveKeyFrom(ctx); ok {
		apkey := appendKeyFor(key, msgs)
		sctx = store.WithAppendKey(sctx, apkey)
		// In a combined save, another layer on the same store may be
		// storing these very messages: the first stores them, the others
		// wait and store nothing (package stackmemo).
		at, err := stackmemo.Append(ctx, b.cfg.store, id.Key(), apkey, at, func() error { return b.cfg.store.Append(sctx, id, msgs...) })
		if err != nil {
			return at, fmt.Errorf("memstack: storing messages: %w", err)
		}
		return at, nil
	}
	if err := b.cfg.store.Append(sctx, id, msgs...); err != nil {
		return at, fmt.Errorf("memstack: storing messages: %w", err)
	}
	return at, nil
}

// appendWith stores msgs for id as append does and, in the same atomic
// step, extra for extraID (what a layer records besides the caller's
// messages: Recall's journal entry), when the store is a
// store.MultiAppender; it reports whether it did. For another store it
// stores nothing and returns false: the caller appends msgs, then extra;
// so does a MultiAppender that refuses these identities
// (errors.ErrUnsupported).
// Under a save key each batch gets the append key append would give it.
func (b *base) appendWith(ctx context.Context, id memstack.Identity, msgs []llms.ChatMessage, extraID memstack.Identity, extra ...llms.ChatMessage) (bool, error) {
	ma, ok := b.cfg.store.(store.MultiAppender)
	if !ok {
		return false, nil
	}
	at := storekit.AppendTime(ctx)
	sctx := memstack.WithTime(ctx, at)
	batches := []store.Batch{{ID: id, Messages: msgs}, {ID: extraID, Messages: extra}}
	if key, ok := memstack.SaveKeyFrom(ctx); ok {
		batches[0].Key, batches[1].Key = appendKeyFor(key, msgs), appendKeyFor(key, extra)
	}
	if err := ma.AppendBatches(sctx, batches...); err != nil {
		if errors.Is(err, errors.ErrUnsupported) {
			return false, nil // stored nothing: the caller appends one by one
		}
		return false, fmt.Errorf("memstack: storing messages: %w", err)
	}
	observe.FromContext(ctx).SavedAt(at)
	return true, nil
}

func (b *base) clear(ctx context.Context) (memstack.Identity, error) {
	id, err := b.begin(ctx)
	if err != nil {
		return id, err
	}
	if err := b.cfg.store.Clear(ctx, id); err != nil {
		return id, fmt.Errorf("memstack: clearing: %w", err)
	}
	return id, nil
}

// variables returns the loaded variable for msgs: the messages themselves
// (msgs must be a fresh slice) or their rendering.
func (b *base) variables(msgs []llms.ChatMessage) (map[string]any, error) {
	if b.cfg.returnMessages {
		return map[string]any{b.cfg.memoryKey: msgs}, nil
	}
	s, err := adapter.Render(msgs, b.cfg.humanPrefix, b.cfg.aiPrefix)
	if err != nil {
		return nil, err
	}
	return map[string]any{b.cfg.memoryKey: s}, nil
}

func (b *base) describe(kind, extra string) string {
	mode := "string"
	if b.cfg.returnMessages {
		mode = "messages"
	}
	if extra != "" {
		extra += ", "
	}
	return fmt.Sprintf("%s(%smemory_key=%q, mode=%s, store=%T)", kind, extra, b.cfg.memoryKey, mode, b.cfg.store)
}

// messagesOf returns the records' messages, in order.
func messagesOf(recs []store.Record) []llms.ChatMessage { return conv.Messages(recs, recMessage) }

// identity is a short name for memstack.Identity inside this package.
type identity = memstack.Identity

// appendKeyFor returns the store append key of msgs saved under saveKey:
// "sk1-" and 32 hex digits of a SHA-256 over the key and the messages'
// encoding — the same for every layer saving the same turn, and never
// showing the key or the messages in the store.
func appendKeyFor(saveKey string, msgs []llms.ChatMessage) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(saveKey)))
	h.Write(n[:])
	h.Write([]byte(saveKey))
	for _, m := range msgs {
		b, err := storekit.EncodeMessage(m)
		if err != nil {
			b = fmt.Appendf(nil, "%T %+v", m, m)
		}
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	return "sk1-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// storeUses describes the memory's use of its store for combined.New;
// reads is how many of the newest non-system messages it reads (0: all).
func (b *base) storeUses(reads int, states ...string) []layer.StoreUse {
	u := layer.StoreUse{Store: b.cfg.store, Reads: reads, Keeps: -1, States: states}
	if r := b.cfg.retention; r != nil {
		u.Keeps = r.keep
	}
	return []layer.StoreUse{u}
}

// retain applies the memory's retention (WithRetention), if it has one,
// to id: see the function retain. limit is the newest Seq it may remove.
func (b *base) retain(ctx context.Context, id memstack.Identity, slack int, limit int64) {
	if r := b.cfg.retention; r != nil {
		retain(ctx, b.cfg.store, id, r.keep, slack, limit)
	}
}

// StoreUses implements layer.StoreUser: a Buffer reads every message.
func (b *Buffer) StoreUses() []layer.StoreUse { return b.storeUses(0) }

// StoreUses implements layer.StoreUser: a Summary reads every message
// its summary does not cover yet, and keeps its summary in the state
// SummaryStateName.
func (m *Summary) StoreUses() []layer.StoreUse { return m.storeUses(0, SummaryStateName) }

// StoreUses implements layer.StoreUser: Facts reads the messages it
// has not extracted from yet, and keeps its facts in the state
// FactsStateName.
func (m *Facts) StoreUses() []layer.StoreUse { return m.storeUses(0, FactsStateName) }

// StoreUses implements layer.StoreUser: Recall searches every message,
// and keeps its index's bookkeeping in the state RecallStateName (or
// WithRecallStateName's).
func (m *Recall) StoreUses() []layer.StoreUse { return m.storeUses(0, m.stateName) }
