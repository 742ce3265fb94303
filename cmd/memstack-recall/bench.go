package main

import (
	"context"
	"fmt"
	"github.com/tmc/langchaingo/schema"
	"time"

	"github.com/memstack/memstack/internal/recallbench/locomo"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/tokens"
)

// result is what one system achieved over every conversation.
type result struct {
	system  system
	answers []locomo.Answer
	saves   []time.Duration
}

// speedRow is one row of the Speed section.
type speedRow struct {
	name     string
	messages int // messages in the memory when asked
	saves    []time.Duration
	answers  []locomo.Answer
}

// data is the benchmark's input and everything it measured.
type data struct {
	o       options
	convs   []locomo.Conversation
	results []result
	// sessions are the results of the default stack, and of it with its
	// Recall narrowed to the conversation, with each session saved as a
	// conversation of its own and every question asked in a new one.
	sessions []result
	speed    []speedRow
}

// benchmark loads the data, runs every system and renders the report.
func benchmark(ctx context.Context, o options) (string, error) {
	convs, err := locomo.Load(o.locomo)
	if err != nil {
		return "", fmt.Errorf("-locomo %s: %w", o.locomo, err)
	}
	if len(convs) == 0 {
		return "", fmt.Errorf("-locomo %s: no conversations", o.locomo)
	}
	counter, err := tokens.CL100K()
	if err != nil {
		return "", err
	}
	emb, embName, err := newEmbedder(ctx, o)
	if err != nil {
		return "", err
	}
	failures := &indexFailures{}
	d := data{o: o, convs: convs}
	for _, s := range systems(o.budget, emb, embName, failures) {
		r, err := runSystem(ctx, s, convs, counter)
		if err != nil {
			return "", err
		}
		d.results = append(d.results, r)
	}
	if err := failures.err(); err != nil {
		return "", fmt.Errorf("-embedder %s -model %s: %w", o.embedder, o.model, err)
	}
	def, ok := d.defaultResult()
	if !ok {
		return "", errNoDefault
	}
	for _, s := range []system{
		def.system,
		{name: defaultName + ", Recall scoped to the conversation", group: groupDefault,
			factory: stack(o.budget, memories.WithRecallScope(memories.RecallScopeConversation))},
	} {
		r, err := runSessions(ctx, s, convs, counter)
		if err != nil {
			return "", err
		}
		d.sessions = append(d.sessions, r)
	}
	if d.speed, err = speed(ctx, o, convs, counter, def); err != nil {
		return "", err
	}
	return render(d, counter)
}

// defaultResult returns the default stack's result.
func (d data) defaultResult() (result, bool) {
	for _, r := range d.results {
		if r.system.group == groupDefault {
			return r, true
		}
	}
	return result{}, false
}

// runSystem replays every conversation through a fresh memory of s.
func runSystem(ctx context.Context, s system, convs []locomo.Conversation, counter tokens.Counter) (result, error) {
	return runWith(ctx, locomo.Replay, s, convs, counter)
}

// runSessions is runSystem with each session saved as a conversation of
// its own of one user and the questions asked in a new conversation
// (locomo.ReplaySessions): a returning user.
func runSessions(ctx context.Context, s system, convs []locomo.Conversation, counter tokens.Counter) (result, error) {
	return runWith(ctx, locomo.ReplaySessions, s, convs, counter)
}

// replayer replays one conversation into a memory.
type replayer func(context.Context, schema.Memory, *locomo.Conversation, tokens.Counter) (locomo.Run, error)

func runWith(ctx context.Context, replay replayer, s system, convs []locomo.Conversation, counter tokens.Counter) (result, error) {
	r := result{system: s}
	for i := range convs {
		mem, err := s.factory()
		if err != nil {
			return r, fmt.Errorf("building %s: %w", s.name, err)
		}
		run, err := replay(ctx, mem, &convs[i], counter)
		if err != nil {
			return r, fmt.Errorf("%s: %w", s.name, err)
		}
		r.answers = append(r.answers, run.Answers...)
		r.saves = append(r.saves, run.Saves...)
	}
	return r, nil
}

// speed times the default stack and its Recall alone: at LoCoMo size (the
// stack's figures are def's, from the main run; Recall alone is run over
// every conversation) and on a history of o.speedMessages messages (see
// locomo.Repeat) after which the last conversation's questions are asked.
func speed(ctx context.Context, o options, convs []locomo.Conversation, counter tokens.Counter, def result) ([]speedRow, error) {
	alone, err := runSystem(ctx, system{name: recallAloneName, factory: recallOnly}, convs, counter)
	if err != nil {
		return nil, err
	}
	rows := []speedRow{
		{name: def.system.name, saves: def.saves, answers: def.answers},
		{name: alone.system.name, saves: alone.saves, answers: alone.answers},
	}
	if o.speedMessages == 0 {
		return rows, nil
	}
	history, err := locomo.Repeat(convs, o.speedMessages)
	if err != nil {
		return nil, fmt.Errorf("-speed-messages %d: %w", o.speedMessages, err)
	}
	last := &convs[len(convs)-1]
	for _, s := range []system{def.system, alone.system} {
		mem, err := s.factory()
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", s.name, err)
		}
		saves, err := locomo.Save(ctx, mem, history)
		if err != nil {
			return nil, fmt.Errorf("%s, %d messages: %w", s.name, o.speedMessages, err)
		}
		answers, err := locomo.Ask(ctx, mem, last, counter)
		if err != nil {
			return nil, fmt.Errorf("%s, %d messages: %w", s.name, o.speedMessages, err)
		}
		rows = append(rows, speedRow{name: s.name, messages: len(history) * locomo.Messages, saves: saves, answers: answers})
	}
	return rows, nil
}

// recallAloneName names the default stack's Recall run alone.
const recallAloneName = "its Recall() alone"
