package storetest_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/store/storetest"
)

// mapStore is a store backend of your own, complete and minimal: maps
// under one mutex, so every call is one atomic step. It keeps one
// namespace per value and implements only store.Store (not the optional
// Users or Rewriter, whose subtests the kit skips). Its Tail walks every
// record (storekit.TailOf); a backend for long conversations reads only the
// system messages and the newest ones.
type mapStore struct {
	mu        sync.Mutex
	last      int64 // the one counter Seqs, versions and absent versions come from: never reused
	convs     map[memstack.Identity]*mapConv
	forgotten map[int]int64 // ForgetBucket -> the absent version Forget drew
}

type mapConv struct {
	recs    []store.Record
	keys    []string // the append key of each record's unit, on its first record
	states  map[string]store.State
	cleared int64 // the Clear mark: the identity's absent version, 0 if never cleared
}

func newMapStore() *mapStore {
	return &mapStore{convs: map[memstack.Identity]*mapConv{}, forgotten: map[int]int64{}}
}

func (s *mapStore) next() int64 { s.last++; return s.last }

// conv returns id's conversation, created when create is set; s.mu is held.
func (s *mapStore) conv(id memstack.Identity, create bool) *mapConv {
	c := s.convs[id]
	if c == nil && create {
		c = &mapConv{states: map[string]store.State{}}
		s.convs[id] = c
	}
	return c
}

// absent is id's absent version: its Clear mark, else its Forget bucket's.
func (s *mapStore) absent(id memstack.Identity, c *mapConv) int64 {
	if c != nil && c.cleared != 0 {
		return c.cleared
	}
	return s.forgotten[storekit.ForgetBucket(id.Tenant, id.User)]
}

// isNil reports a nil message, a typed nil pointer (*llms.AIChatMessage) too.
func isNil(m llms.ChatMessage) bool {
	v := reflect.ValueOf(m)
	return m == nil || v.Kind() == reflect.Pointer && v.IsNil()
}

func copies(rs []store.Record) []store.Record {
	out := make([]store.Record, len(rs))
	for i, r := range rs {
		out[i] = store.Record{Seq: r.Seq, Message: storekit.CloneMessage(r.Message), Time: r.Time}
	}
	return out
}

func (s *mapStore) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mapstore: %w", err)
	}
	if len(msgs) == 0 {
		return nil
	}
	at := storekit.AppendTime(ctx) // memstack.WithTime's time, else now
	if err := storekit.CheckTime(at); err != nil {
		return err
	}
	key, keyed, err := storekit.CheckAppendKeyOf(ctx)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(msgs, isNil) {
		return fmt.Errorf("%w: a nil message", store.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conv(id, true)
	if keyed && slices.Contains(c.keys, key) {
		return nil // this unit is stored already
	}
	for i, m := range msgs {
		c.recs = append(c.recs, store.Record{Seq: s.next(), Message: storekit.CloneMessage(m), Time: at})
		c.keys = append(c.keys, "")
		if i == 0 && keyed {
			c.keys[len(c.keys)-1] = key
		}
	}
	return nil
}

// read returns a copy of what f picks from id's records (nil if none),
// under the lock.
func (s *mapStore) read(ctx context.Context, id memstack.Identity, f func([]store.Record) []store.Record) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mapstore: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var rs []store.Record
	if c := s.conv(id, false); c != nil {
		rs = c.recs
	}
	return copies(f(rs)), nil
}

func (s *mapStore) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: Last(n=%d)", store.ErrInvalidArgument, n)
	}
	return s.read(ctx, id, func(rs []store.Record) []store.Record { return rs[max(len(rs)-n, 0):] })
}

func (s *mapStore) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: Tail(n=%d)", store.ErrInvalidArgument, n)
	}
	return s.read(ctx, id, func(rs []store.Record) []store.Record { return storekit.TailOf(rs, n, after) })
}

func (s *mapStore) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	return s.read(ctx, id, func(rs []store.Record) []store.Record { return rs })
}

func (s *mapStore) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	if err := ctx.Err(); err != nil {
		return store.Stat{}, fmt.Errorf("mapstore: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conv(id, false)
	if c == nil || len(c.recs) == 0 {
		return store.Stat{}, nil
	}
	return store.Stat{Count: len(c.recs), FirstSeq: c.recs[0].Seq, LastSeq: c.recs[len(c.recs)-1].Seq}, nil
}

func (s *mapStore) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("mapstore: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conv(id, false)
	if c == nil {
		return 0, nil
	}
	var recs []store.Record
	var keys []string
	for i, r := range c.recs {
		if r.Seq > through || r.Message.GetType() == llms.ChatMessageTypeSystem { // system messages are pinned
			recs, keys = append(recs, r), append(keys, c.keys[i])
		}
	}
	n := len(c.recs) - len(recs)
	c.recs, c.keys = recs, keys
	return n, nil
}

func (s *mapStore) Clear(ctx context.Context, id memstack.Identity) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mapstore: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.convs[id] = &mapConv{states: map[string]store.State{}, cleared: s.next()}
	return nil
}

func (s *mapStore) Forget(ctx context.Context, id memstack.Identity) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mapstore: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgotten[storekit.ForgetBucket(id.Tenant, id.User)] = s.next()
	delete(s.convs, id)
	return nil
}

func (s *mapStore) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	if err := ctx.Err(); err != nil {
		return store.State{}, fmt.Errorf("mapstore: %w", err)
	}
	if err := storekit.CheckStateName(name); err != nil {
		return store.State{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conv(id, false)
	if st, ok := c.stateOf(name); ok {
		return store.State{Value: bytes.Clone(st.Value), Version: st.Version}, nil
	}
	return store.State{Version: s.absent(id, c)}, nil
}

func (c *mapConv) stateOf(name string) (store.State, bool) {
	if c == nil {
		return store.State{}, false
	}
	st, ok := c.states[name]
	return st, ok
}

func (s *mapStore) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("mapstore: %w", err)
	}
	if err := storekit.CheckStateName(name); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conv(id, true)
	cur, ok := c.states[name]
	if !ok {
		cur.Version = s.absent(id, c)
	}
	if cur.Version != expect {
		return 0, fmt.Errorf("%w: state %q is at version %d, not %d", store.ErrConflict, name, cur.Version, expect)
	}
	if value == nil {
		delete(c.states, name)
		return s.absent(id, c), nil
	}
	v := s.next()
	c.states[name] = store.State{Value: bytes.Clone(value), Version: v}
	return v, nil
}

var _ store.Store = (*mapStore)(nil)

// mapOpener is the Opener of mapStore. Its data lives in the value, so
// opening a namespace again returns the same value: the kit's "reopen"
// and "second client" see the same data, as a new connection pool over
// a database would.
func mapOpener() storetest.Opener {
	var mu sync.Mutex
	stores := map[string]*mapStore{}
	return func(_ testing.TB, ns string) (store.Store, error) {
		mu.Lock()
		defer mu.Unlock()
		if stores[ns] == nil {
			stores[ns] = newMapStore()
		}
		return stores[ns], nil
	}
}

// TestMapStoreConformance runs the conformance kit on the backend: one
// subtest per rule of the store contract.
func TestMapStoreConformance(t *testing.T) {
	storetest.Run(t, mapOpener())
}

// A backend of your own implements store.Store and proves it with
// storetest.Run(t, opener) (TestMapStoreConformance above); the Opener
// gives the kit a store per namespace, and a second client over the same
// data when asked again. Any memory then keeps its messages in it
// (memories.WithStore).
func ExampleOpener() {
	open := mapOpener()
	s, _ := open(nil, "example") // the kit passes its test here; this Opener needs none
	mem, err := memories.NewBuffer(memories.WithStore(s))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "ana"})
	if err := mem.SaveContext(ctx, map[string]any{"input": "Hi, I'm Ana."}, map[string]any{"output": "Hello Ana!"}); err != nil {
		fmt.Println(err)
		return
	}

	again, _ := open(nil, "example") // a second client over the same data
	recs, _ := again.All(ctx, memstack.Identity{Tenant: "acme", User: "ana"})
	for _, r := range recs {
		fmt.Printf("%d %s: %s\n", r.Seq, r.Message.GetType(), r.Message.GetContent())
	}
	vars, _ := mem.LoadMemoryVariables(ctx, nil)
	fmt.Println(vars["history"])
	// Output:
	// 1 human: Hi, I'm Ana.
	// 2 ai: Hello Ana!
	// Human: Hi, I'm Ana.
	// AI: Hello Ana!
}
