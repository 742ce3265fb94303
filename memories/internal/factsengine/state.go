package factsengine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/memstack/memstack/memories/internal/statejson"
	"time"

	"github.com/memstack/memstack/store"
)

// Fact is a fact as the state stores it, and as memories.Fact encodes
// it: the same fields, in the same order, with the same JSON names (the
// embedded structs' fields are encoded in place).
type Fact struct {
	Key       string `json:"key"`
	Subject   string `json:"subject"`
	Attribute string `json:"attribute"`
	Value     string `json:"value"`
	origin
	validity
}

// origin is where a fact came from: its source messages' Seqs, their
// conversation and the extractor's rule.
type origin struct {
	Sources      []int64 `json:"sources,omitempty"`
	Conversation string  `json:"conversation,omitempty"`
	Rule         string  `json:"rule,omitempty"`
}

// validity is when a fact was valid: ValidTo is zero while it is current.
type validity struct {
	ValidFrom time.Time `json:"valid_from"`
	ValidTo   time.Time `json:"valid_to,omitzero"`
}

// state is what an Engine keeps in the store's state per scope.
type state struct {
	// Through maps a conversation to the Seq of the newest of its messages
	// that extraction covered.
	Through map[string]int64 `json:"through,omitempty"`
	// Facts holds every fact, current and superseded, in the order they
	// were recorded.
	Facts []Fact `json:"facts"`
	// Epoch changes whenever the facts are forgotten while the state
	// stays: an extraction that read another epoch before its model call
	// commits its coverage but none of its facts.
	Epoch uint64 `json:"epoch,omitempty"`
}

// Facts returns every fact kept for id (under Config.Scope(id)), current
// and superseded, in the order they were recorded. The slice and its
// facts are the caller's.
func (x *Engine) Facts(ctx context.Context, id identity) ([]Fact, error) {
	st, _, err := x.read(ctx, x.cfg.Scope(id))
	return st.Facts, err
}

// read returns the facts state kept under scope and its version: for an
// absent state the zero state and the store's absent version, which a
// Clear or Forget moves (see package store).
func (x *Engine) read(ctx context.Context, scope identity) (state, int64, error) {
	return statejson.Read[state](ctx, x.cfg.Store, scope, x.cfg.StateName,
		func(err error) error { return fmt.Errorf("memstack: reading the facts of %s: %w", scope.Key(), err) },
		func(err error) error {
			return fmt.Errorf("memstack: the stored facts of %s (state %q) are not valid JSON: %w", scope.Key(), x.cfg.StateName, err)
		})
}

// Forget removes every fact kept for id (under Config.Scope(id)) and
// keeps what extraction covered, so that other conversations sharing the
// facts do not extract their old exchanges again. It moves the state's
// epoch even when there is no fact yet, so an extraction in flight — in
// this process or another replica — that read the state before commits
// no fact from an exchange said before the Forget.
func (x *Engine) Forget(ctx context.Context, id identity) error {
	scope := x.cfg.Scope(id)
	for range stateRetries {
		st, version, err := x.read(ctx, scope)
		if err != nil {
			return err
		}
		st.Facts = nil
		st.Epoch = newEpoch(st.Epoch)
		value, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("encoding the facts of %s: %w", scope.Key(), err)
		}
		_, err = x.cfg.Store.PutState(ctx, scope, x.cfg.StateName, value, version)
		if err == nil || !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("%w: gave up after %d attempts", store.ErrConflict, stateRetries)
}

// newEpoch returns a random epoch other than 0 and old.
func newEpoch(old uint64) uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		if e := binary.LittleEndian.Uint64(b[:]); e != 0 && e != old {
			return e
		}
	}
}

// commit records facts (possibly none) for id and marks its messages up to
// through as covered, in one compare-and-set of the state, retried on
// conflict. It returns how many facts it recorded and superseded. If
// another writer covered through first, it records nothing.
//
// Cleared means gone (see package store): each attempt reads the state,
// then the messages' bounds, then commits with the version it read. If
// the exchange's messages are gone — a Clear or Forget, by any replica,
// after pending read them — it records nothing at all; a Clear after the
// state read makes the commit conflict, and the next attempt sees the
// messages gone. If the facts were forgotten with the state kept (the
// epoch moved since pending's read), it records the coverage but not the
// facts: they come from an exchange said before the Forget.
func (x *Engine) commit(ctx context.Context, id identity, through int64, facts []Fact, epoch uint64) (stored, superseded int, err error) {
	scope := x.cfg.Scope(id)
	for range stateRetries {
		st, version, err := x.read(ctx, scope)
		if err != nil {
			return 0, 0, err
		}
		if st.Through[id.Conversation] >= through {
			return 0, 0, nil
		}
		stat, err := x.cfg.Store.Stat(ctx, id)
		if err != nil {
			return 0, 0, fmt.Errorf("reading the messages of %s: %w", id.Key(), err)
		}
		if stat.Count == 0 || stat.FirstSeq > through {
			return 0, 0, nil // cleared or forgotten since they were read
		}
		keep := facts
		if st.Epoch != epoch {
			keep = nil
		}
		now := x.cfg.Clock().Round(0).UTC()
		stored, superseded = apply(&st, keep, now)
		if st.Through == nil {
			st.Through = make(map[string]int64, 1)
		}
		st.Through[id.Conversation] = through
		value, err := json.Marshal(st)
		if err != nil {
			return 0, 0, fmt.Errorf("encoding the facts of %s: %w", scope.Key(), err)
		}
		_, err = x.cfg.Store.PutState(ctx, scope, x.cfg.StateName, value, version)
		if err == nil {
			return stored, superseded, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return 0, 0, fmt.Errorf("committing the facts of %s: %w", scope.Key(), err)
		}
	}
	return 0, 0, fmt.Errorf("committing the facts of %s: %w: gave up after %d attempts", scope.Key(), store.ErrConflict, stateRetries)
}
