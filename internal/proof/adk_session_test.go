package proof_test

import (
	"testing"

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
