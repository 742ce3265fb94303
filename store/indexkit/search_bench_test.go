package indexkit_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack/internal/benchcorpus"
	"github.com/memstack/memstack/store/indexkit"
)

// BenchmarkSearchUserScope is Search alone over what a store reads for a
// user with 1,000 conversations of 100 messages of the benchmark corpus
// (every turn shares the query's words): the scoring a cold user load's
// search costs beside its reads.
//
//	go test -run x -bench SearchUserScope ./store/indexkit
func BenchmarkSearchUserScope(b *testing.B) {
	const convs, msgs = 1000, 100
	rows := make([]*rows, convs)
	seq := int64(0)
	for c := range convs {
		r := newRows()
		seqs := make([]int64, msgs)
		batch := make([]llms.ChatMessage, msgs)
		for i := 0; i < msgs; i += 2 {
			k := c*msgs/2 + i/2
			seq++
			seqs[i], batch[i] = seq, llms.HumanChatMessage{Content: benchcorpus.Human(k)}
			seq++
			seqs[i+1], batch[i+1] = seq, llms.AIChatMessage{Content: benchcorpus.AI(k)}
		}
		r.add(b, seqs, batch)
		rows[c] = r
	}
	queries := make([]indexkit.Query, 16)
	data := make([][]indexkit.ConvData, len(queries))
	for i := range queries {
		terms := indexkit.QueryTerms(benchcorpus.Human((i * 7919) % (convs * msgs / 2)))
		queries[i] = indexkit.Query{Terms: terms, Kind: indexkit.Exchanges, Near: [2]float64{0.5, 0.25}, K: 64, Reach: 2}
		for c, r := range rows {
			data[i] = append(data[i], r.data(fmt.Sprintf("conv-%04d", c), terms))
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		hits, err := indexkit.Search(queries[i%len(queries)], data[i%len(queries)])
		if err != nil || len(hits) != 64 {
			b.Fatalf("%d hits, %v", len(hits), err)
		}
	}
}

// TestSearchPrunesExactly: the search that skips conversations whose
// bound cannot rank returns exactly what the exhaustive one returns —
// hits, scores and spans — on the benchmark corpus (every turn shares the
// query's words, so bounds are close) and on a skewed vocabulary, for K
// from 1 to more than there are units, both kinds, several weightings.
func TestSearchPrunesExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, corpus := range []string{"bench", "skewed"} {
		var convs []*rows
		seq := int64(0)
		for c := range 120 {
			r := newRows()
			n := 2 + rng.IntN(40)
			seqs := make([]int64, n)
			msgs := make([]llms.ChatMessage, n)
			for i := range n {
				seq++
				seqs[i] = seq
				switch {
				case corpus == "skewed":
					msgs[i] = randomMessage(rng)
				case i%2 == 0:
					msgs[i] = llms.HumanChatMessage{Content: benchcorpus.Human(c*50 + i)}
				default:
					msgs[i] = llms.AIChatMessage{Content: benchcorpus.AI(c*50 + i)}
				}
			}
			r.add(t, seqs, msgs)
			convs = append(convs, r)
		}
		for _, near := range weightings() {
			for _, kind := range []indexkit.Kind{indexkit.Turns, indexkit.Exchanges} {
				for qi := range 8 {
					text := benchcorpus.Human(rng.IntN(6000))
					if corpus == "skewed" {
						text = vocab[rng.IntN(len(vocab))] + " " + vocab[rng.IntN(8)] + " " + vocab[rng.IntN(len(vocab))]
					}
					terms := indexkit.QueryTerms(text)
					var data []indexkit.ConvData
					for c, r := range convs {
						data = append(data, r.data(fmt.Sprintf("c%03d", c), terms))
					}
					for _, k := range []int{1, 3, 10, 64, 5000} {
						q := indexkit.Query{Terms: terms, Kind: kind, Near: near, K: k, Reach: 2}
						indexkit.SetPrune(false)
						want, err := indexkit.Search(q, data)
						indexkit.SetPrune(true)
						require.NoError(t, err)
						got, err := indexkit.Search(q, data)
						require.NoError(t, err)
						require.Equal(t, want, got, "%s, %v, %s, query %d, k=%d", corpus, near, kind, qi, k)
					}
				}
			}
		}
	}
}
