package retrieval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// RRFK is the constant k of reciprocal-rank fusion (Cormack et al., 2009):
// a doc at rank r (1-based) in one ranking contributes 1/(RRFK + r).
const RRFK = 60

// HybridOption configures NewHybrid.
type HybridOption func(*hybrid) error

// WithMinScores drops, before fusion, the hits of the first part scoring
// below minA and those of the second scoring below minB, each in its own
// part's scale (for BM25 and Vector: a lexical score in [0, 1], a cosine
// in [-1, 1]). A value outside its part's Range is an error. Default: no
// minimum, every hit a part returns is fused.
func WithMinScores(minA, minB float64) HybridOption {
	return func(h *hybrid) error {
		if err := checkRange("WithMinScores: first part", minA, h.parts[0].Range()); err != nil {
			return err
		}
		if err := checkRange("WithMinScores: second part", minB, h.parts[1].Range()); err != nil {
			return err
		}
		h.min = [2]float64{minA, minB}
		h.minSet = true
		return nil
	}
}

// NewHybrid returns an index that adds every doc to both a and b and fuses
// their rankings by reciprocal-rank fusion: a doc's fused score is
//
//	Σ over the parts that answered  1/(RRFK + rank in that part)
//
// divided by its maximum (the number of parts that answered times
// 1/(RRFK+1)), so scores lie in [0, 1] (FusedRange): 1 for a doc both
// parts rank first, about 0.5 for a doc only one part finds, at the top.
// Each part is asked for max(4k, 20) candidates, so a doc ranked well by
// both beats one ranked first by only one. Ties go to the newer doc.
//
// Typically a is a BM25 and b a Vector: the hybrid then keeps working,
// lexically, while the embedder is down. When one part fails, Search
// returns the other part's ranking (scores normalised over that one part)
// together with an error wrapping ErrDegraded and the cause; Add adds to the
// part that works and returns such an error too. When both fail, there are
// no hits and the error joins both causes. A part that panics fails like
// one that returns an error (the parts run on goroutines of the hybrid's,
// where no caller could recover a panic). Search waits for a part that
// ignores its context at most HybridSearchGrace after the context ended,
// then fuses the other part's ranking (the late part's answer is
// discarded); Add and Delete wait for both parts, so whoever bounds them
// (memories.Recall) sees when the whole write has ended.
//
// The result implements Durable when a or b does (AddSince passes since to
// the durable parts and every doc to the others), and Releaser, forwarding
// to the parts that implement it. A nil part is an error, as is a bad
// option.
func NewHybrid(a, b Index, opts ...HybridOption) (Index, error) {
	if isNil(a) || isNil(b) {
		return nil, fmt.Errorf("%w: NewHybrid: both parts must be non-nil indexes", ErrInvalidArgument)
	}
	h := &hybrid{parts: [2]Index{a, b}}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: NewHybrid: option %d of %d is nil", ErrInvalidArgument, i+1, len(opts))
		}
		if err := o(h); err != nil {
			return nil, err
		}
	}
	_, da := a.(Durable)
	_, db := b.(Durable)
	if da || db {
		return &durableHybrid{h}, nil
	}
	return h, nil
}

// HybridSearchGrace is how long a hybrid search waits, after its context
// ended, for a part that has not answered (an embedder that ignores its
// context) before it returns the other part's ranking. It is shorter than
// the grace memories.Recall gives an index call, so the working part's
// hits reach the caller.
const HybridSearchGrace = 100 * time.Millisecond

type hybrid struct {
	parts  [2]Index
	min    [2]float64
	minSet bool
}

type durableHybrid struct{ *hybrid }

var (
	_ Index    = (*hybrid)(nil)
	_ Releaser = (*hybrid)(nil)
	_ Durable  = (*durableHybrid)(nil)
	_ Remover  = (*durableHybrid)(nil)
	_ Remover  = (*hybrid)(nil)

	_ SourceRemover = (*durableHybrid)(nil)
	_ SourceRemover = (*Vector)(nil)
)

// String describes the index.
func (h *hybrid) String() string {
	return fmt.Sprintf("Hybrid(RRF k=%d: %s, %s)", RRFK, describe(h.parts[0]), describe(h.parts[1]))
}

// Range returns FusedRange, [0, 1].
func (h *hybrid) Range() Range { return FusedRange }

// both runs f on both parts concurrently and returns their errors; a part
// whose f panics fails with an error saying so.
func (h *hybrid) both(op string, f func(i int, p Index) error) [2]error {
	var errs [2]error
	var wg sync.WaitGroup
	for i, p := range h.parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer catch(&errs[i], "%s in %s", op, lazyName{p})
			errs[i] = f(i, p)
		}()
	}
	wg.Wait()
	return errs
}

// combine turns the parts' errors into the hybrid's error.
func (h *hybrid) combine(op string, errs [2]error) error {
	switch {
	case errs[0] != nil && errs[1] != nil:
		return fmt.Errorf("retrieval: hybrid %s: both parts failed: %w", op, errors.Join(errs[0], errs[1]))
	case errs[0] != nil:
		return fmt.Errorf("%w: %s in %s: %w", ErrDegraded, op, describe(h.parts[0]), errs[0])
	case errs[1] != nil:
		return fmt.Errorf("%w: %s in %s: %w", ErrDegraded, op, describe(h.parts[1]), errs[1])
	}
	return nil
}

// Add adds docs to both parts.
func (h *hybrid) Add(ctx context.Context, scope string, docs []Doc) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	return h.combine("add", h.both("add", func(_ int, p Index) error { return p.Add(ctx, scope, docs) }))
}

// Search fuses both parts' rankings (see NewHybrid).
func (h *hybrid) Search(ctx context.Context, scope, query string, k int) ([]Hit, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if err := checkK(k); err != nil {
		return nil, err
	}
	lists, errs := h.searchParts(ctx, scope, query, max(4*k, 20))
	answered := 0
	fused := make(map[int64]float64)
	for i, hits := range lists {
		if errs[i] != nil {
			continue
		}
		answered++
		rank := 0
		for _, hit := range hits {
			if h.minSet && hit.Score < h.min[i] {
				continue
			}
			rank++
			fused[hit.Seq] += 1 / float64(RRFK+rank)
		}
	}
	err := h.combine("search", errs)
	if answered == 0 {
		return nil, err
	}
	norm := float64(answered) / float64(RRFK+1)
	hits := make([]Hit, 0, len(fused))
	for seq, s := range fused {
		hits = append(hits, Hit{Seq: seq, Score: math.Min(s/norm, 1)})
	}
	sortHits(hits)
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits, err
}

// lazyName formats as describe(idx), when formatted.
type lazyName struct{ idx Index }

func (n lazyName) String() string { return describe(n.idx) }

// searchParts searches both parts concurrently and returns their hits and
// errors. A part that panics fails with an error saying so; a part that
// has not answered HybridSearchGrace after ctx ended fails with an error
// wrapping ctx's, and its answer is discarded when it comes.
func (h *hybrid) searchParts(ctx context.Context, scope, query string, depth int) ([2][]Hit, [2]error) {
	type answer struct {
		i    int
		hits []Hit
		err  error
	}
	answers := make(chan answer, len(h.parts)) // never blocks a late part
	for i, p := range h.parts {
		go func() {
			a := answer{i: i}
			func() {
				defer catch(&a.err, "search in %s", lazyName{p})
				a.hits, a.err = p.Search(ctx, scope, query, depth)
			}()
			answers <- a
		}()
	}
	var lists [2][]Hit
	var errs [2]error
	var answered [2]bool
	done := ctx.Done()
	var grace <-chan time.Time
	for n := 0; n < len(h.parts); {
		select {
		case a := <-answers:
			lists[a.i], errs[a.i], answered[a.i] = a.hits, a.err, true
			n++
		case <-done:
			done = nil
			t := time.NewTimer(HybridSearchGrace)
			defer t.Stop()
			grace = t.C
		case <-grace:
			for i, ok := range answered {
				if !ok {
					errs[i] = fmt.Errorf("retrieval: search in %s abandoned %v after its context ended: %w", describe(h.parts[i]), HybridSearchGrace, ctx.Err())
				}
			}
			return lists, errs
		}
	}
	return lists, errs
}

// Delete deletes scope from both parts.
func (h *hybrid) Delete(ctx context.Context, scope string) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	return h.combine("delete", h.both("delete", func(_ int, p Index) error { return p.Delete(ctx, scope) }))
}

// Release forwards to the parts that implement Releaser.
func (h *hybrid) Release(scope string) {
	for _, p := range h.parts {
		if r, ok := p.(Releaser); ok {
			r.Release(scope)
		}
	}
}

// AddSince implements Durable.
func (h *durableHybrid) AddSince(ctx context.Context, scope string, docs []Doc, since int64) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	return h.combine("add", h.both("add", func(_ int, p Index) error {
		if d, ok := p.(Durable); ok {
			return d.AddSince(ctx, scope, docs, since)
		}
		return p.Add(ctx, scope, docs)
	}))
}

// Remove implements Remover: it removes the docs from both parts (BM25
// removes single docs too). It returns an error wrapping ErrCannotRemove
// if a part cannot remove docs.
func (h *hybrid) Remove(ctx context.Context, scope string, seqs []int64) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	for _, p := range h.parts {
		r, ok := p.(Remover)
		if !ok {
			return fmt.Errorf("%w: the part %T cannot remove documents", ErrCannotRemove, p)
		}
		if err := r.Remove(ctx, scope, seqs); err != nil {
			return err
		}
	}
	return nil
}

// RemoveSource implements SourceRemover: the parts that keep docs outside
// the process remove the source's docs; the in-process parts' docs are
// removed by Seq (Remove). It returns an error wrapping ErrCannotRemove
// if such a part cannot, or none can.
func (h *hybrid) RemoveSource(ctx context.Context, scope, source string) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	removed := false
	for _, p := range h.parts {
		if _, durable := p.(Durable); !durable {
			continue
		}
		r, ok := p.(SourceRemover)
		if !ok {
			return fmt.Errorf("%w: the part %T cannot remove a source's documents", ErrCannotRemove, p)
		}
		if err := r.RemoveSource(ctx, scope, source); err != nil {
			return err
		}
		removed = true
	}
	if !removed {
		return fmt.Errorf("%w: no part keeps documents outside the process", ErrCannotRemove)
	}
	return nil
}

// Spaces implements Durable: the durable parts' spaces, in order.
func (h *durableHybrid) Spaces() []Space {
	var out []Space
	for _, p := range h.parts {
		if d, ok := p.(Durable); ok {
			out = append(out, d.Spaces()...)
		}
	}
	return out
}

// CheckSpaces implements Durable: recorded is split among the durable
// parts as Spaces lists them.
func (h *durableHybrid) CheckSpaces(recorded []Space) error {
	if len(recorded) == 0 {
		return nil
	}
	if want := len(h.Spaces()); len(recorded) != want {
		return fmt.Errorf("%w: %d spaces were recorded; this hybrid index has %d", ErrSpaceMismatch, len(recorded), want)
	}
	rest := recorded
	for _, p := range h.parts {
		d, ok := p.(Durable)
		if !ok {
			continue
		}
		n := len(d.Spaces())
		if err := d.CheckSpaces(rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}
