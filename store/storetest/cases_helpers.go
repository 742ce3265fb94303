package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
)

var (
	alice = memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob   = memstack.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
)

func human(s string) llms.ChatMessage  { return llms.HumanChatMessage{Content: s} }
func ai(s string) llms.ChatMessage     { return llms.AIChatMessage{Content: s} }
func system(s string) llms.ChatMessage { return llms.SystemChatMessage{Content: s} }

func messagesOf(rs []store.Record) []llms.ChatMessage {
	out := make([]llms.ChatMessage, len(rs))
	for i, r := range rs {
		out[i] = r.Message
	}
	return out
}

func contentsOf(rs []store.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Message.GetContent()
	}
	return out
}

func seqsOf(rs []store.Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

func requireIncreasing(t *testing.T, seqs []int64) {
	t.Helper()
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			require.Failf(t, "Seqs must increase strictly", "Seq %d at index %d follows Seq %d", seqs[i], i, seqs[i-1])
		}
	}
}

func mustAppend(t *testing.T, s store.Store, id memstack.Identity, msgs ...llms.ChatMessage) {
	t.Helper()
	require.NoError(t, s.Append(context.Background(), id, msgs...), "Append to %s", id)
}

func mustAll(t *testing.T, s store.Store, id memstack.Identity) []store.Record {
	t.Helper()
	rs, err := s.All(context.Background(), id)
	require.NoError(t, err, "All of %s", id)
	return rs
}

func mustStat(t *testing.T, s store.Store, id memstack.Identity) store.Stat {
	t.Helper()
	st, err := s.Stat(context.Background(), id)
	require.NoError(t, err, "Stat of %s", id)
	return st
}

func mustGet(t *testing.T, s store.Store, id memstack.Identity, name string) store.State {
	t.Helper()
	st, err := s.GetState(context.Background(), id, name)
	require.NoError(t, err, "GetState(%s, %q)", id, name)
	return st
}

// mustCreate stores value under a name that has none, expecting the
// absent version GetState reports, and returns the new version.
func mustCreate(t *testing.T, s store.Store, id memstack.Identity, name string, value []byte) int64 {
	t.Helper()
	st := mustGet(t, s, id, name)
	require.False(t, st.Exists(), "state %q of %s exists already", name, id)
	return mustPut(t, s, id, name, value, st.Version)
}

// assertAbsent checks that st holds no value.
func assertAbsent(t *testing.T, st store.State, msgAndArgs ...any) bool {
	t.Helper()
	return assert.Nil(t, st.Value, msgAndArgs...) && assert.False(t, st.Exists(), msgAndArgs...)
}

func mustPut(t *testing.T, s store.Store, id memstack.Identity, name string, value []byte, expect int64) int64 {
	t.Helper()
	v, err := s.PutState(context.Background(), id, name, value, expect)
	require.NoError(t, err, "PutState(%s, %q, expect %d)", id, name, expect)
	return v
}

// statOf is the Stat that All's records imply.
func statOf(rs []store.Record) store.Stat {
	if len(rs) == 0 {
		return store.Stat{}
	}
	return store.Stat{Count: len(rs), FirstSeq: rs[0].Seq, LastSeq: rs[len(rs)-1].Seq}
}

// requireSameString compares two long strings without printing them.
func requireSameString(t *testing.T, want, got, what string) {
	t.Helper()
	if want == got {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	require.Failf(t, what+" differs", "want %d bytes, got %d bytes; first difference at byte %d", len(want), len(got), i)
}
