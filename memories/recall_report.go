package memories

import (
	"strconv"
	"time"

	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/memories/internal/recallindex"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/tokens"
)

func (m *Recall) report(id identity, op string, n int, took time.Duration, err error) {
	if m.hook != nil {
		m.hook(RecallEvent{IdentityHash: m.HashIdentity(id), Op: op, Exchanges: n, Duration: took, Err: m.redact(err, id)})
	}
}

// record notes a load's injected and dropped exchanges in rec.
func (m *Recall) record(rec *observe.Recorder, exs []recallindex.Unit, order []int, scores map[int]float64, dropped []observe.Item, v recallindex.View) {
	m.counterOnce.Do(func() {
		m.counter = m.cfg.counter
		if m.counter == nil {
			if c, err := tokens.CL100K(); err == nil {
				m.counter = c
			}
		}
	})
	items := make([]observe.Item, len(order))
	total := 0
	for n, i := range order {
		items[n] = observe.Item{Kind: m.unit.String(), ID: strconv.FormatInt(exs[i].Seq(), 10), Score: scores[i], Time: exs[i].At(), Conversation: m.conversationHash(v, i)}
		if m.counter != nil {
			if s, err := adapter.Render(exs[i].Msgs(), m.cfg.humanPrefix, m.cfg.aiPrefix); err == nil {
				// Reports only: a bad count (tokens.Count) is reported
				// as 0, unknown, and never changes what the load shows.
				items[n].Tokens, _ = tokens.Count(m.counter, s)
				total += items[n].Tokens
			}
		}
	}
	rec.Injected(items...)
	rec.Dropped(dropped...)
	rec.Tokens(total)
}
