package locomo

import (
	"fmt"
	"time"
)

// Exchange is what one SaveContext saves: a speaker_a turn as the input and
// the speaker_b turn that answers it as the output. One side may be empty
// (see Exchanges).
type Exchange struct {
	// Input is speaker_a's text ("" when the exchange has only an output).
	Input string
	// Output is speaker_b's text ("" when the exchange has only an input).
	Output string
	// InputID and OutputID are the turns' IDs ("" for a missing side).
	InputID, OutputID string
	// Session is the session's number.
	Session int
	// Time is when the exchange was said: its session's date plus one
	// second per exchange before it in the session.
	Time time.Time
}

// Messages is the number of messages an exchange saves: always two, the
// input and the output (an empty side is saved as an empty message).
const Messages = 2

// Exchanges pairs c's turns, session by session: each speaker_a turn with
// the speaker_b turn right after it. A speaker_b turn with no speaker_a turn
// before it (a session that opens with speaker_b, or two speaker_b turns in
// a row) is an exchange with an empty input; a speaker_a turn followed by
// another speaker_a turn or ending its session is an exchange with an empty
// output. Exchanges never span sessions.
func (c *Conversation) Exchanges() []Exchange {
	var out []Exchange
	for _, s := range c.Sessions {
		n := 0
		add := func(e Exchange) {
			e.Session = s.Number
			e.Time = s.Time.Add(time.Duration(n) * time.Second)
			n++
			out = append(out, e)
		}
		turns := s.Turns
		for i := 0; i < len(turns); i++ {
			t := turns[i]
			if t.Speaker != c.SpeakerA {
				add(Exchange{Output: t.Text, OutputID: t.ID})
				continue
			}
			e := Exchange{Input: t.Text, InputID: t.ID}
			if i+1 < len(turns) && turns[i+1].Speaker == c.SpeakerB {
				i++
				e.Output, e.OutputID = turns[i].Text, turns[i].ID
			}
			add(e)
		}
	}
	return out
}

// Repeat returns a long history for a speed test: exactly ceil(messages/2)
// exchanges (messages messages, see Messages) made of the conversations'
// exchanges one conversation after another, cycling through convs as many
// times as it takes, and ending with the last conversation whole, so that
// its questions can be asked after it. The first conversation in the
// history is cut at the front to make the count exact. Dates are shifted
// so that they keep increasing: each conversation starts a day after the
// one before it ended, its own spacing kept. messages must leave room for
// the last conversation whole.
func Repeat(convs []Conversation, messages int) ([]Exchange, error) {
	if len(convs) == 0 {
		return nil, fmt.Errorf("locomo: Repeat: no conversations")
	}
	want := (messages + Messages - 1) / Messages
	per := make([][]Exchange, len(convs))
	total := 0
	for i := range convs {
		per[i] = convs[i].Exchanges()
		total += len(per[i])
	}
	last := len(per[len(per)-1])
	if total == 0 {
		return nil, fmt.Errorf("locomo: Repeat: the conversations have no turns")
	}
	if want < last {
		return nil, fmt.Errorf("locomo: Repeat(%d messages): the last conversation alone has %d messages", messages, last*Messages)
	}
	// Choose the conversations from the end: the last one, the one before
	// it, ... cycling, until there are enough exchanges.
	var chain [][]Exchange
	have := 0
	for i := len(per) - 1; have < want; i = (i - 1 + len(per)) % len(per) {
		chain = append(chain, per[i])
		have += len(per[i])
	}
	out := make([]Exchange, 0, want)
	var end time.Time
	for j := len(chain) - 1; j >= 0; j-- {
		exs := chain[j]
		if j == len(chain)-1 {
			exs = exs[have-want:] // the oldest is cut at the front
		}
		if len(exs) == 0 {
			continue
		}
		shift := time.Duration(0)
		if !end.IsZero() {
			shift = end.Add(24 * time.Hour).Sub(exs[0].Time)
		}
		for _, e := range exs {
			e.Time = e.Time.Add(shift)
			out = append(out, e)
		}
		end = out[len(out)-1].Time
	}
	return out, nil
}
