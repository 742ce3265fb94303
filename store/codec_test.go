package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

type codecCustomMessage struct{}

func (codecCustomMessage) GetType() llms.ChatMessageType { return "custom" }
func (codecCustomMessage) GetContent() string            { return "x" }

func TestCodecRoundTrip(t *testing.T) {
	big := strings.Repeat("héllo wörld ✓ 🙂 \x00 ", 1<<16)
	cases := []struct {
		name string
		msg  llms.ChatMessage
	}{
		{"human", llms.HumanChatMessage{Content: "Hi <b>&</b>"}},
		{"human empty", llms.HumanChatMessage{}},
		{"system", llms.SystemChatMessage{Content: "Be brief."}},
		{"ai plain", llms.AIChatMessage{Content: "Hello!"}},
		{"ai full", aiWithCalls()},
		{"ai reasoning", llms.AIChatMessage{Content: "a", ReasoningContent: "because"}},
		{"ai empty tool calls", llms.AIChatMessage{Content: "a", ToolCalls: []llms.ToolCall{}}},
		{"ai tool call without function", llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "1", Type: "function"}}}},
		{"ai empty function call", llms.AIChatMessage{FunctionCall: &llms.FunctionCall{}}},
		{"generic", llms.GenericChatMessage{Content: "c", Role: "critic", Name: "bob"}},
		{"generic empty", llms.GenericChatMessage{}},
		{"function", llms.FunctionChatMessage{Content: `{"ok":true}`, Name: "lookup"}},
		{"tool", llms.ToolChatMessage{Content: "42", ID: "call_1"}},
		{"NUL and controls", llms.HumanChatMessage{Content: "a\x00b\x01\n\t\u2028\"\\"}},
		{"1 MB multibyte", llms.HumanChatMessage{Content: big}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := storekit.EncodeMessage(tc.msg)
			require.NoError(t, err)
			assert.NotContains(t, string(data), "\x00", "encoded value must hold no NUL byte")
			got, err := storekit.DecodeMessage(data)
			require.NoError(t, err)
			assert.Equal(t, tc.msg, got)
		})
	}
}

func TestCodecPointersDecodeAsValues(t *testing.T) {
	m := aiWithCalls()
	data, err := storekit.EncodeMessage(&m)
	require.NoError(t, err)
	got, err := storekit.DecodeMessage(data)
	require.NoError(t, err)
	assert.Equal(t, m, got)

	data, err = storekit.EncodeMessage(&llms.ToolChatMessage{ID: "x", Content: "y"})
	require.NoError(t, err)
	got, err = storekit.DecodeMessage(data)
	require.NoError(t, err)
	assert.Equal(t, llms.ToolChatMessage{ID: "x", Content: "y"}, got)
}

func TestCodecFormatIsStable(t *testing.T) {
	data, err := storekit.EncodeMessage(llms.ToolChatMessage{ID: "call_1", Content: "<42>"})
	require.NoError(t, err)
	assert.Equal(t, `{"v":1,"type":"tool","content":"<42>","id":"call_1"}`, string(data))

	data, err = storekit.EncodeMessage(llms.AIChatMessage{Content: "a", ToolCalls: []llms.ToolCall{{ID: "c", Type: "function",
		FunctionCall: &llms.FunctionCall{Name: "f", Arguments: "{}"}}}})
	require.NoError(t, err)
	assert.Equal(t, `{"v":1,"type":"ai","content":"a","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`, string(data))
}

func TestCodecRejectsBadMessages(t *testing.T) {
	var nilAI *llms.AIChatMessage
	cases := []struct {
		name string
		msg  llms.ChatMessage
		want string
	}{
		{"nil", nil, "nil message"},
		{"nil pointer", nilAI, "nil message"},
		{"unknown type", codecCustomMessage{}, "store_test.codecCustomMessage"},
		{"invalid UTF-8 content", llms.HumanChatMessage{Content: "a\xffb"}, "content is not valid UTF-8"},
		{"invalid UTF-8 tool args", llms.AIChatMessage{ToolCalls: []llms.ToolCall{{FunctionCall: &llms.FunctionCall{Arguments: "\xc0"}}}},
			"tool call 1 function arguments is not valid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := storekit.EncodeMessage(tc.msg)
			require.Error(t, err)
			assert.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "a\xffb")
		})
	}
}

func TestCodecRejectsCorruptValues(t *testing.T) {
	cases := []struct {
		name, data, want string
	}{
		{"empty", ``, "empty value"},
		{"garbage", `\x01garbage secret`, "invalid JSON"},
		{"truncated", `{"v":1,"type":"human","content":"sec`, "not a stored message"},
		{"array", `[1,2]`, "not a stored message"},
		{"null", `null`, "codec version 0"},
		{"wrong version", `{"v":2,"type":"human","content":"x"}`, "codec version 2"},
		{"unknown type", `{"v":1,"type":"robot","content":"x"}`, `unknown message type "robot"`},
		{"no content", `{"v":1,"type":"human"}`, "no content field"},
		{"field of another type", `{"v":1,"type":"human","content":"x","role":"r"}`, "has a role field"},
		{"generic without role", `{"v":1,"type":"generic","content":"x","name":"n"}`, "no role field"},
		{"tool without id", `{"v":1,"type":"tool","content":"x"}`, "no id field"},
		{"wrong field type", `{"v":1,"type":"human","content":7}`, "wrong JSON type"},
		{"tool call without id", `{"v":1,"type":"ai","content":"","tool_calls":[{"type":"function"}]}`, "tool call 1 lacks id"},
		{"function call without args", `{"v":1,"type":"ai","content":"","function_call":{"name":"f"}}`, "lacks name or arguments"},
		{"trailing data", `{"v":1,"type":"human","content":"x"} {}`, "invalid JSON"},
		{"whitespace only", " \n", "empty value"},
		{"time not RFC 3339", `{"v":1,"type":"human","content":"x","at":"secret o'clock"}`, "at field (14 bytes) is not an RFC 3339 time"},
		{"time without offset", `{"v":1,"type":"human","content":"x","at":"2023-05-08T10:30:00"}`, "not an RFC 3339 time"},
		{"time out of range", `{"v":1,"type":"human","content":"x","at":"2023-13-08T10:30:00Z"}`, "not an RFC 3339 time"},
		{"empty time", `{"v":1,"type":"human","content":"x","at":""}`, "at field (0 bytes)"},
		{"time as a number", `{"v":1,"type":"human","content":"x","at":1683541800}`, `field "at" has the wrong JSON type`},
		{"zero time", `{"v":1,"type":"human","content":"x","at":"0001-01-01T00:00:00Z"}`, "zero time"},
		{"zero time elsewhere", `{"v":1,"type":"human","content":"x","at":"0001-01-01T02:00:00+02:00"}`, "zero time"},
		{"offset of 24 hours", `{"v":1,"type":"human","content":"x","at":"2023-05-08T10:30:00+24:00"}`, "at field"},
		{"time of a corrupt message", `{"v":1,"type":"robot","content":"x","at":"2023-05-08T10:30:00Z"}`, `unknown message type "robot"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := storekit.DecodeMessage([]byte(tc.data))
			require.Error(t, err)
			assert.Nil(t, msg)
			assert.ErrorIs(t, err, store.ErrCorrupt)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "secret")
		})
	}
}

func TestCodecIgnoresUnknownKeys(t *testing.T) {
	got, err := storekit.DecodeMessage([]byte(`{"v":1,"type":"human","content":"x","added_later":[1]}`))
	require.NoError(t, err)
	assert.Equal(t, llms.HumanChatMessage{Content: "x"}, got)
}

func TestDecodeRecordNamesIdentityAndSeq(t *testing.T) {
	id := memstack.Identity{Tenant: "acme", User: "u:1", Conversation: "c"}
	_, err := storekit.DecodeRecord(id, 42, []byte("garbage"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, store.ErrCorrupt))
	assert.Contains(t, err.Error(), "Seq 42")
	assert.Contains(t, err.Error(), id.Key())

	data, err := storekit.EncodeMessage(llms.HumanChatMessage{Content: "hi"})
	require.NoError(t, err)
	rec, err := storekit.DecodeRecord(id, 7, data)
	require.NoError(t, err)
	assert.Equal(t, store.Record{Seq: 7, Message: llms.HumanChatMessage{Content: "hi"}}, rec)
}

// A time zone two hours east of UTC, and one seven and a half hours west,
// as a caller's WithTime may carry them.
var (
	plus2      = time.FixedZone("CEST", 2*3600)
	minus7half = time.FixedZone("", -(7*3600 + 1800))
)

func TestCodecTimeRoundTrip(t *testing.T) {
	id := memstack.Identity{User: "u"}
	local := time.Date(2024, 2, 29, 23, 59, 59, 1, time.Local)
	cases := []struct {
		name string
		at   time.Time
		wire string // the "at" field as written
	}{
		{"UTC", time.Date(2023, 5, 8, 10, 30, 0, 0, time.UTC), `"at":"2023-05-08T10:30:00Z"`},
		{"nanoseconds", time.Date(2023, 5, 8, 10, 30, 0, 123456789, time.UTC), `"at":"2023-05-08T10:30:00.123456789Z"`},
		{"trailing zeros of the fraction", time.Date(2023, 5, 8, 10, 30, 0, 120000000, time.UTC), `"at":"2023-05-08T10:30:00.12Z"`},
		{"east of UTC", time.Date(2023, 5, 8, 12, 30, 0, 5, plus2), `"at":"2023-05-08T12:30:00.000000005+02:00"`},
		{"west of UTC, half hour", time.Date(2023, 5, 8, 3, 0, 0, 0, minus7half), `"at":"2023-05-08T03:00:00-07:30"`},
		{"local", local, `"at":"` + local.Format(time.RFC3339Nano) + `"`},
		{"year 0", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), `"at":"0000-01-01T00:00:00Z"`},
		{"year 9999", time.Date(9999, 12, 31, 23, 59, 59, 999999999, plus2), `"at":"9999-12-31T23:59:59.999999999+02:00"`},
		{"monotonic reading", time.Now(), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := llms.HumanChatMessage{Content: "Hi"}
			data, err := storekit.EncodeMessageAt(msg, tc.at)
			require.NoError(t, err)
			if tc.wire != "" {
				assert.Equal(t, `{"v":1,"type":"human","content":"Hi",`+tc.wire+`}`, string(data))
			}
			rec, err := storekit.DecodeRecord(id, 3, data)
			require.NoError(t, err)
			assert.Equal(t, int64(3), rec.Seq)
			assert.Equal(t, msg, rec.Message)
			assert.True(t, rec.Time.Equal(tc.at), "time %v read back as %v", tc.at, rec.Time)
			_, wantOff := tc.at.Zone()
			_, gotOff := rec.Time.Zone()
			assert.Equal(t, wantOff, gotOff, "the UTC offset is kept")
			assert.Equal(t, tc.at.Round(0).Format(time.RFC3339Nano), rec.Time.Format(time.RFC3339Nano))

			// Decoding twice gives equal Records (one location per
			// offset), so Records read twice compare equal.
			again, err := storekit.DecodeRecord(id, 3, data)
			require.NoError(t, err)
			assert.Equal(t, rec, again)

			msgOnly, err := storekit.DecodeMessage(data)
			require.NoError(t, err)
			assert.Equal(t, msg, msgOnly, "DecodeMessage reads a dated value")
		})
	}
}

func TestEncodeMessageWritesNoTime(t *testing.T) {
	for _, msg := range []llms.ChatMessage{
		llms.HumanChatMessage{Content: "at"},
		aiWithCalls(),
		llms.ToolChatMessage{ID: "at", Content: `"at":"2023-05-08T10:30:00Z"`},
	} {
		plain, err := storekit.EncodeMessage(msg)
		require.NoError(t, err)
		assert.NotContains(t, string(plain), `,"at":`, "EncodeMessage writes no time")
		zero, err := storekit.EncodeMessageAt(msg, time.Time{})
		require.NoError(t, err)
		assert.Equal(t, string(plain), string(zero), "a zero time is no time")
		rec, err := storekit.DecodeRecord(memstack.Identity{}, 1, plain)
		require.NoError(t, err)
		assert.True(t, rec.Time.IsZero())
		assert.Equal(t, time.Time{}, rec.Time)
	}
}

// Values stored before memstack recorded times — exactly as the backends
// wrote them then — still decode, with a zero Time.
func TestCodecReadsValuesWithoutTime(t *testing.T) {
	legacy := map[string]llms.ChatMessage{
		`{"v":1,"type":"human","content":"Hi"}`:                        llms.HumanChatMessage{Content: "Hi"},
		`{"v":1,"type":"system","content":"Be brief."}`:                llms.SystemChatMessage{Content: "Be brief."},
		`{"v":1,"type":"tool","content":"<42>","id":"call_1"}`:         llms.ToolChatMessage{ID: "call_1", Content: "<42>"},
		`{"v":1,"type":"generic","content":"c","role":"r","name":"n"}`: llms.GenericChatMessage{Content: "c", Role: "r", Name: "n"},
	}
	for data, want := range legacy {
		rec, err := storekit.DecodeRecord(memstack.Identity{User: "u"}, 9, []byte(data))
		require.NoError(t, err, data)
		assert.Equal(t, store.Record{Seq: 9, Message: want}, rec, data)
	}
}

func TestCodecRejectsUnstorableTimes(t *testing.T) {
	cases := []struct {
		name string
		at   time.Time
		want string
	}{
		{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "year 10000"},
		{"year -1", time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), "year -1"},
		{"year 10000 only in its own zone", time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC).In(plus2), "year 10000"},
		{"offset with seconds", time.Date(1900, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", 19*60+32)), "offset of 1172s"},
		{"offset of 24 hours", time.Date(2023, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)), "offset of 86400s"},
		{"offset of -25 hours", time.Date(2023, 1, 1, 0, 0, 0, 0, time.FixedZone("", -25*3600)), "offset of -90000s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := storekit.CheckTime(tc.at)
			require.Error(t, err)
			assert.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.want)

			data, err := storekit.EncodeMessageAt(llms.HumanChatMessage{Content: "secret"}, tc.at)
			require.Error(t, err)
			assert.Nil(t, data)
			assert.ErrorIs(t, err, store.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "human message")
			assert.NotContains(t, err.Error(), "secret")
		})
	}
	assert.NoError(t, storekit.CheckTime(time.Time{}), "the zero time is no time")
	assert.NoError(t, storekit.CheckTime(time.Date(2023, 1, 1, 0, 0, 0, 0, time.FixedZone("", -(23*3600+59*60)))))
}

func TestDecodeRecordNamesIdentityAndSeqOfABadTime(t *testing.T) {
	id := memstack.Identity{Tenant: "acme", User: "u:1"}
	_, err := storekit.DecodeRecord(id, 42, []byte(`{"v":1,"type":"ai","content":"secret","at":"tomorrow secret"}`))
	require.Error(t, err)
	assert.ErrorIs(t, err, store.ErrCorrupt)
	assert.Contains(t, err.Error(), "Seq 42")
	assert.Contains(t, err.Error(), id.Key())
	assert.Contains(t, err.Error(), `"ai" message: the at field`)
	assert.NotContains(t, err.Error(), "secret")
	assert.NotContains(t, err.Error(), "tomorrow")
}
