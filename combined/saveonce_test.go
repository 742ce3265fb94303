package combined_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// countingStore counts the Appends it is given, and fails the first
// fail of them.
type countingStore struct {
	store.Store
	mu      sync.Mutex
	appends int
	fail    int
	panics  bool // the failing calls panic

	tails, failTails int // Tail calls, and how many of the first fail
}

func (s *countingStore) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	s.mu.Lock()
	s.appends++
	failing := s.appends <= s.fail
	s.mu.Unlock()
	if failing && s.panics {
		panic("the driver fell over")
	}
	if failing {
		return errors.New("the database went away")
	}
	return s.Store.Append(ctx, id, msgs...)
}

// Layers sharing a store store a combined save's turn with one store call:
// the first stores it, the others wait for it. When that call fails,
// or panics, another layer stores the turn, and the save reports the
// failure (a layer never waits for a call that ended). A
// store that cannot be compared gets a call per layer (the store's
// append key keeps one copy).
func TestLayersOnOneStoreStoreATurnWithOneCall(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fail        int
		panics      bool
		comparable  bool
		wantAppends int
		wantErr     bool
	}{
		{"one call", 0, false, true, 1, false},
		{"the first call fails", 1, false, true, 2, true},
		{"the first call panics", 1, true, true, 2, true},
		{"every call fails", 9, false, true, 3, true},
		{"a store that cannot be compared", 0, false, false, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := &countingStore{Store: store.NewInMemory(), fail: tc.fail, panics: tc.panics}
			var st store.Store = cs
			if !tc.comparable {
				st = uncomparable{cs, nil}
			}
			recent, err := memories.NewRecentN(6, memories.WithStore(st))
			require.NoError(t, err)
			buffer, err := memories.NewBuffer(memories.WithStore(st), memories.WithMemoryKey("all"))
			require.NoError(t, err)
			recall, err := memories.NewRecall(memories.WithStore(st), memories.WithMemoryKey("recalled"))
			require.NoError(t, err)
			mem, err := combined.New([]schema.Memory{recent, buffer, recall})
			require.NoError(t, err)
			ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: "u", Conversation: "c"})
			err = mem.SaveContext(ctx, map[string]any{"input": "the launch is on the 14th"}, map[string]any{"output": "noted"})
			if tc.wantErr {
				require.Error(t, err)
				require.Regexp(t, "the database went away|the driver fell over", err.Error())
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.wantAppends, cs.appends)
			recs, err := cs.Store.All(ctx, memstack.Identity{User: "u", Conversation: "c"})
			require.NoError(t, err)
			var msgs []llms.ChatMessage
			for _, r := range recs {
				msgs = append(msgs, r.Message)
			}
			if tc.fail >= 3 {
				require.Empty(t, msgs)
				return
			}
			require.Equal(t, []llms.ChatMessage{llms.HumanChatMessage{Content: "the launch is on the 14th"}, llms.AIChatMessage{Content: "noted"}}, msgs)
		})
	}
}

func (s *countingStore) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	s.mu.Lock()
	s.tails++
	failing := s.tails <= s.failTails
	s.mu.Unlock()
	if failing {
		return nil, errors.New("the replica went away")
	}
	return s.Store.Tail(ctx, id, n, after)
}

// Layers sharing a store read the tail they both need with one store call
// in a combined load, and load what they load alone; a failed read is
// not shared (the other layer reads again). Layers on stores of their own
// make their own calls.
func TestLayersOnOneStoreReadATailWithOneCall(t *testing.T) {
	id := memstack.Identity{User: "u", Conversation: "c"}
	ctx := memstack.WithIdentity(context.Background(), id)
	for _, tc := range []struct {
		name      string
		failTails int
		shared    bool
		wantTails int
		wantErr   bool
	}{
		{"one call", 0, true, 1, false},
		{"the first call fails", 1, true, 2, true},
		{"stores of their own", 0, false, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &countingStore{Store: store.NewInMemory()}
			b := a
			if !tc.shared {
				b = &countingStore{Store: store.NewInMemory()}
			}
			for _, cs := range []*countingStore{a, b} {
				for i := range 10 {
					require.NoError(t, cs.Store.Append(ctx, id, llms.HumanChatMessage{Content: fmt.Sprint("question ", i)}, llms.AIChatMessage{Content: fmt.Sprint("answer ", i)}))
				}
			}
			first, err := memories.NewRecentN(6, memories.WithStore(a), memories.WithMemoryKey("first"))
			require.NoError(t, err)
			second, err := memories.NewRecentN(6, memories.WithStore(b), memories.WithMemoryKey("second"))
			require.NoError(t, err)
			mem, err := combined.New([]schema.Memory{first, second})
			require.NoError(t, err)
			alone, err := first.LoadMemoryVariables(ctx, nil)
			require.NoError(t, err)
			a.tails, b.tails = 0, 0
			a.failTails = tc.failTails
			vars, err := mem.LoadMemoryVariables(ctx, nil)
			if tc.wantErr {
				require.ErrorContains(t, err, "the replica went away")
			} else {
				require.NoError(t, err)
				assert.Equal(t, alone["first"], vars["first"])
				assert.Equal(t, alone["first"], vars["second"])
			}
			tails := a.tails
			if !tc.shared {
				tails += b.tails
			}
			assert.Equal(t, tc.wantTails, tails)
		})
	}
}

// uncomparable is a store whose dynamic type cannot be compared.
type uncomparable struct {
	*countingStore
	tags []string
}
