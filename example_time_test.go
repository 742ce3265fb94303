package memstack_test

import (
	"context"
	"fmt"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
)

// Replaying a history at the times its turns were said: each save's
// context carries the turn's time, and the store keeps it with the
// messages. A context without a time means "now".
func ExampleWithTime() {
	ctx := context.Background()
	st := store.NewInMemory()
	mem, err := memories.NewBuffer(memories.WithStore(st))
	if err != nil {
		fmt.Println(err)
		return
	}

	history := []struct {
		at       time.Time
		question string
		answer   string
	}{
		{time.Date(2023, 5, 8, 9, 30, 0, 0, time.UTC), "Hi, I'm Ana.", "Hello Ana!"},
		{time.Date(2023, 5, 9, 18, 5, 0, 0, time.FixedZone("", 2*3600)), "Still there?", "Always."},
	}
	for _, turn := range history {
		turnCtx := memstack.WithTime(ctx, turn.at)
		if err := mem.SaveContext(turnCtx, map[string]any{"input": turn.question}, map[string]any{"output": turn.answer}); err != nil {
			fmt.Println(err)
			return
		}
	}

	recs, err := st.All(ctx, memstack.Identity{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range recs {
		fmt.Println(r.Time.Format(time.RFC3339), r.Message.GetContent())
	}

	at, ok := memstack.TimeFrom(memstack.WithTime(ctx, history[0].at))
	fmt.Println(at.Format(time.DateOnly), ok)
	_, ok = memstack.TimeFrom(ctx)
	fmt.Println("plain context has a time:", ok)
	// Output:
	// 2023-05-08T09:30:00Z Hi, I'm Ana.
	// 2023-05-08T09:30:00Z Hello Ana!
	// 2023-05-09T18:05:00+02:00 Still there?
	// 2023-05-09T18:05:00+02:00 Always.
	// 2023-05-08 true
	// plain context has a time: false
}
