package kit

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// fastParts are what message contents are made of, and every character
// the JSON encoder escapes or encoding/json decodes specially: quotes,
// backslashes, slashes, line breaks, tabs, other control characters,
// U+2028 and U+2029, HTML's characters, letters outside ASCII, emoji.
var fastParts = []string{"hello", " ", "world", "\"", "\\", "/", "\n", "\r\n", "\t", "\b", "\f", "\x00", "\x01", "\x1f", "\x7f",
	"\u2028", "\u2029", "<", ">", "&", "é", "数据", "😀", "'", "{", "}", ",", ":", `\u0041`, `\"`, `","at":"x`, "}"}

func randomContent(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(12) {
		b.WriteString(fastParts[rng.IntN(len(fastParts))])
	}
	return b.String()
}

// decodeCommon decodes what encoding/json decodes, to the same message and
// time, or leaves the value to it: on the values EncodeMessageAt writes
// for every message type, with and without times, and on those values
// damaged (a byte changed, cut or added).
func TestDecodeCommonIsEncodingJSONs(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	zones := []*time.Location{time.UTC, time.FixedZone("", 2*3600), time.FixedZone("", -(9*3600 + 30*60))}
	fast := 0
	for i := range 20000 {
		c := randomContent(rng)
		msgs := []llms.ChatMessage{llms.HumanChatMessage{Content: c}, llms.AIChatMessage{Content: c}, llms.SystemChatMessage{Content: c},
			llms.AIChatMessage{Content: c, ReasoningContent: "r"}, llms.GenericChatMessage{Content: c, Role: "critic", Name: "bob"},
			llms.ToolChatMessage{Content: c, ID: "call_1"}, llms.FunctionChatMessage{Content: c, Name: "f"},
			llms.AIChatMessage{Content: c, ToolCalls: []llms.ToolCall{{ID: "1", Type: "function"}}}}
		var at time.Time
		if i%3 != 0 {
			at = time.Date(1+rng.IntN(9998), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(3)*rng.IntN(1e9), zones[rng.IntN(len(zones))])
		}
		data, err := EncodeMessageAt(msgs[rng.IntN(len(msgs))], at)
		require.NoError(t, err)
		values := [][]byte{data}
		for range 4 {
			d := []byte(string(data))
			switch j := rng.IntN(len(d)); rng.IntN(3) {
			case 0:
				d[j] = fastParts[rng.IntN(len(fastParts))][0]
			case 1:
				d = d[:j]
			default:
				d = append(d[:j:j], append([]byte(fastParts[rng.IntN(len(fastParts))]), d[j:]...)...)
			}
			values = append(values, d)
		}
		for _, v := range values {
			msg, got, ok := decodeCommon(v)
			wantMsg, want, err := decodeJSON(v)
			if !ok {
				continue
			}
			fast++
			require.NoError(t, err, "decodeCommon decoded %q, which encoding/json refuses", v)
			require.Equal(t, wantMsg, msg, "%q", v)
			require.True(t, want.Equal(got) && want.Location().String() == got.Location().String(), "%q: %v, want %v", v, got, want)
			require.Equal(t, want, got, "%q", v)
		}
	}
	// Most undamaged human, AI and system values take the fast path.
	require.Greater(t, fast, 20000/8*3/2, "values decoded without encoding/json")
}

// decodeCommon takes the values of human, AI and system messages with
// only a content and a time, and leaves every other form to encoding/json.
func TestDecodeCommonTakesTheCommonForm(t *testing.T) {
	at := time.Date(2023, 5, 8, 10, 30, 0, 123456789, time.FixedZone("", 2*3600))
	for _, m := range []llms.ChatMessage{llms.HumanChatMessage{Content: "Hi \"there\"\n\tpath C:\\x / é 😀"}, llms.AIChatMessage{Content: ""}, llms.SystemChatMessage{Content: "be brief"}} {
		for _, when := range []time.Time{{}, at} {
			data, err := EncodeMessageAt(m, when)
			require.NoError(t, err)
			msg, got, ok := decodeCommon(data)
			require.True(t, ok, "%s", data)
			require.Equal(t, m, msg)
			require.True(t, when.Equal(got), "%s", data)
		}
	}
	for _, data := range []string{
		`{"v":1,"type":"human","content":"\u0041"}`,            // a \u escape
		`{"v":1,"type":"tool","content":"x","id":"1"}`,         // another type
		`{"v":1,"type":"human","content":"x","name":"n"}`,      // another field
		`{ "v":1,"type":"human","content":"x"}`,                // white space
		`{"v":1,"type":"human","content":"x"} `,                // after the object
		`{"v":1,"type":"human","content":"x","at":"nonsense"}`, // a bad time: encoding/json's path names it
		"{\"v\":1,\"type\":\"human\",\"content\":\"\xff\"}",    // not UTF-8
	} {
		_, _, ok := decodeCommon([]byte(data))
		require.False(t, ok, "%s", data)
	}
}
