package kit

import (
	"bytes"
	"time"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
)

// decodeCommon decodes, without encoding/json, the common form of a
// stored value: a human, AI or system message with only its content, and
// its time or none, exactly as EncodeMessageAt writes it (its field order,
// no white space) with no \u escape in its content. ok is false for any
// other value, which Decode then decodes with encoding/json: what
// decodeCommon decodes, encoding/json would decode to the same message
// and time (a test compares them on random and damaged values), so it
// changes what a decode costs, never what it returns. Reading messages
// back is much of a load's work; this is about a tenth of the time
// encoding/json takes.
func decodeCommon(data []byte) (msg llms.ChatMessage, at time.Time, ok bool) {
	rest, found := bytes.CutPrefix(data, []byte(`{"v":1,"type":"`))
	if !found {
		return nil, time.Time{}, false
	}
	var typ string
	for _, t := range [...]string{"human", "ai", "system"} {
		if r, found := bytes.CutPrefix(rest, []byte(t+`","content":"`)); found {
			typ, rest = t, r
			break
		}
	}
	if typ == "" {
		return nil, time.Time{}, false
	}
	content, rest, ok := cutString(rest)
	if !ok {
		return nil, time.Time{}, false
	}
	if r, found := bytes.CutPrefix(rest, []byte(`,"at":"`)); found {
		var s string
		if s, rest, ok = cutString(r); !ok {
			return nil, time.Time{}, false
		}
		var err error
		if at, err = parseTime(s); err != nil {
			return nil, time.Time{}, false // encoding/json's path names the problem
		}
	}
	if len(rest) != 1 || rest[0] != '}' {
		return nil, time.Time{}, false
	}
	switch typ {
	case "human":
		msg = llms.HumanChatMessage{Content: content}
	case "ai":
		msg = llms.AIChatMessage{Content: content}
	default:
		msg = llms.SystemChatMessage{Content: content}
	}
	return msg, at, true
}

// cutString decodes the JSON string whose opening quote has been read at
// the start of b, and returns it and what follows its closing quote. ok
// is false for a string it leaves to encoding/json: one with a \u escape,
// a bad escape, a raw control character, bytes that are not UTF-8 (which
// encoding/json replaces), or no closing quote.
func cutString(b []byte) (s string, rest []byte, ok bool) {
	var buf []byte // the decoded string, once an escape was met
	start, ascii := 0, true
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			if buf == nil {
				s = string(b[start:i])
			} else {
				s = string(append(buf, b[start:i]...))
			}
			if !ascii && !utf8.ValidString(s) {
				return "", nil, false
			}
			return s, b[i+1:], true
		case c == '\\':
			if i+1 == len(b) {
				return "", nil, false
			}
			var r byte
			switch b[i+1] {
			case '"', '\\', '/':
				r = b[i+1]
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			default:
				return "", nil, false
			}
			buf = append(append(buf, b[start:i]...), r)
			i += 2
			start = i
		case c < 0x20:
			return "", nil, false
		default:
			if c >= utf8.RuneSelf {
				ascii = false
			}
			i++
		}
	}
	return "", nil, false
}
