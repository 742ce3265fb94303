package proof_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
)

// faultServer is a private server the test can crash and bring back.
type faultServer struct {
	kill, restart func() error
	open          func(ns string) store.Store
}

var faultServers = []struct {
	name  string
	start func(t *testing.T) faultServer
}{
	{"redis", func(t *testing.T) faultServer {
		srv := testsvc.StartRedis(t)
		return faultServer{srv.Kill, srv.Restart, func(ns string) store.Store {
			s, err := redisstore.Open(openCtx(t), srv.Addr(), redisstore.WithKeyPrefix("fault"), redisstore.WithNamespace(ns))
			return closeLater(t, "redisstore.Open", s, err)
		}}
	}},
	{"postgres", func(t *testing.T) faultServer {
		srv := testsvc.StartPostgres(t)
		return faultServer{srv.Kill, srv.Restart, func(ns string) store.Store {
			s, err := pgstore.Open(openCtx(t), srv.DSN(), pgstore.WithNamespace(ns))
			return closeLater(t, "pgstore.Open", s, err)
		}}
	}},
}

// TestServerFaults crashes (SIGKILL) and restarts the Redis or PostgreSQL
// server under writers going through combined.Memory(Buffer, RecentN(10)),
// each memory on its own namespace of the server:
//
//   - every call returns within its deadline plus a second, and never
//     panics, before, during and after the outage; calls during the outage
//     return errors;
//   - every acknowledged turn (SaveContext returned nil) is in the
//     Buffer's store afterwards, whole and in order, and nothing is
//     duplicated or from another writer; a turn that failed is there
//     whole or not at all;
//   - RecentN shows the last 10 messages of its store, which end with the
//     writer's last acknowledged turn;
//   - the same memory values work again after the restart, without being
//     rebuilt.
func TestServerFaults(t *testing.T) {
	for _, fs := range faultServers {
		t.Run(fs.name, func(t *testing.T) { serverFaults(t, fs.start(t)) })
	}
}

// outcome is what one SaveContext of a writer returned.
type outcome struct {
	turn  int
	acked bool
	at    time.Time
}

func serverFaults(t *testing.T, srv faultServer) {
	const (
		writers  = 6
		deadline = time.Second
		slack    = time.Second
	)
	bufStore, recStore := srv.open("buffer"), srv.open("recent")
	buf := mustBuffer(memories.WithStore(bufStore), memories.WithMemoryKey("transcript"), memories.WithRequireIdentity())
	rec, err := memories.NewRecentN(recentN, memories.WithStore(recStore), memories.WithMemoryKey("recent"), memories.WithRequireIdentity())
	require.NoError(t, err)
	mem, err := combined.New([]schema.Memory{buf, rec})
	require.NoError(t, err)

	problems := &limiter{t: t, max: 20}
	// call runs f with a deadline and checks that it returns in time and
	// does not panic.
	call := func(what string, id memstack.Identity, f func(ctx context.Context) error) (err error) {
		ctx, cancel := context.WithTimeout(memstack.WithIdentity(context.Background(), id), deadline)
		defer cancel()
		t0 := time.Now()
		defer func() {
			if r := recover(); r != nil {
				problems.Errorf("%s panicked: %v", what, r)
				err = fmt.Errorf("panic: %v", r)
			}
			if took := time.Since(t0); took > deadline+slack {
				problems.Errorf("%s took %v with a %v deadline", what, took, deadline)
			}
		}()
		return f(ctx)
	}
	save := func(ctx context.Context, i, j int) error {
		h, a := turnText(i, j)
		return mem.SaveContext(ctx, map[string]any{"input": h}, map[string]any{"output": a})
	}

	var (
		outcomes [writers][]outcome
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		loads    atomic.Int64
	)
	for w := range writers {
		wg.Go(func() {
			id := proofIdentity(w)
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				err := call("SaveContext", id, func(ctx context.Context) error { return save(ctx, w, j) })
				outcomes[w] = append(outcomes[w], outcome{turn: j, acked: err == nil, at: time.Now()})
				if j%3 == 2 {
					_ = call("LoadMemoryVariables", id, func(ctx context.Context) error {
						_, err := mem.LoadMemoryVariables(ctx, nil)
						return err
					})
					loads.Add(1)
				}
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				} else {
					time.Sleep(2 * time.Millisecond)
				}
			}
		})
	}

	time.Sleep(500 * time.Millisecond)
	require.NoError(t, srv.kill())
	killed := time.Now()

	// While the server is down, every method fails within its deadline.
	probe := memstack.Identity{Tenant: "probe", User: "down:{*}"}
	down := map[string]func(context.Context) error{
		"SaveContext": func(ctx context.Context) error {
			return mem.SaveContext(ctx, map[string]any{"input": "x"}, map[string]any{"output": "y"})
		},
		"LoadMemoryVariables": func(ctx context.Context) error { _, err := mem.LoadMemoryVariables(ctx, nil); return err },
		"AddMessage": func(ctx context.Context) error {
			return mem.AddMessage(ctx, llms.SystemChatMessage{Content: "You are terse."})
		},
		"Clear": func(ctx context.Context) error { return mem.Clear(ctx) },
	}
	for name, f := range down {
		assert.Error(t, call(name+" during the outage", probe, f), "%s with the server down", name)
	}
	time.Sleep(300 * time.Millisecond)

	require.NoError(t, srv.restart())
	restarted := time.Now()
	// The same memory value works again (connections are re-dialled by
	// the clients); the first calls may still meet a broken connection.
	require.Eventually(t, func() bool {
		return call("SaveContext after the restart", probe, down["SaveContext"]) == nil
	}, 20*time.Second, 100*time.Millisecond, "the memory works again after the restart")
	recovered := time.Now()
	time.Sleep(500 * time.Millisecond) // the writers get through again too
	close(stop)
	wg.Wait()

	ctx := context.Background()
	var acked, failed, failedStored, afterRestart int
	for w := range writers {
		id := proofIdentity(w)
		recs, err := bufStore.All(ctx, id)
		require.NoError(t, err)
		got := messagesOf(recs)
		// Index the stored turns.
		type stored struct{ human, ai, pos int }
		at := map[int]*stored{}
		foreign, dup := 0, 0
		for p, m := range got {
			i, j, ok := parseMarker(m.GetContent())
			if !ok || i != w {
				foreign++
				continue
			}
			s := at[j]
			if s == nil {
				s = &stored{pos: p}
				at[j] = s
			}
			if m.GetType() == llms.ChatMessageTypeHuman {
				s.human++
			} else {
				s.ai++
			}
			if s.human > 1 || s.ai > 1 {
				dup++
			}
		}
		assert.Zero(t, foreign, "writer %d: messages of another writer in its transcript", w)
		assert.Zero(t, dup, "writer %d: turns stored twice", w)
		lastPos, lastAcked := -1, -1
		for _, o := range outcomes[w] {
			s := at[o.turn]
			if o.acked {
				acked++
				lastAcked = o.turn
				if o.at.After(recovered) {
					afterRestart++
				}
				if !assert.NotNil(t, s, "writer %d: acknowledged turn %d is lost", w, o.turn) {
					continue
				}
				assert.Greater(t, s.pos, lastPos, "writer %d: acknowledged turn %d is out of order", w, o.turn)
				lastPos = s.pos
			} else {
				failed++
				if s != nil {
					failedStored++
				}
			}
			if s != nil {
				h, a := turnText(w, o.turn)
				whole := s.human == 1 && s.ai == 1 && s.pos+1 < len(got) &&
					got[s.pos].GetContent() == h && got[s.pos+1].GetContent() == a
				assert.True(t, whole, "writer %d: turn %d is not stored whole (human then AI, adjacent)", w, o.turn)
			}
		}

		// RecentN, through the same memory value: its last 10 messages,
		// ending with the last acknowledged turn.
		rrecs, err := recStore.All(ctx, id)
		require.NoError(t, err)
		rmsgs := messagesOf(rrecs)
		wantRecent, _ := llms.GetBufferString(rmsgs[max(len(rmsgs)-recentN, 0):], "Human", "AI")
		vars, err := rec.LoadMemoryVariables(memstack.WithIdentity(ctx, id), nil)
		require.NoError(t, err)
		assert.Equal(t, wantRecent, vars["recent"], "writer %d: RecentN shows the last %d messages of its store", w, recentN)
		if assert.GreaterOrEqual(t, lastAcked, 0, "writer %d acknowledged nothing", w) && assert.NotEmpty(t, rmsgs) {
			h, a := turnText(w, lastAcked)
			n := len(rmsgs)
			last := outcomes[w][len(outcomes[w])-1]
			if last.acked {
				assert.Equal(t, []string{h, a}, []string{rmsgs[n-2].GetContent(), rmsgs[n-1].GetContent()},
					"writer %d: RecentN's store ends with its last acknowledged turn", w)
			}
		}
	}
	t.Logf("outage %v (killed → restarted), recovered %v after the restart; %d turns acknowledged (%d after recovery), %d failed (%d of those stored anyway, whole); %d loads",
		restarted.Sub(killed).Round(time.Millisecond), recovered.Sub(restarted).Round(time.Millisecond), acked, afterRestart, failed, failedStored, loads.Load())
	assert.Zero(t, problems.count(), "problems reported above")
	assert.Positive(t, failed, "the writers saw the outage")
	assert.Positive(t, afterRestart, "the writers got through again after the restart")
}
