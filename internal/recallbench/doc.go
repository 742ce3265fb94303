// Package recallbench is a synthetic test corpus for conversation
// memories: it generates a long conversation with known evidence, replays
// it through any schema.Memory and scores what the memory loads — how much
// of what matters it puts in front of the model, and at what cost in
// tokens. Tests use it; the recall benchmark on real data (LoCoMo) is
// package internal/recallbench/locomo and cmd/memstack-recall. A generated
// conversation flatters a lexical index (its questions are written to
// share words with their facts), so its figures are no benchmark.
//
// # Design
//
//   - Generate makes a multi-session conversation from a seed (math/rand/v2
//     PCG; the same Config gives the same conversation on every platform):
//     sessions of filler chit-chat drawn from varied templates, with facts
//     planted at known turns ("my sister's name is Lina", "we agreed the
//     budget for the kitchen renovation is 4,200 euros", "I moved to Porto
//     in March"), some changed later ("the budget went up to ..."), and a
//     question per fact asked a week after the last session. Questions
//     paraphrase their facts: they share a content word with the statement
//     more often than not, so a lexical index has a chance, but not always,
//     and filler reuses their words as distractors. Each question knows its
//     evidence turns.
//   - Replay feeds the turns through a memory (one SaveContext per turn)
//     and asks each question with one LoadMemoryVariables({"input":
//     question}); questions are not saved, so none helps another.
//   - Score is the metric: evidence recall is the share of evidence turns
//     present in the loaded context (all variables together) — the turn's
//     human message verbatim, or the fact's value as a whole word (a fact
//     layer shows values, not messages) — and the context's size is counted
//     in cl100k tokens as combined.WithTokenBudget counts it.
//
// A value found in the context counts even if it came from the wrong turn;
// the generator rules that out by construction (a value occurs in its
// evidence turns only; the tests check it over many seeds).
package recallbench
