// Package recallbench measures how much of what matters a conversation
// memory puts in front of the model, and at what cost in tokens. Its one
// job is the recall benchmark that cmd/memstack-recall runs: generate a long
// conversation with known evidence, replay it through any schema.Memory,
// and score what the memory loads.
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
//   - Systems lists what the benchmark compares at one budget: memstack's
//     default hybrid stack (NewHybrid: RecentN + Facts + Recall under one
//     combined.WithTokenBudget), memstack's recent window alone, and
//     langchaingo's ConversationTokenBuffer, ConversationWindowBuffer and
//     (unbounded, for reference) ConversationBuffer.
//   - Table, Details and BM25Rank render and explain the results: BM25Rank
//     tells whether a lexical index could have found a missed turn.
//
// A value found in the context counts even if it came from the wrong turn;
// the generator rules that out by construction (a value occurs in its
// evidence turns only; the tests check it over many seeds).
package recallbench
