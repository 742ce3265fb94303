package observe_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
)

// Wrap observes a single memory; Slog writes one log record per call, with
// counts and the identity's hash — never message text or who the user is.
// A save also logs the time its messages were dated with ("at"): here the
// turns' own times, as when a history is replayed with memstack.WithTime.
func ExampleSlog() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "duration" {
				return slog.Attr{} // vary from run to run
			}
			return a
		},
	}))
	recent, err := memories.NewRecentN(2)
	if err != nil {
		fmt.Println(err)
		return
	}
	mem := observe.Wrap(recent, "recent", observe.Slog(logger, slog.LevelInfo))

	ctx := memstack.WithIdentity(context.Background(), memstack.Identity{User: "alice"})
	said := time.Date(2023, 5, 8, 10, 0, 0, 0, time.UTC)
	for i, q := range []string{"My card number is 4111 1111 1111 1111", "What is my balance?"} {
		turn := memstack.WithTime(ctx, said.Add(time.Duration(i)*time.Minute))
		if err := mem.SaveContext(turn, map[string]any{"input": q}, map[string]any{"output": "..."}); err != nil {
			fmt.Println(err)
			return
		}
	}
	if _, err := mem.LoadMemoryVariables(ctx, nil); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {"level":"INFO","msg":"memstack.save","op":"save","layer":"recent","identity_hash":"5679129bd3976b8b","injected":0,"dropped":0,"tokens":0,"llm_calls":0,"embedding_calls":0,"at":"2023-05-08T10:00:00Z"}
	// {"level":"INFO","msg":"memstack.save","op":"save","layer":"recent","identity_hash":"5679129bd3976b8b","injected":0,"dropped":0,"tokens":0,"llm_calls":0,"embedding_calls":0,"at":"2023-05-08T10:01:00Z"}
	// {"level":"INFO","msg":"memstack.load","op":"load","layer":"recent","identity_hash":"5679129bd3976b8b","injected":2,"dropped":2,"tokens":0,"llm_calls":0,"embedding_calls":0,"dropped_by":{"outside_window":2}}
}

// A plain Go hook receives every Report.
func ExampleWrap() {
	buf, err := memories.NewBuffer()
	if err != nil {
		fmt.Println(err)
		return
	}
	mem := observe.Wrap(buf, "transcript", observe.SinkFunc(func(_ context.Context, r observe.Report) {
		fmt.Printf("%s %s: %d injected, err=%v\n", r.Op, r.Layer, len(r.Injected), r.Err)
	}))
	ctx := context.Background()
	_ = mem.SaveContext(ctx, map[string]any{"input": "Hi"}, map[string]any{"output": "Hello!"})
	_, _ = mem.LoadMemoryVariables(ctx, nil)
	_ = mem.SaveContext(ctx, map[string]any{}, map[string]any{"output": "?"})
	// Output:
	// save transcript: 0 injected, err=<nil>
	// load transcript: 2 injected, err=<nil>
	// save transcript: 0 injected, err=invalid input values: input values are empty
}
