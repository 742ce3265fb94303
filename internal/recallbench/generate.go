package recallbench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultSessions        = 10
	DefaultTurnsPerSession = 30
	DefaultFactsPerSession = 2
	DefaultUpdates         = 2
)

// Start is the time of the first turn of every generated conversation;
// sessions are a week apart, turns two minutes apart, and the questions
// are asked a week after the last session.
var Start = time.Date(2026, time.January, 5, 9, 0, 0, 0, time.UTC)

// Session spacing (see Start).
const (
	SessionGap = 7 * 24 * time.Hour
	TurnGap    = 2 * time.Minute
)

// ErrInvalidConfig is wrapped by Generate's errors about a bad Config.
var ErrInvalidConfig = errors.New("recallbench: invalid config")

// Config says what conversation Generate makes. The zero value of a field
// means its default.
type Config struct {
	// Seed seeds the generator (a PCG); the same Config always gives the
	// same conversation.
	Seed uint64
	// Sessions is the number of sessions (default DefaultSessions).
	Sessions int
	// TurnsPerSession is the number of turns of each session (default
	// DefaultTurnsPerSession).
	TurnsPerSession int
	// FactsPerSession is how many facts each session plants (default
	// DefaultFactsPerSession). Each fact is of a different kind; there are
	// Kinds() kinds, so Sessions × FactsPerSession may not exceed it.
	FactsPerSession int
	// Updates is how many planted facts a later session changes ("we moved
	// again"); their question asks for the new value (default
	// DefaultUpdates; -1 for none). Only a fact planted before the last
	// session, of a kind that can change, is updated.
	Updates int
}

// Kinds returns how many kinds of fact the generator knows.
func Kinds() int { return len(factKinds) }

// withDefaults returns c with its defaults applied, or an error naming
// the bad field.
func (c Config) withDefaults() (Config, error) {
	def := func(v *int, d int, name string) error {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			return fmt.Errorf("%w: %s is %d; it must be positive (0 for the default %d)", ErrInvalidConfig, name, *v, d)
		}
		return nil
	}
	if err := errors.Join(
		def(&c.Sessions, DefaultSessions, "Sessions"),
		def(&c.TurnsPerSession, DefaultTurnsPerSession, "TurnsPerSession"),
		def(&c.FactsPerSession, DefaultFactsPerSession, "FactsPerSession"),
	); err != nil {
		return c, err
	}
	switch {
	case c.Updates == 0:
		c.Updates = DefaultUpdates
	case c.Updates == -1:
		c.Updates = 0
	case c.Updates < -1:
		return c, fmt.Errorf("%w: Updates is %d; use -1 for none, 0 for the default %d", ErrInvalidConfig, c.Updates, DefaultUpdates)
	}
	if n := c.Sessions * c.FactsPerSession; n > len(factKinds) {
		return c, fmt.Errorf("%w: %d sessions × %d facts per session = %d facts, but there are only %d kinds of fact",
			ErrInvalidConfig, c.Sessions, c.FactsPerSession, n, len(factKinds))
	}
	if c.FactsPerSession+c.Updates > c.TurnsPerSession {
		return c, fmt.Errorf("%w: %d turns per session cannot hold %d facts and %d updates",
			ErrInvalidConfig, c.TurnsPerSession, c.FactsPerSession, c.Updates)
	}
	return c, nil
}

// Turn is one exchange of the conversation: the user's message and the
// assistant's answer.
type Turn struct {
	// Index is the turn's position in the conversation, from 0.
	Index int
	// Session is the session the turn belongs to, from 0.
	Session int
	// Time is when the turn happens (see Start).
	Time time.Time
	// Human and AI are the two messages.
	Human, AI string
	// Kind is the kind of fact the turn plants ("sister", "budget"...),
	// "" for filler.
	Kind string
	// Value is the value of the planted fact, "" for filler.
	Value string
}

// Evidence is one turn a question's answer rests on.
type Evidence struct {
	// Turn is the evidence turn's index.
	Turn int
	// Value is the fact's value as the turn states it: a loaded context
	// that contains it (as a whole word, in any case) holds the evidence
	// even if it does not quote the turn (a fact layer shows values).
	Value string
}

// Question is one question asked after the last session.
type Question struct {
	// Text is the question (a paraphrase of the evidence, never a copy).
	Text string
	// Kind is the kind of fact it asks about.
	Kind string
	// Evidence lists the turns the answer rests on.
	Evidence []Evidence
}

// Conversation is a generated multi-session conversation with planted
// facts and the questions about them.
type Conversation struct {
	// Config is the configuration it was made with, defaults applied.
	Config Config
	// Turns are the turns, in order.
	Turns []Turn
	// Questions are asked after the last turn, in this order.
	Questions []Question
	// AskedAt is when the questions are asked: a week after the last
	// session started.
	AskedAt time.Time
}

// Generate makes the conversation cfg describes. It is deterministic: the
// same cfg gives the same conversation, byte for byte, on every platform.
//
// Each session is cfg.TurnsPerSession turns of filler chit-chat drawn from
// varied templates (weather, plans, cooking, work, money, travel...), with
// cfg.FactsPerSession facts planted at random turns, each of a kind used
// once (a sister's name, a budget, a move, a dog's name, an allergy, a
// decision...). Then cfg.Updates of the facts planted before the last
// session are changed in a later session. Each planted fact gets one
// question, asked after the last session; a changed fact's question asks
// for the current value and its evidence is the change's turn. The
// questions paraphrase their facts (see the rules in templates.go).
func Generate(cfg Config) (*Conversation, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6d656d737461636b)) // "memstack"
	pick := func(list []string) string { return list[rng.IntN(len(list))] }

	// Which kinds are planted in which session.
	kinds := rng.Perm(len(factKinds))[:cfg.Sessions*cfg.FactsPerSession]
	type plant struct {
		kind    int
		session int
		update  bool
		value   string
		extra   string
		turn    int
	}
	plants := make([]*plant, 0, len(kinds)+cfg.Updates)
	for i, k := range kinds {
		p := &plant{kind: k, session: i / cfg.FactsPerSession}
		p.value = pick(factKinds[k].values)
		if len(factKinds[k].extra) > 0 {
			p.extra = pick(factKinds[k].extra)
		}
		plants = append(plants, p)
	}
	var updatable []*plant
	for _, p := range plants {
		if factKinds[p.kind].update != nil && p.session < cfg.Sessions-1 {
			updatable = append(updatable, p)
		}
	}
	rng.Shuffle(len(updatable), func(i, j int) { updatable[i], updatable[j] = updatable[j], updatable[i] })
	updated := map[*plant]*plant{} // original → its update
	for _, orig := range updatable[:min(cfg.Updates, len(updatable))] {
		u := &plant{kind: orig.kind, update: true, extra: orig.extra}
		u.session = orig.session + 1 + rng.IntN(cfg.Sessions-1-orig.session)
		others := slices.DeleteFunc(slices.Clone(factKinds[orig.kind].values), func(v string) bool { return v == orig.value })
		u.value = pick(others)
		updated[orig] = u
		plants = append(plants, u)
	}

	// Where each plant goes within its session.
	bySession := make([][]*plant, cfg.Sessions)
	for _, p := range plants {
		bySession[p.session] = append(bySession[p.session], p)
	}
	conv := &Conversation{Config: cfg}
	for s := range cfg.Sessions {
		slots := rng.Perm(cfg.TurnsPerSession)[:len(bySession[s])]
		at := make(map[int]*plant, len(slots))
		for i, p := range bySession[s] {
			p.turn = s*cfg.TurnsPerSession + slots[i]
			at[slots[i]] = p
		}
		for t := range cfg.TurnsPerSession {
			turn := Turn{
				Index:   s*cfg.TurnsPerSession + t,
				Session: s,
				Time:    Start.Add(time.Duration(s)*SessionGap + time.Duration(t)*TurnGap),
			}
			if p := at[t]; p != nil {
				k := &factKinds[p.kind]
				say, ack := k.say, k.ack
				if p.update {
					say, ack = k.update.say, k.update.ack
				}
				r := strings.NewReplacer("{v}", p.value, "{x}", p.extra)
				turn.Human, turn.AI = r.Replace(pick(say)), r.Replace(pick(ack))
				turn.Kind, turn.Value = k.name, p.value
			} else {
				turn.Human, turn.AI = filler(rng)
			}
			if rng.IntN(2) == 0 {
				turn.AI += " " + closers[rng.IntN(len(closers))]
			}
			conv.Turns = append(conv.Turns, turn)
		}
	}

	// One question per planted fact that no update replaced, asked in a
	// random order.
	for _, p := range plants {
		if _, stale := updated[p]; stale {
			continue
		}
		k := &factKinds[p.kind]
		ask := k.ask
		if p.update {
			ask = k.update.ask
		}
		text := strings.NewReplacer("{x}", p.extra).Replace(pick(ask))
		conv.Questions = append(conv.Questions, Question{
			Text:     text,
			Kind:     k.name,
			Evidence: []Evidence{{Turn: p.turn, Value: p.value}},
		})
	}
	rng.Shuffle(len(conv.Questions), func(i, j int) {
		conv.Questions[i], conv.Questions[j] = conv.Questions[j], conv.Questions[i]
	})
	conv.AskedAt = Start.Add(time.Duration(cfg.Sessions) * SessionGap)
	return conv, nil
}

// filler returns one turn of chit-chat.
func filler(rng *rand.Rand) (human, ai string) {
	topic := fillerTopics[rng.IntN(len(fillerTopics))]
	pair := topic[rng.IntN(len(topic))]
	return fillSlots(rng, pair[0]), fillSlots(rng, pair[1])
}

// fillSlots replaces every {slot} of s with a word of fillerSlots.
func fillSlots(rng *rand.Rand, s string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		words := fillerSlots[s[i+1:i+j]]
		if len(words) == 0 {
			b.WriteString(s[i : i+j+1]) // unknown slot: left as written
		} else {
			b.WriteString(words[rng.IntN(len(words))])
		}
		s = s[i+j+1:]
	}
}

// ContainsWord reports whether text contains word as a whole word (or
// phrase), ignoring case: the match must not be preceded or followed by a
// letter or digit, so "Ana" is not found in "banana".
func ContainsWord(text, word string) bool {
	if word == "" {
		return false
	}
	lt, lw := strings.ToLower(text), strings.ToLower(word)
	for from := 0; ; {
		i := strings.Index(lt[from:], lw)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(lw)
		if !wordByte(lt, start-1) && !wordByte(lt, end) {
			return true
		}
		from = start + 1
	}
}

// wordByte reports whether s[i] exists and is an ASCII letter or digit,
// or part of a multi-byte (non-ASCII) character, which is counted as a
// letter.
func wordByte(s string, i int) bool {
	if i < 0 || i >= len(s) {
		return false
	}
	c := s[i]
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
