package kit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/memstack/memstack/internal/jsonerr"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
)

// ErrCorrupt is wrapped by DecodeMessage's and DecodeRecord's errors when a
// stored value is not a message EncodeMessageAt could have written. A backend
// that meets one returns the error (naming the identity and Seq, never the
// value) and keeps serving every other message and identity.
var ErrCorrupt = errors.New("store: corrupt stored message")

// ErrInvalidArgument is store.ErrInvalidArgument (defined here so that the
// checks below can wrap it).
var ErrInvalidArgument = errors.New("store: invalid argument")

// codecVersion is the value of the "v" field EncodeMessage writes. A
// decoder meeting another version rejects the value rather than guess.
// The optional "at" field did not change it: a decoder that predates it
// ignores it, as it ignores every key the format does not define, and
// reads the message without its time.
const codecVersion = 1

// wireMessage is the JSON form of a message: one flat object with an
// explicit type tag and only the fields that type has. Pointers tell an
// absent field from an empty one, so a nil ToolCalls slice and an empty one
// both round-trip.
type wireMessage struct {
	V                int               `json:"v"`
	Type             string            `json:"type"`
	Content          *string           `json:"content"`
	ReasoningContent *string           `json:"reasoning_content,omitempty"`
	FunctionCall     *wireFunctionCall `json:"function_call,omitempty"`
	ToolCalls        *[]wireToolCall   `json:"tool_calls,omitempty"`
	Role             *string           `json:"role,omitempty"`
	Name             *string           `json:"name,omitempty"`
	ID               *string           `json:"id,omitempty"`
	At               *string           `json:"at,omitempty"`
}

type wireFunctionCall struct {
	Name      *string `json:"name"`
	Arguments *string `json:"arguments"`
}

type wireToolCall struct {
	ID           *string           `json:"id"`
	Type         *string           `json:"type"`
	FunctionCall *wireFunctionCall `json:"function,omitempty"`
}

// EncodeMessage returns the storage form of msg without a time: a JSON
// object with a version ("v": 1), an explicit type tag ("type": "human",
// "ai", "system", "generic", "function" or "tool") and exactly the fields
// of that langchaingo message type:
//
//	{"v":1,"type":"human","content":"Hi"}
//	{"v":1,"type":"ai","content":"","reasoning_content":"…","function_call":{"name":"f","arguments":"{}"},
//	 "tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{…}"}}]}
//	{"v":1,"type":"generic","content":"…","role":"critic","name":"bob"}
//	{"v":1,"type":"function","content":"…","name":"f"}
//	{"v":1,"type":"tool","content":"…","id":"call_1"}
//
// It is EncodeMessageAt(msg, time.Time{}): the value has no "at" field and
// decodes (DecodeRecord) with a zero Record.Time. Backends store messages
// with EncodeMessageAt, dated AppendTime(ctx).
//
// DecodeMessage(EncodeMessage(m)) equals m (reflect.DeepEqual), including
// a nil versus an empty ToolCalls slice and a nil versus a set FunctionCall.
// A pointer to one of the six message types is encoded as the message it
// points to and decodes as the value type, as InMemory stores it.
//
// Every string must be valid UTF-8 (JSON cannot carry other bytes; the
// encoder refuses rather than silently replace them); the error names the
// field, never its content, and wraps ErrInvalidArgument. NUL and other
// control characters are fine: they are escaped (\u0000), so the encoded
// value never contains a NUL byte and fits a text column — but not
// PostgreSQL's jsonb, which rejects \u0000; store it as text or bytea.
// Any other message type (a caller's own llms.ChatMessage implementation)
// is an error naming its Go type, wrapping ErrInvalidArgument.
//
// The format is stable: backends written by different engineers (SQLite,
// Redis, PostgreSQL) share it, and values written today must decode later.
func EncodeMessage(msg llms.ChatMessage) ([]byte, error) {
	return EncodeMessageAt(msg, time.Time{})
}

// EncodeMessageAt is EncodeMessage for a message saved at time at: the
// value gains an "at" field, the last one, holding at in RFC 3339 with
// nanoseconds (time.RFC3339Nano: trailing zeros of the fraction, and a
// fraction of zero, left out) and at's own UTC offset ("Z" for UTC):
//
//	{"v":1,"type":"human","content":"Hi","at":"2023-05-08T10:30:00.123456789+02:00"}
//	{"v":1,"type":"ai","content":"Hello!","at":"2023-05-08T08:30:00Z"}
//
// DecodeRecord gives the time back as Record.Time: the same instant
// (time.Time.Equal) with the same UTC offset — not the location's name,
// which RFC 3339 does not carry, nor a monotonic clock reading. A zero at
// writes no "at" field, exactly as EncodeMessage. A time RFC 3339 cannot
// hold (see CheckTime) is an error wrapping ErrInvalidArgument.
//
// The field was added to version 1 of the format without changing "v":
// values written without it (before memstack recorded times) still decode,
// with a zero Time, and a decoder that predates the field ignores it.
func EncodeMessageAt(msg llms.ChatMessage, at time.Time) ([]byte, error) {
	if IsNil(msg) {
		return nil, fmt.Errorf("%w: cannot encode a nil message", ErrInvalidArgument)
	}
	w, err := toWire(msg)
	if err != nil {
		return nil, err
	}
	if !at.IsZero() {
		s, err := formatTime(at)
		if err != nil {
			return nil, fmt.Errorf("%w: %s message: %w", ErrInvalidArgument, w.Type, err)
		}
		w.At = &s
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("store: encoding %s message: %w", w.Type, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// CheckTime returns an error wrapping ErrInvalidArgument, naming the
// problem, if t cannot be the time of a stored message: RFC 3339, the form
// the backends keep it in, holds the years 0 to 9999 and UTC offsets of
// whole minutes under 24 hours. The zero time (no time) is fine. A backend
// calls it on AppendTime(ctx) before storing anything, so an Append
// dated with such a time (memstack.WithTime) stores nothing and fails.
func CheckTime(t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if _, err := formatTime(t); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// formatTime returns t in RFC 3339 with nanoseconds and t's offset, or an
// error naming why RFC 3339 cannot hold it.
func formatTime(t time.Time) (string, error) {
	_, off := t.Zone()
	if off%60 != 0 || off <= -24*3600 || off >= 24*3600 {
		return "", fmt.Errorf("the message time's UTC offset of %ds is not a whole number of minutes under 24 hours, which RFC 3339 cannot store (convert the time to UTC first)", off)
	}
	if y := t.Year(); y < 0 || y > 9999 {
		return "", fmt.Errorf("the message time's year %d is outside the years 0 to 9999 RFC 3339 can store", y)
	}
	b, err := t.MarshalText()
	if err != nil { // excluded by the checks above
		return "", fmt.Errorf("the message time cannot be stored: %v", err)
	}
	return string(b), nil
}

// parseTime is the inverse of formatTime for a stored "at" field. Its
// errors never quote the value.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("the at field (%d bytes) is not an RFC 3339 time", len(s))
	}
	if t.IsZero() {
		return time.Time{}, errors.New("the at field holds the zero time, which is never written")
	}
	if _, err := formatTime(t); err != nil {
		return time.Time{}, fmt.Errorf("the at field: %w", err)
	}
	// The location depends on the instant and the offset only, so that
	// two decodings of one value, and a value and its re-encoding, are
	// reflect.DeepEqual (as tests compare Records): time.Parse gives
	// "+00:00" time.Local where Local is UTC but "Z" time.UTC, and every
	// other foreign offset a new location.
	switch _, off := t.Zone(); {
	case off == 0:
		t = t.UTC()
	case t.Location() != time.Local:
		t = t.In(fixedZone(off))
	}
	return t, nil
}

// zones caches one *time.Location per UTC offset: at most 2 × 24 × 60 of
// them, since parseTime accepts only offsets of whole minutes under 24
// hours.
var zones sync.Map // int (offset in seconds) → *time.Location

func fixedZone(off int) *time.Location {
	if z, ok := zones.Load(off); ok {
		return z.(*time.Location)
	}
	z, _ := zones.LoadOrStore(off, time.FixedZone("", off))
	return z.(*time.Location)
}

func str(s string) *string { return &s }

// checkUTF8 returns an error naming field when s is not valid UTF-8.
func checkUTF8(typ, field, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s message: %s is not valid UTF-8", ErrInvalidArgument, typ, field)
	}
	return nil
}

func toWire(msg llms.ChatMessage) (*wireMessage, error) {
	switch m := msg.(type) {
	case *llms.AIChatMessage:
		return toWire(*m)
	case *llms.HumanChatMessage:
		return toWire(*m)
	case *llms.SystemChatMessage:
		return toWire(*m)
	case *llms.GenericChatMessage:
		return toWire(*m)
	case *llms.FunctionChatMessage:
		return toWire(*m)
	case *llms.ToolChatMessage:
		return toWire(*m)
	}
	w := &wireMessage{V: codecVersion}
	type field struct{ name, value string }
	var fields []field
	switch m := msg.(type) {
	case llms.HumanChatMessage:
		w.Type, w.Content = "human", str(m.Content)
		fields = []field{{"content", m.Content}}
	case llms.SystemChatMessage:
		w.Type, w.Content = "system", str(m.Content)
		fields = []field{{"content", m.Content}}
	case llms.GenericChatMessage:
		w.Type, w.Content, w.Role, w.Name = "generic", str(m.Content), str(m.Role), str(m.Name)
		fields = []field{{"content", m.Content}, {"role", m.Role}, {"name", m.Name}}
	case llms.FunctionChatMessage:
		w.Type, w.Content, w.Name = "function", str(m.Content), str(m.Name)
		fields = []field{{"content", m.Content}, {"name", m.Name}}
	case llms.ToolChatMessage:
		w.Type, w.Content, w.ID = "tool", str(m.Content), str(m.ID)
		fields = []field{{"content", m.Content}, {"tool call id", m.ID}}
	case llms.AIChatMessage:
		w.Type, w.Content = "ai", str(m.Content)
		fields = []field{{"content", m.Content}, {"reasoning content", m.ReasoningContent}}
		if m.ReasoningContent != "" {
			w.ReasoningContent = str(m.ReasoningContent)
		}
		if m.FunctionCall != nil {
			w.FunctionCall = &wireFunctionCall{Name: str(m.FunctionCall.Name), Arguments: str(m.FunctionCall.Arguments)}
			fields = append(fields, field{"function call name", m.FunctionCall.Name}, field{"function call arguments", m.FunctionCall.Arguments})
		}
		if m.ToolCalls != nil {
			calls := make([]wireToolCall, len(m.ToolCalls))
			for i, c := range m.ToolCalls {
				n := fmt.Sprintf("tool call %d ", i+1)
				calls[i] = wireToolCall{ID: str(c.ID), Type: str(c.Type)}
				fields = append(fields, field{n + "id", c.ID}, field{n + "type", c.Type})
				if c.FunctionCall != nil {
					calls[i].FunctionCall = &wireFunctionCall{Name: str(c.FunctionCall.Name), Arguments: str(c.FunctionCall.Arguments)}
					fields = append(fields, field{n + "function name", c.FunctionCall.Name}, field{n + "function arguments", c.FunctionCall.Arguments})
				}
			}
			w.ToolCalls = &calls
		}
	default:
		return nil, fmt.Errorf("%w: cannot encode message of Go type %T (message type %q): only langchaingo's six message types are stored",
			ErrInvalidArgument, msg, msg.GetType())
	}
	for _, f := range fields {
		if err := checkUTF8(w.Type, f.name, f.value); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// DecodeMessage is the inverse of EncodeMessage and EncodeMessageAt,
// without the time (DecodeRecord returns it). A value EncodeMessageAt
// could not have written — not JSON, trailing data, another version, an
// unknown type tag (the error names it), a missing field, a field of
// another message type, an "at" field that is not an RFC 3339 time — is an
// error wrapping ErrCorrupt; DecodeMessage never panics. Its errors never
// include the message's content (nor the malformed time). Object keys the
// format does not define are ignored: a change to the format that matters
// changes the version ("v") instead.
func DecodeMessage(data []byte) (llms.ChatMessage, error) {
	msg, _, err := Decode(data)
	return msg, err
}

// Decode decodes a stored value into its message and its time (zero when
// the value has none).
func Decode(data []byte) (llms.ChatMessage, time.Time, error) {
	if msg, at, ok := decodeCommon(data); ok {
		return msg, at, nil
	}
	return decodeJSON(data)
}

// decodeJSON is Decode with encoding/json, for any value.
func decodeJSON(data []byte) (llms.ChatMessage, time.Time, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, time.Time{}, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	var w wireMessage
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: not a stored message (%d bytes): %s", ErrCorrupt, len(data), jsonerr.Problem(err))
	}
	if w.V != codecVersion {
		return nil, time.Time{}, fmt.Errorf("%w: codec version %d, want %d", ErrCorrupt, w.V, codecVersion)
	}
	if w.Content == nil {
		return nil, time.Time{}, fmt.Errorf("%w: %q message has no content field", ErrCorrupt, w.Type)
	}
	msg, err := fromWire(&w)
	if err != nil {
		return nil, time.Time{}, err
	}
	var at time.Time
	if w.At != nil {
		if at, err = parseTime(*w.At); err != nil {
			return nil, time.Time{}, fmt.Errorf("%w: %q message: %w", ErrCorrupt, w.Type, err)
		}
	}
	return msg, at, nil
}

// fromWire turns a decoded wire value with a version and a content into
// its message, checking the fields its type has.
func fromWire(w *wireMessage) (llms.ChatMessage, error) {
	// Which optional fields are present, as a bit set; each type allows
	// some and requires some.
	const (
		fReasoning = 1 << iota
		fFunctionCall
		fToolCalls
		fRole
		fName
		fID
	)
	fieldNames := [...]string{"reasoning_content", "function_call", "tool_calls", "role", "name", "id"}
	var has uint
	for i, present := range [...]bool{w.ReasoningContent != nil, w.FunctionCall != nil, w.ToolCalls != nil, w.Role != nil, w.Name != nil, w.ID != nil} {
		if present {
			has |= 1 << i
		}
	}
	check := func(allowed, required uint) error {
		for i, name := range fieldNames {
			bit := uint(1) << i
			switch {
			case required&bit != 0 && has&bit == 0:
				return fmt.Errorf("%w: %q message has no %s field", ErrCorrupt, w.Type, name)
			case has&bit != 0 && (allowed|required)&bit == 0:
				return fmt.Errorf("%w: %q message has a %s field", ErrCorrupt, w.Type, name)
			}
		}
		return nil
	}
	var err error
	var msg llms.ChatMessage
	switch w.Type {
	case "human":
		err, msg = check(0, 0), llms.HumanChatMessage{Content: *w.Content}
	case "system":
		err, msg = check(0, 0), llms.SystemChatMessage{Content: *w.Content}
	case "generic":
		if err = check(0, fRole|fName); err == nil {
			msg = llms.GenericChatMessage{Content: *w.Content, Role: *w.Role, Name: *w.Name}
		}
	case "function":
		if err = check(0, fName); err == nil {
			msg = llms.FunctionChatMessage{Content: *w.Content, Name: *w.Name}
		}
	case "tool":
		if err = check(0, fID); err == nil {
			msg = llms.ToolChatMessage{Content: *w.Content, ID: *w.ID}
		}
	case "ai":
		if err = check(fReasoning|fFunctionCall|fToolCalls, 0); err == nil {
			msg, err = fromWireAI(w)
		}
	default:
		return nil, fmt.Errorf("%w: unknown message type %q", ErrCorrupt, w.Type)
	}
	if err != nil {
		return nil, err
	}
	return msg, nil
}

func fromWireFunctionCall(what string, w *wireFunctionCall) (*llms.FunctionCall, error) {
	if w == nil {
		return nil, nil
	}
	if w.Name == nil || w.Arguments == nil {
		return nil, fmt.Errorf("%w: \"ai\" message: %s lacks name or arguments", ErrCorrupt, what)
	}
	return &llms.FunctionCall{Name: *w.Name, Arguments: *w.Arguments}, nil
}

func fromWireAI(w *wireMessage) (llms.ChatMessage, error) {
	m := llms.AIChatMessage{Content: *w.Content}
	if w.ReasoningContent != nil {
		m.ReasoningContent = *w.ReasoningContent
	}
	var err error
	if m.FunctionCall, err = fromWireFunctionCall("function_call", w.FunctionCall); err != nil {
		return nil, err
	}
	if w.ToolCalls != nil {
		m.ToolCalls = make([]llms.ToolCall, len(*w.ToolCalls))
		for i, c := range *w.ToolCalls {
			if c.ID == nil || c.Type == nil {
				return nil, fmt.Errorf("%w: \"ai\" message: tool call %d lacks id or type", ErrCorrupt, i+1)
			}
			fc, err := fromWireFunctionCall(fmt.Sprintf("tool call %d function", i+1), c.FunctionCall)
			if err != nil {
				return nil, err
			}
			m.ToolCalls[i] = llms.ToolCall{ID: *c.ID, Type: *c.Type, FunctionCall: fc}
		}
	}
	return m, nil
}
