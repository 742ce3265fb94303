package store_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

// exportFixture fills two InMemory stores (two namespaces, "facts" and
// "recent") and returns their export of ana's scope, merged.
func exportFixture(t *testing.T) store.Export {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 5, 8, 9, 30, 0, 123000000, time.FixedZone("", 2*3600))
	c1 := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}
	c2 := memstack.Identity{Tenant: "acme", User: "ana", Conversation: "c:2"}
	other := memstack.Identity{Tenant: "acme", User: "ben", Conversation: "c1"}
	var merged store.Export
	for i, ns := range []string{"facts", "recent"} {
		s := store.NewInMemory()
		for _, id := range []memstack.Identity{c1, c2, other} {
			tctx := memstack.WithTime(ctx, at.Add(time.Duration(i)*time.Hour))
			require.NoError(t, s.Append(tctx, id, llms.SystemChatMessage{Content: "be brief"}))
			require.NoError(t, s.Append(tctx, id, llms.HumanChatMessage{Content: "hello, I am " + id.User}, llms.AIChatMessage{Content: "hi"}))
			require.NoError(t, s.Append(memstack.WithTime(ctx, at.Add(time.Minute).UTC()), id,
				llms.HumanChatMessage{Content: "weather?"},
				llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "call-1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: `{"city":"Oslo"}`}}}},
				llms.ToolChatMessage{ID: "call-1", Content: `{"temp":3}`},
				llms.AIChatMessage{Content: "3 degrees"}))
			st, err := s.GetState(ctx, id, "summary")
			require.NoError(t, err)
			_, err = s.PutState(ctx, id, "summary", []byte(`{"summary":"about `+id.User+`"}`), st.Version)
			require.NoError(t, err)
			st, err = s.GetState(ctx, id, "binary")
			require.NoError(t, err)
			_, err = s.PutState(ctx, id, "binary", []byte{0xff, 0x00, 0xfe}, st.Version)
			require.NoError(t, err)
			st, err = s.GetState(ctx, id, "empty")
			require.NoError(t, err)
			_, err = s.PutState(ctx, id, "empty", []byte{}, st.Version)
			require.NoError(t, err)
		}
		e, err := s.Export(ctx, store.UserScope("acme", "ana"))
		require.NoError(t, err)
		require.Len(t, e.Identities, 2)
		if merged.Identities == nil {
			merged = e
		} else {
			for j := range merged.Identities {
				merged.Identities[j].Namespaces = append(merged.Identities[j].Namespaces, e.Identities[j].Namespaces...)
			}
		}
		for j := range merged.Identities {
			merged.Identities[j].Namespaces[i].Namespace = ns
		}
	}
	merged.Identities[0].Namespaces[0].Cleared = true
	return merged
}

func TestReadExportRoundTrip(t *testing.T) {
	e := exportFixture(t)
	var buf bytes.Buffer
	require.NoError(t, e.WriteJSON(&buf))
	got, err := store.ReadExport(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	assert.Equal(t, e, got)
	for _, ie := range got.Identities {
		for _, ne := range ie.Namespaces {
			for _, r := range ne.Messages {
				assert.False(t, r.Time.IsZero())
			}
		}
	}

	// Written again, it reads back the same.
	var again bytes.Buffer
	require.NoError(t, got.WriteJSON(&again))
	got2, err := store.ReadExport(&again)
	require.NoError(t, err)
	assert.Equal(t, e, got2)

	// A tenant scope and an empty export.
	empty := store.Export{Scope: store.TenantScope("acme")}
	buf.Reset()
	require.NoError(t, empty.WriteJSON(&buf))
	got, err = store.ReadExport(&buf)
	require.NoError(t, err)
	assert.Equal(t, empty, got)
}

func TestReadExportBadInput(t *testing.T) {
	const secret = "s3cret-content"
	msg := `{"v":1,"type":"human","content":"` + secret + `","at":"2026-05-08T09:30:00Z"}`
	doc := func(conv, messages, states string) string {
		return `{"tenant":"acme","user":"ana","exported_at":"2026-05-08T09:30:00Z","identities":[{"tenant":"acme","user":"ana","conversation":"` + conv +
			`","namespaces":[{"namespace":"recent","messages":[` + messages + `],"states":{` + states + `}}]}]}`
	}
	// The fixture is valid.
	_, err := store.ReadExport(strings.NewReader(doc("c1", `{"seq":1,"message":`+msg+`}`, `"s":{"version":1,"value":"x"}`)))
	require.NoError(t, err)

	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"not JSON", "{" + secret, []string{"not an export", "offset"}},
		{"trailing data", doc("c1", "", "") + "{}", []string{"not an export"}},
		{"no identities", `{"tenant":"acme","user":"ana"}`, []string{`no "identities" field`}},
		{"no tenant", `{"identities":[]}`, []string{`no "tenant" field`}},
		{"wrong type", `{"tenant":"acme","identities":{}}`, []string{"identities", "wrong JSON type"}},
		{"outside scope", strings.Replace(doc("c1", "", ""), `"user":"ana","conversation"`, `"user":"ben","conversation"`, 1), []string{"outside its scope", "acme:ben:c1"}},
		{"bad message", doc("c1", `{"seq":7,"message":{"v":1,"type":"nope","content":"`+secret+`"}}`, ""), []string{"Seq 7", "acme:ana:c1", `"recent"`}},
		{"bad time", doc("c1", `{"seq":7,"message":{"v":1,"type":"human","content":"`+secret+`","at":"yesterday"}}`, ""), []string{"Seq 7", "acme:ana:c1"}},
		{"not a message", doc("c1", `{"seq":3,"message":"`+secret+`"}`, ""), []string{"Seq 3"}},
		{"seq goes back", doc("c1", `{"seq":2,"message":`+msg+`},{"seq":2,"message":`+msg+`}`, ""), []string{"Seq 2", "must increase"}},
		{"state without value", doc("c1", "", `"summary":{"version":3}`), []string{`state "summary"`, "neither"}},
		{"state with both", doc("c1", "", `"summary":{"version":3,"value":"a","bytes":"AA=="}`), []string{`state "summary"`, "both"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := store.ReadExport(strings.NewReader(tc.in))
			require.Error(t, err)
			assert.True(t, errors.Is(err, store.ErrInvalidArgument), err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), secret)
		})
	}
}
