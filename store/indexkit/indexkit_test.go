package indexkit_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store/indexkit"
)

// rows is what a store would hold for one conversation: its state and
// its chunk rows, appended to as a store appends.
type rows struct {
	state indexkit.Conv
	units map[int64][]byte
	terms map[string]map[int64][]byte
	msgs  []rec // what is stored, for the reference
}

type rec struct {
	seq int64
	msg llms.ChatMessage
}

func newRows() *rows {
	return &rows{state: indexkit.NewConv(), units: map[int64][]byte{}, terms: map[string]map[int64][]byte{}}
}

func (r *rows) add(t testing.TB, seqs []int64, msgs []llms.ChatMessage) {
	w, err := r.state.Add(seqs, indexkit.Prepare(msgs))
	require.NoError(t, err)
	for _, u := range w.Units {
		r.units[u.Chunk] = append(r.units[u.Chunk], u.Data...)
	}
	for _, tc := range w.Terms {
		if r.terms[tc.Term] == nil {
			r.terms[tc.Term] = map[int64][]byte{}
		}
		r.terms[tc.Term][tc.Chunk] = append(r.terms[tc.Term][tc.Chunk], tc.Data...)
	}
	for i := range seqs {
		r.msgs = append(r.msgs, rec{seqs[i], msgs[i]})
	}
}

// removeThrough is a prefix removal as a store does it: non-system
// messages through seq go.
func (r *rows) removeThrough(t testing.TB, through int64) {
	for c, d := range r.units {
		out, err := indexkit.DropThrough(d, false, through)
		require.NoError(t, err)
		if len(out) == 0 {
			delete(r.units, c)
		} else {
			r.units[c] = out
		}
	}
	for term, m := range r.terms {
		for c, d := range m {
			out, err := indexkit.DropThrough(d, true, through)
			require.NoError(t, err)
			if len(out) == 0 {
				delete(m, c)
			} else {
				m[c] = out
			}
		}
		if len(m) == 0 {
			delete(r.terms, term)
		}
	}
	var err error
	r.state, err = indexkit.Rebuild(r.allUnits(), r.state.Msgs)
	require.NoError(t, err)
	r.msgs = slices.DeleteFunc(r.msgs, func(x rec) bool { return x.seq <= through && !conv.IsSystem(x.msg) })
}

func sortedChunks(m map[int64][]byte) []byte {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []byte
	for _, k := range keys {
		out = append(out, m[k]...)
	}
	return out
}

func (r *rows) allUnits() []byte { return sortedChunks(r.units) }

func (r *rows) data(id string, terms []string) indexkit.ConvData {
	d := indexkit.ConvData{ID: id, State: r.state, Units: r.allUnits(), Postings: make([][]byte, len(terms))}
	for i, t := range terms {
		d.Postings[i] = sortedChunks(r.terms[t])
	}
	return d
}

// unit is one unit as memories.Recall makes it (recallindex.appendUnit).
type unit struct {
	seq  int64
	text []string
}

func units(msgs []rec, kind indexkit.Kind) []unit {
	var out []unit
	for _, r := range msgs {
		if conv.IsSystem(r.msg) {
			continue
		}
		opens := conv.OpensTurn(r.msg)
		if kind == indexkit.Exchanges {
			opens = conv.OpensExchange(r.msg)
		}
		if len(out) == 0 || opens {
			out = append(out, unit{seq: r.seq})
		}
		if c := r.msg.GetContent(); c != "" {
			out[len(out)-1].text = append(out[len(out)-1].text, c)
		}
	}
	return out
}

var vocab = strings.Fields("apple banana cherry delta echo falcon grape harbor island jungle kettle lemon mango north ocean paris quartz river stone tiger umbrella violet walrus xenon yellow zebra the and of settled planning")

func randomMessage(rng *rand.Rand) llms.ChatMessage {
	n := rng.IntN(12)
	if rng.IntN(15) == 0 {
		n = 0 // an empty message: a unit of no terms
	}
	words := make([]string, n)
	for i := range words {
		// Skewed: a few words are common, most rare.
		words[i] = vocab[min(len(vocab)-1, int(rng.ExpFloat64()*6))]
	}
	text := strings.Join(words, " ")
	switch r := rng.IntN(20); {
	case r < 8:
		return llms.HumanChatMessage{Content: text}
	case r < 15:
		return llms.AIChatMessage{Content: text}
	case r < 18:
		return llms.ToolChatMessage{ID: "t", Content: text}
	case r < 19:
		return llms.GenericChatMessage{Role: "x", Content: text}
	default:
		return llms.SystemChatMessage{Content: text}
	}
}

// compare checks got against want: the same units in the same order
// (units of equal score may trade places) and the same scores.
func compare(t *testing.T, want, got []indexkit.Hit, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		require.InDelta(t, want[i].Score, got[i].Score, 1e-12, "%s: hit %d", what, i)
		if want[i].Seq != got[i].Seq || want[i].ID != got[i].ID {
			// Only a tie may reorder.
			require.InDelta(t, want[i].Score, got[i].Score, 1e-12, what)
			j := slices.IndexFunc(got, func(h indexkit.Hit) bool { return h.Seq == want[i].Seq && h.ID == want[i].ID })
			if j < 0 {
				// The last places of a tie may hold other units.
				require.InDelta(t, want[len(want)-1].Score, want[i].Score, 1e-12, "%s: unit %d missing", what, want[i].Seq)
				continue
			}
			require.InDelta(t, want[i].Score, got[j].Score, 1e-12, what)
		}
	}
}

func weightings() [][2]float64 {
	return [][2]float64{{0, 0}, {0.5, 0.25}, {1, 1}, {0.3, 0}, {0, 0.4}, {0.7, 0.2}}
}

// TestSearchEqualsBM25OnAConversation: for one conversation, Search
// ranks and scores as retrieval.BM25 with neighbour weights fed the
// conversation's units, for both kinds of unit, every weighting, after
// appends in batches across chunks and after prefix removals.
func TestSearchEqualsBM25OnAConversation(t *testing.T) {
	ctx := context.Background()
	for _, near := range weightings() {
		for _, kind := range []indexkit.Kind{indexkit.Turns, indexkit.Exchanges} {
			t.Run(fmt.Sprintf("%v/%s", near, kind), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(near[0]*100+near[1]*10), uint64(kind)))
				r := newRows()
				seq := int64(0)
				for step := range 40 {
					batch := 1 + rng.IntN(20)
					seqs := make([]int64, batch)
					msgs := make([]llms.ChatMessage, batch)
					for i := range seqs {
						seq += 1 + int64(rng.IntN(3))
						seqs[i], msgs[i] = seq, randomMessage(rng)
					}
					r.add(t, seqs, msgs)
					if step%9 == 8 && len(r.msgs) > 4 {
						r.removeThrough(t, r.msgs[rng.IntN(len(r.msgs)/2)].seq)
					}
					us := units(r.msgs, kind)
					ref, err := retrieval.NewBM25(retrieval.WithNeighbourWeights(near[0], near[1]))
					require.NoError(t, err)
					docs := make([]retrieval.Doc, len(us))
					for i, u := range us {
						docs[i] = retrieval.Doc{Seq: u.seq, Text: strings.Join(u.text, "\n")}
					}
					require.NoError(t, ref.Add(ctx, "c", docs))
					assert.Equal(t, int64(len(us)), r.state.Units(kind), "step %d: units", step)
					for range 5 {
						query := strings.Join([]string{vocab[rng.IntN(len(vocab))], vocab[rng.IntN(len(vocab))], vocab[rng.IntN(8)]}, " ")
						k := 1 + rng.IntN(12)
						hits, err := ref.Search(ctx, "c", query, k)
						require.NoError(t, err)
						want := make([]indexkit.Hit, len(hits))
						for i, h := range hits {
							want[i] = indexkit.Hit{ID: "c", Seq: h.Seq, Score: h.Score}
						}
						terms := indexkit.QueryTerms(query)
						reach := rng.IntN(4)
						got, err := indexkit.Search(indexkit.Query{Terms: terms, Kind: kind, Near: near, K: k, Reach: reach}, []indexkit.ConvData{r.data("c", terms)})
						require.NoError(t, err)
						compare(t, want, got, fmt.Sprintf("step %d, %q, k=%d", step, query, k))
						checkSpans(t, r.msgs, kind, reach, got)
					}
				}
			})
		}
	}
}

// checkSpans checks each hit's span (Query.Reach): the messages stored
// in it are the units from reach before the hit to reach after it.
func checkSpans(t *testing.T, msgs []rec, kind indexkit.Kind, reach int, hits []indexkit.Hit) {
	t.Helper()
	us := units(msgs, kind)
	for _, h := range hits {
		if reach == 0 {
			require.Zero(t, h.From+h.To, "no span without Reach")
			continue
		}
		i := slices.IndexFunc(us, func(u unit) bool { return u.seq == h.Seq })
		require.GreaterOrEqual(t, i, 0, "hit %d is a unit", h.Seq)
		var in []rec
		for _, m := range msgs {
			if m.seq >= h.From && m.seq < h.To {
				in = append(in, m)
			}
		}
		want := us[max(i-reach, 0):min(i+reach+1, len(us))]
		assert.Equal(t, want, units(in, kind), "the span [%d, %d) of hit %d, reach %d", h.From, h.To, h.Seq, reach)
	}
}

// TestSearchEqualsBM25WithContextOverAScope: over many conversations a
// unit's neighbours are those of its own conversation: Search equals
// retrieval.BM25 given each unit with its neighbours as explicit Context.
func TestSearchEqualsBM25WithContextOverAScope(t *testing.T) {
	ctx := context.Background()
	for _, near := range weightings() {
		t.Run(fmt.Sprint(near), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(near[0]*1000), uint64(near[1]*1000)))
			convs := map[string]*rows{}
			var ids []string
			seq := int64(0)
			for range 60 {
				id := fmt.Sprintf("conv-%d", rng.IntN(7))
				if convs[id] == nil {
					convs[id] = newRows()
					ids = append(ids, id)
				}
				batch := 1 + rng.IntN(6)
				seqs := make([]int64, batch)
				msgs := make([]llms.ChatMessage, batch)
				for i := range seqs {
					seq++ // one counter for the file, as sqlitestore's
					seqs[i], msgs[i] = seq, randomMessage(rng)
				}
				convs[id].add(t, seqs, msgs)
			}
			slices.Sort(ids)
			ref, err := retrieval.NewBM25()
			require.NoError(t, err)
			owner := map[int64]string{}
			for _, id := range ids {
				us := units(convs[id].msgs, indexkit.Turns)
				var docs []retrieval.Doc
				for i, u := range us {
					d := retrieval.Doc{Seq: u.seq, Text: strings.Join(u.text, "\n")}
					for dist := 1; dist <= 2; dist++ {
						for _, j := range [2]int{i - dist, i + dist} {
							if j >= 0 && j < len(us) && near[dist-1] > 0 {
								d.Context = append(d.Context, retrieval.Context{Text: strings.Join(us[j].text, "\n"), Weight: near[dist-1]})
							}
						}
					}
					docs = append(docs, d)
					owner[u.seq] = id
				}
				require.NoError(t, ref.Add(ctx, "scope", docs))
			}
			for range 40 {
				query := vocab[rng.IntN(len(vocab))] + " " + vocab[rng.IntN(10)]
				k := 1 + rng.IntN(15)
				hits, err := ref.Search(ctx, "scope", query, k)
				require.NoError(t, err)
				want := make([]indexkit.Hit, len(hits))
				for i, h := range hits {
					want[i] = indexkit.Hit{ID: owner[h.Seq], Seq: h.Seq, Score: h.Score}
				}
				terms := indexkit.QueryTerms(query)
				var data []indexkit.ConvData
				for _, id := range ids {
					data = append(data, convs[id].data(id, terms))
				}
				got, err := indexkit.Search(indexkit.Query{Terms: terms, Kind: indexkit.Turns, Near: near, K: k}, data)
				require.NoError(t, err)
				compare(t, want, got, fmt.Sprintf("%q, k=%d", query, k))
			}
		})
	}
}

// TestAddKeepsTheStateRebuildComputes: the state an Add keeps step by
// step is the one Rebuild computes from the entries.
func TestAddKeepsTheStateRebuildComputes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	r := newRows()
	seq := int64(0)
	for range 300 {
		batch := 1 + rng.IntN(4)
		seqs := make([]int64, batch)
		msgs := make([]llms.ChatMessage, batch)
		for i := range seqs {
			seq++
			seqs[i], msgs[i] = seq, randomMessage(rng)
		}
		r.add(t, seqs, msgs)
		got, err := indexkit.Rebuild(r.allUnits(), r.state.Msgs)
		require.NoError(t, err)
		if r.state.Units(indexkit.Turns) > 0 {
			require.Equal(t, r.state, got)
		}
	}
	assert.Greater(t, len(r.units), 2, "the entries span several chunks")
}

func TestConvMarshalRoundTrip(t *testing.T) {
	c := indexkit.NewConv()
	c.Msgs = 1 << 40
	c.K[0] = indexkit.KindState{Lo: 3, Hi: math.MaxInt32, Len1: 5, Len2: 6, P0: 7, P1: 8, P2: 1 << 50}
	b, err := c.MarshalBinary()
	require.NoError(t, err)
	var got indexkit.Conv
	require.NoError(t, got.UnmarshalBinary(b))
	assert.Equal(t, c, got)
	for _, bad := range [][]byte{nil, {9}, b[:len(b)-1], append(slices.Clone(b), 0)} {
		assert.Error(t, got.UnmarshalBinary(bad), "%x", bad)
	}
	// States no Add makes: refused, so a corrupt row allocates nothing
	// big and panics nowhere.
	for _, k := range []indexkit.KindState{
		{Lo: 0, Hi: 5},                         // ordinals start at 1
		{Lo: math.MinInt32, Hi: math.MaxInt32}, // a span of 2³² units
		{Lo: 7, Hi: 5},                         // Lo beyond Hi+1
		{Lo: 1, Hi: 10, P1: -1},                // a negative sum
	} {
		c := indexkit.NewConv()
		c.Msgs = 10
		c.K[1] = k
		b, err := c.MarshalBinary()
		require.NoError(t, err)
		assert.Error(t, got.UnmarshalBinary(b), "%+v", k)
	}
	c = indexkit.NewConv()
	c.Msgs = 3
	c.K[0] = indexkit.KindState{Lo: 1, Hi: 4}
	b, err = c.MarshalBinary()
	require.NoError(t, err)
	assert.Error(t, got.UnmarshalBinary(b), "4 units of 3 messages")
}

// TestCorruptRowsAreErrors: unit entries whose ordinals no Add writes
// are an error of Rebuild and of Search, never a panic or a huge
// allocation; a query term given twice counts once.
func TestCorruptRowsAreErrors(t *testing.T) {
	r := newRows()
	r.add(t, []int64{1, 2, 3}, []llms.ChatMessage{llms.HumanChatMessage{Content: "apple"}, llms.HumanChatMessage{Content: "banana"}, llms.HumanChatMessage{Content: "apple pie"}})
	units := r.allUnits()
	// Swap the first and last entries: ordinals fall as Seqs rise.
	bad := slices.Clone(units)
	copy(bad[8:12], units[len(units)-12:len(units)-8])
	copy(bad[len(bad)-12:len(bad)-8], units[8:12])
	_, err := indexkit.Rebuild(bad, 3)
	assert.Error(t, err)
	d := r.data("c", []string{"appl"})
	d.Units = d.Units[:20] // one entry for a state of three units
	_, err = indexkit.Search(indexkit.Query{Terms: []string{"appl"}, K: 2}, []indexkit.ConvData{d})
	assert.ErrorContains(t, err, "3 units in its state, 1 unit entries")
	once, err := indexkit.Search(indexkit.Query{Terms: []string{"appl"}, K: 2}, []indexkit.ConvData{r.data("c", []string{"appl"})})
	require.NoError(t, err)
	twice, err := indexkit.Search(indexkit.Query{Terms: []string{"appl", "appl"}, K: 2}, []indexkit.ConvData{r.data("c", []string{"appl", "appl"})})
	require.NoError(t, err)
	assert.Equal(t, once, twice)
}

func TestBM25ParametersAgree(t *testing.T) {
	// Search's constants are retrieval's: a ranking differs otherwise.
	ref, err := retrieval.NewBM25()
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, ref.Add(ctx, "s", []retrieval.Doc{{Seq: 1, Text: "apple apple banana"}, {Seq: 2, Text: "cherry"}, {Seq: 3, Text: "apple cherry cherry delta echo"}}))
	hits, err := ref.Search(ctx, "s", "apple", 3)
	require.NoError(t, err)
	r := newRows()
	r.add(t, []int64{1, 2, 3}, []llms.ChatMessage{llms.HumanChatMessage{Content: "apple apple banana"}, llms.HumanChatMessage{Content: "cherry"}, llms.HumanChatMessage{Content: "apple cherry cherry delta echo"}})
	terms := indexkit.QueryTerms("apple")
	got, err := indexkit.Search(indexkit.Query{Terms: terms, K: 3}, []indexkit.ConvData{r.data("c", terms)})
	require.NoError(t, err)
	require.Len(t, got, len(hits))
	for i := range hits {
		assert.Equal(t, hits[i].Seq, got[i].Seq)
		assert.Equal(t, hits[i].Score, got[i].Score)
	}
}

func TestSearchRejectsBadQueries(t *testing.T) {
	_, err := indexkit.Search(indexkit.Query{Terms: []string{"x"}, Kind: 7, K: 1}, nil)
	assert.ErrorContains(t, err, "unit kind 7")
	_, err = indexkit.Search(indexkit.Query{Terms: []string{"x"}, Near: [2]float64{math.NaN(), 0}, K: 1}, nil)
	assert.ErrorContains(t, err, "neighbour weights")
	r := newRows()
	r.add(t, []int64{1}, []llms.ChatMessage{llms.HumanChatMessage{Content: "apple"}})
	d := r.data("c", []string{"appl"})
	d.Postings[0] = d.Postings[0][:5]
	_, err = indexkit.Search(indexkit.Query{Terms: []string{"appl"}, K: 1}, []indexkit.ConvData{d})
	assert.ErrorContains(t, err, `conversation "c", term "appl"`)
}

// TestDayRows: the units opened are filed under their own day, in their
// own location, a row per (day, Seq / DaySeqs), each row once; a message
// without a time is filed under no day.
func TestDayRows(t *testing.T) {
	zone := time.FixedZone("UTC-7", -7*3600)
	late := time.Date(2026, 3, 5, 23, 0, 0, 0, zone) // 6 March in UTC
	next := time.Date(2026, 3, 6, 9, 0, 0, 0, zone)
	opened := []indexkit.Opened{{Seq: 1, Kinds: [2]bool{true, true}}, {Seq: 3, Kinds: [2]bool{true, false}}, {Seq: indexkit.DaySeqs + 1, Kinds: [2]bool{true, true}}, {Seq: indexkit.DaySeqs + 5, Kinds: [2]bool{true, true}}}
	seqs := []int64{1, 2, 3, indexkit.DaySeqs + 1, indexkit.DaySeqs + 5}
	at := []time.Time{late, late, late, next, {}}
	rows := indexkit.DayRows(opened, seqs, at)
	require.Len(t, rows, 2)
	assert.Equal(t, indexkit.DayRow{Day: 20260305, Chunk: 0, Data: indexkit.AppendOpened(indexkit.AppendOpened(nil, opened[0]), opened[1])}, rows[0])
	assert.Equal(t, indexkit.DayRow{Day: 20260306, Chunk: 1, Data: indexkit.AppendOpened(nil, opened[2])}, rows[1])
	turns, err := indexkit.OpenedSeqs(rows[0].Data, indexkit.Turns)
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 3}, turns)
	exchanges, err := indexkit.OpenedSeqs(rows[0].Data, indexkit.Exchanges)
	require.NoError(t, err)
	assert.Equal(t, []int64{1}, exchanges)
}
