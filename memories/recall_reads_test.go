package memories_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// statCounting is a real in-memory store that counts its Stat calls and,
// when multi is set, answers StatMany (store.MultiStat) by counting the
// call and asking Stat for each identity; panicOn makes Stat of that
// conversation panic once armed (a store's bug).
type statCounting struct {
	*store.InMemory
	stats, manys atomic.Int64
	panicOn      string
	armed        atomic.Bool
}

func (s *statCounting) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	s.stats.Add(1)
	if s.armed.Load() && id.Conversation == s.panicOn {
		panic("a store bug reading " + id.Conversation)
	}
	return s.InMemory.Stat(ctx, id)
}

type multiStatCounting struct{ *statCounting }

func (s multiStatCounting) StatMany(ctx context.Context, ids []memstack.Identity) ([]store.Stat, error) {
	s.manys.Add(1)
	out := make([]store.Stat, len(ids))
	for i, id := range ids {
		st, err := s.InMemory.Stat(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	return out, nil
}

// rrFill saves, in each of n conversations of ana, an exchange about the
// ferry, so a question about it finds a turn in every one.
func rrFill(t *testing.T, s store.Store, n int) {
	m, err := memories.NewRecall(memories.WithStore(s))
	require.NoError(t, err)
	for c := range n {
		id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: fmt.Sprintf("c%d", c)}
		rsSave(t, m, id, rsMay8.Add(time.Duration(c)*time.Hour), fmt.Sprintf("When does ferry %d leave?", c), fmt.Sprintf("Ferry %d leaves at nine.", c))
	}
}

func rrLoad(m *memories.Recall) (map[string]any, error) {
	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "ana", Conversation: "new"})
	return m.LoadMemoryVariables(ctx, map[string]any{"input": "when does the ferry leave?"})
}

// A load that shows turns of many conversations over a store.MultiStat
// checks them with one StatMany, not a Stat each (and its own
// conversation and the user's journal with another); a conversation changed
// meanwhile (by another client of the store) is read again, so what it
// shows is current.
func TestRecall_LoadChecksTheConversationsItShowsInOneCall(t *testing.T) {
	s := multiStatCounting{&statCounting{InMemory: store.NewInMemory()}}
	rrFill(t, s, 6)
	m, err := memories.NewRecall(memories.WithStore(s), memories.WithK(6))
	require.NoError(t, err)
	_, err = rrLoad(m) // the first load indexes the user's conversations
	require.NoError(t, err)

	s.stats.Store(0)
	s.manys.Store(0)
	vars, err := rrLoad(m)
	require.NoError(t, err)
	shown := fmt.Sprint(vars)
	convs := 0
	for c := range 6 {
		if strings.Contains(shown, fmt.Sprintf("Ferry %d leaves", c)) {
			convs++
		}
	}
	require.GreaterOrEqual(t, convs, 4, "the load shows turns of most conversations: %s", shown)
	assert.EqualValues(t, 2, s.manys.Load(), "one StatMany for the conversation and the journal, one for the conversations shown")
	assert.Zero(t, s.stats.Load(), "no Stat of its own for any conversation")

	// Another client clears conversation c3: the next load reads it again
	// and shows nothing of it.
	require.NoError(t, s.InMemory.Clear(context.Background(), memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c3"}))
	vars, err = rrLoad(m)
	require.NoError(t, err)
	assert.NotContains(t, fmt.Sprint(vars), "Ferry 3 leaves")
	assert.Contains(t, fmt.Sprint(vars), "Ferry 4 leaves")
}

// Over a networked store without StatMany the conversations a load shows
// are read concurrently; a panic in one read (a store's bug) is the
// load's error, naming the panic, and the process goes on.
func TestRecall_APanickingReadIsTheLoadsError(t *testing.T) {
	s := &statCounting{InMemory: store.NewInMemory(), panicOn: "c2"}
	rrFill(t, s, 4)
	m, err := memories.NewRecall(memories.WithStore(s), memories.WithK(4))
	require.NoError(t, err)
	vars, err := rrLoad(m)
	require.NoError(t, err)
	require.Contains(t, fmt.Sprint(vars), "Ferry 2 leaves")

	s.armed.Store(true)
	_, err = rrLoad(m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panicked")
	assert.Contains(t, err.Error(), "a store bug reading c2")
}
