package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// GetState implements store.Store with one script: the value and its
// version, or, when the name has none, the absent version (the Clear mark,
// else the slot's forgotten version, else 0), read in one step.
func (s *Store) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	const op = "GetState"
	if err := s.begin(ctx, op, id); err != nil {
		return store.State{}, err
	}
	if err := storekit.CheckStateName(name); err != nil {
		return store.State{}, err
	}
	res, err := getStateScript.Run(ctx, s.client, s.keysOf(id).all(), name).Slice()
	if err != nil {
		return store.State{}, s.fail(ctx, op, id, err)
	}
	var str string
	if len(res) == 2 {
		str, _ = res[1].(string)
	}
	switch status(res) {
	case "absent":
		v, err := strconv.ParseInt(str, 10, 64)
		if err != nil || v < 0 {
			return store.State{}, s.fail(ctx, op, id, fmt.Errorf("unexpected absent version %q in the script's reply", str))
		}
		return store.State{Version: v}, nil
	case "value":
	default:
		return store.State{}, s.corruptStatus(op, id, status(res))
	}
	version, value, ok := parseStateValue(str)
	if !ok {
		return store.State{}, s.corrupt(op, id, fmt.Sprintf("state %q has no valid version", name))
	}
	return store.State{Value: value, Version: version}, nil
}

// PutState implements store.Store: a compare-and-set in one script, whose
// current version for an absent value is the absent version, read in the
// same script. New versions come from the identity's Seq counter, so they
// are never reused. A nil value deletes and returns the absent version. A
// retry of the script after a lost reply returns the version the first run
// wrote, not a conflict with itself (its write token).
func (s *Store) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	const op = "PutState"
	if err := s.begin(ctx, op, id); err != nil {
		return 0, err
	}
	if err := storekit.CheckStateName(name); err != nil {
		return 0, err
	}
	mode := "put"
	if value == nil {
		mode = "del"
	}
	res, err := s.runWrite(ctx, putStateScript, s.keysOf(id).all(),
		s.ns, s.ttlArg, name, strconv.FormatInt(expect, 10), mode, value)
	if err != nil {
		return 0, s.fail(ctx, op, id, err)
	}
	switch status(res) {
	case "ok":
		str, _ := res[len(res)-1].(string)
		v, err := strconv.ParseInt(str, 10, 64)
		if err != nil || v < 0 {
			return 0, s.fail(ctx, op, id, fmt.Errorf("unexpected version %q in the script's reply", str))
		}
		return v, nil
	case "conflict":
		cur, _ := res[len(res)-1].(string)
		return 0, fmt.Errorf("redisstore: %s: %w: state %q of %q in namespace %q is at version %s, not %d",
			op, store.ErrConflict, name, id.Key(), s.ns, cur, expect)
	case "corrupt":
		return 0, s.corrupt(op, id, fmt.Sprintf("state %q has no valid version", name))
	}
	return 0, s.corruptStatus(op, id, status(res))
}
