package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// Overwrite replaces, behind the store's back, the stored value of the
// message of id with sequence number seq by value: the message's JSON as
// storekit.EncodeMessage writes it, which a backend wraps as it stores every
// message (a Redis list element adds its "<seq>|<flag>|" head, a SQL row
// keeps it in its message column). RunUndated uses it to plant values
// written before memstack recorded times.
type Overwrite func(t *testing.T, id memstack.Identity, seq int64, value []byte)

// undatedValues are messages exactly as the codec wrote them before it
// wrote times: no "at" field.
var undatedValues = []struct {
	value string
	msg   llms.ChatMessage
}{
	{`{"v":1,"type":"system","content":"Be brief."}`, llms.SystemChatMessage{Content: "Be brief."}},
	{`{"v":1,"type":"human","content":"My name is Ana."}`, llms.HumanChatMessage{Content: "My name is Ana."}},
	{`{"v":1,"type":"ai","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"remember","arguments":"{}"}}]}`,
		llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "remember", Arguments: "{}"}}}}},
	{`{"v":1,"type":"tool","content":"ok","id":"c1"}`, llms.ToolChatMessage{ID: "c1", Content: "ok"}},
}

// RunUndated checks that s reads messages stored before memstack recorded
// times — values without the "at" field, planted with overwrite — as it
// always did, with a zero store.Record.Time, next to messages that have a
// time: Last, All and Stat read both; RemovePrefix removes the old ones
// (keeping an old system message) and leaves the rest alone; new Appends
// are dated as usual. A backend runs it from its interop tests with an
// Overwrite that writes its own storage layout; s must be empty for the
// identity it uses.
func RunUndated(t *testing.T, s store.Store, overwrite Overwrite) {
	t.Helper()
	if s == nil || overwrite == nil {
		t.Fatal("storetest.RunUndated: nil store or overwrite")
	}
	ctx := context.Background()
	id := memstack.Identity{Tenant: "undated", User: randomHex(4), Conversation: "before times"}
	at := time.Date(2023, 5, 8, 12, 30, 0, 0, time.FixedZone("", 2*3600))

	// The old turn is appended now and then rewritten as the codec wrote
	// it before times; the new turn keeps its time.
	old := make([]llms.ChatMessage, len(undatedValues))
	for i, u := range undatedValues {
		enc, err := storekit.EncodeMessage(u.msg)
		require.NoError(t, err)
		require.Equal(t, u.value, string(enc), "the undated value is what EncodeMessage writes")
		old[i] = u.msg
	}
	require.NoError(t, s.Append(ctx, id, old...))
	require.NoError(t, s.Append(memstack.WithTime(ctx, at), id, human("And now?"), ai("Now it is dated.")))
	before := mustAll(t, s, id)
	require.Len(t, before, len(old)+2)
	for i, u := range undatedValues {
		overwrite(t, id, before[i].Seq, []byte(u.value))
	}

	check := func(what string, rs []store.Record, wantOld []store.Record, dated int) {
		t.Helper()
		require.Len(t, rs, len(wantOld)+dated, what)
		for i, r := range rs[:len(wantOld)] {
			assert.Equal(t, wantOld[i].Seq, r.Seq, "%s: Seq of old message %d", what, i)
			assert.Equal(t, wantOld[i].Message, r.Message, "%s: old message %d", what, i)
			assert.Equal(t, time.Time{}, r.Time, "%s: an old message has no time", what)
		}
		for _, r := range rs[len(wantOld):] {
			requireTime(t, at, r.Time, what, ": a new message")
		}
	}
	undated := make([]store.Record, len(undatedValues))
	for i, u := range undatedValues {
		undated[i] = store.Record{Seq: before[i].Seq, Message: u.msg}
	}
	check("All", mustAll(t, s, id), undated, 2)
	last, err := s.Last(ctx, id, 3)
	require.NoError(t, err)
	check("Last(3)", last, undated[len(undated)-1:], 2)
	assert.Equal(t, statOf(before), mustStat(t, s, id))

	// RemovePrefix through the old tool call: the old system message stays.
	n, err := s.RemovePrefix(ctx, id, before[2].Seq)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	check("All after RemovePrefix", mustAll(t, s, id), []store.Record{undated[0], undated[3]}, 2)

	// New Appends are dated; the old messages stay undated.
	t0 := time.Now().Round(0)
	require.NoError(t, s.Append(ctx, id, human("later")))
	rs := mustAll(t, s, id)
	require.Len(t, rs, 5)
	newest := rs[len(rs)-1]
	assert.False(t, newest.Time.Before(t0) || newest.Time.After(time.Now()), "a new Append is dated now, got %v", newest.Time)
	check("All after a new Append", rs[:4], []store.Record{undated[0], undated[3]}, 2)
}
