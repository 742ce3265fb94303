package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// The codec fuzzers. The seeds below and the files under
// testdata/fuzz/<FuzzName>/ run with every `go test`; to search longer:
//
//	go test ./store -run '^$' -fuzz '^FuzzDecodeMessage$' -fuzztime 10m
//	go test ./store -run '^$' -fuzz '^FuzzEncodeRoundTrip$' -fuzztime 10m
//	go test ./store -run '^$' -fuzz '^FuzzDecodeRecord$' -fuzztime 10m
//	go test ./store -run '^$' -fuzz '^FuzzTimeRoundTrip$' -fuzztime 10m

// codecSeeds are stored values: what EncodeMessage writes for every message
// type, and values it could not have written.
func codecSeeds() [][]byte {
	seeds := [][]byte{
		[]byte(`{"v":1,"type":"human","content":"Hi"}`),
		[]byte(`{"v":1,"type":"system","content":"Be brief."}`),
		[]byte(`{"v":1,"type":"ai","content":"","reasoning_content":"r","function_call":{"name":"f","arguments":"{}"},"tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\":1}"}}]}`),
		[]byte(`{"v":1,"type":"ai","content":"a","tool_calls":[]}`),
		[]byte(`{"v":1,"type":"ai","content":"a","tool_calls":[{"id":"1","type":"function"}]}`),
		[]byte(`{"v":1,"type":"generic","content":"c","role":"critic","name":"bob"}`),
		[]byte(`{"v":1,"type":"function","content":"{}","name":"f"}`),
		[]byte(`{"v":1,"type":"tool","content":"42","id":"call_1"}`),
		[]byte(`{"v":1,"type":"human","content":"a\u0000b\ud83d\ude00"}`),
		[]byte(`{"v":1,"type":"human","content":"\ud800"}`), // lone surrogate: decodes to U+FFFD
		[]byte(`{"v":1,"type":"human","content":"x","extra":[1,2,{"deep":null}]}`),
		[]byte(`{"v":2,"type":"human","content":"Hi"}`),
		[]byte(`{"v":1,"type":"robot","content":"Hi"}`),
		[]byte(`{"v":1,"type":"human"}`),
		[]byte(`{"v":1,"type":"human","content":null}`),
		[]byte(`{"v":1,"type":"human","content":"x","name":"n"}`),
		[]byte(`{"v":1,"type":"generic","content":"c","role":"r"}`),
		[]byte(`{"v":1,"type":"ai","content":"","tool_calls":[{"type":"function"}]}`),
		[]byte(`{"v":1,"type":"ai","content":"","function_call":{"name":"f"}}`),
		[]byte(`{"v":1,"type":"ai","content":"","tool_calls":[null]}`),
		[]byte(`{"v":1,"type":"ai","content":"","tool_calls":{}}`),
		[]byte(`{"v":"1","type":"human","content":"x"}`),
		[]byte(`{"v":1e400,"type":"human","content":"x"}`),
		[]byte(`{"v":1,"type":"human","content":"x"} trailing`),
		[]byte(`{"v":1,"type":"human","content":"x"}{"v":1}`),
		[]byte(`[1,2,3]`),
		[]byte(`null`),
		[]byte(`"human"`),
		[]byte(""),
		[]byte("   \n\t"),
		[]byte("\xff\xfe\x00"),
		[]byte(`{"v":1,"type":"human","content":"` + "\xff" + `"}`),
		[]byte(`{"v":1,"type":"human","content":"x","v":1,"v":2}`),
		[]byte(`{"V":1,"TYPE":"human","Content":"case-insensitive keys"}`),
		[]byte(strings.Repeat("[", 10000)),
		// Times: what EncodeMessageAt writes, and what it could not.
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"2023-05-08T10:30:00Z"}`),
		[]byte(`{"v":1,"type":"ai","content":"a","tool_calls":[],"at":"2023-05-08T12:30:00.123456789+02:00"}`),
		[]byte(`{"v":1,"type":"tool","content":"42","id":"call_1","at":"0000-01-01T00:00:00-23:59"}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"9999-12-31T23:59:59.999999999+14:00"}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"2023-05-08T10:30:00.1200+00:00"}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"2023-05-08T10:30:00,5Z"}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"2023-05-08t10:30:00z"}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"2023-05-08T10:30:60Z"}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"2023-05-08T24:00:00Z"}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"2023-05-08T10:30:00+24:00"}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"0001-01-01T00:00:00Z"}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"a long secret that is not a time"}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":""}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":null}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":1683541800}`),
		[]byte(`{"v":1,"type":"human","content":"Hi","at":"2023-05-08T10:30:00Z","at":"bad"}`),
	}
	return seeds
}

// FuzzDecodeMessage feeds DecodeMessage arbitrary bytes, as a backend does
// with whatever it finds in a row or a list element. It must never panic;
// an error wraps store.ErrCorrupt and never quotes the message's content;
// a value it accepts is one of langchaingo's six message types, re-encodes
// (its strings are valid UTF-8) and decodes again to the same message.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range codecSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		msg, err := storekit.DecodeMessage(data)
		if err != nil {
			if msg != nil {
				t.Fatalf("DecodeMessage returned a message (%T) and an error: %v", msg, err)
			}
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("DecodeMessage error does not wrap store.ErrCorrupt: %v", err)
			}
			checkNoContentInError(t, data, err)
			return
		}
		switch msg.(type) {
		case llms.HumanChatMessage, llms.AIChatMessage, llms.SystemChatMessage,
			llms.GenericChatMessage, llms.FunctionChatMessage, llms.ToolChatMessage:
		default:
			t.Fatalf("DecodeMessage returned a %T, not one of langchaingo's message value types", msg)
		}
		enc, err := storekit.EncodeMessage(msg)
		if err != nil {
			t.Fatalf("a decoded message does not encode again: %v", err)
		}
		again, err := storekit.DecodeMessage(enc)
		if err != nil {
			t.Fatalf("DecodeMessage(EncodeMessage(decoded)) failed: %v\nencoded: %q", err, enc)
		}
		if !reflect.DeepEqual(msg, again) {
			t.Fatalf("decode/encode/decode changed the message:\nfirst:  %#v\nsecond: %#v", msg, again)
		}
		enc2, err := storekit.EncodeMessage(again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not deterministic: %q vs %q (%v)", enc, enc2, err)
		}
	})
}

// checkNoContentInError fails if err quotes the content field of data (when
// data has one that is long and distinctive enough to tell).
func checkNoContentInError(t *testing.T, data []byte, err error) {
	t.Helper()
	var probe struct {
		Type    any     `json:"type"`
		Content *string `json:"content"`
	}
	if json.Unmarshal(data, &probe) != nil || probe.Content == nil {
		return
	}
	c := *probe.Content
	if len(c) < 12 || strings.Contains(fmt.Sprint(probe.Type), c) {
		return
	}
	if strings.Contains(err.Error(), c) || strings.Contains(err.Error(), fmt.Sprintf("%q", c)) {
		t.Fatalf("error quotes the message content: %v", err)
	}
}

// FuzzEncodeRoundTrip builds a message of each type from fuzzed strings.
// EncodeMessage must accept it when every string is valid UTF-8 — and then
// DecodeMessage gives back exactly the message (nil and empty tool calls
// told apart), the pointer form encodes the same, and the value holds no NUL
// byte — and reject it otherwise with an error wrapping
// store.ErrInvalidArgument that names the field, never its content.
func FuzzEncodeRoundTrip(f *testing.F) {
	f.Add(uint8(0), "Hi", "", "", "", uint8(0))
	f.Add(uint8(1), "answer", "reasoning", "search", `{"q":"x"}`, uint8(0xff))
	f.Add(uint8(1), "", "", "", "", uint8(2))
	f.Add(uint8(1), "", "", "f", "", uint8(1|4))
	f.Add(uint8(2), "You are terse.", "", "", "", uint8(0))
	f.Add(uint8(3), "c", "critic", "bob", "", uint8(0))
	f.Add(uint8(4), `{"ok":true}`, "lookup", "", "", uint8(0))
	f.Add(uint8(5), "42", "call_1", "", "", uint8(0))
	f.Add(uint8(0), "a\x00b\x01\n\t\u2028\"\\<&>", "", "", "", uint8(0))
	f.Add(uint8(0), "\xff\xfe invalid", "", "", "", uint8(0))
	f.Add(uint8(1), "ok", "\xc3\x28", "", "", uint8(0))
	f.Add(uint8(1), "ok", "", "f", "\xed\xa0\x80", uint8(8))
	f.Add(uint8(3), "ok", "role", "\x80name", "", uint8(0))
	f.Add(uint8(5), "ok", "\xf0\x28\x8c\xbc", "", "", uint8(0))
	f.Fuzz(func(t *testing.T, kind uint8, a, b, c, d string, flags uint8) {
		msg := buildMessage(kind, a, b, c, d, flags)
		valid := allValidUTF8(msg)
		data, err := storekit.EncodeMessage(msg)
		if !valid {
			if err == nil {
				t.Fatalf("EncodeMessage accepted a %s message with invalid UTF-8: %q", msg.GetType(), data)
			}
			if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), "UTF-8") {
				t.Fatalf("EncodeMessage error for invalid UTF-8 should wrap ErrInvalidArgument and say UTF-8: %v", err)
			}
			for _, s := range []string{a, b, c, d} {
				if len(s) >= 8 && strings.Contains(err.Error(), s) {
					t.Fatalf("error quotes a field's content: %v", err)
				}
			}
			return
		}
		if err != nil {
			t.Fatalf("EncodeMessage(%#v): %v", msg, err)
		}
		if bytes.IndexByte(data, 0) >= 0 {
			t.Fatalf("encoded value holds a NUL byte: %q", data)
		}
		if !utf8.Valid(data) {
			t.Fatalf("encoded value is not valid UTF-8: %q", data)
		}
		got, err := storekit.DecodeMessage(data)
		if err != nil {
			t.Fatalf("DecodeMessage(EncodeMessage(%#v)): %v\nencoded: %q", msg, err, data)
		}
		if !reflect.DeepEqual(msg, got) {
			t.Fatalf("round trip changed the message:\nsent: %#v\ngot:  %#v", msg, got)
		}
		pdata, err := storekit.EncodeMessage(pointerTo(msg))
		if err != nil || !bytes.Equal(pdata, data) {
			t.Fatalf("the pointer form encodes differently: %q vs %q (%v)", pdata, data, err)
		}
		id := memstack.Identity{Tenant: a, User: "u"}
		rec, err := storekit.DecodeRecord(id, 7, data)
		if err != nil || rec.Seq != 7 || !reflect.DeepEqual(rec.Message, msg) {
			t.Fatalf("DecodeRecord: %+v, %v", rec, err)
		}
	})
}

// buildMessage makes a message of type kind%6 from the fuzzed strings; for
// an AI message flags choose which optional parts it has.
func buildMessage(kind uint8, a, b, c, d string, flags uint8) llms.ChatMessage {
	switch kind % 6 {
	case 0:
		return llms.HumanChatMessage{Content: a}
	case 1:
		m := llms.AIChatMessage{Content: a}
		if flags&1 != 0 {
			m.ReasoningContent = b
		}
		if flags&2 != 0 {
			m.ToolCalls = []llms.ToolCall{}
		}
		if flags&4 != 0 {
			m.ToolCalls = append(m.ToolCalls, llms.ToolCall{ID: b, Type: "function", FunctionCall: &llms.FunctionCall{Name: c, Arguments: d}})
		}
		if flags&8 != 0 {
			m.FunctionCall = &llms.FunctionCall{Name: c, Arguments: d}
		}
		if flags&16 != 0 {
			m.ToolCalls = append(m.ToolCalls, llms.ToolCall{ID: d, Type: c})
		}
		return m
	case 2:
		return llms.SystemChatMessage{Content: a}
	case 3:
		return llms.GenericChatMessage{Content: a, Role: b, Name: c}
	case 4:
		return llms.FunctionChatMessage{Content: a, Name: b}
	default:
		return llms.ToolChatMessage{Content: a, ID: b}
	}
}

func pointerTo(msg llms.ChatMessage) llms.ChatMessage {
	switch m := msg.(type) {
	case llms.HumanChatMessage:
		return &m
	case llms.AIChatMessage:
		return &m
	case llms.SystemChatMessage:
		return &m
	case llms.GenericChatMessage:
		return &m
	case llms.FunctionChatMessage:
		return &m
	case llms.ToolChatMessage:
		return &m
	}
	return msg
}

// allValidUTF8 reports whether every string field of msg is valid UTF-8.
func allValidUTF8(msg llms.ChatMessage) bool {
	var ss []string
	switch m := msg.(type) {
	case llms.AIChatMessage:
		ss = append(ss, m.Content, m.ReasoningContent)
		if m.FunctionCall != nil {
			ss = append(ss, m.FunctionCall.Name, m.FunctionCall.Arguments)
		}
		for _, tc := range m.ToolCalls {
			ss = append(ss, tc.ID, tc.Type)
			if tc.FunctionCall != nil {
				ss = append(ss, tc.FunctionCall.Name, tc.FunctionCall.Arguments)
			}
		}
	case llms.GenericChatMessage:
		ss = append(ss, m.Content, m.Role, m.Name)
	case llms.FunctionChatMessage:
		ss = append(ss, m.Content, m.Name)
	case llms.ToolChatMessage:
		ss = append(ss, m.Content, m.ID)
	default:
		ss = append(ss, msg.GetContent())
	}
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// FuzzDecodeRecord checks what a backend reports for a stored value: the
// error of DecodeRecord wraps store.ErrCorrupt and names the identity's key
// and the Seq; a decodable value comes back with that Seq.
func FuzzDecodeRecord(f *testing.F) {
	for i, s := range codecSeeds() {
		f.Add("acme", fmt.Sprintf("u%d:{*}", i), int64(i+1), s)
	}
	f.Add("", "", int64(-1), []byte(`{"v":1,"type":"human","content":""}`))
	f.Add("t%", "\x00", int64(1<<62), []byte(`{}`))
	f.Fuzz(func(t *testing.T, tenant, user string, seq int64, data []byte) {
		id := memstack.Identity{Tenant: tenant, User: user}
		rec, err := storekit.DecodeRecord(id, seq, data)
		want, werr := storekit.DecodeMessage(data)
		if (err == nil) != (werr == nil) {
			t.Fatalf("DecodeRecord error %v, DecodeMessage error %v", err, werr)
		}
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("DecodeRecord error does not wrap ErrCorrupt: %v", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("Seq %d", seq)) || !strings.Contains(err.Error(), id.Key()) {
				t.Fatalf("DecodeRecord error does not name Seq %d and identity %q: %v", seq, id.Key(), err)
			}
			return
		}
		if rec.Seq != seq || !reflect.DeepEqual(rec.Message, want) {
			t.Fatalf("DecodeRecord = %+v, want Seq %d and %#v", rec, seq, want)
		}
		if rec.Time.IsZero() {
			if rec.Time != (time.Time{}) {
				t.Fatalf("DecodeRecord returned a zero instant that is not the zero Time: %v", rec.Time)
			}
			return
		}
		// A time DecodeRecord accepts is one EncodeMessageAt writes again,
		// always the same way, and reads back the same.
		enc, err := storekit.EncodeMessageAt(rec.Message, rec.Time)
		if err != nil {
			t.Fatalf("the decoded time %v does not encode again: %v", rec.Time, err)
		}
		again, err := storekit.DecodeRecord(id, seq, enc)
		if err != nil {
			t.Fatalf("DecodeRecord(EncodeMessageAt(decoded)): %v\nencoded: %q", err, enc)
		}
		checkSameTime(t, rec.Time, again.Time)
		if !reflect.DeepEqual(rec, again) {
			t.Fatalf("decode/encode/decode changed the record:\nfirst:  %#v\nsecond: %#v", rec, again)
		}
		enc2, err := storekit.EncodeMessageAt(again.Message, again.Time)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding with a time is not deterministic: %q vs %q (%v)", enc, enc2, err)
		}
	})
}

// checkSameTime fails unless got is the instant of want with its UTC
// offset.
func checkSameTime(t *testing.T, want, got time.Time) {
	t.Helper()
	_, wo := want.Zone()
	_, gwo := got.Zone()
	if !got.Equal(want) || wo != gwo {
		t.Fatalf("time %s (offset %d) read back as %s (offset %d)",
			want.Format(time.RFC3339Nano), wo, got.Format(time.RFC3339Nano), gwo)
	}
}

// FuzzTimeRoundTrip dates a message with an arbitrary time: a Unix time in
// seconds and nanoseconds and a UTC offset in seconds. EncodeMessageAt and
// CheckTime agree; a time they accept reads back from DecodeRecord as the
// same instant with the same offset; one they reject (a year outside 0 to
// 9999, an offset that is not whole minutes under 24 hours) is an error
// wrapping store.ErrInvalidArgument; neither ever panics.
func FuzzTimeRoundTrip(f *testing.F) {
	f.Add(int64(1683541800), int64(0), int32(0))
	f.Add(int64(1683541800), int64(123456789), int32(7200))
	f.Add(int64(-62135596800), int64(0), int32(0))         // the zero time
	f.Add(int64(-62167219200), int64(0), int32(0))         // year 0
	f.Add(int64(253402300799), int64(999999999), int32(0)) // the end of 9999
	f.Add(int64(253402300799), int64(0), int32(3600))      // year 10000 in its zone
	f.Add(int64(0), int64(0), int32(-(7*3600 + 1800)))
	f.Add(int64(0), int64(0), int32(1172))
	f.Add(int64(0), int64(0), int32(86400))
	f.Add(int64(1<<62), int64(-1), int32(-86340))
	f.Fuzz(func(t *testing.T, sec, nsec int64, off int32) {
		at := time.Unix(sec, nsec).In(time.FixedZone("", int(off)))
		msg := llms.AIChatMessage{Content: "a", ToolCalls: []llms.ToolCall{}}
		data, err := storekit.EncodeMessageAt(msg, at)
		if cerr := storekit.CheckTime(at); (cerr == nil) != (err == nil) {
			t.Fatalf("CheckTime says %v, EncodeMessageAt says %v", cerr, err)
		}
		if err != nil {
			if !errors.Is(err, store.ErrInvalidArgument) {
				t.Fatalf("EncodeMessageAt error does not wrap ErrInvalidArgument: %v", err)
			}
			return
		}
		rec, err := storekit.DecodeRecord(memstack.Identity{}, 1, data)
		if err != nil {
			t.Fatalf("DecodeRecord(EncodeMessageAt(m, %v)): %v\nencoded: %q", at, err, data)
		}
		if !reflect.DeepEqual(rec.Message, msg) {
			t.Fatalf("the time changed the message: %#v", rec.Message)
		}
		if at.IsZero() {
			if rec.Time != (time.Time{}) {
				t.Fatalf("a zero time read back as %v", rec.Time)
			}
			return
		}
		checkSameTime(t, at, rec.Time)
	})
}
