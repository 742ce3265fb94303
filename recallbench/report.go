package recallbench

import (
	"context"
	"fmt"
	"strings"

	"github.com/memstack/memstack/retrieval"
)

// Table renders results as a markdown table: one row per memory with its
// evidence recall, mean and max context tokens, and number of questions.
func Table(results []Result) string {
	var b strings.Builder
	b.WriteString("| memory | evidence recall | mean context tokens | max context tokens | questions |\n")
	b.WriteString("|---|---:|---:|---:|---:|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %.2f (%d/%d) | %.0f | %d | %d |\n",
			r.Name, r.Recall(), r.Found, r.Evidence, r.MeanTokens, r.MaxTokens, r.Questions)
	}
	return b.String()
}

// BM25Rank returns the rank (1 = best) that a BM25 index over every turn
// of conv (each turn indexed as its human and AI messages, one per line,
// as memories.Recall indexes an exchange) gives the evidence turn ev for
// the query q, or 0 when the turn shares no term with the query. It is a
// diagnostic: it tells whether a lexical Recall could have found the
// evidence, and with what k.
func BM25Rank(ctx context.Context, conv *Conversation, q Question, ev Evidence) (int, error) {
	idx := retrieval.NewBM25()
	docs := make([]retrieval.Doc, len(conv.Turns))
	for i, t := range conv.Turns {
		docs[i] = retrieval.Doc{Seq: int64(i + 1), Through: int64(i + 1), Text: t.Human + "\n" + t.AI}
	}
	if err := idx.Add(ctx, "conversation", docs); err != nil {
		return 0, err
	}
	hits, err := idx.Search(ctx, "conversation", q.Text, len(docs))
	if err != nil {
		return 0, err
	}
	for i, h := range hits {
		if h.Seq == int64(ev.Turn+1) {
			return i + 1, nil
		}
	}
	return 0, nil
}

// Details renders, for one result, a markdown table with a row per
// question: the question, where its evidence is (session and turn), the
// variables that held it (or "missed"), the BM25 rank of the evidence turn
// (see BM25Rank) and the context's tokens.
func Details(ctx context.Context, conv *Conversation, r Result) (string, error) {
	var b strings.Builder
	b.WriteString("| question | kind | evidence (session/turn) | found in | BM25 rank | tokens |\n")
	b.WriteString("|---|---|---|---|---:|---:|\n")
	for _, qr := range r.PerQuestion {
		for e, ev := range qr.Question.Evidence {
			rank, err := BM25Rank(ctx, conv, qr.Question, ev)
			if err != nil {
				return "", err
			}
			t := conv.Turns[ev.Turn]
			where := "**missed**"
			if qr.Found[e] {
				where = strings.Join(qr.FoundIn[e], ", ")
			}
			rs := "–"
			if rank > 0 {
				rs = fmt.Sprint(rank)
			}
			fmt.Fprintf(&b, "| %s | %s | %d/%d | %s | %s | %d |\n",
				qr.Question.Text, qr.Question.Kind, t.Session+1, t.Index-t.Session*conv.Config.TurnsPerSession+1, where, rs, qr.Tokens)
		}
	}
	return b.String(), nil
}
