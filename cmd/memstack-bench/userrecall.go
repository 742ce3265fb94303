package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// userRecallResult is what measureUserRecall measured for a user with
// conversations conversations of userRecallMessages messages each.
type userRecallResult struct {
	conversations int
	// coldP50 and coldP95: the first load of a fresh stack (a new
	// process's: over an in-process index every conversation is read and
	// indexed; over a store that searches its own, one search), over
	// coldSamples fresh stacks.
	coldP50, coldP95 time.Duration
	loadP50          time.Duration // budgeted loads in a new conversation, warm
	loadP95          time.Duration
	saveUser         time.Duration // p50 SaveContext of a user-scoped Recall
	saveConv         time.Duration // p50 SaveContext of a conversation-scoped Recall, same run
}

// userRecallMessages is the size of each of the user's conversations.
const userRecallMessages = 100

// coldSamples is how many fresh stacks time a first load.
const coldSamples = 10

// measureUserRecall fills, for one new user of s, convs conversations of
// userRecallMessages messages each (per entry of counts), then opens a
// Recall searching the user's conversations (the default) in a stack
// RecentN(6) + Recall under combined.WithTokenBudget(1000), and times: its
// first load in a new conversation (cold: it indexes every conversation),
// samples budgeted loads after it, each with another question, and
// samples saves, alternating with the saves of a Recall scoped to the
// conversation on the same store (what a save costs without user-level
// memory). settle, if not nil, runs after the filling (see
// storeBackend.settle). The user is forgotten afterwards.
func measureUserRecall(ctx context.Context, s store.Store, counts []int, samples int, settle func(context.Context) error) ([]userRecallResult, error) {
	var out []userRecallResult
	for _, n := range counts {
		var b [6]byte
		_, _ = rand.Read(b[:])
		tenant, user := "bench-users", hex.EncodeToString(b[:])
		users, ok := s.(store.Users)
		if !ok {
			return nil, fmt.Errorf("the store %T cannot list conversations", s)
		}
		forget := func() { _, _ = users.ForgetScope(context.WithoutCancel(ctx), store.UserScope(tenant, user)) }
		r, err := func() (userRecallResult, error) {
			defer forget()
			for c := range n {
				id := memstack.Identity{Tenant: tenant, User: user, Conversation: fmt.Sprintf("conv-%d", c)}
				msgs := make([]llms.ChatMessage, 0, userRecallMessages)
				for i := range userRecallMessages / 2 {
					k := c*userRecallMessages + i
					msgs = append(msgs, llms.HumanChatMessage{Content: humanText(k)}, llms.AIChatMessage{Content: aiText(k)})
				}
				if err := s.Append(ctx, id, msgs...); err != nil {
					return userRecallResult{}, fmt.Errorf("filling conversation %d: %w", c, err)
				}
			}
			if settle != nil {
				if err := settle(ctx); err != nil {
					return userRecallResult{}, fmt.Errorf("settling the tables: %w", err)
				}
			}
			return timeUserRecall(ctx, s, tenant, user, n, samples)
		}()
		if err != nil {
			return nil, fmt.Errorf("%d conversations: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// agentStack returns the memory stack an agent over s would use, which
// the user-recall table and the scale benchmark measure: RecentN(6) and
// a Recall of the user's conversations (the default scope, excluding the
// window's six messages) under combined.WithTokenBudget(1000).
func agentStack(s store.Store) (schema.Memory, error) {
	recent, err := memories.NewRecentN(6, memories.WithStore(s))
	if err != nil {
		return nil, fmt.Errorf("RecentN: %w", err)
	}
	recall, err := memories.NewRecall(memories.WithStore(s), memories.WithExcludeRecent(6))
	if err != nil {
		return nil, fmt.Errorf("Recall: %w", err)
	}
	return combined.New([]schema.Memory{recent, recall}, combined.WithTokenBudget(1000))
}

// timeUserRecall times, for the user of tenant with n conversations in s,
// the first load of fresh agent stacks in a new conversation, samples
// warm loads, and the saves of a user-scoped against a
// conversation-scoped Recall (see measureUserRecall).
func timeUserRecall(ctx context.Context, s store.Store, tenant, user string, n, samples int) (userRecallResult, error) {
	here := memstack.WithIdentity(ctx, memstack.Identity{Tenant: tenant, User: user, Conversation: "new"})
	r := userRecallResult{conversations: n}
	var mem schema.Memory
	ask := func(i int) (time.Duration, error) {
		t0 := time.Now()
		_, err := mem.LoadMemoryVariables(here, map[string]any{"input": humanText((i * 7919) % (n * userRecallMessages / 2))})
		return time.Since(t0), err
	}
	cold := make([]time.Duration, coldSamples)
	for i := range cold {
		var err error
		if mem, err = agentStack(s); err != nil {
			return userRecallResult{}, err
		}
		if cold[i], err = ask(i); err != nil {
			return r, fmt.Errorf("the first load: %w", err)
		}
	}
	slices.Sort(cold)
	r.coldP50, r.coldP95 = cold[len(cold)/2], cold[min(len(cold)-1, len(cold)*95/100)]
	loads := make([]time.Duration, 0, samples)
	for i := range samples + 3 {
		d, err := ask(i + 1)
		if err != nil {
			return r, fmt.Errorf("loading: %w", err)
		}
		if i >= 3 {
			loads = append(loads, d)
		}
	}
	slices.Sort(loads)
	r.loadP50, r.loadP95 = loads[len(loads)/2], loads[min(len(loads)-1, len(loads)*95/100)]

	// Saves: a Recall alone, user-scoped and conversation-scoped,
	// alternating, each warmed by its first (untimed) saves.
	userOnly, err := memories.NewRecall(memories.WithStore(s))
	if err != nil {
		return r, err
	}
	convOnly, err := memories.NewRecall(memories.WithStore(s), memories.WithRecallScope(memories.RecallScopeConversation))
	if err != nil {
		return r, err
	}
	var su, sc []time.Duration
	for i := range samples + 3 {
		t := opTurns[i%len(opTurns)]
		for _, m := range []struct {
			mem schema.Memory
			to  *[]time.Duration
		}{{userOnly, &su}, {convOnly, &sc}} {
			t0 := time.Now()
			if err := m.mem.SaveContext(here, t.in, t.out); err != nil {
				return r, fmt.Errorf("saving: %w", err)
			}
			if i >= 3 {
				*m.to = append(*m.to, time.Since(t0))
			}
		}
	}
	slices.Sort(su)
	slices.Sort(sc)
	r.saveUser, r.saveConv = su[len(su)/2], sc[len(sc)/2]
	return r, nil
}
