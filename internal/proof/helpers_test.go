package proof_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// proofIdentity returns the identity of writer i. Odd writers have
// separators, wildcards and brace tags in every part, so a backend that
// builds keys or patterns naively mixes them up.
func proofIdentity(i int) memstack.Identity {
	if i%2 == 0 {
		return memstack.Identity{Tenant: "acme", User: fmt.Sprintf("user%d", i), Conversation: "c1"}
	}
	return memstack.Identity{
		Tenant:       "acme:{*}",
		User:         fmt.Sprintf("user/%d*?[", i),
		Conversation: fmt.Sprintf("c:%%%d%%:%s", i, "ü"),
	}
}

// turnText returns the two messages of turn j of writer i. Both start with
// the marker "[i/j]", which parseMarker reads back, and read like a real
// exchange (names, numbers, a decision), which is what the extractive
// summarizer keeps.
func turnText(i, j int) (human, ai string) {
	human = fmt.Sprintf("[%d/%d] Human %d asks: can Alice meet on Monday at %d? Please confirm the budget of %d euros.", i, j, i, j%24, 100+j)
	ai = fmt.Sprintf("[%d/%d] Agreed: the meeting with Alice is booked for Monday at %d, budget %d euros.", i, j, j%24, 100+j)
	return human, ai
}

// expected returns the messages writer i sent in turns [0, turns).
func expected(i, turns int) []llms.ChatMessage {
	out := make([]llms.ChatMessage, 0, 2*turns)
	for j := range turns {
		h, a := turnText(i, j)
		out = append(out, llms.HumanChatMessage{Content: h}, llms.AIChatMessage{Content: a})
	}
	return out
}

var markerRe = regexp.MustCompile(`^\[(\d+)/(\d+)\] `)

// parseMarker returns the writer and turn of a message written by
// turnText, or ok false.
func parseMarker(content string) (writer, turn int, ok bool) {
	m := markerRe.FindStringSubmatch(content)
	if m == nil {
		return 0, 0, false
	}
	w, err1 := strconv.Atoi(m[1])
	j, err2 := strconv.Atoi(m[2])
	return w, j, err1 == nil && err2 == nil
}

// tally is what a transcript holds compared with what its writer sent.
type tally struct {
	lost, duplicated, foreign, mismatched int
}

func (t *tally) add(o tally) {
	t.lost += o.lost
	t.duplicated += o.duplicated
	t.foreign += o.foreign
	t.mismatched += o.mismatched
}

// count compares the messages stored for writer i with want: messages of
// want missing (lost), stored twice (duplicated), of another writer or of
// no writer (foreign), and whether the sequence differs from want in any
// way at all (mismatched: 0 or 1).
func count(i int, got []llms.ChatMessage, want []llms.ChatMessage) tally {
	var t tally
	type key struct {
		turn int
		typ  llms.ChatMessageType
	}
	seen := map[key]int{}
	for _, m := range got {
		w, j, ok := parseMarker(m.GetContent())
		if !ok || w != i {
			t.foreign++
			continue
		}
		k := key{j, m.GetType()}
		if seen[k]++; seen[k] == 2 {
			t.duplicated++
		}
	}
	for _, m := range want {
		_, j, _ := parseMarker(m.GetContent())
		if seen[key{j, m.GetType()}] == 0 {
			t.lost++
		}
	}
	if !sameMessages(got, want) {
		t.mismatched = 1
	}
	return t
}

func sameMessages(a, b []llms.ChatMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].GetType() != b[i].GetType() || a[i].GetContent() != b[i].GetContent() {
			return false
		}
	}
	return true
}

func messagesOf(recs []store.Record) []llms.ChatMessage {
	out := make([]llms.ChatMessage, len(recs))
	for i, r := range recs {
		out[i] = r.Message
	}
	return out
}

// summaryState is the state a Summary keeps per identity under
// memories.SummaryStateName (documented as JSON: the summary, the Seq it
// covers through, and how many messages it folded).
type summaryState struct {
	Summary string `json:"summary"`
	Through int64  `json:"through"`
	Folded  int64  `json:"folded"`
}

// readSummary returns the summary state of id in s and the non-system
// messages the summary does not cover (Seq after Through), oldest first.
func readSummary(t testing.TB, ctx context.Context, s store.Store, id memstack.Identity) (summaryState, []store.Record) {
	t.Helper()
	recs, err := s.All(ctx, id)
	if err != nil {
		t.Errorf("summary store All(%s): %v", id, err)
		return summaryState{}, nil
	}
	st, err := s.GetState(ctx, id, memories.SummaryStateName)
	if err != nil {
		t.Errorf("summary store GetState(%s): %v", id, err)
		return summaryState{}, nil
	}
	var ss summaryState
	if st.Version != 0 {
		if err := json.Unmarshal(st.Value, &ss); err != nil {
			t.Errorf("summary state of %s is not JSON: %v", id, err)
		}
	}
	var raw []store.Record
	for _, r := range recs {
		if r.Message.GetType() != llms.ChatMessageTypeSystem && r.Seq > ss.Through {
			raw = append(raw, r)
		}
	}
	return ss, raw
}

// limiter reports at most max problems with t.Errorf and counts the rest,
// so a broken run fails with a readable log.
type limiter struct {
	t   testing.TB
	max int64
	n   atomic.Int64
}

func (l *limiter) Errorf(format string, args ...any) {
	if l.n.Add(1) <= l.max {
		l.t.Errorf(format, args...)
	}
}

func (l *limiter) count() int64 { return l.n.Load() }
