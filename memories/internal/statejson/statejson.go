// Package statejson reads the JSON states the layers of package memories
// keep in their store (store.States).
package statejson

import (
	"context"
	"encoding/json"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// Read reads the state name of id from s and decodes its JSON into a T.
// For an absent state it returns the zero T and the store's absent
// version, which a Clear or Forget moves (see package store), so that a
// compare-and-set with it conflicts after one. An error of the store is
// returned as readErr makes it, a value that is not valid JSON as badErr
// makes it.
func Read[T any](ctx context.Context, s store.Store, id memstack.Identity, name string, readErr, badErr func(error) error) (T, int64, error) {
	var v T
	st, err := s.GetState(ctx, id, name)
	if err != nil {
		return v, 0, readErr(err)
	}
	if !st.Exists() {
		return v, st.Version, nil // the absent version: a Clear or Forget moves it
	}
	if err := json.Unmarshal(st.Value, &v); err != nil {
		var zero T
		return zero, 0, badErr(err)
	}
	return v, st.Version, nil
}
