package proof_test

// Review 4: the ADK adapter's documentation against its behaviour.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/sessiontestsuite"

	"github.com/tmc/langchaingo/embeddings"

	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/tokens"
)

// TestADKReview4_DateWithoutYear: doc.go promised "dates in questions
// ("what did we settle on 14 May?")", but Recall reads only dates with a
// year. The doc now says so ("14 May 2026?": a date with its year); this
// holds it to that: with its year the day's turns come first, and a day
// and month alone are words like any other (the 14 May turns, which do not
// say "14 May", are not brought forward).
func TestADKReview4_DateWithoutYear(t *testing.T) {
	f := newADKFixture(t, backends()[1])
	ctx := context.Background()
	may14 := time.Date(2026, time.May, 14, 10, 0, 0, 0, time.UTC)
	may20 := time.Date(2026, time.May, 20, 10, 0, 0, 0, time.UTC)
	require.NoError(t, f.mem.AddSessionToMemory(ctx, f.session(t, "travel", "ana", "s1",
		adkText("a1", "user", may14, "Let's go with the blue logo and the Porto venue."),
		adkText("a2", "planner", may14.Add(time.Minute), "Agreed: blue logo, Porto venue."))))
	require.NoError(t, f.mem.AddSessionToMemory(ctx, f.session(t, "travel", "ana", "s2",
		adkText("b1", "user", may20, "What did we settle about catering?"),
		adkText("b2", "planner", may20.Add(time.Minute), "Nothing was settled about catering yet."))))

	withYear := search(t, f.mem, "travel", "ana", "What did we settle on 14 May 2026?")
	require.NotEmpty(t, withYear)
	assert.Contains(t, entryText(withYear[0]), "blue logo", "with a year the day's turns come first")

	got := search(t, f.mem, "travel", "ana", "What did we settle on 14 May?")
	require.NotEmpty(t, got)
	assert.Contains(t, entryText(got[0]), "settle", "without a year, the question's words rank")
	doc, err := os.ReadFile("../../adapters/adk/doc.go")
	require.NoError(t, err)
	assert.Contains(t, string(doc), `"what
// did we settle on 14 May 2026?": a date with its year`, "the doc's example names a year")
}

// TestADKReview4_BudgetVersusWhatTheModelGets: WithTokenBudget counts an
// entry's text parts only. A tool-call entry carries the call and its
// result as FunctionCall/FunctionResponse parts AND as a text part, so
// what loadmemorytool hands the model (the entries as JSON) holds the
// result twice and exceeds the budget by far.
func TestADKReview4_BudgetVersusWhatTheModelGets(t *testing.T) {
	const budget = 1500 // the README's
	f := newADKFixture(t, backends()[1], adk.WithTokenBudget(budget))
	ctx := context.Background()
	var rows []map[string]any
	for i := range 30 {
		rows = append(rows, map[string]any{"flight": fmt.Sprintf("TP%04d", 1000+i), "from": "LIS", "to": "OPO", "price_eur": 40 + i, "seats": i % 9})
	}
	require.NoError(t, f.mem.AddSessionToMemory(ctx, f.session(t, "travel", "ana", "s1",
		adkText("a1", "user", adkDay, "Find flights from Lisbon to Porto."),
		adkCall("a2", "planner", adkDay.Add(time.Minute), "c1", "search_flights", map[string]any{"from": "LIS", "to": "OPO"}),
		adkResult("a3", "planner", adkDay.Add(2*time.Minute), "c1", "search_flights", map[string]any{"flights": rows}),
		adkText("a4", "planner", adkDay.Add(3*time.Minute), "The cheapest is TP1000 at 40 euros."))))
	got := search(t, f.mem, "travel", "ana", "flights Lisbon Porto")
	require.NotEmpty(t, got)
	cl, err := tokens.CL100K()
	require.NoError(t, err)
	texts := 0
	for _, e := range got {
		var parts []string
		for _, p := range e.Content.Parts {
			if p.Text != "" {
				parts = append(parts, p.Text)
			}
		}
		texts += cl.CountTokens(strings.Join(parts, "\n"))
	}
	// What load_memory returns to the model: {"memories": entries}.
	data, err := json.Marshal(map[string]any{"memories": got})
	require.NoError(t, err)
	asJSON := cl.CountTokens(string(data))
	for _, e := range got {
		t.Logf("%s: %.80s", e.ID, entryText(e))
	}
	t.Logf("%d entries: text parts %d tokens (the budget counts these), load_memory's JSON %d tokens, budget %d", len(got), texts, asJSON, budget)
	assert.LessOrEqual(t, texts, budget)
	assert.LessOrEqual(t, asJSON, budget, "what the model receives from load_memory is within WithTokenBudget")
}

// TestADKReview4_ConformanceOnIndexBackends: "ADK's own session
// conformance suite passes on every backend": also on the stores opened
// WithRecallIndex, which the proof suite runs memory tests on but not the
// conformance suite.
func TestADKReview4_ConformanceOnIndexBackends(t *testing.T) {
	for _, b := range adkBackends()[4:] {
		t.Run(b.name, func(t *testing.T) {
			sessiontestsuite.RunServiceTests(t, sessiontestsuite.SuiteOptions{SupportsUserProvidedSessionID: true},
				func(t *testing.T) session.Service {
					svc, err := adk.NewSessionService(b.space(t)("adk"))
					require.NoError(t, err)
					return svc
				})
		})
	}
}

var _ memory.Service = (*adk.MemoryService)(nil)

// TestADKReview4_CommandForgetLeavesVectors: doc.go says the memstack
// command "does the same" as ForgetUser ("memstack forget -store DSN
// -tenant APP -user USER -yes"), and the README that it "removes the
// user's memory". With vector or hybrid retrieval (which the README
// advertises) the user's turns also live, as text, in the vector store,
// which the command cannot reach: they survive a forget.
func TestADKReview4_CommandForgetLeavesVectors(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "memstack")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/memstack/memstack/cmd/memstack").CombinedOutput()
	require.NoError(t, err, "%s", out)
	path := filepath.Join(dir, "agent.db")
	raw, err := sqlitestore.Open(openCtx(t), path)
	st := closeLater(t, "sqlitestore.Open", raw, err)
	emb := wordEmbedder(t)
	vs, err := retrieval.NewChromem(nil, "adk", emb)
	require.NoError(t, err)
	sessions, err := adk.NewSessionService(st)
	require.NoError(t, err)
	mem, err := adk.NewMemoryService(st, adk.WithRecallOptions(memories.WithHybrid(emb, vs, retrieval.WithEmbedderName("words"))))
	require.NoError(t, err)
	f := adkFixture{st: st, sessions: sessions, mem: mem}
	ctx := context.Background()
	require.NoError(t, mem.AddSessionToMemory(ctx, f.session(t, "travel", "ana", "s1",
		adkText("e1", "user", adkDay, "My passport number is X1234567."))))
	require.NotEmpty(t, search(t, mem, "travel", "ana", "passport"))

	out, err = exec.Command(bin, "forget", "-store", "sqlite://"+path, "-tenant", "travel", "-user", "ana", "-yes").CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("memstack forget: %s", strings.TrimSpace(string(out)))
	assert.Empty(t, search(t, mem, "travel", "ana", "passport"), "SearchMemory shows nothing")
	docs, err := vs.SimilaritySearch(ctx, "passport number", 5)
	require.NoError(t, err)
	for _, d := range docs {
		t.Logf("left in the vector store: %q %v", d.PageContent, d.Metadata)
	}
	// The command cannot reach a vector store (the docs say so, and to
	// forget such users through ForgetUser): the vectors may stay, never
	// shown, until a Recall that indexed them notices their turns are gone
	// (the search above may have) or ForgetUser runs.
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	assert.Contains(t, string(readme), "cannot reach a vector store", "the README says the command leaves vectors")
	_, err = mem.ForgetUser(ctx, "travel", "ana")
	require.NoError(t, err)
	docs, err = vs.SimilaritySearch(ctx, "passport number", 5)
	require.NoError(t, err)
	assert.Empty(t, docs, "a ForgetUser after the command removes the orphaned vectors")
}

// wordEmbedder: one dimension per hashed word.
func wordEmbedder(t *testing.T) embeddings.Embedder {
	e, err := embeddings.NewEmbedder(embeddings.EmbedderClientFunc(func(_ context.Context, texts []string) ([][]float32, error) {
		out := make([][]float32, len(texts))
		for i, text := range texts {
			v := make([]float32, 64)
			v[63] = 0.01
			for _, w := range strings.Fields(strings.ToLower(text)) {
				w = strings.Trim(w, ".,?!")
				h := 0
				for _, c := range w {
					h = (h*31 + int(c)) % 63
				}
				v[h]++
			}
			out[i] = v
		}
		return out, nil
	}))
	require.NoError(t, err)
	return e
}
