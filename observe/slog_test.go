package observe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
)

func jsonLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func TestSlogOneRecordPerReportWithoutMessageText(t *testing.T) {
	const secret = "my passport number is X1234567"
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	id := memstack.Identity{Tenant: "acme", User: "alice@example.com", Conversation: "c1"}
	ctx := memstack.WithIdentity(context.Background(), id)

	r, err := memories.NewRecentN(2)
	require.NoError(t, err)
	mem := observe.Wrap(r, "recent", observe.Slog(logger, slog.LevelInfo))
	require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": secret}, map[string]any{"output": "Noted: " + secret}))
	require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": "hi"}, map[string]any{"output": "hello"}))
	_, err = mem.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)

	out := buf.String()
	assert.NotContains(t, out, "passport", "no message text in logs")
	assert.NotContains(t, out, "X1234567")
	assert.NotContains(t, out, "alice", "no identity in logs")

	recs := jsonLines(t, &buf)
	require.Len(t, recs, 3, "one record per report")
	load := recs[2]
	assert.Equal(t, "memstack.load", load["msg"])
	assert.Equal(t, "INFO", load["level"])
	assert.Equal(t, "load", load["op"])
	assert.Equal(t, "recent", load["layer"])
	assert.Equal(t, id.Hash(), load["identity_hash"])
	assert.EqualValues(t, 2, load["injected"])
	assert.EqualValues(t, 2, load["dropped"])
	assert.EqualValues(t, 0, load["tokens"])
	assert.EqualValues(t, 0, load["llm_calls"])
	assert.EqualValues(t, 0, load["embedding_calls"])
	assert.Contains(t, load, "duration")
	assert.Positive(t, load["duration"].(float64), "duration in nanoseconds")
	assert.Equal(t, map[string]any{observe.ReasonWindow: float64(2)}, load["dropped_by"])
	assert.NotContains(t, load, "error")
	assert.Equal(t, "save", recs[0]["op"])
	assert.NotContains(t, recs[0], "dropped_by")
}

func TestSlogSaveLogsItsTime(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	b := mustBuffer()
	mem := observe.Wrap(b, "buf", observe.Slog(logger, slog.LevelInfo))
	at := time.Date(2023, 5, 8, 12, 30, 0, 0, time.FixedZone("", 2*3600))
	ctx := memstack.WithTime(context.Background(), at)
	require.NoError(t, mem.SaveContext(ctx, map[string]any{"input": "hi"}, map[string]any{"output": "hello"}))
	_, err := mem.LoadMemoryVariables(ctx, nil)
	require.NoError(t, err)
	recs := jsonLines(t, &buf)
	require.Len(t, recs, 2)
	assert.Equal(t, "save", recs[0]["op"])
	assert.Equal(t, "2023-05-08T12:30:00+02:00", recs[0]["at"], "a save logs the time its messages were dated with")
	assert.Equal(t, "load", recs[1]["op"])
	assert.NotContains(t, recs[1], "at", "a load has no save time")
}

func TestSlogErrorsLogAtErrorLevel(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sink := observe.Slog(logger, slog.LevelInfo)
	// Below the handler's level: nothing.
	sink.Observe(context.Background(), observe.Report{Op: observe.OpLoad, Layer: "x"})
	assert.Empty(t, buf.String())
	// A failed call logs at Error, with the error.
	sink.Observe(context.Background(), observe.Report{Op: observe.OpSave, Layer: "x", Err: errors.New("store unreachable"), Duration: time.Millisecond})
	recs := jsonLines(t, &buf)
	require.Len(t, recs, 1)
	assert.Equal(t, "ERROR", recs[0]["level"])
	assert.Equal(t, "store unreachable", recs[0]["error"])
	assert.EqualValues(t, time.Millisecond, recs[0]["duration"])

	// A nil logger is slog.Default(); a nil context is tolerated.
	prev := slog.Default()
	defer slog.SetDefault(prev)
	buf.Reset()
	slog.SetDefault(logger)
	//nolint:staticcheck // a nil context is tolerated
	observe.Slog(nil, slog.LevelError).Observe(nil, observe.Report{Op: observe.OpClear, Layer: "y"})
	recs = jsonLines(t, &buf)
	require.Len(t, recs, 1)
	assert.Equal(t, "clear", recs[0]["op"])
}

func TestSlogWithAddMessage(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	mem := observe.Wrap(mustBuffer(), "full", observe.Slog(logger, slog.LevelInfo))
	adder, ok := mem.(interface {
		AddMessage(context.Context, llms.ChatMessage) error
	})
	require.True(t, ok)
	require.NoError(t, adder.AddMessage(context.Background(), llms.SystemChatMessage{Content: "classified instructions"}))
	recs := jsonLines(t, &buf)
	require.Len(t, recs, 1)
	assert.Equal(t, "add", recs[0]["op"])
	assert.NotContains(t, buf.String(), "classified")
}
