package locomo

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixture is a small file in LoCoMo's published format, written for these
// tests: three sessions listed out of order (session_10 sorts after
// session_2), the second opening with speaker_b, turns with image fields,
// a date with no session, evidence joined by ";", padded with zeros,
// malformed or naming no turn, a question without evidence, a numeric
// answer and an adversarial one, and fields the parser ignores.
const fixture = `[
 {
  "sample_id": "t-1",
  "conversation": {
   "speaker_a": "Ana",
   "speaker_b": "Ben",
   "session_1_date_time": "1:56 pm on 8 May, 2023",
   "session_1": [
    {"speaker": "Ana", "dia_id": "D1:1", "text": "Morning Ben, the kiln is finally fixed."},
    {"speaker": "Ben", "dia_id": "D1:2", "text": "Great news, what broke?"},
    {"speaker": "Ana", "dia_id": "D1:3", "text": "A relay in the controller; I swapped it myself.",
     "img_url": ["https://example.invalid/kiln.jpg"], "blip_caption": "a photo of a kiln", "query": "kiln"},
    {"speaker": "Ben", "dia_id": "D1:4", "text": "Impressive. Bowls next?"},
    {"speaker": "Ana", "dia_id": "D1:5", "text": "Bowls next."}
   ],
   "session_10_date_time": "12:06 am on 1 June, 2023",
   "session_10": [
    {"speaker": "Ana", "dia_id": "D10:1", "text": "Late night glazing."},
    {"speaker": "Ben", "dia_id": "D10:2", "text": "Celadon again?"}
   ],
   "session_2_date_time": "9:05 am on 20 May, 2023",
   "session_2": [
    {"speaker": "Ben", "dia_id": "D2:1", "text": "I signed up for the pottery market in June."},
    {"speaker": "Ana", "dia_id": "D2:2", "text": "Then we need forty bowls.", "blip_caption": "bowls on a shelf"},
    {"speaker": "Ben", "dia_id": "D2:3", "text": "Thirty might do."}
   ],
   "session_3_date_time": "4:00 pm on 2 July, 2023"
  },
  "qa": [
   {"question": "What did Ana fix and when did Ben sign up?", "answer": "The kiln; May 2023", "evidence": ["D1:3; D2:1"], "category": 1},
   {"question": "Which year?", "answer": 2023, "evidence": ["D01:03"], "category": 2},
   {"question": "How many bowls?", "answer": "forty", "evidence": ["D:2:2", "D2:2", "D9:9", "D"], "category": 4},
   {"question": "What is the weather?", "answer": "unknown", "evidence": [], "category": 3},
   {"question": "What did Ben fix?", "adversarial_answer": "the kiln", "evidence": ["D1:3"], "category": 5}
  ],
  "event_summary": {"ignored": true},
  "observation": {},
  "session_summary": {}
 }
]`

func parseFixture(t *testing.T) Conversation {
	t.Helper()
	convs, err := Parse([]byte(fixture))
	require.NoError(t, err)
	require.Len(t, convs, 1)
	return convs[0]
}

func TestParse(t *testing.T) {
	c := parseFixture(t)
	assert.Equal(t, "t-1", c.ID)
	assert.Equal(t, "Ana", c.SpeakerA)
	assert.Equal(t, "Ben", c.SpeakerB)
	assert.Equal(t, 10, c.Turns())

	// Sessions in numeric order; the date with no session is ignored.
	require.Len(t, c.Sessions, 3)
	for i, want := range []struct {
		number int
		at     time.Time
		turns  int
	}{
		{1, time.Date(2023, time.May, 8, 13, 56, 0, 0, time.UTC), 5},
		{2, time.Date(2023, time.May, 20, 9, 5, 0, 0, time.UTC), 3},
		{10, time.Date(2023, time.June, 1, 0, 6, 0, 0, time.UTC), 2},
	} {
		s := c.Sessions[i]
		assert.Equal(t, want.number, s.Number, "session %d", i)
		assert.Equal(t, want.at, s.Time, "session %d", i)
		assert.Len(t, s.Turns, want.turns, "session %d", i)
	}
	// The image fields are ignored: the turn is its text.
	assert.Equal(t, Turn{ID: "D1:3", Speaker: "Ana", Text: "A relay in the controller; I swapped it myself."}, c.Sessions[0].Turns[2])

	tests := []struct {
		question   int
		answer     string
		category   int
		evidence   []string
		normalised []string
		dropped    []string
	}{
		{0, "The kiln; May 2023", CategoryMultiHop, []string{"D1:3", "D2:1"}, nil, nil},
		{1, "2023", CategoryTemporal, []string{"D1:3"}, []string{"D01:03"}, nil},
		{2, "forty", CategorySingleHop, []string{"D2:2"}, []string{"D:2:2"}, []string{"D9:9", "D"}},
		{3, "unknown", CategoryOpenDomain, nil, nil, nil},
		{4, "the kiln", CategoryAdversarial, []string{"D1:3"}, nil, nil},
	}
	require.Len(t, c.Questions, len(tests))
	for _, tt := range tests {
		q := c.Questions[tt.question]
		assert.Equal(t, tt.answer, q.Answer, "question %d", tt.question)
		assert.Equal(t, tt.category, q.Category, "question %d", tt.question)
		assert.Equal(t, tt.evidence, q.Evidence, "question %d: evidence", tt.question)
		assert.Equal(t, tt.normalised, q.Normalised, "question %d: normalised", tt.question)
		assert.Equal(t, tt.dropped, q.Dropped, "question %d: dropped", tt.question)
	}

	turn, ok := c.Turn("d10:02")
	assert.True(t, ok)
	assert.Equal(t, "Celadon again?", turn.Text)
	_, ok = c.Turn("D3:1")
	assert.False(t, ok)
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, old, new, want string
	}{
		{"not JSON", "[", "{", "not a JSON list of samples"},
		{"no sample id", `"sample_id": "t-1"`, `"sample_id": ""`, "sample #1: no sample_id"},
		{"no speaker", `"speaker_b": "Ben",`, ``, "sample t-1: conversation has no speaker_b"},
		{"same speakers", `"speaker_b": "Ben"`, `"speaker_b": "Ana"`, `speakers "Ana" and "Ana"`},
		{"session without a date", `"session_2_date_time": "9:05 am on 20 May, 2023",`, ``, "conversation has no session_2_date_time"},
		{"bad date", `9:05 am on 20 May, 2023`, `20 May 2023`, `session_2_date_time: session date "20 May 2023"`},
		{"stranger", `{"speaker": "Ben", "dia_id": "D2:3"`, `{"speaker": "Cy", "dia_id": "D2:3"`, `session_2 turn 3 (D2:3): speaker "Cy" is neither "Ana" nor "Ben"`},
		{"no dia_id", `"dia_id": "D2:3"`, `"dia_id": " "`, "session_2 turn 3: no dia_id"},
		{"duplicate dia_id", `"dia_id": "D2:3"`, `"dia_id": "D2:02"`, `dia_id "D2:2": two turns have this id`},
		{"bad category", `"category": 3}`, `"category": 6}`, "qa 4: category 6: want 1 to 5"},
		{"session not a list", `"session_10": [`, `"session_10": {"x": [`, "session_10:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, fixture, tt.old)
			data := strings.Replace(fixture, tt.old, tt.new, 1)
			if tt.name == "session not a list" {
				data = strings.Replace(data, `"Celadon again?"}
   ],`, `"Celadon again?"}
   ]},`, 1)
			}
			_, err := Parse([]byte(data))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.json")
	require.NoError(t, os.WriteFile(path, []byte(fixture), 0o600))
	convs, err := Load(path)
	require.NoError(t, err)
	assert.Len(t, convs, 1)

	_, err = Load(filepath.Join(t.TempDir(), "missing.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, os.WriteFile(path, []byte("{}"), 0o600))
	_, err = Load(path)
	assert.ErrorContains(t, err, path+": locomo: not a JSON list")
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
	}{
		{"1:56 pm on 8 May, 2023", time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)},
		{"10:04 am on 19 December, 2023", time.Date(2023, 12, 19, 10, 4, 0, 0, time.UTC)},
		{"12:06 am on 11 November, 2022", time.Date(2022, 11, 11, 0, 6, 0, 0, time.UTC)},
		{"12:30 pm on 1 January, 2024", time.Date(2024, 1, 1, 12, 30, 0, 0, time.UTC)},
		{"9:27 am on 7 February, 2022", time.Date(2022, 2, 7, 9, 27, 0, 0, time.UTC)},
		{"  7:31 PM  on 21 january 2022 ", time.Date(2022, 1, 21, 19, 31, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in)
		require.NoError(t, err, "%q", tt.in)
		assert.Equal(t, tt.want, got, "%q", tt.in)
	}
	for _, bad := range []string{"", "8 May 2023", "13:56 pm on 8 May, 2023", "1:56 pm on 31 February, 2023",
		"1:56 pm at 8 May, 2023", "1:56 on 8 May, 2023", "1:56 pm on 8 Mayo, 2023"} {
		_, err := ParseTime(bad)
		assert.Error(t, err, "%q", bad)
	}
	assert.Equal(t, "1:56 pm on 8 May, 2023", FormatTime(tests[0].want))
	assert.Equal(t, "12:06 am on 11 November, 2022", FormatTime(tests[2].want))
}

// devSet is the development set, relative to the repository root (this
// package is three levels below it).
const devSet = "../../../../shared/locomo/locomo10-dev.json"

// Every session date in the development set parses, and formats back to
// the text it was read from: the parser knows every form the data uses.
func TestParseTimeDevSet(t *testing.T) {
	data, err := os.ReadFile(devSet)
	if os.IsNotExist(err) {
		t.Skipf("no development set at %s", devSet)
	}
	require.NoError(t, err)
	var samples []struct {
		Conversation map[string]json.RawMessage `json:"conversation"`
	}
	require.NoError(t, json.Unmarshal(data, &samples))
	key := regexp.MustCompile(`^session_[0-9]+_date_time$`)
	n := 0
	for _, s := range samples {
		for k, raw := range s.Conversation {
			if !key.MatchString(k) {
				continue
			}
			var date string
			require.NoError(t, json.Unmarshal(raw, &date), k)
			at, err := ParseTime(date)
			require.NoError(t, err, "%s", k)
			assert.Equal(t, date, FormatTime(at), k)
			n++
		}
	}
	assert.Positive(t, n)
	_, err = Load(devSet)
	assert.NoError(t, err, "the whole development set parses")
}

func TestNormaliseID(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"D1:3", "D1:3", true},
		{" D1:3 ", "D1:3", true},
		{"d1:3", "D1:3", true},
		{"D01:003", "D1:3", true},
		{"D:11:26", "D11:26", true},
		{"D 2 : 7", "D2:7", true},
		{"D10:0", "D10:0", true},
		{"D", "", false},
		{"D1", "", false},
		{"1:3", "", false},
		{"D1:3:4", "", false},
		{"S1:3", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := NormaliseID(tt.in)
		assert.Equal(t, tt.ok, ok, "%q", tt.in)
		assert.Equal(t, tt.want, got, "%q", tt.in)
	}
}

func TestCategoryLabel(t *testing.T) {
	want := []string{"multi-hop", "temporal", "open-domain", "single-hop", "adversarial"}
	for i, c := range Categories {
		assert.Equal(t, want[i], CategoryLabel(c))
	}
	assert.Equal(t, "category 9", CategoryLabel(9))
}

func TestMarshalRoundTrip(t *testing.T) {
	c := parseFixture(t)
	data, err := Marshal([]Conversation{c})
	require.NoError(t, err)
	back, err := Parse(data)
	require.NoError(t, err)
	require.Len(t, back, 1)
	b := back[0]
	assert.Equal(t, c.Sessions, b.Sessions)
	require.Len(t, b.Questions, len(c.Questions))
	for i := range c.Questions {
		want := c.Questions[i]
		want.Normalised, want.Dropped = nil, nil
		assert.Equal(t, want, b.Questions[i], "question %d", i)
	}
}
