package observe_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/observe"
)

func TestNilRecorderIsANoOpAndAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	var r *observe.Recorder
	assert.Nil(t, observe.FromContext(ctx))
	//nolint:staticcheck // a nil context is tolerated
	assert.Nil(t, observe.FromContext(nil))
	assert.False(t, r.Enabled())
	assert.Equal(t, observe.Report{}, r.Finish(time.Second, errors.New("x")))
	assert.Equal(t, observe.Report{}, r.FinishNow(nil))

	item := observe.Item{Kind: "message", ID: "1"}
	allocs := testing.AllocsPerRun(1000, func() {
		rec := observe.FromContext(ctx)
		if rec.Enabled() {
			t.Fatal("enabled without a recorder")
		}
		rec.Injected(item)
		rec.Dropped(item)
		rec.Tokens(3)
		rec.LLMCall(1)
		rec.EmbeddingCall(1)
		rec.SavedAt(time.Time{})
	})
	assert.Zero(t, allocs, "recording with no observer must not allocate")
}

func TestRecorderCollectsAReport(t *testing.T) {
	r := observe.StartRecorder(observe.OpLoad, "recent", "abc")
	ctx := observe.WithRecorder(context.Background(), r)
	require.Same(t, r, observe.FromContext(ctx))
	assert.True(t, r.Enabled())

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := observe.FromContext(ctx)
			rec.Injected(observe.Item{Kind: "message", ID: "1", Tokens: 2})
			rec.Dropped(observe.Item{Kind: "message", ID: "0", Reason: observe.ReasonWindow})
			rec.Tokens(2)
			rec.LLMCall(1)
			rec.EmbeddingCall(2)
		}()
	}
	wg.Wait()
	time.Sleep(time.Millisecond)
	boom := errors.New("boom")
	rep := r.FinishNow(boom)
	assert.Equal(t, observe.OpLoad, rep.Op)
	assert.Equal(t, "recent", rep.Layer)
	assert.Equal(t, "abc", rep.IdentityHash)
	assert.Len(t, rep.Injected, 8)
	assert.Len(t, rep.Dropped, 8)
	assert.Equal(t, 16, rep.Tokens)
	assert.Equal(t, 8, rep.LLMCalls)
	assert.Equal(t, 16, rep.EmbeddingCalls)
	assert.Same(t, boom, rep.Err)
	assert.False(t, rep.Start.IsZero())
	assert.GreaterOrEqual(t, rep.Duration, time.Millisecond)

	// The report is a copy: later recording does not change it.
	r.Injected(observe.Item{ID: "late"})
	assert.Len(t, rep.Injected, 8)

	// NewRecorder leaves the start unset; Finish takes the caller's duration.
	plain := observe.NewRecorder(observe.OpSave, "x", "")
	rep = plain.Finish(3*time.Second, nil)
	assert.True(t, rep.Start.IsZero())
	assert.Equal(t, 3*time.Second, rep.Duration)
	assert.Zero(t, observe.NewRecorder(observe.OpSave, "x", "").FinishNow(nil).Duration)
	assert.True(t, rep.At.IsZero(), "no save time unless a layer notes one")
}

func TestRecorderNotesTheSaveTime(t *testing.T) {
	at := time.Date(2023, 5, 8, 10, 30, 0, 0, time.FixedZone("", 2*3600))
	r := observe.StartRecorder(observe.OpSave, "recent", "abc")
	observe.FromContext(observe.WithRecorder(context.Background(), r)).SavedAt(at)
	rep := r.FinishNow(nil)
	assert.Equal(t, at, rep.At)
	assert.NotEqual(t, rep.Start, rep.At, "Start is when the call ran, At when its messages are dated")

	var nilRec *observe.Recorder
	nilRec.SavedAt(at) // a no-op
	assert.Equal(t, observe.Report{}, nilRec.FinishNow(nil))
}

func TestCountReasons(t *testing.T) {
	got := observe.CountReasons([]observe.Item{
		{Reason: observe.ReasonBudget}, {Reason: observe.ReasonWindow}, {Reason: observe.ReasonBudget}, {},
	})
	assert.Equal(t, map[string]int{observe.ReasonBudget: 2, observe.ReasonWindow: 1, "": 1}, got)
}

type resolver struct {
	id  memstack.Identity
	err error
}

func (r resolver) ResolveIdentity(context.Context) (memstack.Identity, error) { return r.id, r.err }

func TestIdentityHash(t *testing.T) {
	given := memstack.Identity{Tenant: "t", User: "u", Conversation: "c"}
	def := memstack.Identity{User: "default"}
	withID := memstack.WithIdentity(context.Background(), given)
	assert.Equal(t, def.Hash(), observe.IdentityHash(withID, resolver{id: def}), "the memory's answer wins")
	assert.Equal(t, "", observe.IdentityHash(withID, resolver{err: memstack.ErrNoIdentity}))
	assert.Equal(t, given.Hash(), observe.IdentityHash(withID, struct{}{}), "a foreign memory: the context's identity")
	assert.Equal(t, memstack.Identity{}.Hash(), observe.IdentityHash(context.Background(), struct{}{}), "else the zero identity")
	assert.NotContains(t, observe.IdentityHash(withID, nil), "u", "the hash does not show the identity")
	assert.Len(t, observe.IdentityHash(withID, nil), 16)
}
