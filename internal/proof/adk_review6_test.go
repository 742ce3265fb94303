package proof_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/schema"
	"google.golang.org/adk/v2/session"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/summarizer"
)

func review6Events() []*session.Event {
	d := adkDay
	return []*session.Event{
		adkText("e1", "user", d, "My name is Ana and I live in Lisbon. What is the weather in Porto?"),
		adkCall("e2", "travel_agent", d.Add(time.Second), "c1", "get_weather", map[string]any{"city": "Porto"}),
		adkResult("e3", "travel_agent", d.Add(2*time.Second), "c1", "get_weather", map[string]any{"forecast": "rainy"}),
		adkText("e4", "travel_agent", d.Add(3*time.Second), "It will be rainy in Porto."),
		adkText("e5", "user", d.Add(time.Hour), "Book the train to Porto for Friday."),
		adkText("e6", "travel_agent", d.Add(time.Hour+time.Second), "Booked: the 9:00 train to Porto on Friday."),
	}
}

// TestADKReview6VectorRecallBesideMemoryService: the package doc says a
// memories.Recall on the MemoryService's store reads the ADK conversations
// too. With a vector index on both (each its own vector store, as two
// components of one app would have), both keep their durable watermark in
// the same state value "recall" of each conversation: the Recall that
// comes second believes the turns are embedded already (they are, but in
// the other's vector store), so it never finds them; with another
// embedder it fails outright with ErrSpaceMismatch.
func TestADKReview6VectorRecallBesideMemoryService(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			emb := wordEmbedder(t)
			// Each case on a store of its own: two chain Recalls with
			// vector indexes on one store need their own state names
			// too (memories.WithRecallStateName), which is not what is
			// tested here.
			fixture := func(t *testing.T) adkFixture {
				vsADK, err := retrieval.NewChromem(nil, "adk", emb)
				require.NoError(t, err)
				f := newADKFixture(t, b, adk.WithRecallOptions(memories.WithVector(emb, vsADK, retrieval.WithEmbedderName("words"))))
				s := f.session(t, "travel", "ana", "s1", review6Events()...)
				require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
				return f
			}

			t.Run("same embedder", func(t *testing.T) {
				f := fixture(t)
				vsLC, err := retrieval.NewChromem(nil, "lc", emb)
				require.NoError(t, err)
				rec, err := memories.NewRecall(memories.WithStore(f.st), memories.WithVector(emb, vsLC, retrieval.WithEmbedderName("words")), memories.WithMemoryKey("relevant"))
				require.NoError(t, err)
				lctx := memstack.WithIdentity(ctx, memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s2"})
				vars, err := rec.LoadMemoryVariables(lctx, map[string]any{"input": "train to Porto on Friday"})
				require.NoError(t, err)
				assert.Contains(t, fmt.Sprint(vars["relevant"]), "Booked: the 9:00 train to Porto on Friday.",
					"a vector Recall on the MemoryService's store finds the ADK turns")
				docs, err := vsLC.SimilaritySearch(ctx, "train Porto Friday", 10)
				require.NoError(t, err)
				assert.NotEmpty(t, docs, "its own vector store holds the ADK turns")
			})
			t.Run("other embedder", func(t *testing.T) {
				f := fixture(t)
				rec, err := memories.NewRecall(memories.WithStore(f.st), memories.WithVector(emb, nil, retrieval.WithEmbedderName("other-model")))
				require.NoError(t, err)
				lctx := memstack.WithIdentity(ctx, memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s2"})
				_, err = rec.LoadMemoryVariables(lctx, map[string]any{"input": "train to Porto on Friday"})
				assert.NoError(t, err, "a Recall with its own vector store and embedder is not refused because of the MemoryService's")
			})
		})
	}
}

// TestADKReview6Layers: a combined stack over the MemoryService's store,
// loading the conversation it writes. RecentN and Recall show the ADK
// turns (a call with its result); Facts shows nothing and Summary shows
// every message raw until a turn is saved through them (they derive only
// on their own saves), against the package doc's "a Summary or Facts on
// the same store reads it too".
func TestADKReview6Layers(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			f := newADKFixture(t, b)
			ctx := context.Background()
			s := f.session(t, "travel", "ana", "s1", review6Events()...)
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))

			recent, err := memories.NewRecentN(10, memories.WithStore(f.st), memories.WithMemoryKey("recent"))
			require.NoError(t, err)
			sum, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(f.st), memories.WithMaxMessages(2), memories.WithBatchSize(2), memories.WithMemoryKey("summary"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = sum.Close() })
			pat, err := extract.NewPatterns()
			require.NoError(t, err)
			facts, err := memories.NewFacts(pat, memories.WithStore(f.st), memories.WithMemoryKey("facts"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = facts.Close() })
			rec, err := memories.NewRecall(memories.WithStore(f.st), memories.WithMemoryKey("relevant"))
			require.NoError(t, err)
			stack, err := combined.New([]schema.Memory{recent, sum, facts, rec})
			require.NoError(t, err)
			lctx := memstack.WithIdentity(ctx, memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s1"})
			vars, err := stack.LoadMemoryVariables(lctx, map[string]any{"input": "weather in Porto?"})
			require.NoError(t, err)
			t.Logf("%v", vars)
			// RecentN and Recall read the ADK turns as they are; Summary and
			// Facts derive only on their own saves, so they take the ADK
			// turns in at the next turn saved through them (the package doc
			// now says so; the review found it claimed more).
			assert.Contains(t, vars["recent"], "Booked: the 9:00 train to Porto on Friday.", "RecentN shows the ADK turns")
			assert.Contains(t, vars["relevant"], "rainy", "Recall finds the ADK turns")
			assert.NotContains(t, vars["facts"], "Ana", "Facts has not derived from the ADK turns yet")
			// One save through the stack: they catch up then.
			require.NoError(t, stack.SaveContext(lctx, map[string]any{"input": "Thanks."}, map[string]any{"output": "You are welcome."}))
			require.NoError(t, sum.Flush(lctx))
			vars, err = stack.LoadMemoryVariables(lctx, map[string]any{"input": "weather in Porto?"})
			require.NoError(t, err)
			assert.Contains(t, vars["facts"], "Ana", "Facts took the ADK turns in at the next save")
			assert.NotContains(t, vars["summary"], "Human: My name is Ana", "Summary folded the ADK turns at the next save")
			doc, err := os.ReadFile("../../adapters/adk/doc.go")
			require.NoError(t, err)
			assert.Contains(t, string(doc), "takes its turns in at their", "the package doc says when Summary and Facts see the ADK turns")
			t.Logf("after a save: facts=%q summary=%q", vars["facts"], vars["summary"])
		})
	}
}

// TestADKReview6RetentionKeepsRecord: a Summary with WithRetention over the
// conversation the MemoryService writes removes a prefix; the
// MemoryService must not store those events again on the next add, and
// stores the session's new events.
func TestADKReview6RetentionKeepsRecord(t *testing.T) {
	for _, b := range adkBackends() {
		t.Run(b.name, func(t *testing.T) {
			f := newADKFixture(t, b)
			ctx := context.Background()
			s := f.session(t, "travel", "ana", "s1", review6Events()...)
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			sum, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(f.st), memories.WithMaxMessages(2), memories.WithBatchSize(2), memories.WithRetention(memories.KeepLast(2)))
			require.NoError(t, err)
			t.Cleanup(func() { _ = sum.Close() })
			stack, err := combined.New([]schema.Memory{sum})
			require.NoError(t, err)
			id := memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s1"}
			lctx := memstack.WithIdentity(ctx, id)
			for i := range 12 {
				require.NoError(t, stack.SaveContext(lctx, map[string]any{"input": fmt.Sprintf("Question %d about kiwis?", i)}, map[string]any{"output": fmt.Sprintf("Answer %d about kiwis.", i)}))
			}
			require.NoError(t, sum.Flush(lctx))
			before, _ := stored(t, f.st, "travel", "ana", "s1")
			t.Logf("after retention: %d messages; first %v", len(before), before[0])
			require.NotContains(t, fmt.Sprint(before), "Booked: the 9:00", "the retention removed the ADK prefix")

			// The same session again, then a longer one.
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			after, _ := stored(t, f.st, "travel", "ana", "s1")
			assert.Equal(t, len(before), len(after), "the removed events are not stored again")
			s = f.extend(t, s, adkText("e7", "user", adkDay.Add(2*time.Hour), "Cancel the kiwi order."))
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			after, _ = stored(t, f.st, "travel", "ana", "s1")
			assert.Equal(t, len(before)+1, len(after), "only the new event is stored")
			got := search(t, f.mem, "travel", "ana", "kiwi order")
			require.NotEmpty(t, got)
			assert.Contains(t, entryText(got[0]), "Cancel the kiwi order.")
			got = search(t, f.mem, "travel", "ana", "train Porto Friday")
			for _, e := range got {
				assert.NotContains(t, entryText(e), "Booked", "a removed turn is not found")
			}
		})
	}
}

// TestADKReview6SearchMatchesLoadItems: Recall.Search over the ADK
// conversation, with exchanges and WithExcludeRecent, offers what
// LoadItems offers, on every backend (indexed ones too).
func TestADKReview6SearchMatchesLoadItems(t *testing.T) {
	for _, b := range adkBackends() {
		t.Run(b.name, func(t *testing.T) {
			f := newADKFixture(t, b)
			ctx := context.Background()
			s := f.session(t, "travel", "ana", "s1", review6Events()...)
			require.NoError(t, f.mem.AddSessionToMemory(ctx, s))
			rec, err := memories.NewRecall(memories.WithStore(f.st), memories.WithRecallUnit(memories.RecallExchanges), memories.WithExcludeRecent(1))
			require.NoError(t, err)
			lctx := memstack.WithIdentity(ctx, memstack.Identity{Tenant: "travel", User: "ana", Conversation: "s1"})
			ms, err := rec.Search(lctx, "weather in Porto")
			require.NoError(t, err)
			it, err := rec.LoadItems(lctx, map[string]any{"input": "weather in Porto"})
			require.NoError(t, err)
			require.Len(t, ms, len(it.List))
			require.Len(t, ms, 1, "the recent exchange is excluded")
			assert.Len(t, ms[0].Messages, 4, "the exchange holds the call with its result")
			assert.Equal(t, fmt.Sprint(ms[0].Seq), it.List[0].ID)
		})
	}
}
