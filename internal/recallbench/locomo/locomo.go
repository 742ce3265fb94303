// Package locomo reads LoCoMo, a published benchmark of long multi-session
// conversations with questions whose evidence turns are known, and replays
// it through any langchaingo schema.Memory to measure what the memory puts
// in front of the model: evidence recall and context tokens.
//
// # The format
//
// A LoCoMo file (locomo10.json) is a JSON list of samples. Each sample has
// a "sample_id", a "conversation" and a "qa" list:
//
//   - "conversation" holds "speaker_a" and "speaker_b" (names), and for
//     each session N a list "session_N" of turns {"speaker", "dia_id",
//     "text"} and its date "session_N_date_time" ("1:56 pm on 8 May,
//     2023"). Some turns also carry an image ("img_url", "blip_caption",
//     ...): those fields are ignored, the turn is its text. A date with no
//     session list (the published file has some) is ignored.
//   - each "qa" entry has a "question", an "answer" (a string or a number;
//     the adversarial questions have "adversarial_answer" instead), the
//     "evidence" (dia_ids such as "D1:3"; several may be joined by ";" in
//     one string) and a "category", 1 to 5 (see CategoryLabel).
//
// Every other field (summaries, observations) is ignored. Real data has a
// few malformed evidence ids: Parse normalises what it can (NormaliseID:
// case, blanks, leading zeros, a stray colon as in "D:11:26") and drops,
// and records in Question.Dropped, the ids that still name no turn.
//
// # Replaying
//
// Exchanges pairs the turns for a memory: speaker_a's turns are inputs,
// speaker_b's outputs, each speaker_a turn paired with the speaker_b turn
// that follows it, in session order. A turn with no partner (a session
// that opens with speaker_b, or two turns in a row by one speaker) becomes
// an exchange whose other side is the empty string: memstack's and
// langchaingo's memories accept an empty input or output and store the
// other side verbatim. Each exchange is dated at its session's date plus
// one second per exchange before it in the session, so the order is kept.
//
// Replay saves the exchanges (one SaveContext per exchange, with
// memstack.WithTime carrying its date) and asks every question that has
// evidence with LoadMemoryVariables({"input": question}); Score measures
// each load. Questions are never saved, so each sees the same memory.
//
// The data is licensed CC BY-NC 4.0: this package reads it from a file
// and never embeds any of it.
package locomo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The question categories of LoCoMo, with the labels of LoCoMo's own
// evaluation code.
const (
	CategoryMultiHop    = 1
	CategoryTemporal    = 2
	CategoryOpenDomain  = 3
	CategorySingleHop   = 4
	CategoryAdversarial = 5
)

// Categories lists the categories in order.
var Categories = []int{CategoryMultiHop, CategoryTemporal, CategoryOpenDomain, CategorySingleHop, CategoryAdversarial}

// CategoryLabel returns the label of category c as LoCoMo's evaluation code
// names it ("multi-hop", "temporal", "open-domain", "single-hop",
// "adversarial"), or "category c" for any other number.
func CategoryLabel(c int) string {
	switch c {
	case CategoryMultiHop:
		return "multi-hop"
	case CategoryTemporal:
		return "temporal"
	case CategoryOpenDomain:
		return "open-domain"
	case CategorySingleHop:
		return "single-hop"
	case CategoryAdversarial:
		return "adversarial"
	}
	return "category " + strconv.Itoa(c)
}

// Turn is one turn of a conversation.
type Turn struct {
	// ID is the turn's dia_id ("D1:3"), normalised (see NormaliseID) when
	// it can be.
	ID string
	// Speaker is the speaker's name: Conversation.SpeakerA or SpeakerB.
	Speaker string
	// Text is what the speaker said.
	Text string
}

// Session is one session of a conversation.
type Session struct {
	// Number is N in "session_N".
	Number int
	// Time is the session's date and time (see ParseTime).
	Time time.Time
	// Turns are the session's turns, in order.
	Turns []Turn
}

// Question is one question about a conversation.
type Question struct {
	// Text is the question.
	Text string
	// Answer is the reference answer (for adversarial questions, the
	// adversarial answer), as a string.
	Answer string
	// Category is LoCoMo's category, 1 to 5 (see CategoryLabel).
	Category int
	// Evidence lists the IDs of the turns that hold the answer: normalised,
	// each naming a turn of the conversation, without repeats, in the
	// order given.
	Evidence []string
	// Normalised lists the evidence ids, as given, that were rewritten to
	// name a turn (see NormaliseID).
	Normalised []string
	// Dropped lists the evidence ids, as given, that name no turn: they
	// are not in Evidence.
	Dropped []string
}

// Conversation is one LoCoMo sample: a conversation and its questions.
type Conversation struct {
	// ID is the sample_id.
	ID string
	// SpeakerA and SpeakerB are the two speakers' names.
	SpeakerA, SpeakerB string
	// Sessions are the sessions, in session order.
	Sessions []Session
	// Questions are the questions, in the order given.
	Questions []Question

	turns map[string]Turn
}

// Turn returns the turn whose ID is id (normalised first, see NormaliseID)
// and whether there is one.
func (c *Conversation) Turn(id string) (Turn, bool) {
	if n, ok := NormaliseID(id); ok {
		id = n
	}
	if c.turns != nil {
		t, ok := c.turns[id]
		return t, ok
	}
	for _, s := range c.Sessions { // a Conversation built by hand
		for _, t := range s.Turns {
			if t.ID == id {
				return t, true
			}
		}
	}
	return Turn{}, false
}

// Turns returns the number of turns over all sessions.
func (c *Conversation) Turns() int {
	n := 0
	for _, s := range c.Sessions {
		n += len(s.Turns)
	}
	return n
}

// Load reads and parses the LoCoMo file at path (see Parse).
func Load(path string) ([]Conversation, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("locomo: %w", err)
	}
	convs, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return convs, nil
}

// The published format, as far as it is read.
type (
	sampleJSON struct {
		SampleID     string                     `json:"sample_id"`
		Conversation map[string]json.RawMessage `json:"conversation"`
		QA           []qaJSON                   `json:"qa"`
	}
	turnJSON struct {
		Speaker string `json:"speaker"`
		DiaID   string `json:"dia_id"`
		Text    string `json:"text"`
	}
	qaJSON struct {
		Question          string          `json:"question"`
		Answer            json.RawMessage `json:"answer"`
		AdversarialAnswer json.RawMessage `json:"adversarial_answer"`
		Evidence          []string        `json:"evidence"`
		Category          int             `json:"category"`
	}
)

var sessionKey = regexp.MustCompile(`^session_([0-9]+)$`)

// Parse parses a LoCoMo file's contents (see the package documentation).
// It fails, naming the sample and the field, on what it cannot read: JSON
// that is not a list of samples, a sample with no sample_id or no speakers,
// a session with no date or an unreadable one, a turn by neither speaker
// or with no dia_id, two turns with one dia_id, a category outside 1–5.
// Evidence ids that name no turn are not errors (see Question.Dropped).
func Parse(data []byte) ([]Conversation, error) {
	var samples []sampleJSON
	if err := json.Unmarshal(data, &samples); err != nil {
		return nil, fmt.Errorf("locomo: not a JSON list of samples: %w", err)
	}
	convs := make([]Conversation, 0, len(samples))
	for i, s := range samples {
		c, err := parseSample(s)
		if err != nil {
			name := s.SampleID
			if name == "" {
				name = fmt.Sprintf("#%d", i+1)
			}
			return nil, fmt.Errorf("locomo: sample %s: %w", name, err)
		}
		convs = append(convs, c)
	}
	return convs, nil
}

func parseSample(s sampleJSON) (Conversation, error) {
	if s.SampleID == "" {
		return Conversation{}, errors.New("no sample_id")
	}
	c := Conversation{ID: s.SampleID, turns: map[string]Turn{}}
	if err := str(s.Conversation, "speaker_a", &c.SpeakerA); err != nil {
		return c, err
	}
	if err := str(s.Conversation, "speaker_b", &c.SpeakerB); err != nil {
		return c, err
	}
	if c.SpeakerA == "" || c.SpeakerB == "" || c.SpeakerA == c.SpeakerB {
		return c, fmt.Errorf("speakers %q and %q: want two different names", c.SpeakerA, c.SpeakerB)
	}
	var numbers []int
	for k := range s.Conversation {
		if m := sessionKey.FindStringSubmatch(k); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil {
				return c, fmt.Errorf("%s: %w", k, err)
			}
			numbers = append(numbers, n)
		}
	}
	slices.Sort(numbers)
	for _, n := range numbers {
		sess, err := parseSession(s.Conversation, n, c.SpeakerA, c.SpeakerB)
		if err != nil {
			return c, err
		}
		for _, t := range sess.Turns {
			if _, dup := c.turns[t.ID]; dup {
				return c, fmt.Errorf("session_%d: dia_id %q: two turns have this id", n, t.ID)
			}
			c.turns[t.ID] = t
		}
		c.Sessions = append(c.Sessions, sess)
	}
	for i, q := range s.QA {
		question, err := c.parseQuestion(q)
		if err != nil {
			return c, fmt.Errorf("qa %d: %w", i+1, err)
		}
		c.Questions = append(c.Questions, question)
	}
	return c, nil
}

// str reads the string field key of m into dst.
func str(m map[string]json.RawMessage, key string, dst *string) error {
	raw, ok := m[key]
	if !ok {
		return fmt.Errorf("conversation has no %s", key)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("conversation.%s: %w", key, err)
	}
	return nil
}

func parseSession(m map[string]json.RawMessage, n int, a, b string) (Session, error) {
	key := fmt.Sprintf("session_%d", n)
	var turns []turnJSON
	if err := json.Unmarshal(m[key], &turns); err != nil {
		return Session{}, fmt.Errorf("%s: %w", key, err)
	}
	var date string
	if err := str(m, key+"_date_time", &date); err != nil {
		return Session{}, err
	}
	at, err := ParseTime(date)
	if err != nil {
		return Session{}, fmt.Errorf("%s_date_time: %w", key, err)
	}
	sess := Session{Number: n, Time: at, Turns: make([]Turn, 0, len(turns))}
	for i, t := range turns {
		if t.Speaker != a && t.Speaker != b {
			return sess, fmt.Errorf("%s turn %d (%s): speaker %q is neither %q nor %q", key, i+1, t.DiaID, t.Speaker, a, b)
		}
		id := strings.TrimSpace(t.DiaID)
		if id == "" {
			return sess, fmt.Errorf("%s turn %d: no dia_id", key, i+1)
		}
		if norm, ok := NormaliseID(id); ok {
			id = norm
		}
		sess.Turns = append(sess.Turns, Turn{ID: id, Speaker: t.Speaker, Text: t.Text})
	}
	return sess, nil
}

func (c *Conversation) parseQuestion(q qaJSON) (Question, error) {
	if !slices.Contains(Categories, q.Category) {
		return Question{}, fmt.Errorf("category %d: want 1 to 5", q.Category)
	}
	out := Question{Text: q.Question, Category: q.Category}
	answer := q.Answer
	if len(bytes.TrimSpace(answer)) == 0 {
		answer = q.AdversarialAnswer
	}
	out.Answer = rawText(answer)
	for _, field := range q.Evidence {
		for _, raw := range strings.FieldsFunc(field, func(r rune) bool { return r == ';' || r == ',' }) {
			raw = strings.TrimSpace(raw)
			if raw == "" {
				continue
			}
			id := raw
			if n, ok := NormaliseID(raw); ok {
				id = n
			}
			if _, ok := c.turns[id]; !ok {
				out.Dropped = append(out.Dropped, raw)
				continue
			}
			if id != raw {
				out.Normalised = append(out.Normalised, raw)
			}
			if !slices.Contains(out.Evidence, id) {
				out.Evidence = append(out.Evidence, id)
			}
		}
	}
	return out, nil
}

// rawText renders a JSON answer as text: a string as is, anything else
// (a number) as written.
func rawText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if string(raw) == "null" {
		return ""
	}
	return string(raw)
}

var idForm = regexp.MustCompile(`^[Dd]\s*:?\s*([0-9]+)\s*:\s*([0-9]+)$`)

// NormaliseID returns the canonical form "D<session>:<turn>" of a dia_id
// and whether id has the form of one: a "D" (either case), the session
// number, a colon and the turn number, with blanks around the parts,
// leading zeros and a stray colon after the D allowed ("d01:003", "D:11:26"
// and " D1 : 3" all give "D1:3" or "D11:26"). Whether a turn has that id
// is the caller's question (Conversation.Turn).
func NormaliseID(id string) (string, bool) {
	m := idForm.FindStringSubmatch(strings.TrimSpace(id))
	if m == nil {
		return "", false
	}
	s, err1 := strconv.Atoi(m[1])
	t, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil {
		return "", false
	}
	return fmt.Sprintf("D%d:%d", s, t), true
}

// ParseTime parses a session date as LoCoMo writes it: "1:56 pm on 8 May,
// 2023" — hour (1–12) and minutes, am or pm, "on", the day, the English
// month name and the year — as that wall-clock time in UTC (the data gives
// no zone). Blanks are folded and the case of "am"/"pm" and of the month
// is ignored; the comma is optional.
func ParseTime(s string) (time.Time, error) {
	f := strings.Fields(strings.ReplaceAll(s, ",", " "))
	if len(f) == 6 && strings.EqualFold(f[2], "on") {
		layout := "3:04 PM 2 January 2006"
		v := strings.ToUpper(f[1])
		month := strings.ToLower(f[4])
		if month != "" {
			month = strings.ToUpper(month[:1]) + month[1:]
		}
		if t, err := time.Parse(layout, f[0]+" "+v+" "+f[3]+" "+month+" "+f[5]); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("session date %q: want the form \"1:56 pm on 8 May, 2023\"", s)
}

// Marshal writes conversations in LoCoMo's published format, the form
// Parse reads: a sample per conversation with its sessions, their dates
// ("1:56 pm on 8 May, 2023", minutes kept, seconds dropped), the turns and
// the questions with their evidence ids and answers. Question.Normalised
// and Question.Dropped are not written. It is how tests and tools build
// their own files in the format; Parse(Marshal(c)) gives c back, but for
// seconds in the dates.
func Marshal(convs []Conversation) ([]byte, error) {
	type qaOut struct {
		Question string   `json:"question"`
		Answer   string   `json:"answer"`
		Evidence []string `json:"evidence"`
		Category int      `json:"category"`
	}
	type sampleOut struct {
		SampleID     string         `json:"sample_id"`
		Conversation map[string]any `json:"conversation"`
		QA           []qaOut        `json:"qa"`
	}
	out := make([]sampleOut, 0, len(convs))
	for _, c := range convs {
		conv := map[string]any{"speaker_a": c.SpeakerA, "speaker_b": c.SpeakerB}
		for _, s := range c.Sessions {
			turns := make([]turnJSON, len(s.Turns))
			for i, t := range s.Turns {
				turns[i] = turnJSON{Speaker: t.Speaker, DiaID: t.ID, Text: t.Text}
			}
			key := fmt.Sprintf("session_%d", s.Number)
			conv[key] = turns
			conv[key+"_date_time"] = FormatTime(s.Time)
		}
		qa := make([]qaOut, len(c.Questions))
		for i, q := range c.Questions {
			qa[i] = qaOut{Question: q.Text, Answer: q.Answer, Evidence: q.Evidence, Category: q.Category}
			if qa[i].Evidence == nil {
				qa[i].Evidence = []string{}
			}
		}
		out = append(out, sampleOut{SampleID: c.ID, Conversation: conv, QA: qa})
	}
	return json.MarshalIndent(out, "", " ")
}

// FormatTime writes t as LoCoMo writes a session date: "1:56 pm on 8 May,
// 2023". ParseTime reads it back.
func FormatTime(t time.Time) string {
	return strings.Replace(strings.Replace(t.Format("3:04 PM on 2 January, 2006"), " AM ", " am ", 1), " PM ", " pm ", 1)
}
