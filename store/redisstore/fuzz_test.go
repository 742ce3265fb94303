package redisstore

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/storekit"
)

// FuzzParseElement fuzzes the decoding of one stored list element
// ("<seq>|<flag>|<message>", see the package documentation) — what All and
// Last do with every value they read from Redis, whoever wrote it. It runs
// in the package itself (an internal test) because parseElement is not
// exported; it needs no server. The seeds below and
// testdata/fuzz/FuzzParseElement run with every `go test`; to search longer:
//
//	go test ./store/redisstore -run '^$' -fuzz '^FuzzParseElement$' -fuzztime 10m
//
// Properties: no panic; an error wraps store.ErrCorrupt and names the
// identity's key; an accepted element has a positive Seq, its flag matches
// the message's role ('s' exactly for system messages), its body decodes
// with storekit.DecodeMessage to the same message; decoding it again (a decode
// cache hit) gives the same record, and changing a returned message does
// not change what the cache returns. An element built as Append builds one
// from a valid message always parses back to that message.
func FuzzParseElement(f *testing.F) {
	for _, s := range []string{
		`1|m|{"v":1,"type":"human","content":"Hi"}`,
		`1777777777777777|s|{"v":1,"type":"system","content":"Be brief."}`,
		`42|m|{"v":1,"type":"ai","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
		`42|m|{"v":1,"type":"ai","content":"x","tool_calls":[]}`,
		`7|m|{"v":1,"type":"tool","content":"42","id":"call_1"}`,
		`7|m|{"v":1,"type":"generic","content":"c","role":"r","name":"n"}`,
		`7|m|{"v":1,"type":"function","content":"c","name":"n"}`,
		`7|s|{"v":1,"type":"human","content":"flag says system"}`,
		`7|m|{"v":1,"type":"system","content":"flag says other"}`,
		`7|x|{"v":1,"type":"human","content":"bad flag"}`,
		`7|m{"v":1,"type":"human","content":"no bar"}`,
		`|m|{"v":1,"type":"human","content":"no seq"}`,
		`0|m|{"v":1,"type":"human","content":"zero"}`,
		`-5|m|{"v":1,"type":"human","content":"negative"}`,
		`+5|m|{"v":1,"type":"human","content":"plus"}`,
		`0005|m|{"v":1,"type":"human","content":"zeros"}`,
		`99999999999999999999|m|{"v":1,"type":"human","content":"overflow"}`,
		`12345678901234567890|m|x`,
		`1|m|`,
		`1|m`,
		`1|`,
		`1`,
		``,
		`|`,
		`||||`,
		"1|m|{\"v\":1,\"type\":\"human\",\"content\":\"a\\u0000b\"}",
		"1|m|\xff\xfe",
		`1|m|{"v":2,"type":"human","content":"future"}`,
	} {
		f.Add(s)
	}
	id := memstack.Identity{Tenant: "t:{x}", User: "*", Conversation: "c%"}
	f.Fuzz(func(t *testing.T, elem string) {
		s := &Store{ns: "fuzz", prefix: "p", cache: newDecodeCache(8)}
		r, err := s.parseElement("All", id, elem, 3)
		if err != nil {
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("parseElement(%q): error does not wrap store.ErrCorrupt: %v", elem, err)
			}
			if !strings.Contains(err.Error(), id.Key()) {
				t.Fatalf("parseElement(%q): error does not name the identity %q: %v", elem, id.Key(), err)
			}
			return
		}
		if r.Seq < 1 {
			t.Fatalf("parseElement(%q) accepted Seq %d", elem, r.Seq)
		}
		parts := strings.SplitN(elem, "|", 3)
		if len(parts) != 3 {
			t.Fatalf("parseElement(%q) accepted an element without two bars", elem)
		}
		if seq, err := strconv.ParseInt(parts[0], 10, 64); err != nil || seq != r.Seq || strconv.FormatInt(seq, 10) != parts[0] {
			t.Fatalf("parseElement(%q): Seq %d, the element says %q (only the canonical form is accepted)", elem, r.Seq, parts[0])
		}
		if sys := r.Message.GetType() == llms.ChatMessageTypeSystem; sys != (parts[1] == "s") || (parts[1] != "s" && parts[1] != "m") {
			t.Fatalf("parseElement(%q): flag %q accepted for a %s message", elem, parts[1], r.Message.GetType())
		}
		want, err := storekit.DecodeMessage([]byte(parts[2]))
		if err != nil || !reflect.DeepEqual(want, r.Message) {
			t.Fatalf("parseElement(%q) = %#v; DecodeMessage of the body = %#v, %v", elem, r.Message, want, err)
		}
		// Changing the returned message must not change the cache.
		if ai, ok := r.Message.(llms.AIChatMessage); ok && len(ai.ToolCalls) > 0 {
			ai.ToolCalls[0].ID = "changed by the caller"
		}
		again, err := s.parseElement("All", id, elem, 3)
		if err != nil || !reflect.DeepEqual(again.Message, want) || again.Seq != r.Seq {
			t.Fatalf("parseElement(%q) a second time (cache hit) = %#v, %v; want %#v", elem, again, err, want)
		}
	})
}

// FuzzElementRoundTrip builds elements the way Append does from valid
// messages (fuzzed content, every role) and checks that they parse back.
func FuzzElementRoundTrip(f *testing.F) {
	f.Add(int64(1), uint8(0), "Hi")
	f.Add(int64(1777777777777777), uint8(1), "system\x00prompt")
	f.Add(int64(1<<53), uint8(2), `{"json":"in content"}|m|`)
	f.Add(int64(9223372036854775807), uint8(3), "|s|")
	f.Fuzz(func(t *testing.T, seq int64, kind uint8, content string) {
		if seq < 1 { // every int64 maps to a positive Seq
			if seq = -(seq + 1); seq < 1 {
				seq = 1
			}
		}
		var msg llms.ChatMessage
		switch kind % 4 {
		case 0:
			msg = llms.HumanChatMessage{Content: content}
		case 1:
			msg = llms.SystemChatMessage{Content: content}
		case 2:
			msg = llms.AIChatMessage{Content: content, ToolCalls: []llms.ToolCall{{ID: content, Type: "function"}}}
		default:
			msg = llms.ToolChatMessage{Content: content, ID: "id"}
		}
		data, err := storekit.EncodeMessage(msg)
		if err != nil {
			return // invalid UTF-8: Append refuses it before it reaches Redis
		}
		flag := "m"
		if msg.GetType() == llms.ChatMessageTypeSystem {
			flag = "s"
		}
		elem := fmt.Sprintf("%d|%s|%s", seq, flag, data)
		s := &Store{ns: "fuzz", prefix: "p", cache: newDecodeCache(8)}
		r, err := s.parseElement("Last", memstack.Identity{}, elem, -1)
		if err != nil {
			t.Fatalf("an element Append could write does not parse: %q: %v", elem, err)
		}
		if r.Seq != seq || !reflect.DeepEqual(r.Message, msg) {
			t.Fatalf("parsed %+v, want Seq %d and %#v", r, seq, msg)
		}
	})
}
