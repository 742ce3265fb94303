package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
	"github.com/memstack/memstack/store/storetest"
)

// The kit must catch broken stores. Each broken store below breaks one rule
// of the contract; TestKitCatchesBrokenStores runs the kit's subtest for
// that rule against it in a child process and requires the child to fail.

type halfTurns struct{ *store.InMemory }

func (s halfTurns) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	if len(msgs) > 1 {
		msgs = msgs[:len(msgs)-1]
	}
	return s.InMemory.Append(ctx, id, msgs...)
}

type lastOneMore struct{ *store.InMemory }

func (s lastOneMore) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	return s.InMemory.Last(ctx, id, n+1)
}

// tailDropsSystem reads the newest n messages, system ones included, and
// no older system message: a Tail built on Last.
type tailDropsSystem struct{ *store.InMemory }

func (s tailDropsSystem) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	rs, err := s.InMemory.Last(ctx, id, n)
	var out []store.Record
	for _, r := range rs {
		if r.Seq > after {
			out = append(out, r)
		}
	}
	return out, err
}

// tailInTwoReads reads the system messages and the newest ones in two
// steps, letting an Append in between show half a turn.
type tailInTwoReads struct{ *store.InMemory }

func (s tailInTwoReads) Tail(ctx context.Context, id memstack.Identity, n int, after int64) ([]store.Record, error) {
	all, err := s.InMemory.Tail(ctx, id, n, after)
	if err != nil || len(all) == 0 {
		return all, err
	}
	// Between the two reads, wait (up to 100 ms) for another writer's
	// Append, so that the half turn shows whenever writers are running,
	// not only when the scheduler happens to interleave them.
	newest := all[len(all)-1].Seq
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); {
		if st, err := s.InMemory.Stat(ctx, id); err != nil || st.LastSeq != newest {
			break
		}
		time.Sleep(50 * time.Microsecond)
	}
	again, err := s.InMemory.Tail(ctx, id, 1, after)
	if err != nil || len(again) == 0 {
		return all, err
	}
	// The newest message read now replaces the newest read before.
	all[len(all)-1] = again[len(again)-1]
	return all, nil
}

// ignoresAppendKey stores every Append, keyed or not.
type ignoresAppendKey struct{ *store.InMemory }

func (s ignoresAppendKey) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	return s.InMemory.Append(store.WithAppendKey(ctx, ""), id, msgs...)
}

// racyAppendKey checks the key, then appends: two Appends with one key at
// the same moment both store.
type racyAppendKey struct{ *store.InMemory }

func (s racyAppendKey) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	key, ok := storekit.AppendKey(ctx)
	if !ok {
		return s.InMemory.Append(ctx, id, msgs...)
	}
	if err := storekit.CheckAppendKey(key); err != nil {
		return err
	}
	all, err := s.InMemory.All(ctx, id)
	if err != nil {
		return err
	}
	for _, r := range all {
		if r.Message.GetContent() == msgs[0].GetContent() && r.Message.GetType() == msgs[0].GetType() {
			return nil
		}
	}
	time.Sleep(time.Millisecond)
	return s.InMemory.Append(store.WithAppendKey(ctx, ""), id, msgs...)
}

type clearKeepsSystem struct{ *store.InMemory }

func (s clearKeepsSystem) Clear(ctx context.Context, id memstack.Identity) error {
	_, err := s.InMemory.RemovePrefix(ctx, id, 1<<62)
	return err
}

type ignoresContext struct{ *store.InMemory }

func (s ignoresContext) Append(_ context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	return s.InMemory.Append(context.Background(), id, msgs...)
}

type blindPut struct{ *store.InMemory }

func (s blindPut) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, _ int64) (int64, error) {
	cur, err := s.InMemory.GetState(ctx, id, name)
	if err != nil {
		return 0, err
	}
	return s.InMemory.PutState(ctx, id, name, value, cur.Version)
}

// absentIsZero is the store before absent versions: an absent value reads
// as version 0 before and after a Clear, so a commit that read before the
// Clear lands after it.
type absentIsZero struct{ *store.InMemory }

func (s absentIsZero) GetState(ctx context.Context, id memstack.Identity, name string) (store.State, error) {
	st, err := s.InMemory.GetState(ctx, id, name)
	if err == nil && !st.Exists() {
		st.Version = 0
	}
	return st, err
}

func (s absentIsZero) PutState(ctx context.Context, id memstack.Identity, name string, value []byte, expect int64) (int64, error) {
	if expect == 0 {
		if cur, err := s.InMemory.GetState(ctx, id, name); err == nil && !cur.Exists() {
			expect = cur.Version
		}
	}
	return s.InMemory.PutState(ctx, id, name, value, expect)
}

// clearMarksAll moves every identity's absent version on a Clear (as a
// store-wide counter would), failing other identities' first commits.
type clearMarksAll struct{ *store.InMemory }

func (s clearMarksAll) Clear(ctx context.Context, id memstack.Identity) error {
	if err := s.InMemory.Clear(ctx, id); err != nil {
		return err
	}
	// A tenant-wide forget moves the absent version of every bucket: as if
	// the Clear mark were one for every identity.
	_, err := s.InMemory.ForgetScope(ctx, store.TenantScope("nobody"))
	return err
}

// forgetMovesAll is a Forget that moves a store-wide absent version, as
// memstack's backends did before forgets were kept per user bucket.
type forgetMovesAll struct{ *store.InMemory }

func (s forgetMovesAll) Forget(ctx context.Context, id memstack.Identity) error {
	if err := s.InMemory.Forget(ctx, id); err != nil {
		return err
	}
	_, err := s.InMemory.ForgetScope(ctx, store.TenantScope("nobody"))
	return err
}

// joinedKeys keys identities by joining the raw parts with ':', so
// ("a:b", "", "") and ("a", "b", "") collide.
type joinedKeys struct{ *store.InMemory }

func joined(id memstack.Identity) memstack.Identity {
	return memstack.Identity{Tenant: id.Tenant + ":" + id.User + ":" + id.Conversation}
}

func (s joinedKeys) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	return s.InMemory.Append(ctx, joined(id), msgs...)
}
func (s joinedKeys) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	return s.InMemory.All(ctx, joined(id))
}
func (s joinedKeys) Stat(ctx context.Context, id memstack.Identity) (store.Stat, error) {
	return s.InMemory.Stat(ctx, joined(id))
}

// forgetsMessagesOnly forgets the messages but keeps the state (and the
// system messages).
type forgetsMessagesOnly struct{ *store.InMemory }

func (s forgetsMessagesOnly) Forget(ctx context.Context, id memstack.Identity) error {
	_, err := s.InMemory.RemovePrefix(ctx, id, 1<<62)
	return err
}

// oneByOne appends a turn message by message, so a bad message in the
// middle leaves the ones before it stored.
type oneByOne struct{ *store.InMemory }

func (s oneByOne) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	for _, m := range msgs {
		if err := s.InMemory.Append(ctx, id, m); err != nil {
			return err
		}
	}
	return nil
}

// unpinned removes system messages too when the prefix covers everything.
type unpinned struct{ *store.InMemory }

func (s unpinned) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	st, err := s.InMemory.Stat(ctx, id)
	if err != nil || through < st.LastSeq {
		return s.InMemory.RemovePrefix(ctx, id, through)
	}
	return st.Count, s.InMemory.Clear(ctx, id)
}

// lenientLast treats n < 1 as "nothing".
type lenientLast struct{ *store.InMemory }

func (s lenientLast) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	if n < 1 {
		return nil, nil
	}
	return s.InMemory.Last(ctx, id, n)
}

// utcTimes reads times back in UTC: the instant is kept, the offset lost.
type utcTimes struct{ *store.InMemory }

func inUTC(rs []store.Record, err error) ([]store.Record, error) {
	for i := range rs {
		rs[i].Time = rs[i].Time.UTC()
	}
	return rs, err
}

func (s utcTimes) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	return inUTC(s.InMemory.Last(ctx, id, n))
}
func (s utcTimes) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	return inUTC(s.InMemory.All(ctx, id))
}

// perMessageTimes dates each message of an Append a nanosecond after the
// one before.
type perMessageTimes struct{ *store.InMemory }

func (s perMessageTimes) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	at := storekit.AppendTime(ctx)
	for i, m := range msgs {
		if err := s.InMemory.Append(memstack.WithTime(ctx, at.Add(time.Duration(i))), id, m); err != nil {
			return err
		}
	}
	return nil
}

// staleClock dates an Append without a time with the time it was built.
type staleClock struct {
	*store.InMemory
	built time.Time
}

func (s staleClock) Append(ctx context.Context, id memstack.Identity, msgs ...llms.ChatMessage) error {
	if _, ok := memstack.TimeFrom(ctx); !ok {
		ctx = memstack.WithTime(ctx, s.built)
	}
	return s.InMemory.Append(ctx, id, msgs...)
}

// removeForgetsTimes returns zero times once RemovePrefix has run.
type removeForgetsTimes struct {
	*store.InMemory
	removed *atomic.Bool
}

func (s removeForgetsTimes) RemovePrefix(ctx context.Context, id memstack.Identity, through int64) (int, error) {
	s.removed.Store(true)
	return s.InMemory.RemovePrefix(ctx, id, through)
}

func (s removeForgetsTimes) forget(rs []store.Record, err error) ([]store.Record, error) {
	if s.removed.Load() {
		for i := range rs {
			rs[i].Time = time.Time{}
		}
	}
	return rs, err
}

func (s removeForgetsTimes) Last(ctx context.Context, id memstack.Identity, n int) ([]store.Record, error) {
	return s.forget(s.InMemory.Last(ctx, id, n))
}
func (s removeForgetsTimes) All(ctx context.Context, id memstack.Identity) ([]store.Record, error) {
	return s.forget(s.InMemory.All(ctx, id))
}

// nsBackend is a backend of several namespaces, an InMemory each, as a
// SQL file or a Redis prefix holds them: Forget reaches every namespace,
// Clear one. clearForgets and forgetClears break that rule.
type nsBackend struct {
	mu     sync.Mutex
	spaces map[string]*store.InMemory
}

type nsStore struct {
	store.Store                // an *store.InMemory, seen only as a Store (no Users: it would see one namespace)
	b                          *nsBackend
	ns                         string
	clearForgets, forgetClears bool
}

func (s nsStore) Namespace() string { return s.ns }

func (s nsStore) Forget(ctx context.Context, id memstack.Identity) error {
	if s.forgetClears {
		return s.Store.Clear(ctx, id)
	}
	s.b.mu.Lock()
	spaces := make([]*store.InMemory, 0, len(s.b.spaces))
	for _, sp := range s.b.spaces {
		spaces = append(spaces, sp)
	}
	s.b.mu.Unlock()
	for _, sp := range spaces {
		if err := sp.Forget(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

func (s nsStore) Clear(ctx context.Context, id memstack.Identity) error {
	if s.clearForgets {
		return s.Forget(ctx, id)
	}
	return s.Store.Clear(ctx, id)
}

// namespacedOpener opens ns and ns+"_b" as two namespaces of one backend.
func namespacedOpener(clearForgets, forgetClears bool) storetest.Opener {
	var mu sync.Mutex
	backends := map[string]*nsBackend{}
	return func(_ testing.TB, ns string) (store.Store, error) {
		base := strings.TrimSuffix(ns, "_b")
		mu.Lock()
		b := backends[base]
		if b == nil {
			b = &nsBackend{spaces: map[string]*store.InMemory{}}
			backends[base] = b
		}
		mu.Unlock()
		b.mu.Lock()
		sp := b.spaces[ns]
		if sp == nil {
			sp = store.NewInMemory()
			b.spaces[ns] = sp
		}
		b.mu.Unlock()
		return nsStore{Store: sp, b: b, ns: ns, clearForgets: clearForgets, forgetClears: forgetClears}, nil
	}
}

// TestNamespacedConformance checks the test's own multi-namespace store:
// the broken ones below differ from it in one rule only.
func TestNamespacedConformance(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("child process")
	}
	storetest.Run(t, namespacedOpener(false, false))
}

var brokenStores = map[string]struct {
	wrap    func(*store.InMemory) store.Store
	open    storetest.Opener // instead of wrap: a store with namespaces
	subtest string
}{
	"Clear forgets every namespace":                {open: namespacedOpener(true, false), subtest: "ClearVersusForgetAcrossNamespaces"},
	"Forget clears one namespace":                  {open: namespacedOpener(false, true), subtest: "ClearVersusForgetAcrossNamespaces"},
	"appends one by one":                           {wrap: func(s *store.InMemory) store.Store { return oneByOne{s} }, subtest: "AppendTurnIsAtomic"},
	"RemovePrefix drops system":                    {wrap: func(s *store.InMemory) store.Store { return unpinned{s} }, subtest: "RemovePrefixPinsSystemMessages"},
	"Last accepts n < 1":                           {wrap: func(s *store.InMemory) store.Store { return lenientLast{s} }, subtest: "LastRejectsNBelowOne"},
	"half turns":                                   {wrap: func(s *store.InMemory) store.Store { return halfTurns{s} }, subtest: "AppendKeepsOrder"},
	"Last returns one more":                        {wrap: func(s *store.InMemory) store.Store { return lastOneMore{s} }, subtest: "Last"},
	"Tail drops older system messages":             {wrap: func(s *store.InMemory) store.Store { return tailDropsSystem{s} }, subtest: "TailIsSystemPlusNewest"},
	"Tail reads twice":                             {wrap: func(s *store.InMemory) store.Store { return tailInTwoReads{s} }, subtest: "TailNeverShowsHalfATurn"},
	"Append ignores its key":                       {wrap: func(s *store.InMemory) store.Store { return ignoresAppendKey{s} }, subtest: "AppendKeyStoresOnce"},
	"Append checks its key, then appends":          {wrap: func(s *store.InMemory) store.Store { return racyAppendKey{s} }, subtest: "AppendKeyRacingStoresOnce"},
	"Clear keeps system":                           {wrap: func(s *store.InMemory) store.Store { return clearKeepsSystem{s} }, subtest: "Clear"},
	"ignores context":                              {wrap: func(s *store.InMemory) store.Store { return ignoresContext{s} }, subtest: "CancelledContext"},
	"PutState ignores CAS":                         {wrap: func(s *store.InMemory) store.Store { return blindPut{s} }, subtest: "StateCompareAndSet"},
	"absent reads as 0 after Clear":                {wrap: func(s *store.InMemory) store.Store { return absentIsZero{s} }, subtest: "ClearDefeatsEarlierCommits"},
	"absent reads as 0 while Clears race":          {wrap: func(s *store.InMemory) store.Store { return absentIsZero{s} }, subtest: "ClearRacingCommitsLeavesNothingOlder"},
	"Clear marks every identity":                   {wrap: func(s *store.InMemory) store.Store { return clearMarksAll{s} }, subtest: "ClearMarksOneIdentity"},
	"Forget moves every identity's version":        {wrap: func(s *store.InMemory) store.Store { return forgetMovesAll{s} }, subtest: "ForgetSparesOtherUsersCommits"},
	"joined identity keys":                         {wrap: func(s *store.InMemory) store.Store { return joinedKeys{s} }, subtest: "IdentitiesIsolated"},
	"Forget keeps state":                           {wrap: func(s *store.InMemory) store.Store { return forgetsMessagesOnly{s} }, subtest: "Forget"},
	"Forget keeps state of adversarial identities": {wrap: func(s *store.InMemory) store.Store { return forgetsMessagesOnly{s} }, subtest: "ForgetAdversarialIdentities"},
	"ignores the context's time":                   {wrap: func(s *store.InMemory) store.Store { return ignoresContext{s} }, subtest: "TimeFromContext"},
	"times lose their offset":                      {wrap: func(s *store.InMemory) store.Store { return utcTimes{s} }, subtest: "TimeFromContext"},
	"a time per message":                           {wrap: func(s *store.InMemory) store.Store { return perMessageTimes{s} }, subtest: "TimeSharedByTurn"},
	"a stale clock":                                {wrap: func(s *store.InMemory) store.Store { return staleClock{s, time.Now().Add(-time.Hour)} }, subtest: "TimeDefaultsToNow"},
	"RemovePrefix forgets times": {wrap: func(s *store.InMemory) store.Store { return removeForgetsTimes{s, new(atomic.Bool)} },
		subtest: "TimeSurvivesRemovePrefix"},
}

const brokenEnv = "STORETEST_BROKEN_STORE"

// TestBrokenStoreChild runs the kit against the broken store named by the
// environment; it does nothing unless TestKitCatchesBrokenStores started it.
func TestBrokenStoreChild(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("only run as a child of TestKitCatchesBrokenStores")
	}
	b, ok := brokenStores[name]
	require.True(t, ok, "unknown broken store %q", name)
	if b.open != nil {
		storetest.Run(t, b.open)
		return
	}
	open := inMemoryOpener()
	storetest.Run(t, func(tb testing.TB, ns string) (store.Store, error) {
		s, err := open(tb, ns)
		if err != nil {
			return nil, err
		}
		return b.wrap(s.(*store.InMemory)), nil
	})
}

func TestKitCatchesBrokenStores(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("child process")
	}
	for name, b := range brokenStores {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestBrokenStoreChild$/^"+b.subtest+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "the kit passed a store with %q:\n%s", name, out)
			assert.Contains(t, string(out), "--- FAIL: TestBrokenStoreChild/"+b.subtest, "the failing subtest names the rule")
		})
	}
}

func TestMeasureSize(t *testing.T) {
	s := store.NewInMemory()
	res, err := storetest.MeasureSize(context.Background(), s, 2000, 5)
	require.NoError(t, err)
	assert.Equal(t, 2000, res.Messages)
	for name, d := range map[string]time.Duration{"Stat": res.Stat, "Append": res.Append, "RemovePrefix": res.RemovePrefix, "StatAfter": res.StatAfter, "AppendAfter": res.AppendAfter} {
		assert.Positive(t, d, name)
	}
	users, err := s.Identities(context.Background(), store.TenantScope("storetest-measure"))
	require.NoError(t, err)
	assert.Empty(t, users, "the measured conversation is forgotten")
	_, err = storetest.MeasureSize(context.Background(), s, 10, 5)
	assert.ErrorIs(t, err, store.ErrInvalidArgument)
}
