package retrieval_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/memstack/memstack/retrieval"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"whitespace and punctuation only", "  \t\n ?!... --- ", nil},
		{"lower-cases and splits on punctuation", "PostgreSQL, Redis; SQLite!", []string{"postgresql", "redi", "sqlite"}},
		{"drops English stop words", "What did we settle on for the database?", []string{"settl", "databas"}},
		{"stems verb forms together", "settle settled settling settles", []string{"settl", "settl", "settl", "settl"}},
		{"plurals (Porter2)", "policies plans classes status news", []string{"polici", "plan", "class", "status", "news"}},
		{"ing and ed (Porter2)", "meeting string used planned", []string{"meet", "string", "use", "plan"}},
		{"keeps digits, drops one Latin letter", "v2 a 5 x 2024", []string{"v2", "5", "2024"}},
		{"apostrophes split", "isn't it great", []string{"great"}},
		{"unicode letters", "Café ÜBER naïve", []string{"café", "über", "naïv"}},
		{"CJK is tokenised per rune", "数据库 Postgres", []string{"数", "据", "库", "postgr"}},
		{"unicode digits and letters joined", "abc١٢٣", []string{"abc١٢٣"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, retrieval.Tokenize(tc.in))
		})
	}
}

func TestStopWordAndStem(t *testing.T) {
	for _, w := range []string{"the", "what", "we", "did", "on", "and"} {
		assert.True(t, retrieval.StopWord(w), w)
	}
	for _, w := range []string{"database", "settle", "postgres", "budget"} {
		assert.False(t, retrieval.StopWord(w), w)
	}
	for in, want := range map[string]string{
		"decided": "decid", "decide": "decid", "deciding": "decid",
		"speed": "speed", "bus": "bus", "process": "process", "ties": "tie",
		"moved": "move", "move": "move", "named": "name", "name": "name", "freed": "freed",
		"news": "news", "planned": "plan", "plans": "plan", "settled": "settl", "": "",
	} {
		assert.Equal(t, want, retrieval.Stem(in), in)
	}
}

// newBM25 is NewBM25 with options a test knows to be good.
func newBM25(t testing.TB, opts ...retrieval.BM25Option) *retrieval.BM25 {
	t.Helper()
	x, err := retrieval.NewBM25(opts...)
	require.NoError(t, err)
	return x
}

// NewBM25 never panics: every bad option value is an error wrapping
// ErrInvalidArgument that names the option, and no index is returned. The
// bounds themselves are good values.
func TestNewBM25_BadOptionsAreErrors(t *testing.T) {
	type badOption struct {
		name string
		opts []retrieval.BM25Option
		want string // what the error must name
	}
	var cases []badOption
	for _, w := range []float64{-0.1, -1, 1.0001, 2, math.NaN(), math.Inf(1), math.Inf(-1), -math.SmallestNonzeroFloat64} {
		for _, pair := range [][2]float64{{w, 0}, {0.5, w}, {w, w}} {
			cases = append(cases, badOption{
				name: fmt.Sprintf("WithNeighbourWeights(%v, %v)", pair[0], pair[1]),
				opts: []retrieval.BM25Option{retrieval.WithNeighbourWeights(pair[0], pair[1])},
				want: "WithNeighbourWeights(",
			})
		}
	}
	cases = append(cases,
		badOption{"a nil option", []retrieval.BM25Option{nil}, "option 1 of 1 is nil"},
		badOption{"a nil option after good ones", []retrieval.BM25Option{retrieval.WithTokenizer(nil), retrieval.WithNeighbourWeights(0.4, 0.2), nil}, "option 3 of 3 is nil"},
		badOption{"a bad weight after a good option", []retrieval.BM25Option{retrieval.WithTokenizer(strings.Fields), retrieval.WithNeighbourWeights(0.4, 1.5)}, "WithNeighbourWeights(0.4, 1.5)"},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var (
				x   *retrieval.BM25
				err error
			)
			require.NotPanics(t, func() { x, err = retrieval.NewBM25(tc.opts...) })
			require.ErrorIs(t, err, retrieval.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, x)
		})
	}
	for _, pair := range [][2]float64{{0, 0}, {1, 1}, {0, 1}, {1, 0}, {0.4, 0.2}} {
		x, err := retrieval.NewBM25(retrieval.WithNeighbourWeights(pair[0], pair[1]))
		require.NoError(t, err, "WithNeighbourWeights(%v, %v)", pair[0], pair[1])
		require.NotNil(t, x)
	}
}

// bm25Corpus is the tiny corpus whose scores are computed by hand below.
//
//	doc 1: apple banana         (2 terms)
//	doc 2: apple apple cherry   (3 terms)
//	doc 3: banana cherry durian (3 terms)
//
// N = 3, avgdl = 8/3, k1 = 1.2, b = 0.75.
func bm25Corpus(t *testing.T, x *retrieval.BM25, scope string) {
	t.Helper()
	require.NoError(t, x.Add(context.Background(), scope, []retrieval.Doc{
		{Seq: 1, Through: 1, Text: "apple banana"},
		{Seq: 2, Through: 2, Text: "apple apple cherry"},
		{Seq: 3, Through: 3, Text: "banana cherry durian"},
	}))
}

func TestBM25_HandComputedScores(t *testing.T) {
	ctx := context.Background()
	x := newBM25(t)
	bm25Corpus(t, x, "s")

	// Length normalisation 1 - b + b·dl/avgdl:
	//   dl=2: 0.25 + 0.75·2/(8/3) = 0.8125 → k1·0.8125 = 0.975
	//   dl=3: 0.25 + 0.75·3/(8/3) = 1.09375 → k1·1.09375 = 1.3125
	// idf(apple) = idf(banana) = ln(1 + (3-2+0.5)/(2+0.5)) = ln 1.6
	// idf(durian) = ln(1 + (3-1+0.5)/(1+0.5)) = ln(8/3)
	idfB, idfD := math.Log(1.6), math.Log(8.0/3)

	for _, tc := range []struct {
		query string
		want  []retrieval.Hit
	}{
		// "apple": norm = idf·2.2; doc 2: tf 2 → 2·2.2/(2+1.3125), doc 1:
		// tf 1 → 2.2/(1+0.975). Normalised, the idf and 2.2 cancel.
		{"apple", []retrieval.Hit{{Seq: 2, Score: 2 / 3.3125}, {Seq: 1, Score: 1 / 1.975}}},
		// "banana durian": doc 3 has both once (dl 3), doc 1 banana once
		// (dl 2); norm = 2.2·(idfB+idfD).
		{"banana durian", []retrieval.Hit{
			{Seq: 3, Score: 1 / 2.3125},
			{Seq: 1, Score: idfB / 1.975 / (idfB + idfD)},
		}},
		// Stop words and repeated terms do not change anything.
		{"the apple and the APPLE", []retrieval.Hit{{Seq: 2, Score: 2 / 3.3125}, {Seq: 1, Score: 1 / 1.975}}},
		// An unknown term dilutes the score: norm gains 2.2·ln(1+3.5/0.5).
		{"durian zebra", []retrieval.Hit{{Seq: 3, Score: idfD / 2.3125 / (idfD + math.Log(8))}}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			got, err := x.Search(ctx, "s", tc.query, 10)
			require.NoError(t, err)
			require.Len(t, got, len(tc.want))
			for i := range tc.want {
				assert.Equal(t, tc.want[i].Seq, got[i].Seq, "rank %d", i+1)
				assert.InDelta(t, tc.want[i].Score, got[i].Score, 1e-12, "rank %d", i+1)
				assert.True(t, retrieval.LexicalRange.Contains(got[i].Score))
			}
		})
	}
	// Hand-computed values, to four places, as a check on the formulas
	// above.
	got, err := x.Search(ctx, "s", "apple", 1)
	require.NoError(t, err)
	require.Len(t, got, 1, "k limits the hits")
	assert.InDelta(t, 0.6038, got[0].Score, 1e-4)
}

func TestBM25_ReplaceSkipsAndTies(t *testing.T) {
	ctx := context.Background()
	x := newBM25(t)
	bm25Corpus(t, x, "s")

	// Re-adding seq 2 replaces it: "apple" now only in doc 1, so N stays 3
	// and idf(apple) = ln(1 + 2.5/1.5).
	require.NoError(t, x.Add(ctx, "s", []retrieval.Doc{{Seq: 2, Through: 4, Text: "cherry pie"}}))
	got, err := x.Search(ctx, "s", "apple", 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, int64(1), got[0].Seq)
	// avgdl = (2+2+3)/3 = 7/3; dl 2: 0.25+0.75·2/(7/3) → denominator 1+1.2·(0.25+0.642857…)
	assert.InDelta(t, 1/(1+1.2*(0.25+0.75*2/(7.0/3))), got[0].Score, 1e-12)

	for _, q := range []string{"", "   \n\t", "the and of what", "zebra"} {
		got, err := x.Search(ctx, "s", q, 3)
		require.NoError(t, err, "%q", q)
		assert.Empty(t, got, "%q matches nothing", q)
	}

	// Equal scores: the newer doc (higher Seq) first.
	y := newBM25(t)
	require.NoError(t, y.Add(ctx, "s", []retrieval.Doc{{Seq: 5, Text: "budget"}, {Seq: 9, Text: "budget"}, {Seq: 7, Text: "budget"}}))
	got, err = y.Search(ctx, "s", "budget", 3)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, []int64{9, 7, 5}, []int64{got[0].Seq, got[1].Seq, got[2].Seq})
}

// A k as large as an int can be (a natural "every hit") returns every hit.
func TestBM25_HugeK(t *testing.T) {
	ctx := context.Background()
	x := newBM25(t, retrieval.WithNeighbourWeights(0.5, 0.25))
	var docs []retrieval.Doc
	for i := range 20 {
		docs = append(docs, retrieval.Doc{Seq: int64(i + 1), Text: fmt.Sprintf("lake cabin word%d", i)})
	}
	require.NoError(t, x.Add(ctx, "s", docs))
	for _, k := range []int{math.MaxInt - 3, math.MaxInt - 2, math.MaxInt} {
		hits, err := x.Search(ctx, "s", "lake", k)
		require.NoError(t, err, "k=%d", k)
		assert.Len(t, hits, 20, "k=%d", k)
	}
}

func TestBM25_BadCalls(t *testing.T) {
	x := newBM25(t)
	bm25Corpus(t, x, "s")
	for _, k := range []int{0, -1} {
		_, err := x.Search(context.Background(), "s", "apple", k)
		assert.ErrorIs(t, err, retrieval.ErrInvalidArgument, "k=%d", k)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := x.Search(ctx, "s", "apple", 3)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, x.Add(ctx, "s", []retrieval.Doc{{Seq: 9, Text: "apple"}}), context.Canceled)
	got, err := x.Search(context.Background(), "s", "apple", 3)
	require.NoError(t, err)
	assert.Len(t, got, 2, "a cancelled Add adds nothing")
	//nolint:staticcheck // a nil context must be an error, not a panic
	_, err = x.Search(nil, "s", "apple", 3)
	assert.ErrorIs(t, err, retrieval.ErrInvalidArgument)
}

func TestBM25_ScopesAreIsolated(t *testing.T) {
	ctx := context.Background()
	x := newBM25(t)
	// Adversarial scope names: prefixes, separators, empty, look-alikes.
	scopes := []string{"", "a", "a:", "a:b", "a%3Ab", "A", "a ", "*", "a\x00b"}
	for i, s := range scopes {
		require.NoError(t, x.Add(ctx, s, []retrieval.Doc{{Seq: int64(i + 1), Text: fmt.Sprintf("secret%d shared", i)}}))
	}
	for i, s := range scopes {
		got, err := x.Search(ctx, s, "shared secret0 secret1 secret2 secret3 secret4 secret5 secret6 secret7 secret8", 20)
		require.NoError(t, err)
		require.Len(t, got, 1, "scope %q sees only its own doc", s)
		assert.Equal(t, int64(i+1), got[0].Seq)
	}
	require.NoError(t, x.Delete(ctx, "a"))
	got, err := x.Search(ctx, "a", "shared", 5)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = x.Search(ctx, "a:", "shared", 5)
	require.NoError(t, err)
	assert.Len(t, got, 1, "deleting one scope leaves the others")
	x.Release("a:")
	got, err = x.Search(ctx, "a:", "shared", 5)
	require.NoError(t, err)
	assert.Empty(t, got, "Release frees the in-process scope")
}

func TestBM25_Concurrent(t *testing.T) {
	ctx := context.Background()
	x := newBM25(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scope := fmt.Sprint("s", g%2)
			for i := range 50 {
				seq := int64(g*1000 + i)
				if err := x.Add(ctx, scope, []retrieval.Doc{{Seq: seq, Text: fmt.Sprintf("topic%d common", i%5)}}); err != nil {
					t.Error(err)
					return
				}
				if _, err := x.Search(ctx, scope, "topic3 common", 3); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got, err := x.Search(ctx, "s0", "topic3", 1000)
	require.NoError(t, err)
	assert.Len(t, got, 4*10, "4 goroutines × 10 docs of topic3 in scope s0")
}

func TestBM25Context(t *testing.T) {
	ctx := context.Background()
	idx := newBM25(t)
	require.NoError(t, idx.Add(ctx, "s", []retrieval.Doc{
		{Seq: 1, Through: 1, Text: "we booked the cabin", Context: []retrieval.Context{{Text: "trip to the lake", Weight: 0.4}}},
		{Seq: 2, Through: 2, Text: "the lake trip was lovely"},
		{Seq: 3, Through: 3, Text: "nothing in common here"},
	}))
	hits, err := idx.Search(ctx, "s", "lake trip", 10)
	require.NoError(t, err)
	require.Len(t, hits, 2, "the doc whose context matches is a hit; the unrelated one is not")
	assert.Equal(t, int64(2), hits[0].Seq, "a match in the text outranks the same match in the context")
	assert.Equal(t, int64(1), hits[1].Seq)
	assert.Less(t, hits[1].Score, hits[0].Score)
	assert.Greater(t, hits[1].Score, 0.0)

	for _, w := range []float64{0, -0.5, 1.5, math.NaN()} {
		err := idx.Add(ctx, "s", []retrieval.Doc{{Seq: 9, Text: "x", Context: []retrieval.Context{{Text: "y", Weight: w}}}})
		require.ErrorIs(t, err, retrieval.ErrInvalidArgument, "weight %v", w)
		assert.Contains(t, err.Error(), "Seq 9")
	}
	hits, err = idx.Search(ctx, "s", "x y", 10)
	require.NoError(t, err)
	assert.Empty(t, hits, "a rejected Add adds nothing")
}

// TestBM25NeighbourWeightsEqualExplicitContext: scoring with neighbour
// weights gives the scores an index gets when each doc is added with its
// neighbours' texts as Context — for docs added in order, out of order,
// replaced, and interleaved with searches.
func TestBM25NeighbourWeightsEqualExplicitContext(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 9))
	words := strings.Fields("lake cabin sauna key trip budget offsite lisbon june hiring engineers monday paint fence dog walk")
	texts := make([]string, 60)
	for i := range texts {
		var b strings.Builder
		for j := 0; j < 1+rng.IntN(6); j++ {
			b.WriteString(words[rng.IntN(len(words))] + " ")
		}
		if i%13 == 4 {
			b.Reset() // an empty doc still takes its place in the order
		}
		texts[i] = b.String()
	}
	const w1, w2 = 0.5, 0.25
	explicit := func(n int) *retrieval.BM25 {
		x := newBM25(t)
		var docs []retrieval.Doc
		for i := 0; i < n; i++ {
			d := retrieval.Doc{Seq: int64(10 * (i + 1)), Text: texts[i]}
			for dist, w := range map[int]float64{1: w1, 2: w2} {
				for _, j := range []int{i - dist, i + dist} {
					if j >= 0 && j < n && texts[j] != "" {
						d.Context = append(d.Context, retrieval.Context{Text: texts[j], Weight: w})
					}
				}
			}
			docs = append(docs, d)
		}
		require.NoError(t, x.Add(ctx, "s", docs))
		return x
	}
	near := newBM25(t, retrieval.WithNeighbourWeights(w1, w2))
	// Out of order: the even docs first, then the odd ones, one by one,
	// with a replacement of doc 3 and searches in between.
	var order []int
	for i := 0; i < len(texts); i += 2 {
		order = append(order, i)
	}
	for i := 1; i < len(texts); i += 2 {
		order = append(order, i)
	}
	for n, i := range order {
		require.NoError(t, near.Add(ctx, "s", []retrieval.Doc{{Seq: int64(10 * (i + 1)), Text: texts[i]}}))
		if n == len(order)/2 {
			_, err := near.Search(ctx, "s", "lake", 5)
			require.NoError(t, err)
			require.NoError(t, near.Add(ctx, "s", []retrieval.Doc{{Seq: 40, Text: texts[3]}}), "replace doc 3 with itself")
		}
	}
	want := explicit(len(texts))
	for _, q := range []string{"lake cabin", "hiring engineers monday", "dog", "budget lisbon june", "nothing matches this"} {
		a, err := near.Search(ctx, "s", q, 100)
		require.NoError(t, err)
		b, err := want.Search(ctx, "s", q, 100)
		require.NoError(t, err)
		require.Len(t, a, len(b), q)
		for i := range a {
			assert.Equal(t, b[i].Seq, a[i].Seq, "%s: hit %d", q, i)
			assert.InDelta(t, b[i].Score, a[i].Score, 1e-9, "%s: hit %d", q, i)
		}
	}
	// And in order, appended one by one (the incremental length sum).
	inOrder := newBM25(t, retrieval.WithNeighbourWeights(w1, w2))
	for i := range texts {
		require.NoError(t, inOrder.Add(ctx, "s", []retrieval.Doc{{Seq: int64(10 * (i + 1)), Text: texts[i]}}))
	}
	a, err := inOrder.Search(ctx, "s", "lake cabin sauna", 100)
	require.NoError(t, err)
	b, err := want.Search(ctx, "s", "lake cabin sauna", 100)
	require.NoError(t, err)
	require.Len(t, a, len(b))
	for i := range a {
		assert.Equal(t, b[i].Seq, a[i].Seq)
		assert.InDelta(t, b[i].Score, a[i].Score, 1e-9)
	}
}

func TestBM25WithTokenizer(t *testing.T) {
	ctx := context.Background()
	upper := newBM25(t, retrieval.WithTokenizer(func(s string) []string { return strings.Fields(strings.ToUpper(s)) }))
	require.NoError(t, upper.Add(ctx, "s", []retrieval.Doc{{Seq: 1, Text: "the cat"}, {Seq: 2, Text: "a dog"}}))
	hits, err := upper.Search(ctx, "s", "THE", 5)
	require.NoError(t, err)
	require.Len(t, hits, 1, "the tokenizer keeps stop words: it is the one used, for docs and queries")
	assert.Equal(t, int64(1), hits[0].Seq)
	plain := newBM25(t, retrieval.WithTokenizer(nil))
	require.NoError(t, plain.Add(ctx, "s", []retrieval.Doc{{Seq: 1, Text: "the cat"}}))
	hits, err = plain.Search(ctx, "s", "the", 5)
	require.NoError(t, err)
	assert.Empty(t, hits, "nil keeps Tokenize, which drops stop words")
}

func TestTokenizeWith(t *testing.T) {
	upper := retrieval.TokenizeWith(strings.ToUpper)
	assert.Equal(t, []string{"SETTLED", "POSTGRESQL", "16"}, upper("What did we settle on? We settled on PostgreSQL 16.")[1:])
	assert.Equal(t, []string{"settled", "plans"}, retrieval.TokenizeWith(nil)("the settled plans"))
	assert.Equal(t, retrieval.Tokenize("meetings were planned"), retrieval.TokenizeWith(retrieval.Stem)("meetings were planned"))
}
