package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/internal/conv"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/indexkit"
)

// recallVocab is the fixed corpus's words: a few common, most rare.
var recallVocab = strings.Fields("invoice refund parcel courier warranty laptop charger screen battery keyboard tuesday paris lisbon ticket seat window aisle passport visa hotel breakfast pool gym sauna allergy peanut gluten vegan the and of settled")

// recallMessage is the i-th message of the fixed corpus of rng.
func recallMessage(rng *rand.Rand) llms.ChatMessage {
	words := make([]string, rng.IntN(10))
	for i := range words {
		words[i] = recallVocab[min(len(recallVocab)-1, int(rng.ExpFloat64()*7))]
	}
	text := strings.Join(words, " ")
	switch r := rng.IntN(20); {
	case r < 8:
		return llms.HumanChatMessage{Content: text}
	case r < 15:
		return llms.AIChatMessage{Content: text}
	case r < 18:
		return llms.ToolChatMessage{ID: "call", Content: text}
	default:
		return llms.SystemChatMessage{Content: text}
	}
}

// recallUnit is a unit as memories.Recall makes it from stored records.
type recallUnit struct {
	seq  int64
	text string
	at   time.Time
}

func recallUnits(recs []store.Record, kind indexkit.Kind) []recallUnit {
	var out []recallUnit
	var texts [][]string
	for _, r := range recs {
		if conv.IsSystem(r.Message) {
			continue
		}
		opens := conv.OpensTurn(r.Message)
		if kind == indexkit.Exchanges {
			opens = conv.OpensExchange(r.Message)
		}
		if len(out) == 0 || opens {
			out = append(out, recallUnit{seq: r.Seq, at: r.Time})
			texts = append(texts, nil)
		}
		if c := r.Message.GetContent(); c != "" {
			texts[len(texts)-1] = append(texts[len(texts)-1], c)
		}
	}
	for i := range out {
		out[i].text = strings.Join(texts[i], "\n")
	}
	return out
}

// recallReference is retrieval.BM25 fed the units of convs as a Recall's
// in-process index scores them: one conversation with neighbour weights,
// several with each unit's neighbours in its own conversation as explicit
// Context. It returns the index and each doc's unit.
func recallReference(t *testing.T, s store.Store, convs []memstack.Identity, kind indexkit.Kind, near [2]float64) (*retrieval.BM25, map[int64]unitKey) {
	t.Helper()
	ctx := context.Background()
	var opts []retrieval.BM25Option
	if len(convs) == 1 {
		opts = append(opts, retrieval.WithNeighbourWeights(near[0], near[1]))
	}
	ref, err := retrieval.NewBM25(opts...)
	require.NoError(t, err)
	owner := map[int64]unitKey{}
	id := int64(0)
	for _, c := range convs {
		recs, err := s.All(ctx, c)
		require.NoError(t, err)
		us := recallUnits(recs, kind)
		docs := make([]retrieval.Doc, len(us))
		for i, u := range us {
			id++ // a doc ID of the scope's own: Seqs are unique per identity only
			docs[i] = retrieval.Doc{Seq: id, Text: u.text}
			if len(convs) > 1 {
				for dist := 1; dist <= 2; dist++ {
					for _, j := range [2]int{i - dist, i + dist} {
						if j >= 0 && j < len(us) && near[dist-1] > 0 {
							docs[i].Context = append(docs[i].Context, retrieval.Context{Text: us[j].text, Weight: near[dist-1]})
						}
					}
				}
			}
			owner[id] = unitKey{c.Key(), u.seq}
		}
		require.NoError(t, ref.Add(ctx, "scope", docs))
	}
	return ref, owner
}

// unitKey names a unit: its conversation's key and its Seq.
type unitKey struct {
	conv string
	seq  int64
}

// checkRecallSearch compares a store's SearchRecall with the reference for
// query and k: the same units, best first (units of equal score may trade
// places), the same scores, every hit within the scope searched.
func checkRecallSearch(t *testing.T, s store.Store, rs store.RecallSearcher, in store.RecallScope, convs []memstack.Identity, kind indexkit.Kind, near [2]float64, query string, k int) []store.RecallHit {
	t.Helper()
	ctx := context.Background()
	ref, owner := recallReference(t, s, convs, kind, near)
	want, err := ref.Search(ctx, "scope", query, k)
	require.NoError(t, err)
	got, err := rs.SearchRecall(ctx, in, indexkit.Query{Terms: indexkit.QueryTerms(query), Kind: kind, Near: near, K: k})
	require.NoError(t, err, "SearchRecall(%s, %q)", in, query)
	what := fmt.Sprintf("SearchRecall(%s, %q, %s, near %v, k=%d)", in, query, kind, near, k)
	require.Len(t, got, len(want), what)
	for _, h := range got {
		if in.Conversation != nil {
			require.Equal(t, *in.Conversation, h.ID, "%s: a hit outside the conversation", what)
		} else {
			require.True(t, in.Scope.Contains(h.ID), "%s: hit %s outside the scope", what, h.ID.Key())
		}
	}
	key := func(h store.RecallHit) unitKey { return unitKey{h.ID.Key(), h.Seq} }
	for i, w := range want {
		u := owner[w.Seq]
		require.InDelta(t, w.Score, got[i].Score, 1e-9, "%s: score of hit %d", what, i)
		if key(got[i]) == u {
			continue
		}
		// Another unit of the same score may stand here (ties).
		j := slices.IndexFunc(got, func(h store.RecallHit) bool { return key(h) == u })
		if j < 0 {
			require.InDelta(t, want[len(want)-1].Score, w.Score, 1e-9, "%s: unit %v missing", what, u)
			continue
		}
		require.InDelta(t, w.Score, got[j].Score, 1e-9, what)
	}
	return got
}

// testRecallSearch: a store.RecallSearcher ranks a fixed corpus as the
// in-process index (retrieval.BM25) ranks the units memories.Recall makes
// — for a conversation and for a user's conversations, both kinds of
// unit, several neighbour weightings — through another client too; it
// never returns a unit outside the scope searched (another user, tenant or
// namespace, a derived identity of the user), nor one removed by RemovePrefix, Clear, Forget or
// ForgetScope; a bad query is an error wrapping store.ErrInvalidArgument.
func testRecallSearch(t *testing.T, e *env) {
	s := e.store()
	rs := optional[store.RecallSearcher](t, s, "store.RecallSearcher")
	ctx := e.ctx
	if _, err := rs.SearchRecall(ctx, store.RecallScope{Scope: store.UserScope(e.tenant(), "u1")}, indexkit.Query{Terms: []string{"x"}, K: 1}); errors.Is(err, store.ErrRecallNotReady) {
		// A backend whose index is off in this configuration (sqlitestore
		// without WithRecallIndex) has none to check.
		t.Skipf("%T keeps no recall index in this configuration: %v", s, err)
	}
	tenant := e.tenant()
	id := func(tenant, user, c string) memstack.Identity {
		return memstack.Identity{Tenant: tenant, User: user, Conversation: c}
	}
	c1, c2, c3 := id(tenant, "u1", "c1"), id(tenant, "u1", "c2"), id(tenant, "u1", "c3")
	// Outside the scopes searched: other users and tenants, and a derived
	// identity of the user (storekit.Derived: memstack's own, such as its
	// facts or a recall journal), which no index counts or returns.
	others := []memstack.Identity{id(tenant, "u10", "c1"), id(tenant, "u2", "c1"), id(tenant+"x", "u1", "c1"), id(tenant, "u1", "\x00derived")}
	rng := rand.New(rand.NewPCG(7, 11))
	writes := append([]memstack.Identity{c1, c1, c1, c2, c2, c3}, others...)
	// Every append an hour after the last, in a zone of its own (the
	// units' days are read in their own location).
	zone := time.FixedZone("UTC-5", -5*3600)
	start := time.Date(2026, 2, 26, 8, 0, 0, 0, zone)
	for i := range 150 {
		target := writes[rng.IntN(len(writes))]
		msgs := make([]llms.ChatMessage, 1+rng.IntN(3))
		for i := range msgs {
			msgs[i] = recallMessage(rng)
		}
		require.NoError(t, s.Append(memstack.WithTime(ctx, start.Add(time.Duration(i)*time.Hour)), target, msgs...))
	}
	if other, ok := e.secondNamespace(); ok {
		// The same user in another namespace: never found from this one.
		mustAppend(t, other, c1, human("invoice refund parcel courier in another namespace"))
	}
	user := store.UserScope(tenant, "u1")
	queries := []string{"invoice refund", "laptop battery", "paris", "peanut allergy vegan", "settled", "zebra"}
	weightings := [][2]float64{{0.5, 0.25}, {0, 0}, {1, 0.3}}
	check := func(step string) {
		t.Helper()
		for _, kind := range []indexkit.Kind{indexkit.Turns, indexkit.Exchanges} {
			for wi, near := range weightings {
				for qi, q := range queries {
					k := []int{1, 3, 10, 100}[(qi+wi)%4]
					checkRecallSearch(t, s, rs, store.RecallScope{Conversation: &c1}, []memstack.Identity{c1}, kind, near, q, k)
					checkRecallSearch(t, s, rs, store.RecallScope{Scope: user}, []memstack.Identity{c1, c2, c3}, kind, near, q, k)
				}
			}
		}
	}
	check("after the appends")
	checkDated := func() {
		t.Helper()
		for _, kind := range []indexkit.Kind{indexkit.Turns, indexkit.Exchanges} {
			for _, days := range [][2]int32{{20260226, 20260226}, {20260301, 20260301}, {20260227, 20260228}, {20260300, 20260331}, {20250101, 20250101}} {
				for _, in := range []struct {
					scope store.RecallScope
					convs []memstack.Identity
				}{{store.RecallScope{Conversation: &c1}, []memstack.Identity{c1}}, {store.RecallScope{Scope: user}, []memstack.Identity{c1, c2, c3}}} {
					var want []unitKey
					for _, c := range in.convs {
						recs, err := s.All(ctx, c)
						require.NoError(t, err)
						for _, u := range recallUnits(recs, kind) {
							if d := indexkit.DayKey(u.at); d >= days[0] && d <= days[1] {
								want = append(want, unitKey{c.Key(), u.seq})
							}
						}
					}
					got, err := rs.RecallDated(ctx, in.scope, kind, days[0], days[1])
					require.NoError(t, err)
					var keys []unitKey
					stored := map[unitKey]time.Time{}
					for _, c := range in.convs {
						recs, err := s.All(ctx, c)
						require.NoError(t, err)
						for _, u := range recallUnits(recs, kind) {
							stored[unitKey{c.Key(), u.seq}] = u.at
						}
					}
					for _, h := range got {
						// A unit no longer stored may be named: the
						// reader checks; every unit stored must be,
						// and one stored must be of the days asked.
						k := unitKey{h.ID.Key(), h.Seq}
						keys = append(keys, k)
						if at, ok := stored[k]; ok {
							d := indexkit.DayKey(at)
							require.True(t, d >= days[0] && d <= days[1], "RecallDated(%s, %s, %v): unit %v is of day %d", in.scope, kind, days, k, d)
						}
					}
					for _, w := range want {
						require.Contains(t, keys, w, "RecallDated(%s, %s, %v): a unit of the day missing", in.scope, kind, days)
					}
					for _, k := range keys {
						require.True(t, slices.ContainsFunc(in.convs, func(c memstack.Identity) bool { return c.Key() == k.conv }), "RecallDated(%s): %v outside the scope", in.scope, k)
					}
				}
			}
		}
	}
	checkDated()
	// Another client reads what this one wrote.
	s2 := e.store()
	checkRecallSearch(t, s2, optional[store.RecallSearcher](t, s2, "store.RecallSearcher"), store.RecallScope{Scope: user}, []memstack.Identity{c1, c2, c3}, indexkit.Turns, [2]float64{0.5, 0.25}, "invoice refund laptop", 20)

	// A prefix removal (retention), a Clear and a Forget: what they
	// removed is never found, what is left ranks as the reference.
	recs, err := s.All(ctx, c1)
	require.NoError(t, err)
	_, err = s.RemovePrefix(ctx, c1, recs[len(recs)/3].Seq)
	require.NoError(t, err)
	require.NoError(t, s.Clear(ctx, c2))
	mustAppend(t, s, c2, human("after the clear: invoice paris"), ai("noted, invoice paris"))
	check("after RemovePrefix, Clear and a new turn")
	if rw, ok := unwrap(s).(store.Rewriter); ok {
		// A Rewrite replaces a prefix (system messages too) and appends.
		recs, err := s.All(ctx, c1)
		require.NoError(t, err)
		_, err = rw.Rewrite(ctx, c1, recs[len(recs)/4].Seq, false, llms.SystemChatMessage{Content: "summary"}, human("rewritten: invoice laptop"), ai("rewritten: refund battery"))
		require.NoError(t, err)
		recs, err = s.All(ctx, c2)
		require.NoError(t, err)
		_, err = rw.Rewrite(ctx, c2, recs[len(recs)-1].Seq, true, human("after a reset: paris ticket"))
		require.NoError(t, err)
		check("after Rewrite")
	}
	checkDated()
	require.NoError(t, s.Forget(ctx, c3))
	for _, kind := range []indexkit.Kind{indexkit.Turns, indexkit.Exchanges} {
		got, err := rs.RecallDated(ctx, store.RecallScope{Scope: user}, kind, 20260200, 20260331)
		require.NoError(t, err)
		for _, h := range got {
			require.NotEqual(t, c3, h.ID, "a forgotten conversation's dated unit")
		}
	}
	for _, q := range queries {
		hits := checkRecallSearch(t, s, rs, store.RecallScope{Scope: user}, []memstack.Identity{c1, c2}, indexkit.Turns, [2]float64{0.5, 0.25}, q, 100)
		for _, h := range hits {
			require.NotEqual(t, c3, h.ID, "a forgotten conversation's unit was found")
		}
	}
	if u, ok := s.(store.Users); ok {
		_, err := u.ForgetScope(ctx, user)
		require.NoError(t, err)
		for _, q := range queries {
			hits, err := rs.SearchRecall(ctx, store.RecallScope{Scope: user}, indexkit.Query{Terms: indexkit.QueryTerms(q), Near: [2]float64{0.5, 0.25}, K: 10})
			require.NoError(t, err)
			require.Empty(t, hits, "a forgotten user's units were found for %q", q)
		}
		// The other users are still found.
		hits, err := rs.SearchRecall(ctx, store.RecallScope{Scope: store.UserScope(tenant, "u2")}, indexkit.Query{Terms: indexkit.QueryTerms(strings.Join(recallVocab, " ")), K: 5})
		require.NoError(t, err)
		require.NotEmpty(t, hits, "another user's units")
	}

	// Bad queries.
	for _, q := range []indexkit.Query{{Terms: []string{"x"}, Kind: 9, K: 1}, {Terms: []string{"x"}, Near: [2]float64{2, 0}, K: 1}, {Terms: []string{"x"}, K: 0}} {
		_, err := rs.SearchRecall(ctx, store.RecallScope{Scope: user}, q)
		require.ErrorIs(t, err, store.ErrInvalidArgument, "%+v", q)
	}
	_, err = rs.SearchRecall(ctx, store.RecallScope{Scope: store.Scope{Tenant: tenant, User: "u1", AllUsers: true}}, indexkit.Query{Terms: []string{"x"}, K: 1})
	require.ErrorIs(t, err, store.ErrInvalidArgument, "a bad scope")
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = rs.SearchRecall(done, store.RecallScope{Scope: user}, indexkit.Query{Terms: []string{"x"}, K: 1})
	require.True(t, errors.Is(err, context.Canceled), "a done context: %v", err)
}
