package memories

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/store"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// Buffer is the full transcript of each conversation: langchaingo's
// ConversationBuffer, without its faults.
//
// In string mode (the default) Buffer keeps each identity's rendered
// history and extends it incrementally: a load checks the store's Stat and
// renders only the messages added since the previous load, so the cost of a
// turn does not grow with the length of the conversation (langchaingo
// re-renders the whole history on every turn). The rendered string is
// byte-for-byte llms.GetBufferString of the stored messages. In messages mode
// a load returns a fresh copy of every stored message.
//
// Buffer is safe for concurrent use.
type Buffer struct {
	base
	cache *lru.Cache[memstack.Identity, *rendered]
}

// rendered is the rendered history of one identity and the store Stat it
// was rendered from.
type rendered struct {
	mu    sync.Mutex
	stat  store.Stat
	sb    strings.Builder
	seqs  []int64     // the Seqs rendered, in order (for reports)
	times []time.Time // the times of the messages rendered (for reports)
}

var (
	_ schema.Memory = (*Buffer)(nil)
	_ fmt.Stringer  = (*Buffer)(nil)
)

// NewBuffer returns a Buffer. A bad option value (WithStore(nil), an empty
// WithMemoryKey, a negative WithCacheSize, a nil option...) is an error
// wrapping ErrInvalidOption that names the option, as for every other
// memory type; it never panics. (langchaingo's NewConversationBuffer has
// no error result because none of its options can fail; memstack's can,
// so NewBuffer reports it here rather than from every later call.)
func NewBuffer(opts ...BufferOption) (*Buffer, error) {
	b := &Buffer{base: newBase(opts, BufferOption.applyBuffer)}
	if b.err != nil {
		return nil, b.err
	}
	if b.cfg.cacheSize > 0 {
		b.cache, _ = lru.New[memstack.Identity, *rendered](b.cfg.cacheSize)
	}
	return b, nil
}

// SaveContext stores the turn: the user's message from inputs and the
// model's answer from outputs (keys chosen as in langchaingo). Both maps are
// validated first; the turn is stored whole or not at all.
func (b *Buffer) SaveContext(ctx context.Context, inputs, outputs map[string]any) error {
	id, msgs, err := b.turn(ctx, inputs, outputs)
	if err != nil {
		return err
	}
	return b.append(ctx, id, msgs...)
}

// AddMessage stores one message of any role (a system prompt, a tool
// result, ...).
func (b *Buffer) AddMessage(ctx context.Context, msg llms.ChatMessage) error {
	id, msg, err := b.message(ctx, msg)
	if err != nil {
		return err
	}
	return b.append(ctx, id, msg)
}

// LoadMemoryVariables returns the whole transcript under the memory key.
// The inputs are not used.
func (b *Buffer) LoadMemoryVariables(ctx context.Context, _ map[string]any) (map[string]any, error) {
	id, err := b.begin(ctx)
	if err != nil {
		return nil, err
	}
	rec := observe.FromContext(ctx)
	if b.cfg.returnMessages || b.cache == nil {
		recs, err := b.cfg.store.All(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("memstack: loading history: %w", err)
		}
		if rec.Enabled() {
			recordMessages(rec, nil, recs)
		}
		return b.variables(messagesOf(recs))
	}
	s, err := b.renderedHistory(ctx, id, rec)
	if err != nil {
		return nil, err
	}
	return map[string]any{b.cfg.memoryKey: s}, nil
}

// renderedHistory brings id's cached rendering up to date with the store
// and returns it; with a Recorder, it notes the messages rendered.
func (b *Buffer) renderedHistory(ctx context.Context, id memstack.Identity, rec *observe.Recorder) (_ string, err error) {
	r, ok := b.cache.Get(id)
	if !ok {
		r = &rendered{}
		if prev, found, _ := b.cache.PeekOrAdd(id, r); found {
			r = prev
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec.Enabled() {
		defer func() {
			if err == nil {
				recordSeqs(rec, r.seqs, r.times)
			}
		}()
	}
	st, err := b.cfg.store.Stat(ctx, id)
	if err != nil {
		return "", fmt.Errorf("memstack: loading history: %w", err)
	}
	if st == r.stat {
		return r.sb.String(), nil
	}
	// Only appends since the last load: render just the new messages.
	if r.stat.Count > 0 && st.FirstSeq == r.stat.FirstSeq && st.Count > r.stat.Count {
		k := st.Count - r.stat.Count
		recs, err := b.cfg.store.Last(ctx, id, k+1)
		if err != nil {
			return "", fmt.Errorf("memstack: loading history: %w", err)
		}
		if len(recs) == k+1 && recs[0].Seq == r.stat.LastSeq {
			if err := b.renderInto(r, recs[1:]); err != nil {
				return "", err
			}
			return r.sb.String(), nil
		}
	}
	// Anything else (first load, prefix removed, cleared, changed by
	// another writer): render from scratch.
	recs, err := b.cfg.store.All(ctx, id)
	if err != nil {
		return "", fmt.Errorf("memstack: loading history: %w", err)
	}
	r.sb = strings.Builder{}
	r.stat = store.Stat{}
	r.seqs, r.times = r.seqs[:0], r.times[:0]
	if err := b.renderInto(r, recs); err != nil {
		return "", err
	}
	return r.sb.String(), nil
}

// renderInto appends recs to r's rendering. On error r is reset so that the
// next load renders from scratch.
func (b *Buffer) renderInto(r *rendered, recs []store.Record) error {
	for _, rec := range recs {
		line, err := adapter.RenderLine(rec.Message, b.cfg.humanPrefix, b.cfg.aiPrefix)
		if err != nil {
			r.sb, r.stat, r.seqs, r.times = strings.Builder{}, store.Stat{}, r.seqs[:0], r.times[:0]
			return err
		}
		if r.stat.Count > 0 {
			r.sb.WriteByte('\n')
		} else {
			r.stat.FirstSeq = rec.Seq
		}
		r.sb.WriteString(line)
		r.seqs = append(r.seqs, rec.Seq)
		r.times = append(r.times, rec.Time)
		r.stat.Count++
		r.stat.LastSeq = rec.Seq
	}
	return nil
}

// Clear removes the transcript of the identity in ctx, and only that one.
func (b *Buffer) Clear(ctx context.Context) error {
	id, err := b.clear(ctx)
	if err != nil {
		return err
	}
	if b.cache != nil {
		b.cache.Remove(id)
	}
	return nil
}

// String describes the memory's configuration (not its contents, which
// depend on the identity and live in the store).
func (b *Buffer) String() string { return b.describe("Buffer", "") }
