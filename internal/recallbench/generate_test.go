package recallbench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGenerateIsDeterministic(t *testing.T) {
	a, err := Generate(Config{Seed: 7})
	require.NoError(t, err)
	b, err := Generate(Config{Seed: 7})
	require.NoError(t, err)
	assert.Equal(t, a, b, "the same seed gives the same conversation")

	c, err := Generate(Config{Seed: 8})
	require.NoError(t, err)
	assert.NotEqual(t, a.Turns, c.Turns, "another seed gives another conversation")
}

// A fixed fingerprint of seed 1: any change to the generator or its
// material changes the published benchmark, and must be deliberate.
func TestGenerateSeedOneFingerprint(t *testing.T) {
	conv, err := Generate(Config{Seed: 1})
	require.NoError(t, err)
	require.Len(t, conv.Turns, 300)
	require.Len(t, conv.Questions, 20)
	assert.Equal(t, "I have to pick up a parcel from the library on Friday.", conv.Turns[0].Human)
	assert.Equal(t, "Remind me, what is my sister's name?", conv.Questions[0].Text)
	assert.Equal(t, []Evidence{{Turn: 225, Value: "Sofia"}}, conv.Questions[0].Evidence)
	assert.Equal(t, []Evidence{{Turn: 176, Value: "Waffles"}}, conv.Questions[15].Evidence)
	assert.Equal(t, "We adopted a rescue dog last spring and named him Waffles.", conv.Turns[176].Human)
}

func TestGenerateShape(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		// want: sessions, turns per session, questions, and at most
		// maxUpdates changed facts (only kinds that can change, planted
		// before the last session, are changed)
		sessions, turns, questions, maxUpdates int
	}{
		{"defaults", Config{Seed: 1}, 10, 30, 20, 2},
		{"two sessions", Config{Seed: 2, Sessions: 2}, 2, 30, 4, 2},
		{"one session: nothing to update", Config{Seed: 3, Sessions: 1}, 1, 30, 2, 0},
		{"no updates", Config{Seed: 4, Updates: -1}, 10, 30, 20, 0},
		{"dense", Config{Seed: 5, Sessions: 4, TurnsPerSession: 6, FactsPerSession: 3, Updates: 3}, 4, 6, 12, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conv, err := Generate(tt.cfg)
			require.NoError(t, err)
			require.Len(t, conv.Turns, tt.sessions*tt.turns)
			assert.Len(t, conv.Questions, tt.questions)
			planted, perKind := 0, map[string]int{}
			for i, turn := range conv.Turns {
				assert.Equal(t, i, turn.Index)
				assert.Equal(t, i/tt.turns, turn.Session)
				assert.Equal(t, Start.Add(SessionGap*time.Duration(turn.Session)+TurnGap*time.Duration(i%tt.turns)), turn.Time)
				assert.NotEmpty(t, turn.Human)
				assert.NotEmpty(t, turn.AI)
				assert.NotContains(t, turn.Human+turn.AI, "{", "turn %d has an unfilled slot", i)
				if turn.Kind != "" {
					planted++
					perKind[turn.Kind]++
				}
			}
			updates := 0
			for kind, n := range perKind {
				assert.LessOrEqual(t, n, 2, "kind %s planted %d times", kind, n)
				updates += n - 1
			}
			assert.LessOrEqual(t, updates, tt.maxUpdates)
			assert.Equal(t, tt.questions+updates, planted, "one question per fact, changed facts asked once")
			assert.Equal(t, Start.Add(SessionGap*time.Duration(tt.sessions)), conv.AskedAt)

			// Every question has one evidence turn: the newest turn that
			// planted its kind, which states the value.
			kinds := map[string]bool{}
			for _, q := range conv.Questions {
				require.Len(t, q.Evidence, 1)
				ev := q.Evidence[0]
				turn := conv.Turns[ev.Turn]
				assert.Equal(t, q.Kind, turn.Kind, "question %q", q.Text)
				assert.Equal(t, turn.Value, ev.Value)
				assert.True(t, ContainsWord(turn.Human, ev.Value), "evidence turn %d states %q", ev.Turn, ev.Value)
				for _, later := range conv.Turns[ev.Turn+1:] {
					assert.NotEqual(t, q.Kind, later.Kind, "a later turn changes the %s fact: it would be the evidence", q.Kind)
				}
				assert.False(t, kinds[q.Kind], "one question per kind")
				kinds[q.Kind] = true
			}
		})
	}
}

// The rule the scorer rests on: a question's value occurs, as a whole word,
// in its evidence turn and nowhere else — not in filler, not in another
// fact's turns, not in the question.
func TestGenerateValuesOnlyInEvidence(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		conv, err := Generate(Config{Seed: seed})
		require.NoError(t, err)
		for _, q := range conv.Questions {
			ev := q.Evidence[0]
			assert.False(t, ContainsWord(q.Text, ev.Value), "seed %d: question %q gives its value away", seed, q.Text)
			for _, turn := range conv.Turns {
				if turn.Index == ev.Turn {
					continue
				}
				if ContainsWord(turn.Human, ev.Value) || ContainsWord(turn.AI, ev.Value) {
					t.Errorf("seed %d: value %q of question %q occurs in turn %d (%s), not its evidence turn %d",
						seed, ev.Value, q.Text, turn.Index, turn.Kind, ev.Turn)
				}
				if strings.Contains(turn.Human, q.Text) {
					t.Errorf("seed %d: question %q copies turn %d", seed, q.Text, turn.Index)
				}
			}
		}
	}
}

// Every template of the material is well formed: statements carry the
// value, questions never do, and every {slot} is known.
func TestMaterial(t *testing.T) {
	names := map[string]bool{}
	values := map[string]string{}
	for _, k := range factKinds {
		assert.False(t, names[k.name], "kind %s twice", k.name)
		names[k.name] = true
		assert.NotEmpty(t, k.values, k.name)
		for _, v := range k.values {
			if other, dup := values[strings.ToLower(v)]; dup {
				t.Errorf("value %q is used by %s and %s", v, other, k.name)
			}
			values[strings.ToLower(v)] = k.name
		}
		says, asks := k.say, k.ask
		if k.update != nil {
			says = append(append([]string{}, says...), k.update.say...)
			asks = append(append([]string{}, asks...), k.update.ask...)
			assert.NotEmpty(t, k.update.ack, k.name)
		}
		for _, s := range says {
			assert.Contains(t, s, "{v}", "%s: a statement must state the value", k.name)
		}
		for _, q := range asks {
			assert.NotContains(t, q, "{v}", "%s: a question must not contain the value", k.name)
			assert.True(t, strings.HasSuffix(q, "?"), "%s: %q is not a question", k.name, q)
		}
		for _, s := range append(append(append([]string{}, says...), asks...), k.ack...) {
			if strings.Contains(s, "{x}") {
				assert.NotEmpty(t, k.extra, "%s uses {x} without extras", k.name)
			}
		}
	}
	for _, topic := range fillerTopics {
		for _, pair := range topic {
			for _, s := range pair {
				for rest := s; ; {
					i := strings.IndexByte(rest, '{')
					if i < 0 {
						break
					}
					j := strings.IndexByte(rest[i:], '}')
					require.Positive(t, j, "unclosed slot in %q", s)
					slot := rest[i+1 : i+j]
					assert.NotEmpty(t, fillerSlots[slot], "unknown slot {%s} in %q", slot, s)
					rest = rest[i+j+1:]
				}
			}
		}
	}
	assert.GreaterOrEqual(t, Kinds(), DefaultSessions*DefaultFactsPerSession)
}

func TestGenerateRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"negative sessions", Config{Sessions: -1}, "Sessions is -1"},
		{"negative turns", Config{TurnsPerSession: -3}, "TurnsPerSession is -3"},
		{"negative facts", Config{FactsPerSession: -2}, "FactsPerSession is -2"},
		{"bad updates", Config{Updates: -2}, "Updates is -2"},
		{"more facts than kinds", Config{Sessions: 20, FactsPerSession: 2}, "only"},
		{"turns too few", Config{TurnsPerSession: 3, FactsPerSession: 2, Updates: 2}, "3 turns per session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Generate(tt.cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestContainsWord(t *testing.T) {
	tests := []struct {
		text, word string
		want       bool
	}{
		{"my name is Ana", "Ana", true},
		{"banana bread", "Ana", false},
		{"ANA is here", "ana", true},
		{"the budget is 4,200 euros.", "4,200 euros", true},
		{"the budget is 14,200 euros", "4,200 euros", false},
		{"level 4B of the garage", "level 4B", true},
		{"level 4BC", "level 4B", false},
		{"Ana, banana", "ana", true}, // second occurrence is whole
		{"bananas and Ana", "ana", true},
		{"São Paulo", "Paulo", true},
		{"", "x", false},
		{"anything", "", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ContainsWord(tt.text, tt.word), "%q in %q", tt.word, tt.text)
	}
}
