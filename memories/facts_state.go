package memories

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/memstack/memstack/memories/internal/statejson"
	"github.com/memstack/memstack/store"
)

// Clear removes the messages and the facts of the identity in ctx, and
// only that one; with WithFactsPerUser it removes this conversation's
// messages and the user's facts (shared by all their conversations; the
// other conversations' messages stay, and are not extracted again). An
// extraction of that identity in flight in this Facts is cancelled first
// and cannot commit afterwards.
func (m *Facts) Clear(ctx context.Context) error {
	return m.clearExclusive(ctx, m.pool, errFactsClosed{}, func(id identity) error {
		if !m.perUser {
			return nil
		}
		if err := m.forgetFacts(ctx, m.scope(id)); err != nil {
			return fmt.Errorf("memstack: clearing the facts: %w", err)
		}
		return nil
	})
}

// ---- state ----

// readState returns the facts state kept under scope and its version: for
// an absent state the zero factsState and the store's absent version,
// which a Clear or Forget moves (see package store).
func (m *Facts) readState(ctx context.Context, scope identity) (factsState, int64, error) {
	return statejson.Read[factsState](ctx, m.cfg.store, scope, FactsStateName,
		func(err error) error { return fmt.Errorf("memstack: reading the facts of %s: %w", scope.Key(), err) },
		func(err error) error {
			return fmt.Errorf("memstack: the stored facts of %s (state %q) are not valid JSON: %w", scope.Key(), FactsStateName, err)
		})
}

// forgetFacts removes every fact kept under scope and keeps what
// extraction covered, so that other conversations sharing the facts
// (WithFactsPerUser) do not extract their old turns again. It moves the
// state's epoch even when there is no fact yet, so an extraction in
// flight — in this process or another replica — that read the state
// before commits no fact from a turn said before the Clear.
func (m *Facts) forgetFacts(ctx context.Context, scope identity) error {
	for range stateRetries {
		st, version, err := m.readState(ctx, scope)
		if err != nil {
			return err
		}
		st.Facts = nil
		st.Epoch = newEpoch(st.Epoch)
		value, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("encoding the facts of %s: %w", scope.Key(), err)
		}
		_, err = m.cfg.store.PutState(ctx, scope, FactsStateName, value, version)
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
