package memories_test

// Regressions found in review of the user-level Recall and the earlier
// conversations' summaries: each failed before its fix. The stores here
// are memstack's InMemory with a fault or a hook around one call.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// zPerIDStore: a contract-conforming store whose Seqs are unique per
// identity only (like redisstore's per-identity clock counters): each
// identity gets its own InMemory, so Seqs of two conversations collide.
type zPerIDStore struct {
	mu sync.Mutex
	m  map[memstack.Identity]*store.InMemory
}

func newPerID() *zPerIDStore { return &zPerIDStore{m: map[memstack.Identity]*store.InMemory{}} }
func (p *zPerIDStore) sub(id memstack.Identity) *store.InMemory {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.m[id]
	if s == nil {
		s = store.NewInMemory()
		p.m[id] = s
	}
	return s
}
func (p *zPerIDStore) Forget(ctx context.Context, id memstack.Identity) error {
	return p.sub(id).Forget(ctx, id)
}
func (p *zPerIDStore) GetState(ctx context.Context, id memstack.Identity, n string) (store.State, error) {
	return p.sub(id).GetState(ctx, id, n)
}
func (p *zPerIDStore) PutState(ctx context.Context, id memstack.Identity, n string, v []byte, e int64) (int64, error) {
	return p.sub(id).PutState(ctx, id, n, v, e)
}
func (p *zPerIDStore) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	return p.sub(id).Append(ctx, id, msgs...)
}
func (p *zPerIDStore) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	return p.sub(id).Last(ctx, id, n)
}
func (p *zPerIDStore) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	return p.sub(id).Tail(ctx, id, n, after)
}
func (p *zPerIDStore) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	return p.sub(id).All(ctx, id)
}
func (p *zPerIDStore) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	return p.sub(id).Stat(ctx, id)
}
func (p *zPerIDStore) RemovePrefix(ctx context.Context, id memstack.Identity, t int64) (int, error) {
	return p.sub(id).RemovePrefix(ctx, id, t)
}
func (p *zPerIDStore) Clear(ctx context.Context, id memstack.Identity) error {
	return p.sub(id).Clear(ctx, id)
}
func (p *zPerIDStore) Identities(ctx context.Context, sc store.Scope) ([]memstack.Identity, error) {
	p.mu.Lock()
	var out []memstack.Identity
	for id := range p.m {
		if sc.Contains(id) {
			out = append(out, id)
		}
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}
func (p *zPerIDStore) Export(ctx context.Context, sc store.Scope) (store.Export, error) {
	return store.Export{}, nil
}
func (p *zPerIDStore) ForgetScope(ctx context.Context, sc store.Scope) (int, error) { return 0, nil }

var (
	zA = memstack.Identity{Tenant: "t", User: "u", Conversation: "a"}
	zB = memstack.Identity{Tenant: "t", User: "u", Conversation: "b"}
	zC = memstack.Identity{Tenant: "t", User: "u", Conversation: "c"}
)

func zSave(t *testing.T, m *memories.Recall, id memstack.Identity, in, out string) {
	t.Helper()
	require.NoError(t, m.SaveContext(ctIDCtx(id), map[string]any{"input": in}, map[string]any{"output": out}))
}

// Seq collision across a user's conversations: conversation a's
// units vanish from the user's index (replaced by b's with the same Seq).
func TestRecallReview_SeqCollisionLosesUnits(t *testing.T) {
	st := newPerID()
	m, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallUnit(memories.RecallExchanges))
	require.NoError(t, err)
	zSave(t, m, zA, "my zebra is named Otto", "noted")
	zSave(t, m, zB, "the weather is nice", "indeed")
	got := rcAsk(t, m, ctIDCtx(zC), "zebra")
	t.Logf("from c, ask zebra: %q", got)
	require.Contains(t, got, "Otto", "a's unit should be recallable from c")
}

// Clear of conversation a removes b's units (same Seq) from the
// index, also for loads of b itself.
func TestRecallReview_SeqCollisionClearRemovesOtherConversation(t *testing.T) {
	st := newPerID()
	m, err := memories.NewRecall(memories.WithStore(st), memories.WithRecallUnit(memories.RecallExchanges))
	require.NoError(t, err)
	zSave(t, m, zB, "my zebra is named Otto", "noted")
	zSave(t, m, zA, "the weather is nice", "indeed")
	require.Contains(t, rcAsk(t, m, ctIDCtx(zB), "zebra"), "Otto", "warm")
	require.NoError(t, m.Clear(ctIDCtx(zA)))
	got := rcAsk(t, m, ctIDCtx(zB), "zebra")
	t.Logf("from b after Clear(a): %q", got)
	require.Contains(t, got, "Otto", "b's own unit must survive a's Clear")
}

// zHookStore calls hook once on the first Stat of id.
type zHookStore struct {
	*store.InMemory
	id   memstack.Identity
	once sync.Once
	hook func()
	arm  bool
}

func (h *zHookStore) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	if h.arm && id == h.id {
		h.once.Do(h.hook)
	}
	return h.InMemory.Stat(ctx, id)
}

// a save by another replica to the load's own conversation between
// the load's refresh and syncScope: syncScope indexes it, the search hits
// it, scopedHits thinks it is gone (cur is stale) and removes it from the
// index for good.
func TestRecallReview_LoadRemovesLiveUnitOfOwnConversation(t *testing.T) {
	mem := store.NewInMemory()
	hs := &zHookStore{InMemory: mem, id: memstack.Identity{Tenant: "t", User: "u", Conversation: memories.RecallJournalConversation}}
	r1, err := memories.NewRecall(memories.WithStore(hs), memories.WithRecallUnit(memories.RecallExchanges))
	require.NoError(t, err)
	r2, err := memories.NewRecall(memories.WithStore(mem), memories.WithRecallUnit(memories.RecallExchanges))
	require.NoError(t, err)
	zSave(t, r2, zA, "hello there", "hi")
	_ = rcAsk(t, r1, ctIDCtx(zA), "hello") // r1 warm (scope built)
	hs.hook = func() { zSave(t, r2, zA, "my zebra is named Otto", "noted") }
	hs.arm = true
	first := rcAsk(t, r1, ctIDCtx(zA), "zebra")
	hs.arm = false
	t.Logf("racy load: %q", first)
	for i := 0; i < 2; i++ {
		got := rcAsk(t, r1, ctIDCtx(zB), "zebra")
		t.Logf("later load from b: %q", got)
		require.Contains(t, got, "Otto", "a stored turn must stay recallable on r1")
	}
}

// a replica that built the scope while the journal was empty
// (seen == 0) never notices a trim: conversations named only in trimmed
// entries are never caught up.
func TestRecallReview_TrimWithSeenZeroMissesForever(t *testing.T) {
	mem := store.NewInMemory()
	r1, _ := memories.NewRecall(memories.WithStore(mem), memories.WithRecallUnit(memories.RecallExchanges))
	r2, _ := memories.NewRecall(memories.WithStore(mem), memories.WithRecallUnit(memories.RecallExchanges))
	_ = rcAsk(t, r1, ctIDCtx(zC), "anything") // new user: r1 builds on an empty journal
	zSave(t, r2, zA, "my zebra is named Otto", "noted")
	// simulate trimJournal exactly (through = first kept - 1)
	jid := memstack.Identity{Tenant: "t", User: "u", Conversation: memories.RecallJournalConversation}
	zSave(t, r2, zB, "filler", "ok")
	recs, _ := mem.All(context.Background(), jid)
	through := recs[len(recs)-1].Seq - 1
	old, _ := mem.GetState(context.Background(), jid, "recall-journal-trimmed")
	_, err := mem.PutState(context.Background(), jid, "recall-journal-trimmed", []byte(strconv.FormatInt(through, 10)), old.Version)
	require.NoError(t, err)
	_, err = mem.RemovePrefix(context.Background(), jid, through)
	require.NoError(t, err)
	got := rcAsk(t, r1, ctIDCtx(zC), "zebra")
	t.Logf("r1 from c: %q", got)
	require.Contains(t, got, "Otto")
}

// zCancelStore cancels the save's ctx right after the turn's Append.
type zCancelStore struct {
	*store.InMemory
	cancel func()
	id     memstack.Identity
}

func (c *zCancelStore) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	err := c.InMemory.Append(ctx, id, msgs...)
	if id == c.id && c.cancel != nil {
		c.cancel()
	}
	return err
}

// a save whose ctx ends after the turn is stored skips the journal:
// replicas that built the scope never index that turn (until the
// conversation's next save).
func TestRecallReview_CancelledSaveSkipsJournal(t *testing.T) {
	mem := store.NewInMemory()
	cs := &zCancelStore{InMemory: mem, id: zA}
	r1, _ := memories.NewRecall(memories.WithStore(mem), memories.WithRecallUnit(memories.RecallExchanges))
	r2, _ := memories.NewRecall(memories.WithStore(cs), memories.WithRecallUnit(memories.RecallExchanges))
	zSave(t, r2, zB, "hello", "hi")
	_ = rcAsk(t, r1, ctIDCtx(zC), "hello") // r1 built
	ctx, cancel := context.WithCancel(ctIDCtx(zA))
	cs.cancel = cancel
	err := r2.SaveContext(ctx, map[string]any{"input": "my zebra is named Otto"}, map[string]any{"output": "noted"})
	t.Logf("save err: %v", err)
	require.Len(t, ctStored(t, mem, zA), 2, "turn stored")
	got := rcAsk(t, r1, ctIDCtx(zC), "zebra")
	t.Logf("r1 from c: %q", got)
	require.Contains(t, got, "Otto")
}

type zFailStore struct {
	*store.InMemory
	bad memstack.Identity
	on  bool
}

func (f *zFailStore) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	if f.on && id == f.bad {
		return nil, errors.New("corrupt record")
	}
	return f.InMemory.All(ctx, id)
}

func TestRecallReview_OneBadConversationFailsEveryLoad(t *testing.T) {
	fs := &zFailStore{InMemory: store.NewInMemory(), bad: zA}
	m, _ := memories.NewRecall(memories.WithStore(fs), memories.WithRecallUnit(memories.RecallExchanges))
	zSave(t, m, zA, "hello", "hi")
	zSave(t, m, zB, "my zebra is named Otto", "noted")
	fs.on = true
	m2, _ := memories.NewRecall(memories.WithStore(fs), memories.WithRecallUnit(memories.RecallExchanges)) // a fresh replica
	_, err := m2.LoadMemoryVariables(ctIDCtx(zB), map[string]any{"input": "zebra"})
	t.Logf("load of b on a fresh replica: %v", err)
	require.NoError(t, err)
}

// After store.Forget of conversation a (not through Summary.Clear) and a
// reuse of a's id, b shows a summary of a's forgotten text.
func TestSummaryReview_ForgottenConversationSummaryReappears(t *testing.T) {
	st := store.NewInMemory()
	m, err := memories.NewSummary(&suNotes{}, memories.WithStore(st), memories.WithEarlierSummaries(2))
	require.NoError(t, err)
	suSave(t, m, zA, rsMay8, "my card is 4111", "noted")
	suSave(t, m, zB, rsMay8.Add(3600e9), "hello", "hi") // completes a
	require.Contains(t, suLoad(t, m, zB), "4111")
	require.NoError(t, st.Forget(context.Background(), zA))
	require.NotContains(t, suLoad(t, m, zB), "4111", "hidden while a is empty")
	// a is used again (new content), e.g. by another layer / replica
	require.NoError(t, st.Append(memstack.WithIdentity(context.Background(), zA), zA, llms.HumanChatMessage{Content: "new topic"}))
	got := suLoad(t, m, zB)
	t.Logf("b after a's forget and reuse: %q", got)
	require.NotContains(t, got, "4111", "forgotten text shown again")
}

// slowSum blocks on a channel when it sees text "slow".
type zSlowSum struct {
	suNotes
	in, out chan struct{}
}

func (s *zSlowSum) Summarize(ctx context.Context, prev string, msgs []llms.ChatMessage) (string, error) {
	for _, m := range msgs {
		if m.GetContent() == "my card is 4111" && s.in != nil {
			s.in <- struct{}{}
			<-s.out
		}
	}
	return s.suNotes.Summarize(ctx, prev, msgs)
}

// Clear of a while b's first pass completes a: the completed summary of
// the cleared conversation is written after the Clear.
func TestSummaryReview_ClearRacesCompleteEarlier(t *testing.T) {
	st := store.NewInMemory()
	sum := &zSlowSum{}
	m, err := memories.NewSummary(sum, memories.WithStore(st), memories.WithEarlierSummaries(2))
	require.NoError(t, err)
	suSave(t, m, zA, rsMay8, "my card is 4111", "noted")
	sum.in, sum.out = make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx := memstack.WithIdentity(context.Background(), zB)
		_ = m.SaveContext(ctx, map[string]any{"input": "hello"}, map[string]any{"output": "hi"})
	}()
	<-sum.in // b's pass is completing a
	require.NoError(t, m.Clear(memstack.WithIdentity(context.Background(), zA)))
	close(sum.out)
	<-done
	s, err := st.GetState(context.Background(), memstack.Identity{Tenant: "t", User: "u", Conversation: memories.UserSummariesConversation}, memories.UserSummariesStateName)
	require.NoError(t, err)
	t.Logf("user summaries after Clear(a): %s", s.Value)
	require.NotContains(t, string(s.Value), "4111", "cleared means gone")
}

type zPoisonSum struct{ suNotes }

func (s *zPoisonSum) Summarize(ctx context.Context, prev string, msgs []llms.ChatMessage) (string, error) {
	for _, m := range msgs {
		if strings.Contains(m.GetContent(), "poison") {
			return "", errors.New("context window exceeded")
		}
	}
	return s.suNotes.Summarize(ctx, prev, msgs)
}

func TestSummaryReview_FailingEarlierBlocksCurrentSummary(t *testing.T) {
	st := store.NewInMemory()
	m, err := memories.NewSummary(&zPoisonSum{}, memories.WithStore(st), memories.WithEarlierSummaries(1), memories.WithMaxMessages(4), memories.WithBatchSize(2))
	require.NoError(t, err)
	suSave(t, m, zA, rsMay8, "poison", "x")
	for i := 0; i < 10; i++ {
		err := m.SaveContext(ctIDCtx(zB), map[string]any{"input": fmt.Sprint("b", i)}, map[string]any{"output": "ok"})
		if i == 9 {
			t.Logf("save err: %v", err)
		}
	}
	st2, _ := st.GetState(context.Background(), zB, "summary")
	t.Logf("b state: %q; b load lines: %d", st2.Value, strings.Count(suLoad(t, m, zB), "\n")+1)
	got := suLoad(t, m, zB)
	require.True(t, strings.HasPrefix(got, memories.SummaryPrefix), "b's oldest turns are folded into its summary: %q", got)
	require.NotContains(t, got, "Human: b0", "b's oldest turns are folded, not shown raw")
}

// A load asks the index for 2k hits beyond the recent units (units, not
// messages): with exchanges of two messages and WithExcludeRecent(4), two
// recent units, WithK(1) asks for 4 — as before the engine moved out.
func TestRecallReview_SearchAsksForTheRecentUnitsNotMessages(t *testing.T) {
	for _, scope := range []memories.RecallScope{memories.RecallScopeConversation, memories.RecallScopeUser} {
		t.Run(scope.String(), func(t *testing.T) {
			var mu sync.Mutex
			var evs []memories.RecallEvent
			m, err := memories.NewRecall(memories.WithRecallUnit(memories.RecallExchanges), memories.WithContextWeight(0), memories.WithRecallDates(false),
				memories.WithK(1), memories.WithExcludeRecent(4), memories.WithRecallScope(scope),
				memories.WithRecallHook(func(ev memories.RecallEvent) { mu.Lock(); evs = append(evs, ev); mu.Unlock() }))
			require.NoError(t, err)
			for i := range 20 {
				zSave(t, m, zA, fmt.Sprintf("apple question %d", i), fmt.Sprintf("apple answer %d", i))
			}
			_ = rcAsk(t, m, ctIDCtx(zA), "apple")
			mu.Lock()
			defer mu.Unlock()
			last := evs[len(evs)-1]
			require.Equal(t, memories.RecallOpSearch, last.Op)
			require.Equal(t, 4, last.Exchanges, "2·k hits and one per recent unit")
		})
	}
}

// zBlockIdx blocks its searches while armed.
type zBlockIdx struct {
	*retrieval.BM25
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (x *zBlockIdx) Search(ctx context.Context, scope, q string, k int) ([]retrieval.Hit, error) {
	if x.armed.Load() {
		x.entered <- struct{}{}
		<-x.release
	}
	return x.BM25.Search(ctx, scope, q, k)
}

// A Clear of a conversation waits for a load of it that is searching.
func TestRecallReview_ClearWaitsForTheConversationsSearch(t *testing.T) {
	b, err := retrieval.NewBM25()
	require.NoError(t, err)
	idx := &zBlockIdx{BM25: b, entered: make(chan struct{}), release: make(chan struct{})}
	m, err := memories.NewRecall(memories.WithIndex(idx), memories.WithRecallScope(memories.RecallScopeConversation), memories.WithK(1))
	require.NoError(t, err)
	zSave(t, m, zA, "apple", "ok")
	idx.armed.Store(true)
	loaded := make(chan struct{})
	go func() { _, _ = m.LoadMemoryVariables(ctIDCtx(zA), map[string]any{"input": "apple"}); close(loaded) }()
	<-idx.entered
	idx.armed.Store(false)
	cleared := make(chan struct{})
	go func() { _ = m.Clear(ctIDCtx(zA)); close(cleared) }()
	select {
	case <-cleared:
		t.Error("the Clear returned while a load of its conversation was searching")
	case <-time.After(200 * time.Millisecond):
	}
	close(idx.release)
	<-loaded
	<-cleared
}

// gated is an in-memory store with StatMany; when armed, the first
// StatMany of [conversation, journal] blocks after reading, until released.
type gated struct {
	*store.InMemory
	armed   atomic.Bool
	reached chan struct{}
	release chan struct{}
	idents  atomic.Int64
}

func (s *gated) Identities(ctx context.Context, sc store.Scope) ([]memstack.Identity, error) {
	s.idents.Add(1)
	return s.InMemory.Identities(ctx, sc)
}

func (s *gated) StatMany(ctx context.Context, ids []memstack.Identity) ([]store.Stat, error) {
	out := make([]store.Stat, len(ids))
	for i, id := range ids {
		st, err := s.InMemory.Stat(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i] = st
	}
	if len(ids) == 2 && ids[1].Conversation == store.UserRecallJournalConversation && s.armed.CompareAndSwap(true, false) {
		close(s.reached)
		<-s.release
	}
	return out, nil
}

// A scoped load over a store.MultiStat reads the journal's Stat early; if
// another load of the same user caught up meanwhile, that Stat is behind
// what the process has seen, and must not pass for a forgotten journal
// (which rebuilds the whole scope: every conversation listed and read
// again, the index emptied while other loads search it). A reviewer
// found it; the test failed before the fix.
func TestReview_StaleJournalStatDoesNotRebuildTheScope(t *testing.T) {
	s := &gated{InMemory: store.NewInMemory(), reached: make(chan struct{}), release: make(chan struct{})}
	m, err := memories.NewRecall(memories.WithStore(s))
	require.NoError(t, err)
	c0 := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c0"}
	c1 := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}
	at := time.Date(2023, 5, 8, 10, 0, 0, 0, time.UTC)
	rsSave(t, m, c0, at, "When does the ferry leave?", "At nine.")
	rsSave(t, m, c1, at.Add(time.Hour), "Which database?", "PostgreSQL.")
	load := func(id memstack.Identity) error {
		_, err := m.LoadMemoryVariables(memstack.WithIdentity(context.Background(), id), map[string]any{"input": "ferry?"})
		return err
	}
	require.NoError(t, load(c0)) // builds the scope
	require.NoError(t, load(c1))
	base := s.idents.Load()

	s.armed.Store(true)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); require.NoError(t, load(c0)) }() // L1: reads the journal's Stat, then waits
	<-s.reached
	rsSave(t, m, c1, at.Add(2*time.Hour), "And the office?", "Porto.") // a new journal entry
	require.NoError(t, load(c1))                                       // L2 catches up: u.seen advances
	close(s.release)
	wg.Wait()
	require.Equal(t, base, s.idents.Load(), "a load with a stale journal Stat rebuilt the whole scope (listed every conversation again)")
}

// zFlakyLast fails Last of one identity once, while armed, after skip
// calls that succeed (a store read that times out).
type zFlakyLast struct {
	*store.InMemory
	id    memstack.Identity
	skip  atomic.Int32
	armed atomic.Bool
}

func (s *zFlakyLast) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	if id == s.id && s.armed.Load() && s.skip.Add(-1) < 0 && s.armed.CompareAndSwap(true, false) {
		return nil, errors.New("read timed out")
	}
	return s.InMemory.Last(ctx, id, n)
}

// A scope's sync that cannot read a conversation another replica saved
// to — whichever of its reads fails — retries it at the next load: the
// turn is found then, not only after the conversation's next save.
func TestRecallReview_UnreadConversationIsRetried(t *testing.T) {
	for skip := range int32(3) {
		t.Run(fmt.Sprintf("read %d fails", skip+1), func(t *testing.T) {
			mem := store.NewInMemory()
			flaky := &zFlakyLast{InMemory: mem, id: zA}
			r1, err := memories.NewRecall(memories.WithStore(flaky), memories.WithRecallUnit(memories.RecallExchanges))
			require.NoError(t, err)
			r2, err := memories.NewRecall(memories.WithStore(mem), memories.WithRecallUnit(memories.RecallExchanges))
			require.NoError(t, err)
			zSave(t, r2, zA, "hello there", "hi")
			_ = rcAsk(t, r1, ctIDCtx(zB), "hello") // r1 warm (scope built)
			zSave(t, r2, zA, "my zebra is named Otto", "noted")
			flaky.skip.Store(skip)
			flaky.armed.Store(true)
			_ = rcAsk(t, r1, ctIDCtx(zB), "zebra") // a read of zA may fail
			failed := !flaky.armed.Load()
			flaky.armed.Store(false)
			require.Contains(t, rcAsk(t, r1, ctIDCtx(zB), "zebra"), "Otto", "the next load reads zA again (a read failed: %v)", failed)
		})
	}
}

// zFlakyIndex is a BM25 whose Add fails once while armed (an index that
// timed out).
type zFlakyIndex struct {
	*retrieval.BM25
	armed atomic.Bool
}

func (x *zFlakyIndex) Add(ctx context.Context, scope string, docs []retrieval.Doc) error {
	if x.armed.CompareAndSwap(true, false) {
		return errors.New("index timed out")
	}
	return x.BM25.Add(ctx, scope, docs)
}

// A scope's sync whose indexing of a conversation fails for a moment
// retries it at the next load, as it does a conversation it could not
// read: the turn another replica saved is found then.
func TestRecallReview_UnindexedConversationIsRetried(t *testing.T) {
	mem := store.NewInMemory()
	bm, err := retrieval.NewBM25()
	require.NoError(t, err)
	flaky := &zFlakyIndex{BM25: bm}
	r1, err := memories.NewRecall(memories.WithStore(mem), memories.WithIndex(flaky), memories.WithRecallUnit(memories.RecallExchanges))
	require.NoError(t, err)
	r2, err := memories.NewRecall(memories.WithStore(mem), memories.WithRecallUnit(memories.RecallExchanges))
	require.NoError(t, err)
	zSave(t, r2, zA, "hello there", "hi")
	_ = rcAsk(t, r1, ctIDCtx(zB), "hello") // r1 warm (scope built)
	zSave(t, r2, zA, "my zebra is named Otto", "noted")
	flaky.armed.Store(true)
	_ = rcAsk(t, r1, ctIDCtx(zB), "zebra") // indexing zA's new turn fails
	require.False(t, flaky.armed.Load(), "the load indexed zA")
	require.Contains(t, rcAsk(t, r1, ctIDCtx(zB), "zebra"), "Otto", "the next load indexes zA again")
}
