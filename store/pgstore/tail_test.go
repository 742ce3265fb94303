package pgstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
)

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan, with the fields the
// cost test reads.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	SharedHit    int64      `json:"Shared Hit Blocks"`
	SharedRead   int64      `json:"Shared Read Blocks"`
	Plans        []planNode `json:"Plans"`
}

// walk calls f on n and every node below it.
func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// literal quotes s as an SQL string literal (standard_conforming_strings
// is on).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// explainTail runs Tail's statement for id, n and after under EXPLAIN
// (ANALYZE, BUFFERS, FORMAT JSON), prepared as the store prepares it and
// planned as mode (plan_cache_mode: force_custom_plan or
// force_generic_plan), and returns the plan.
func explainTail(t *testing.T, c *pgx.Conn, s *pgstore.Store, ns string, id memstack.Identity, n int, after int64, mode string) planNode {
	t.Helper()
	ctx := context.Background()
	h := sha256.Sum256([]byte(id.Key()))
	execAll(t, c,
		"SET plan_cache_mode = "+mode,
		"PREPARE tail_plan (bytea, text, text, bigint, bigint) AS "+s.TailSQL())
	defer execAll(t, c, "DEALLOCATE tail_plan", "RESET plan_cache_mode")
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	var raw []byte
	require.NoError(t, c.QueryRow(ctx, fmt.Sprintf("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE tail_plan('\\x%s', %s, %s, %d, %d)",
		hex.EncodeToString(h[:]), literal(ns), literal(id.Key()), after, n)).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	require.Len(t, out, 1)
	return out[0].Plan
}

// TestTailCostsWhatItReturns reads the plans of Tail's statement, as
// PostgreSQL runs it (EXPLAIN ANALYZE, custom and generic plans), on a
// conversation of 2,000 and then 20,000 messages with three system
// messages among its oldest: no plan reads the messages table
// sequentially, the system messages come from their partial index, and
// the pages a Tail touches (PostgreSQL's own count of buffer hits and
// reads) do not grow with the history. Without the partial index the same
// measurement grows with it, which the test checks last, so it can fail.
func TestTailCostsWhatItReturns(t *testing.T) {
	ctx := context.Background()
	admin := adminConn(t)
	prefix := freshPrefix("tail")
	s := open(t, pgstore.WithTablePrefix(prefix))
	messages := prefix + "messages"
	id := memstack.Identity{Tenant: "acme", User: "tail", Conversation: "long"}
	// Other conversations in the table, so id's rows are not all of it.
	for i := range 20 {
		other := memstack.Identity{Tenant: "acme", User: "other", Conversation: fmt.Sprint(i)}
		fillConversation(t, s, other, 100, true)
	}

	stored := 0
	grow := func(to int) {
		t.Helper()
		for stored < to {
			msgs := make([]llms.ChatMessage, 0, 500)
			for ; len(msgs) < cap(msgs) && stored < to; stored++ {
				if stored == 0 || stored == 300 || stored == 700 {
					msgs = append(msgs, llms.SystemChatMessage{Content: fmt.Sprint("system ", stored)})
					continue
				}
				msgs = append(msgs, human(fmt.Sprintf("message %d: what did we decide about the launch date?", stored)))
			}
			require.NoError(t, s.Append(ctx, id, msgs...))
		}
		execAll(t, admin, "ANALYZE "+messages, "ANALYZE "+prefix+"conversations")
	}
	calls := []struct {
		name  string
		n     int
		after func(all []store.Record) int64
		want  int // records returned
	}{
		{"newest 10", 10, func([]store.Record) int64 { return 0 }, 3 + 10},
		{"every message after the 20th newest", math.MaxInt, func(all []store.Record) int64 { return all[len(all)-21].Seq }, 3 + 20},
	}
	// measure returns the pages each call touched under each plan mode,
	// checking the records Tail returns and, with the partial index, the
	// plans' scans.
	measure := func(t *testing.T, partialIndex bool) map[string]int64 {
		t.Helper()
		all, err := s.All(ctx, id)
		require.NoError(t, err)
		out := map[string]int64{}
		for _, c := range calls {
			after := c.after(all)
			rs, err := s.Tail(ctx, id, c.n, after)
			require.NoError(t, err)
			require.Len(t, rs, c.want, c.name)
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				plan := explainTail(t, admin, s, pgstore.DefaultNamespace, id, c.n, after, mode)
				usesPartial := false
				plan.walk(func(n planNode) {
					if partialIndex && n.RelationName == messages {
						assert.NotContains(t, []string{"Seq Scan", "Parallel Seq Scan"}, n.NodeType,
							"%s, %s: Tail reads the messages table sequentially", c.name, mode)
					}
					usesPartial = usesPartial || n.IndexName == prefix+"messages_system"
				})
				if partialIndex {
					assert.True(t, usesPartial, "%s, %s: the system messages come from their partial index", c.name, mode)
				}
				out[c.name+", "+mode] = plan.SharedHit + plan.SharedRead
			}
		}
		return out
	}

	grow(2000)
	small := measure(t, true)
	grow(20000)
	large := measure(t, true)
	const bound = 40
	for k, pages := range large {
		t.Logf("%s: %d pages at 2,000 messages, %d at 20,000", k, small[k], pages)
		assert.LessOrEqual(t, pages, int64(bound), "%s: Tail touched %d pages of a 20,000-message conversation", k, pages)
		assert.LessOrEqual(t, pages, small[k]+5, "%s: Tail touched %d pages at 20,000 messages, %d at 2,000", k, pages, small[k])
	}

	// The control: without the partial index the system messages are
	// found by reading the conversation, and the measurement shows it.
	execAll(t, admin, "DROP INDEX "+prefix+"messages_system")
	without := measure(t, false)
	grew := false
	for k, pages := range without {
		t.Logf("without the partial index, %s: %d pages at 20,000 messages", k, pages)
		grew = grew || pages > bound
	}
	assert.True(t, grew, "without the partial index some Tail must touch more than %d pages: the measurement cannot fail", bound)
}
