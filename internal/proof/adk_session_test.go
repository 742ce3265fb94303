package proof_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/sessiontestsuite"

	"github.com/memstack/memstack/adapters/adk"
)

// TestADKSessionServiceConformance runs ADK's own conformance suite for
// session.Service against adk.SessionService on every backend, against
// real servers: each subtest gets a fresh data space.
func TestADKSessionServiceConformance(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			sessiontestsuite.RunServiceTests(t, sessiontestsuite.SuiteOptions{SupportsUserProvidedSessionID: true},
				func(t *testing.T) session.Service {
					svc, err := adk.NewSessionService(b.space(t)("adk"))
					if err != nil {
						t.Fatalf("NewSessionService: %v", err)
					}
					return svc
				})
		})
	}
}

// TestADKSessionReplicas: two replicas (service values over their own
// store values on one data space) share sessions: a session value one of
// them read before the other appended is stale and stores nothing; app
// and user state updated from many sessions at once lose no key; every
// event appended is stored once.
func TestADKSessionReplicas(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			open := b.space(t)
			a, err := adk.NewSessionService(open("adk"))
			require.NoError(t, err)
			c, err := adk.NewSessionService(open("adk"))
			require.NoError(t, err)
			ctx := context.Background()
			_, err = a.Create(ctx, &session.CreateRequest{AppName: "app", UserID: "u", SessionID: "s"})
			require.NoError(t, err)
			get := func(svc *adk.SessionService) session.Session {
				got, err := svc.Get(ctx, &session.GetRequest{AppName: "app", UserID: "u", SessionID: "s"})
				require.NoError(t, err)
				return got.Session
			}
			fromA, fromC := get(a), get(c)
			require.NoError(t, a.AppendEvent(ctx, fromA, adkText("e1", "user", adkDay, "first")))
			err = c.AppendEvent(ctx, fromC, adkText("e2", "user", adkDay.Add(time.Second), "second"))
			require.ErrorIs(t, err, adk.ErrStaleSession)
			assert.Equal(t, 1, get(a).Events().Len(), "the stale append stored nothing")
			fromC = get(c)
			require.NoError(t, c.AppendEvent(ctx, fromC, adkText("e2", "user", adkDay.Add(time.Second), "second")))
			err = a.AppendEvent(ctx, fromA, adkText("e3", "user", adkDay.Add(2*time.Second), "third"))
			require.ErrorIs(t, err, adk.ErrStaleSession, "the other replica appended since")
			fromA = get(a)
			require.NoError(t, a.AppendEvent(ctx, fromA, adkText("e3", "user", adkDay.Add(2*time.Second), "third")))
			require.NoError(t, a.AppendEvent(ctx, fromA, adkText("e4", "user", adkDay.Add(3*time.Second), "fourth")),
				"a session value stays fresh across its own appends")
			assert.Equal(t, []string{"e1", "e2", "e3", "e4"}, eventIDs(get(c)))
			require.ErrorIs(t, c.AppendEvent(ctx, fromC, adkText("e5", "user", adkDay.Add(4*time.Second), "fifth")), adk.ErrStaleSession)

			// Many sessions of one user at once, each updating app, user
			// and session state: no key lost.
			const n = 6
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					svc := a
					if i%2 == 1 {
						svc = c
					}
					sid := fmt.Sprintf("p%d", i)
					created, err := svc.Create(ctx, &session.CreateRequest{AppName: "app", UserID: "u", SessionID: sid})
					if err != nil {
						errs[i] = err
						return
					}
					for j := range 3 {
						ev := adkText(fmt.Sprintf("%s-%d", sid, j), "user", adkDay.Add(time.Duration(j)*time.Second), "hello")
						ev.Actions.StateDelta = map[string]any{
							fmt.Sprintf("app:k%d_%d", i, j):  i,
							fmt.Sprintf("user:k%d_%d", i, j): j,
							"own":                            j,
						}
						if errs[i] = svc.AppendEvent(ctx, created.Session, ev); errs[i] != nil {
							return
						}
					}
				}()
			}
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "session p%d", i)
			}
			for i := range n {
				got, err := c.Get(ctx, &session.GetRequest{AppName: "app", UserID: "u", SessionID: fmt.Sprintf("p%d", i)})
				require.NoError(t, err)
				assert.Equal(t, 3, got.Session.Events().Len())
				own, err := got.Session.State().Get("own")
				require.NoError(t, err)
				assert.EqualValues(t, 2, own)
				for k := range n {
					for j := range 3 {
						_, err := got.Session.State().Get(fmt.Sprintf("app:k%d_%d", k, j))
						assert.NoError(t, err, "app key %d/%d lost", k, j)
						_, err = got.Session.State().Get(fmt.Sprintf("user:k%d_%d", k, j))
						assert.NoError(t, err, "user key %d/%d lost", k, j)
					}
				}
			}
		})
	}
}

func eventIDs(s session.Session) []string {
	var ids []string
	for ev := range s.Events().All() {
		ids = append(ids, ev.ID)
	}
	return ids
}
