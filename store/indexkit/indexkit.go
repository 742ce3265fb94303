// Package indexkit is the recall index a store keeps beside its messages,
// for store backends that search in the database (sqlitestore, pgstore):
// what an Append writes with its messages, in the same transaction, and
// how a search scores what it reads back. Any process reading the
// database searches what every process saved: no replica builds an index
// of its own.
//
// # The ranking
//
// A search ranks a scope's units exactly as retrieval.BM25 with
// retrieval.WithNeighbourWeights ranks the docs memories.Recall gives it:
// Okapi BM25 over retrieval.Tokenize's terms (the tokenizer is shared:
// internal/lexical), each unit scored with the words of the units next to
// it in its conversation at the neighbour weights, df counting the units a
// term's words reach, lengths weighted the same way, and scores divided by
// the query's supremum (see retrieval.BM25). For one conversation the
// scores are those of retrieval.BM25 fed the conversation's units; over a
// scope of many conversations a unit's neighbours are those of its own
// conversation (an in-process index of a user's scope keeps one order
// for all, so its units at a conversation's ends also take words from
// another conversation's), as if each unit were given to retrieval.BM25
// with its neighbours as explicit Context. Tests check both against
// retrieval.BM25.
//
// # What is stored
//
// Units are memories.Recall's (RecallTurns or RecallExchanges; system
// messages belong to none). Both kinds are kept, so a Recall of either
// unit searches the same rows. Per conversation:
//
//   - Conv: a small state, rewritten by each append (the counts, the
//     last units' lengths, the sums a mean length needs).
//   - Unit entries, one per non-system message (its Seq, its turn's and
//     exchange's ordinal in the conversation, its number of terms),
//     appended to chunk rows of ChunkSize messages.
//   - Postings, one per (message, term): the message's Seq and the term's
//     count, appended to (term, chunk) rows.
//
// A store appends encoded entries to the row's value (SQL's ||), so an
// append writes O(its messages' terms) bytes, never a whole list. A search
// reads the Conv of every conversation of the scope (the scope's unit
// count and mean length), the postings of the query's terms, and the unit
// entries of the conversations they name, and scores in Go (Search):
// every unit the terms reach is counted (BM25's document frequencies need
// them all), but only the conversations whose bound — each term at its
// largest count there, the shortest unit's length — can beat the K hits
// kept so far are scored, best bound first.
// Removing a prefix (retention) filters the chunks it reaches and
// recomputes the Conv from the remaining entries (Rebuild).
package indexkit

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/internal/lexical"
	"github.com/tmc/langchaingo/llms"
)

// BM25 parameters: retrieval.BM25K1 and retrieval.BM25B (a test checks
// they agree).
const (
	k1 = 1.2
	b  = 0.75
)

// ChunkSize is how many messages' entries one chunk row holds.
const ChunkSize = 128

// Kind is a kind of unit: memories.RecallTurns or RecallExchanges.
type Kind int

// The kinds of unit.
const (
	// Turns: a human message, or an AI message with the tool and
	// function results after it (conv.OpensTurn).
	Turns Kind = iota
	// Exchanges: a human message and every message up to the next one
	// (conv.OpensExchange).
	Exchanges
)

// String returns "turns" or "exchanges".
func (k Kind) String() string {
	if k == Exchanges {
		return "exchanges"
	}
	return "turns"
}

func (k Kind) valid() bool { return k == Turns || k == Exchanges }

// Message is one message as the index sees it: prepared (Prepare) before
// the store's transaction, so tokenising costs no time under its lock.
type Message struct {
	System bool
	Opens  [2]bool // opens a unit of each Kind
	Len    int32   // its number of terms
	Terms  []TermTF
}

// TermTF is a distinct term of a message and how often it occurs.
type TermTF struct {
	Term string
	TF   int32
}

// Prepare tokenises msgs (retrieval.Tokenize of each message's content)
// for Conv.Add.
func Prepare(msgs []llms.ChatMessage) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		if conv.IsSystem(m) {
			out[i].System = true
			continue
		}
		out[i].Opens = [2]bool{conv.OpensTurn(m), conv.OpensExchange(m)}
		var text string
		if m != nil {
			text = m.GetContent()
		}
		terms := lexical.Tokenize(text)
		for j, t := range terms {
			terms[j] = termKey(t)
		}
		out[i].Len = int32(len(terms))
		if len(terms) == 0 {
			continue
		}
		slices.Sort(terms)
		for j := 0; j < len(terms); {
			k := j + 1
			for k < len(terms) && terms[k] == terms[j] {
				k++
			}
			out[i].Terms = append(out[i].Terms, TermTF{terms[j], int32(k - j)})
			j = k
		}
	}
	return out
}

// maxTermKey is the longest term stored as it is; a longer one (a run of
// letters and digits of more than 128 bytes: a hash, a base64 blob) is
// stored as "#" and its SHA-256, which no term of Tokenize starts with, so
// a row key stays small and the ranking unchanged (the same term, the same
// key).
const maxTermKey = 128

func termKey(t string) string {
	if len(t) <= maxTermKey {
		return t
	}
	h := sha256.Sum256([]byte(t))
	return "#" + hex.EncodeToString(h[:])
}

// QueryTerms returns the distinct terms of a query, sorted: what Search
// takes.
func QueryTerms(text string) []string {
	terms := lexical.Tokenize(text)
	for j, t := range terms {
		terms[j] = termKey(t)
	}
	slices.Sort(terms)
	return slices.Compact(terms)
}

// Conv is one conversation's index state.
type Conv struct {
	// Msgs counts the non-system messages ever indexed (a prefix removal
	// does not lower it): the next one's number, whose chunk is
	// Msgs/ChunkSize.
	Msgs int64
	K    [2]KindState
}

// KindState is a conversation's units of one Kind: their ordinals lie in
// [Lo, Hi] (none when Hi < Lo).
type KindState struct {
	Lo, Hi int32
	// Len1 and Len2 are the lengths of units Hi and Hi-1.
	Len1, Len2 int64
	// P0 is the units' total length; P1 the sum, over the pairs of units
	// one apart, of both lengths; P2 the same two apart. The units'
	// lengths with their neighbours' sum to P0 + w1·P1 + w2·P2.
	P0, P1, P2 int64
}

// NewConv returns the state of a conversation with nothing indexed.
func NewConv() Conv {
	return Conv{K: [2]KindState{{Lo: 1}, {Lo: 1}}}
}

// Units returns how many units of kind k the conversation has.
func (c Conv) Units(k Kind) int64 {
	s := c.K[k]
	if s.Hi < s.Lo {
		return 0
	}
	return int64(s.Hi) - int64(s.Lo) + 1
}

// Chunk is encoded entries to append to a chunk row.
type Chunk struct {
	Chunk int64
	Data  []byte
}

// TermChunk is encoded postings to append to a (term, chunk) row.
type TermChunk struct {
	Term  string
	Chunk int64
	Data  []byte
}

// Writes are the rows an Add appends to.
type Writes struct {
	Units []Chunk
	Terms []TermChunk
	// Opened are the messages that opened a unit, of either kind: the
	// store files them under their day (DayKey of their time) for dated
	// questions (AppendOpened, Opened).
	Opened []Opened
}

// Opened is a message that opened a unit of one kind or both: a unit's
// Seq, for the kinds it opened.
type Opened struct {
	Seq   int64
	Kinds [2]bool
}

// Entry sizes, in bytes.
const (
	unitEntrySize    = 8 + 4 + 4 + 4 // Seq, turn, exchange, length
	postingEntrySize = 8 + 4         // Seq, count
)

// Add indexes msgs, stored under seqs (increasing, after every Seq the
// conversation holds), updating c, and returns what to append to the
// chunk rows.
func (c *Conv) Add(seqs []int64, msgs []Message) (Writes, error) {
	if len(seqs) != len(msgs) {
		return Writes{}, fmt.Errorf("indexkit: %d Seqs for %d messages", len(seqs), len(msgs))
	}
	var w Writes
	at := map[[2]any]int{} // (term, chunk) → index in w.Terms
	for i, m := range msgs {
		if m.System {
			continue
		}
		chunk := c.Msgs / ChunkSize
		c.Msgs++
		var ords [2]int32
		var opened [2]bool
		for k := range c.K {
			s := &c.K[k]
			if s.Hi < s.Lo || m.Opens[k] {
				s.open()
				opened[k] = true
			}
			s.grow(int64(m.Len))
			ords[k] = s.Hi
		}
		if opened[0] || opened[1] {
			w.Opened = append(w.Opened, Opened{Seq: seqs[i], Kinds: opened})
		}
		if n := len(w.Units); n == 0 || w.Units[n-1].Chunk != chunk {
			w.Units = append(w.Units, Chunk{Chunk: chunk})
		}
		u := &w.Units[len(w.Units)-1]
		u.Data = appendUnitEntry(u.Data, seqs[i], ords, m.Len)
		for _, t := range m.Terms {
			key := [2]any{t.Term, chunk}
			j, ok := at[key]
			if !ok {
				j = len(w.Terms)
				at[key] = j
				w.Terms = append(w.Terms, TermChunk{Term: t.Term, Chunk: chunk})
			}
			w.Terms[j].Data = appendPosting(w.Terms[j].Data, seqs[i], t.TF)
		}
	}
	return w, nil
}

// open starts a new unit at Hi+1.
func (s *KindState) open() {
	if s.Hi < s.Lo {
		s.Lo, s.Hi, s.Len1, s.Len2 = s.Hi+1, s.Hi+1, 0, 0
		return
	}
	s.P1 += s.Len1 // the pair (Hi, Hi+1)
	if s.Hi-1 >= s.Lo {
		s.P2 += s.Len2 // the pair (Hi-1, Hi+1)
	}
	s.Hi++
	s.Len2, s.Len1 = s.Len1, 0
}

// grow adds n terms to unit Hi.
func (s *KindState) grow(n int64) {
	s.P0 += n
	if s.Hi-1 >= s.Lo {
		s.P1 += n
	}
	if s.Hi-2 >= s.Lo {
		s.P2 += n
	}
	s.Len1 += n
}

func appendUnitEntry(b []byte, seq int64, ords [2]int32, n int32) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(seq))
	b = binary.LittleEndian.AppendUint32(b, uint32(ords[0]))
	b = binary.LittleEndian.AppendUint32(b, uint32(ords[1]))
	return binary.LittleEndian.AppendUint32(b, uint32(n))
}

func appendPosting(b []byte, seq int64, tf int32) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(seq))
	return binary.LittleEndian.AppendUint32(b, uint32(tf))
}

// unitEntry is a decoded unit entry.
type unitEntry struct {
	seq  int64
	ords [2]int32
	n    int32
}

// posting is a decoded posting.
type posting struct {
	seq int64
	tf  int32
}

func decodeUnits(b []byte) ([]unitEntry, error) { return decodeUnitsInto(b, nil) }

// decodeUnitsInto decodes unit entries into dst's array, sorted by Seq.
func decodeUnitsInto(b []byte, dst []unitEntry) ([]unitEntry, error) {
	if len(b)%unitEntrySize != 0 {
		return nil, fmt.Errorf("indexkit: unit entries of %d bytes, not a multiple of %d", len(b), unitEntrySize)
	}
	out := slices.Grow(dst[:0], len(b)/unitEntrySize)[:len(b)/unitEntrySize]
	for i := range out {
		e := b[i*unitEntrySize:]
		out[i] = unitEntry{
			seq:  int64(binary.LittleEndian.Uint64(e)),
			ords: [2]int32{int32(binary.LittleEndian.Uint32(e[8:])), int32(binary.LittleEndian.Uint32(e[12:]))},
			n:    int32(binary.LittleEndian.Uint32(e[16:])),
		}
	}
	if !slices.IsSortedFunc(out, func(a, b unitEntry) int { return cmp.Compare(a.seq, b.seq) }) {
		slices.SortFunc(out, func(a, b unitEntry) int { return cmp.Compare(a.seq, b.seq) })
	}
	return out, nil
}

func decodePostings(b []byte, dst []posting) ([]posting, error) {
	if len(b)%postingEntrySize != 0 {
		return nil, fmt.Errorf("indexkit: postings of %d bytes, not a multiple of %d", len(b), postingEntrySize)
	}
	for i := 0; i < len(b); i += postingEntrySize {
		dst = append(dst, posting{int64(binary.LittleEndian.Uint64(b[i:])), int32(binary.LittleEndian.Uint32(b[i+8:]))})
	}
	return dst, nil
}

// DropThrough returns the entries of a chunk row's value — unit entries
// (postings false) or postings — whose Seq is greater than through: what
// a prefix removal leaves of the row (nil for nothing).
func DropThrough(data []byte, postings bool, through int64) ([]byte, error) {
	size := unitEntrySize
	if postings {
		size = postingEntrySize
	}
	if len(data)%size != 0 {
		return nil, fmt.Errorf("indexkit: a row of %d bytes, not a multiple of %d", len(data), size)
	}
	var out []byte
	for i := 0; i < len(data); i += size {
		if int64(binary.LittleEndian.Uint64(data[i:])) > through {
			out = append(out, data[i:i+size]...)
		}
	}
	return out, nil
}

// MaxSeq returns the greatest Seq among a unit chunk row's entries (0 for
// none).
func MaxSeq(units []byte) int64 {
	var m int64
	for i := 0; i+unitEntrySize <= len(units); i += unitEntrySize {
		m = max(m, int64(binary.LittleEndian.Uint64(units[i:])))
	}
	return m
}

// Rebuild recomputes a conversation's state from its remaining unit
// entries (every chunk row, concatenated), keeping msgs, the count of
// messages ever indexed: after a prefix removal.
func Rebuild(units []byte, msgs int64) (Conv, error) {
	es, err := decodeUnits(units)
	if err != nil {
		return Conv{}, err
	}
	c := NewConv()
	c.Msgs = msgs
	for k := range c.K {
		if len(es) == 0 {
			continue
		}
		lo, hi := es[0].ords[k], es[len(es)-1].ords[k]
		if lo < 1 || hi < lo || int64(hi)-int64(lo) >= int64(len(es)) {
			return Conv{}, fmt.Errorf("indexkit: unit entries with ordinals %d to %d for %d messages", lo, hi, len(es))
		}
		lens := make([]int64, int(hi-lo)+1)
		for _, e := range es {
			if o := e.ords[k]; o >= lo && o <= hi {
				lens[o-lo] += int64(e.n)
			}
		}
		s := KindState{Lo: lo, Hi: hi}
		for i, n := range lens {
			s.P0 += n
			if i >= 1 {
				s.P1 += n + lens[i-1]
			}
			if i >= 2 {
				s.P2 += n + lens[i-2]
			}
		}
		s.Len1 = lens[len(lens)-1]
		if len(lens) > 1 {
			s.Len2 = lens[len(lens)-2]
		}
		c.K[k] = s
	}
	return c, nil
}

// stateVersion is the first byte of an encoded Conv.
const stateVersion = 1

// MarshalBinary encodes c.
func (c Conv) MarshalBinary() ([]byte, error) {
	b := []byte{stateVersion}
	b = binary.AppendVarint(b, c.Msgs)
	for _, s := range c.K {
		for _, v := range []int64{int64(s.Lo), int64(s.Hi), s.Len1, s.Len2, s.P0, s.P1, s.P2} {
			b = binary.AppendVarint(b, v)
		}
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary encoded.
func (c *Conv) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != stateVersion {
		return fmt.Errorf("indexkit: a conversation state of unknown version")
	}
	b = b[1:]
	next := func() (int64, error) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, fmt.Errorf("indexkit: a truncated conversation state")
		}
		b = b[n:]
		return v, nil
	}
	var err error
	var x Conv
	if x.Msgs, err = next(); err != nil {
		return err
	}
	for k := range x.K {
		var v [7]int64
		for i := range v {
			if v[i], err = next(); err != nil {
				return err
			}
		}
		// Ordinals start at 1 and a conversation has at most a unit a
		// message; lengths and sums are counts.
		if v[0] < 1 || v[1] > math.MaxInt32 || v[0] > v[1]+1 || v[1]-v[0]+1 > x.Msgs || slices.ContainsFunc(v[2:], func(n int64) bool { return n < 0 }) {
			return fmt.Errorf("indexkit: a conversation state with ordinals [%d, %d] for %d messages, or a negative sum", v[0], v[1], x.Msgs)
		}
		x.K[k] = KindState{Lo: int32(v[0]), Hi: int32(v[1]), Len1: v[2], Len2: v[3], P0: v[4], P1: v[5], P2: v[6]}
	}
	if len(b) != 0 {
		return fmt.Errorf("indexkit: %d bytes after a conversation state", len(b))
	}
	*c = x
	return nil
}

// DayKey is t's calendar day in t's own location as one number,
// yyyymmdd: the key a store files units under for dated questions (a
// unit is on the day of its first message, as memories.Recall reads it).
// The zero time has none (0).
func DayKey(t time.Time) int32 {
	if t.IsZero() {
		return 0
	}
	y, m, d := t.Date()
	return int32(y*10000 + int(m)*100 + d)
}

// dayEntrySize is an opened unit's entry in a day row: its Seq and a byte
// of kinds (bit 0: a turn, bit 1: an exchange).
const dayEntrySize = 8 + 1

// AppendOpened appends the entry of o to a day row's value.
func AppendOpened(b []byte, o Opened) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(o.Seq))
	var k byte
	if o.Kinds[Turns] {
		k |= 1
	}
	if o.Kinds[Exchanges] {
		k |= 2
	}
	return append(b, k)
}

// OpenedSeqs returns the Seqs of the units of kind whose entries a day
// row's value holds.
func OpenedSeqs(b []byte, kind Kind) ([]int64, error) {
	if len(b)%dayEntrySize != 0 {
		return nil, fmt.Errorf("indexkit: a day row of %d bytes, not a multiple of %d", len(b), dayEntrySize)
	}
	var out []int64
	for i := 0; i < len(b); i += dayEntrySize {
		if b[i+8]&(1<<kind) != 0 {
			out = append(out, int64(binary.LittleEndian.Uint64(b[i:])))
		}
	}
	return out, nil
}

// FirstOpened returns the first unit of each kind of a conversation whose
// remaining unit entries (every chunk row, concatenated) are units, and
// state c: after a prefix removal that cut a unit, its first remaining
// message stands for it (as memories.Recall reads the messages) and is
// to be filed under its own day. ok is false when there are no units.
func FirstOpened(units []byte, c Conv) (o Opened, ok bool, err error) {
	es, err := decodeUnits(units)
	if err != nil || len(es) == 0 {
		return Opened{}, false, err
	}
	// Entries are in Seq order: the first is the first of its units.
	o.Seq = es[0].seq
	for k := range c.K {
		o.Kinds[k] = c.K[k].Hi >= c.K[k].Lo && es[0].ords[k] == c.K[k].Lo
	}
	return o, true, nil
}

// DaySeqs is how many Seqs one day row of a store covers (a row's chunk
// is Seq / DaySeqs), so an append never rewrites a long row: a
// conversation that saves thousands of turns a day has a row per DaySeqs
// of them.
const DaySeqs = 1024

// DayRow is what one append adds to one day row of a store: the entries
// (AppendOpened) of the units opened on Day whose Seqs fall in Chunk.
type DayRow struct {
	Day   int32
	Chunk int64
	Data  []byte
}

// DayRows files the units opened (Writes.Opened; their Seqs among seqs,
// whose times are at) under their days: the rows to append to, each
// once, in the order first met. A message with no time (stored before
// memstack recorded times) is filed under no day.
func DayRows(opened []Opened, seqs []int64, at []time.Time) []DayRow {
	type key struct {
		day   int32
		chunk int64
	}
	index := map[key]int{}
	var rows []DayRow
	j := 0
	for _, o := range opened {
		for j < len(seqs) && seqs[j] < o.Seq {
			j++
		}
		if j == len(seqs) || j >= len(at) {
			break
		}
		d := DayKey(at[j])
		if d == 0 {
			continue
		}
		k := key{d, o.Seq / DaySeqs}
		i, ok := index[k]
		if !ok {
			i = len(rows)
			index[k] = i
			rows = append(rows, DayRow{Day: d, Chunk: k.chunk})
		}
		rows[i].Data = AppendOpened(rows[i].Data, o)
	}
	return rows
}
