package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/replay"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
)

var ana = memstack.Identity{Tenant: "acme", User: "ana"}

// newStack is the stack memstack's README recommends, on one store.
func newStack(t *testing.T, s store.Store) *combined.Memory {
	t.Helper()
	recent, err := memories.NewRecentN(6, memories.WithStore(s))
	require.NoError(t, err)
	sum, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(s), memories.WithMemoryKey("summary"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = sum.Close() })
	patterns, err := extract.NewPatterns()
	require.NoError(t, err)
	facts, err := memories.NewFacts(patterns, memories.WithStore(s), memories.WithFactsPerUser(true))
	require.NoError(t, err)
	t.Cleanup(func() { _ = facts.Close() })
	recall, err := memories.NewRecall(memories.WithStore(s))
	require.NoError(t, err)
	mem, err := combined.New([]schema.Memory{recent, sum, facts, recall})
	require.NoError(t, err)
	return mem
}

var day = time.Date(2025, 3, 2, 10, 0, 0, 0, time.UTC)

// historyJSONL is a file of two conversations, interleaved, with a
// system message, a lone question and enough turns to be summarized.
func historyJSONL() string {
	var b strings.Builder
	line := func(conv, role, content string, at time.Time) {
		fmt.Fprintf(&b, `{"conversation":%q,"role":%q,"content":%q,"time":%q,"extra":1}`+"\n", conv, role, content, at.Format(time.RFC3339Nano))
	}
	line("trip", "system", "You are a travel agent.", day)
	line("trip", "user", "My name is Ana.", day.Add(time.Second))
	line("trip", "assistant", "Hello Ana!", day.Add(3*time.Second))
	line("billing", "human", "Where is invoice 4711?", day.Add(time.Minute))
	b.WriteString("\n   \n")
	line("trip", "user", "I live in Oslo.", day.Add(time.Hour))
	line("trip", "ai", "Oslo is lovely.", day.Add(time.Hour+2*time.Second))
	line("billing", "ai", "Invoice 4711 was paid on 1 March.", day.Add(time.Minute+time.Second))
	for i := range 9 {
		at := day.Add(time.Duration(2+i) * time.Hour)
		line("trip", "User", fmt.Sprintf("Question %d: can the flight to Lisbon leave on day %d?", i, i+1), at)
		line("trip", "Assistant", fmt.Sprintf("Answer %d: yes, the Lisbon flight leaves on day %d.", i, i+1), at.Add(time.Second))
	}
	line("trip", "user", "Thanks!", day.Add(12*time.Hour))
	return b.String()
}

// wantTimes is when each message of c must be stored: its own time, or
// for the answer of an exchange its question's.
func wantTimes(c replay.Conversation) []time.Time {
	var out []time.Time
	for i := 0; i < len(c.Messages); i++ {
		r := c.Messages[i]
		out = append(out, r.Time)
		if _, ok := r.Message.(llms.HumanChatMessage); ok && i+1 < len(c.Messages) {
			if a, ok := c.Messages[i+1].Message.(llms.AIChatMessage); ok && len(a.ToolCalls) == 0 {
				out = append(out, r.Time)
				i++
			}
		}
	}
	return out
}

func exportOf(t *testing.T, s store.Store) string {
	t.Helper()
	e, err := s.(store.Users).Export(context.Background(), store.UserScope(ana.Tenant, ana.User))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, e.WriteJSON(&buf))
	_, rest, _ := strings.Cut(buf.String(), `"identities"`)
	return rest // without "exported_at"
}

func TestImportJSONL(t *testing.T) {
	ctx := context.Background()
	convs, err := replay.Read(strings.NewReader(historyJSONL()))
	require.NoError(t, err)
	require.Len(t, convs, 2)
	assert.Equal(t, "trip", convs[0].ID)
	assert.Equal(t, "billing", convs[1].ID)
	require.Len(t, convs[0].Messages, 1+2+2+18+1)

	s := store.NewInMemory()
	mem := newStack(t, s)
	stats, err := replay.Import(ctx, mem, ana, convs)
	require.NoError(t, err)
	assert.Equal(t, replay.Stats{Conversations: 2, Exchanges: 12, Messages: 26}, stats)

	for _, c := range convs {
		recs, err := s.All(ctx, memstack.Identity{Tenant: "acme", User: "ana", Conversation: c.ID})
		require.NoError(t, err)
		require.Len(t, recs, len(c.Messages), c.ID)
		want := wantTimes(c)
		for i, r := range recs {
			assert.Equal(t, c.Messages[i].Message.GetType(), r.Message.GetType())
			assert.Equal(t, c.Messages[i].Message.GetContent(), r.Message.GetContent())
			assert.True(t, want[i].Equal(r.Time), "%s message %d at %v, want %v", c.ID, i, r.Time, want[i])
		}
	}

	// Derived state: the trip's summary and the user's facts.
	trip := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "trip"}
	st, err := s.GetState(ctx, trip, memories.SummaryStateName)
	require.NoError(t, err)
	assert.NotEmpty(t, st.Value, "no summary")
	e, err := s.Export(ctx, store.UserScope("acme", "ana"))
	require.NoError(t, err)
	var factsFound bool
	for _, ie := range e.Identities {
		if ie.Identity.Conversation == store.UserFactsConversation {
			for _, v := range ie.Namespaces[0].States {
				factsFound = factsFound || strings.Contains(string(v.Value), "Oslo")
			}
		}
	}
	assert.True(t, factsFound, "no fact about Oslo")

	// A new conversation of the user recalls an imported turn.
	nctx := memstack.WithIdentity(ctx, memstack.Identity{Tenant: "acme", User: "ana", Conversation: "new"})
	vars, err := mem.LoadMemoryVariables(nctx, map[string]any{"input": "Was invoice 4711 paid?"})
	require.NoError(t, err)
	assert.Contains(t, fmt.Sprint(vars["relevant_history"]), "paid on 1 March")
	assert.Contains(t, fmt.Sprint(vars["facts"]), "Oslo")

	// A second import stores nothing and derives nothing new.
	before := exportOf(t, s)
	again, err := replay.Import(ctx, newStack(t, s), ana, convs)
	require.NoError(t, err)
	assert.Equal(t, stats, again)
	assert.Equal(t, before, exportOf(t, s))
}

func TestImportExportRoundTrip(t *testing.T) {
	// Import a JSONL file, export the user, import the export into a new
	// store: the same transcripts at the same times.
	ctx := context.Background()
	convs, err := replay.ReadJSONL(strings.NewReader(historyJSONL()))
	require.NoError(t, err)
	first := store.NewInMemory()
	_, err = replay.Import(ctx, newStack(t, first), ana, convs)
	require.NoError(t, err)
	e, err := first.Export(ctx, store.UserScope("acme", "ana"))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, e.WriteJSON(&buf))

	fromExport, err := replay.Read(&buf)
	require.NoError(t, err)
	require.Len(t, fromExport, 2) // the derived identities are skipped
	owner, err := replay.ExportOwner(e)
	require.NoError(t, err)
	assert.Equal(t, ana, owner)

	second := store.NewInMemory()
	mem := newStack(t, second)
	stats, err := replay.Import(ctx, mem, owner, fromExport)
	require.NoError(t, err)
	assert.Equal(t, 2, stats.Conversations)
	for _, c := range convs {
		id := memstack.Identity{Tenant: "acme", User: "ana", Conversation: c.ID}
		a, err := first.All(ctx, id)
		require.NoError(t, err)
		b, err := second.All(ctx, id)
		require.NoError(t, err)
		require.Len(t, b, len(a))
		for i := range a {
			assert.Equal(t, a[i].Message, b[i].Message)
			assert.True(t, a[i].Time.Equal(b[i].Time))
		}
	}
	// And once more: nothing new.
	before := exportOf(t, second)
	again, err := replay.Import(ctx, mem, owner, fromExport)
	require.NoError(t, err)
	assert.Equal(t, stats, again)
	assert.Equal(t, before, exportOf(t, second))
}

func TestImportToolMessagesAndSkips(t *testing.T) {
	ctx := context.Background()
	conv := replay.Conversation{ID: "tools", Messages: []store.Record{
		{Message: llms.HumanChatMessage{Content: "weather in Oslo?"}, Time: day},
		{Message: llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: "{}"}}}}, Time: day.Add(time.Second)},
		{Message: llms.ToolChatMessage{ID: "c1", Content: "3 degrees"}, Time: day.Add(2 * time.Second)},
		{Message: llms.AIChatMessage{Content: "It is 3 degrees."}, Time: day.Add(3 * time.Second)},
	}}
	s := store.NewInMemory()
	recent, err := memories.NewRecentN(6, memories.WithStore(s))
	require.NoError(t, err)
	stats, err := replay.Import(ctx, recent, ana, []replay.Conversation{conv})
	require.NoError(t, err)
	assert.Equal(t, replay.Stats{Conversations: 1, Messages: 4}, stats)
	recs, err := s.All(ctx, memstack.Identity{Tenant: "acme", User: "ana", Conversation: "tools"})
	require.NoError(t, err)
	require.Len(t, recs, 4)
	for i, r := range recs {
		assert.Equal(t, conv.Messages[i].Message, r.Message)
		assert.True(t, conv.Messages[i].Time.Equal(r.Time))
	}

	// langchaingo's own memory has no AddMessage: the lone messages are
	// skipped, the exchanges saved (and saved again on a re-import: it
	// ignores save keys).
	lc := memory.NewConversationBuffer()
	stats, err = replay.Import(ctx, lc, ana, []replay.Conversation{conv, {ID: "x", Messages: []store.Record{
		{Message: llms.HumanChatMessage{Content: "hi"}, Time: day}, {Message: llms.AIChatMessage{Content: "hello"}, Time: day},
	}}})
	require.NoError(t, err)
	assert.Equal(t, replay.Stats{Conversations: 2, Exchanges: 1, Messages: 2, Skipped: 4}, stats)
}

func TestImportErrors(t *testing.T) {
	ctx := context.Background()
	s := store.NewInMemory()
	recent, err := memories.NewRecentN(6, memories.WithStore(s))
	require.NoError(t, err)
	ok := replay.Conversation{ID: "ok", Messages: []store.Record{{Message: llms.HumanChatMessage{Content: "hi"}, Time: day}}}

	_, err = replay.Import(ctx, recent, memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c"}, []replay.Conversation{ok})
	require.ErrorIs(t, err, replay.ErrInput)
	_, err = replay.Import(ctx, nil, ana, []replay.Conversation{ok})
	require.ErrorIs(t, err, replay.ErrInput)

	// A failing message stops the import: what came before stays.
	bad := replay.Conversation{ID: "bad", Messages: []store.Record{
		{Message: llms.HumanChatMessage{Content: "first"}, Time: day},
		{Message: llms.HumanChatMessage{Content: "bad time"}, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	}}
	stats, err := replay.Import(ctx, recent, ana, []replay.Conversation{ok, bad, ok})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `conversation "bad", message 1`)
	assert.Equal(t, replay.Stats{Conversations: 1, Messages: 2}, stats)
	recs, err := s.All(ctx, memstack.Identity{Tenant: "acme", User: "ana", Conversation: "bad"})
	require.NoError(t, err)
	assert.Len(t, recs, 1)

	derived := replay.Conversation{ID: store.UserFactsConversation, Messages: ok.Messages}
	_, err = replay.Import(ctx, recent, ana, []replay.Conversation{derived})
	require.ErrorIs(t, err, replay.ErrInput)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = replay.Import(cctx, recent, ana, []replay.Conversation{ok})
	require.ErrorIs(t, err, context.Canceled)
}

func TestReadJSONLErrors(t *testing.T) {
	const secret = "s3cret"
	good := `{"conversation":"c","role":"user","content":"` + secret + `","time":"2025-03-02T10:00:00Z"}`
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"not JSON", good + "\n" + secret + "\n", []string{"line 2", "not a JSON object"}},
		{"an array", "[1]\n", []string{"line 1", "not a JSON object"}},
		{"no conversation", `{"role":"user","content":"` + secret + `","time":"2025-03-02T10:00:00Z"}`, []string{"line 1", `"conversation"`}},
		{"empty conversation", strings.Replace(good, `"c"`, `""`, 1), []string{"line 1", `"conversation"`, "empty"}},
		{"derived conversation", strings.Replace(good, `"c"`, `"\u0000facts"`, 1), []string{"line 1", `"conversation"`}},
		{"no role", strings.Replace(good, `"role":"user",`, "", 1), []string{"line 1", `"role"`}},
		{"bad role", "\n" + strings.Replace(good, `"user"`, `"`+secret+`"`, 1), []string{"line 2", `"role"`}},
		{"no content", `{"conversation":"c","role":"user","time":"2025-03-02T10:00:00Z"}`, []string{"line 1", `"content"`}},
		{"content not a string", `{"conversation":"c","role":"user","content":7,"time":"2025-03-02T10:00:00Z"}`, []string{"line 1", `"content"`}},
		{"no time", strings.Replace(good, `,"time":"2025-03-02T10:00:00Z"`, "", 1), []string{"line 1", `"time"`}},
		{"bad time", strings.Replace(good, "2025-03-02T10:00:00Z", "2 March "+secret, 1), []string{"line 1", `"time"`}},
		{"time goes back", good + "\n" + strings.Replace(good, "10:00:00Z", "09:59:59Z", 1), []string{"line 2", `"time"`, "before"}},
		{"long line", good + "\n" + `{"conversation":"c","role":"user","time":"2025-03-02T10:00:00Z","content":"` + strings.Repeat("x", replay.MaxLineBytes) + `"}` + "\n", []string{"line 2", "longer than"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			convs, err := replay.ReadJSONL(strings.NewReader(tc.in))
			require.Error(t, err)
			assert.Nil(t, convs)
			assert.True(t, errors.Is(err, replay.ErrInput), err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), secret)
		})
	}

	// Times equal are fine, and another conversation's earlier time too; a
	// line just under the limit is read.
	in := good + "\n" + good + "\n" + strings.Replace(strings.Replace(good, "10:00", "09:00", 1), `"c"`, `"d"`, 1) + "\n" +
		`{"conversation":"c","role":"ai","time":"2025-03-02T10:00:00Z","content":"` + strings.Repeat("x", replay.MaxLineBytes-100) + `"}`
	convs, err := replay.ReadJSONL(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, convs, 2)
	assert.Len(t, convs[0].Messages, 3)
	convs, err = replay.ReadJSONL(strings.NewReader(""))
	require.NoError(t, err)
	assert.Empty(t, convs)
}

func TestFromExportNamespaces(t *testing.T) {
	at := day
	rec := func(seq int64, s string) store.Record {
		return store.Record{Seq: seq, Message: llms.HumanChatMessage{Content: s}, Time: at}
	}
	e := store.Export{Scope: store.UserScope("acme", "ana"), Identities: []store.IdentityExport{
		{Identity: memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}, Namespaces: []store.NamespaceExport{
			{Namespace: "a", Messages: []store.Record{rec(1, "a1")}},
			{Namespace: "b", Messages: []store.Record{rec(1, "b1"), rec(2, "b2")}},
		}},
		{Identity: memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c2"}, Namespaces: []store.NamespaceExport{
			{Namespace: "a", Messages: []store.Record{rec(1, "x")}},
			{Namespace: "b", Messages: []store.Record{rec(1, "y")}},
		}},
		{Identity: memstack.Identity{Tenant: "acme", User: "ana", Conversation: store.UserFactsConversation}, Namespaces: []store.NamespaceExport{
			{Namespace: "a", Messages: []store.Record{rec(1, "derived")}},
		}},
	}}
	for _, tc := range []struct {
		ns   string
		want map[string][]string
	}{
		{"", map[string][]string{"c1": {"b1", "b2"}, "c2": {"x"}}},
		{"a", map[string][]string{"c1": {"a1"}, "c2": {"x"}}},
		{"b", map[string][]string{"c1": {"b1", "b2"}, "c2": {"y"}}},
		{"none", map[string][]string{}},
	} {
		convs, err := replay.FromExport(e, tc.ns)
		require.NoError(t, err)
		got := map[string][]string{}
		for _, c := range convs {
			for _, r := range c.Messages {
				got[c.ID] = append(got[c.ID], r.Message.GetContent())
			}
		}
		assert.Equal(t, tc.want, got, "namespace %q", tc.ns)
	}

	// A tenant's export of two users is refused.
	e.Scope = store.TenantScope("acme")
	e.Identities = append(e.Identities, store.IdentityExport{Identity: memstack.Identity{Tenant: "acme", User: "ben", Conversation: "c1"}})
	_, err := replay.FromExport(e, "")
	require.ErrorIs(t, err, replay.ErrInput)
	_, err = replay.ExportOwner(e)
	require.ErrorIs(t, err, replay.ErrInput)
}

// With SkipStored a re-import stores nothing even when the store no longer
// knows the save keys (Redis forgets them after minutes; here the first
// copy was appended without any): every message it holds is left out.
func TestImportSkipStoredWithoutKeys(t *testing.T) {
	ctx := context.Background()
	convs, err := replay.ReadJSONL(strings.NewReader(historyJSONL()))
	require.NoError(t, err)
	s := store.NewInMemory()
	// The first copy: the transcript as a memstack stack stores it, but
	// with no append keys at all.
	plain, err := replay.Import(ctx, newStack(t, store.NewInMemory()), ana, convs)
	require.NoError(t, err)
	for _, c := range convs {
		id := memstack.Identity{Tenant: ana.Tenant, User: ana.User, Conversation: c.ID}
		times := wantTimes(c)
		for i, r := range c.Messages {
			require.NoError(t, s.Append(memstack.WithTime(ctx, times[i]), id, r.Message))
		}
	}
	before := exportOf(t, s)

	st, err := replay.Import(ctx, newStack(t, s), ana, convs, replay.SkipStored(s))
	require.NoError(t, err)
	assert.Equal(t, plain.Messages, st.Present, "every message found stored")
	assert.Zero(t, st.Messages)
	assert.Equal(t, before, exportOf(t, s), "nothing stored twice")

	// Without it the same import stores the transcript again: the keys
	// alone cannot know the first copy.
	_, err = replay.Import(ctx, newStack(t, s), ana, convs)
	require.NoError(t, err)
	assert.NotEqual(t, before, exportOf(t, s))
}
