package memories

import (
	"context"

	"github.com/memstack/memstack/observe"
)

// Extractions run in m.pool (package memories/internal/worker), as a
// Summary's summarizations do: one at a time per identity. A save in
// synchronous mode that finds another extraction of its identity running
// waits for it (or for its own ctx), then makes its own pass, which finds
// its turn covered already or covers it; no call loops over the turns of
// callers that keep arriving, so a save costs its own extraction plus, at
// most, those of the saves of its identity running at the same time.

// after runs or schedules extraction once a message is stored for id.
func (m *Facts) after(ctx context.Context, id identity) {
	if m.cfg.background {
		m.pool.Kick(ctx, id)
		return
	}
	_ = m.pool.Now(ctx, id) // run reports its own failures
}

// run extracts id's pending turns.
func (m *Facts) run(ctx context.Context, id identity, background bool) error {
	if !background {
		m.eng.CatchUp(ctx, id) // the caller's Recorder counts the model calls
		return nil
	}
	// Model calls made here are recorded on a Recorder of the worker's
	// own (the save that started it has delivered its report already)
	// and reported with the identity's next observed call.
	priv := observe.NewRecorder(observe.OpSave, "", "")
	m.eng.CatchUp(observe.WithRecorder(ctx, priv), id)
	if n := priv.Finish(0, nil).LLMCalls; n > 0 {
		m.mu.Lock()
		if m.laterLLM == nil {
			m.laterLLM = make(map[identity]int)
		}
		if _, ok := m.laterLLM[id]; ok || len(m.laterLLM) < maxLaterLLM {
			m.laterLLM[id] += n
		}
		m.mu.Unlock()
	}
	return nil
}

// maxLaterLLM bounds how many identities' background model calls a Facts
// keeps for their next report (an identity never called again would keep
// its count forever).
const maxLaterLLM = 1 << 16

// reportLaterLLM adds to the Recorder in ctx the background model calls
// made for id since its last observed call.
func (m *Facts) reportLaterLLM(ctx context.Context, id identity) {
	rec := observe.FromContext(ctx)
	if !rec.Enabled() {
		return
	}
	m.mu.Lock()
	n := m.laterLLM[id]
	delete(m.laterLLM, id)
	m.mu.Unlock()
	if n > 0 {
		rec.LLMCall(n)
	}
}
