// Package summarizer turns conversation messages into a running summary: its
// one job is progressive summarization, folding new messages into the summary
// so far.
//
// Summarizer is the one small interface a summary memory needs
// (memories.NewSummary). This package has two implementations:
//
//   - LLM (New) asks any langchaingo llms.Model. It calls GenerateContent
//     with role-separated messages — a system message carrying the
//     instruction, then a human message carrying the previous summary (if
//     any) and the transcript of the new messages — so chat models get real
//     roles. The answer is checked before it is returned: an empty summary,
//     a summary longer than WithMaxTokens, or a summary that is not shorter
//     (in tokens) than the previous summary and transcript it replaces is
//     rejected with an error wrapping ErrEmptySummary, ErrSummaryTooLong or
//     ErrNotShorter. A memory that gets such an error keeps the messages
//     raw, so a bad answer never costs information.
//   - Extractive (NewExtractive) needs no model: it keeps the most
//     informative sentences of the previous summary and the new messages
//     within a token budget, in their original order. It is deterministic
//     and offline, which makes it the summarizer for examples, tests and any
//     deployment without a model.
//
// # Transcript
//
// Both implementations see messages as the transcript llms.GetBufferString
// renders ("Human: ...", "AI: ...", "tool: ...", one message per line), with
// one extension: the tool calls of an AI message are appended to its line as
// JSON ({"name":...,"arguments":...}), exactly as GetBufferString already
// does for a legacy function call, so a summary can mention what was looked
// up.
//
// Both implementations are safe for concurrent use and honour context
// cancellation.
package summarizer
