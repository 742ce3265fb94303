package observe

import (
	"context"
	"log/slog"
	"sort"
)

// Slog returns a Sink that writes one log record per Report to logger
// (slog.Default() when nil) at level, or at slog.LevelError when the call
// failed and level is lower.
//
// The record's message is "memstack.<op>" and its attributes are op, layer,
// identity_hash, injected and dropped (item counts), tokens, duration,
// llm_calls, embedding_calls, at (Report.At, present when set: the time a
// save's messages were dated with), dropped_by (a group counting the
// dropped items per reason, present when any were dropped) and error
// (present when the call failed). A record never carries message text or the identity itself
// — except as far as an error's text does: memstack's errors never include
// message text, but a few name the identity's storage key.
// Nothing is built when the logger is not enabled for the level.
func Slog(logger *slog.Logger, level slog.Level) Sink {
	if logger == nil {
		logger = slog.Default()
	}
	return slogSink{logger: logger, level: level}
}

type slogSink struct {
	logger *slog.Logger
	level  slog.Level
}

func (s slogSink) Observe(ctx context.Context, r Report) {
	if ctx == nil {
		ctx = context.Background()
	}
	level := s.level
	if r.Err != nil && level < slog.LevelError {
		level = slog.LevelError
	}
	if !s.logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 13)
	attrs = append(attrs,
		slog.String("op", r.Op),
		slog.String("layer", r.Layer),
		slog.String("identity_hash", r.IdentityHash),
		slog.Int("injected", len(r.Injected)),
		slog.Int("dropped", len(r.Dropped)),
		slog.Int("tokens", r.Tokens),
		slog.Duration("duration", r.Duration),
		slog.Int("llm_calls", r.LLMCalls),
		slog.Int("embedding_calls", r.EmbeddingCalls),
	)
	if !r.At.IsZero() {
		attrs = append(attrs, slog.Time("at", r.At))
	}
	if len(r.Dropped) > 0 {
		reasons := CountReasons(r.Dropped)
		names := make([]string, 0, len(reasons))
		for k := range reasons {
			names = append(names, k)
		}
		sort.Strings(names)
		by := make([]any, 0, len(names))
		for _, k := range names {
			by = append(by, slog.Int(k, reasons[k]))
		}
		attrs = append(attrs, slog.Group("dropped_by", by...))
	}
	if r.Err != nil {
		attrs = append(attrs, slog.String("error", r.Err.Error()))
	}
	s.logger.LogAttrs(ctx, level, "memstack."+r.Op, attrs...)
}

// CountReasons returns how many of items have each Reason ("" for items
// without one).
func CountReasons(items []Item) map[string]int {
	out := make(map[string]int, 2)
	for _, it := range items {
		out[it.Reason]++
	}
	return out
}
