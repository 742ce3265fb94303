// Package extract finds durable facts in conversation messages — the user's
// name, where they live, their job, their preferences, the decisions taken —
// for the memories.Facts memory. Its one job is to turn messages into
// Candidates; storing, superseding and showing facts is the memory's job.
//
// # Design
//
// One small interface, Extractor, and two implementations:
//
//   - Patterns (NewPatterns): regular-expression rules over the messages'
//     text. A built-in English rule set (DefaultRules) covers the common
//     user facts and the decisions of a conversation; callers add their own
//     rules (WithRules). It needs no model, is deterministic and costs
//     microseconds per message. The rules favour precision over recall:
//     a missed fact costs less than a wrong one shown to the model on every
//     later turn. It reads at most DefaultMaxScanBytes of each message
//     (WithMaxScanBytes), so a pasted document costs what its start costs,
//     and it honours ctx's deadline while it works.
//   - LLM (NewLLM): one call to any langchaingo llms.Model per extraction,
//     in JSON mode, with the schema in a system instruction; the answer is
//     validated, and an answer that does not follow the schema yields no
//     facts and an error wrapping ErrMalformed.
//
// ExtractorFunc adapts a plain function. Every Extractor is given the
// messages of one turn and returns the Candidates found in them, each naming
// the messages (indices into its input) it came from.
//
// # Keys
//
// A Candidate's Subject and Attribute form the fact's key: a new value for
// the same key supersedes the old one in memories.Facts. Subjects are
// single lower-case words ("user" for facts about the user, "we" for what
// the conversation's parties decided together); attributes are lower-case,
// either a plain name ("name", "location", "job", "employer") or a category
// and a topic joined by a colon ("preference:hiking", "decision:use
// postgres"), so that each topic has its own current value. Normalize
// brings any subject and attribute to that form.
package extract

import (
	"context"
	"errors"
	"strings"
	"unicode"

	"github.com/tmc/langchaingo/llms"
)

// Well-known subjects and attributes used by the built-in rules and asked
// for by the LLM extractor's default instruction.
const (
	// SubjectUser is the subject of facts about the user.
	SubjectUser = "user"
	// SubjectWe is the subject of decisions the user and the assistant
	// (or the user's team) took together.
	SubjectWe = "we"

	AttrName       = "name"
	AttrLocation   = "location"
	AttrJob        = "job"
	AttrEmployer   = "employer"
	AttrPreference = "preference" // used as "preference:<topic>"
	AttrDecision   = "decision"   // used as "decision:<topic>"
)

// Candidate is one fact an Extractor found: a value for the key
// (Subject, Attribute), and the messages it came from.
type Candidate struct {
	// Subject is whom or what the fact is about: SubjectUser, SubjectWe or
	// any other single word.
	Subject string
	// Attribute is what the fact says about the subject: "name",
	// "location", "preference:<topic>"...
	Attribute string
	// Value is the fact's value, as stated ("Ana", "Lisbon", "loves
	// hiking").
	Value string
	// Sources are the indices, in the slice given to Extract, of the
	// messages the fact came from. Empty means the whole input.
	Sources []int
	// Rule names what produced the candidate: a Rule's Name for Patterns,
	// "llm" for LLM.
	Rule string
}

// Key returns the candidate's key in its normalized form: the subject and
// the attribute joined by one space (see Normalize).
func (c Candidate) Key() string {
	s, a := Normalize(c.Subject, c.Attribute)
	return s + " " + a
}

// Extractor finds facts in the messages of one conversation turn.
//
// Implementations must be safe for concurrent use, must honour ctx and
// must not keep msgs. An empty result with a nil error means "nothing worth
// remembering"; an error means the messages could not be examined (the
// caller reports it and stores the turn all the same).
type Extractor interface {
	Extract(ctx context.Context, msgs []llms.ChatMessage) ([]Candidate, error)
}

// ExtractorFunc adapts a function to Extractor.
type ExtractorFunc func(ctx context.Context, msgs []llms.ChatMessage) ([]Candidate, error)

// Extract implements Extractor.
func (f ExtractorFunc) Extract(ctx context.Context, msgs []llms.ChatMessage) ([]Candidate, error) {
	return f(ctx, msgs)
}

// ErrMalformed is wrapped by the error an LLM extractor returns when the
// model's answer does not follow the JSON schema it asked for. No facts are
// returned with it. Use errors.As with *MalformedError for the reason.
var ErrMalformed = errors.New("extract: malformed model output")

// ErrInvalidOption is wrapped by errors about a bad option or constructor
// argument of this package; the message names the option.
var ErrInvalidOption = errors.New("extract: invalid option")

// MalformedError is the error an LLM extractor returns for an answer that
// does not follow the schema. errors.Is(err, ErrMalformed) is true for it.
// It never quotes the model's answer, which may repeat user content.
type MalformedError struct {
	// Reason says what is wrong ("not a JSON object", "fact 2 has no
	// value").
	Reason string
	// Err is the JSON decoder's error, when there is one.
	Err error
}

// Error implements error.
func (e *MalformedError) Error() string {
	if e.Err != nil {
		return ErrMalformed.Error() + ": " + e.Reason + ": " + e.Err.Error()
	}
	return ErrMalformed.Error() + ": " + e.Reason
}

// Is makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// Unwrap returns the decoder's error, if any.
func (e *MalformedError) Unwrap() error { return e.Err }

// Normalize returns subject and attribute in the form keys use: both
// trimmed and lower-cased with runs of white space made one space; in the
// subject, spaces become '_' so that it is a single word and the key
// "subject attribute" splits unambiguously at its first space.
func Normalize(subject, attribute string) (string, string) {
	s := strings.ReplaceAll(collapse(strings.ToLower(subject)), " ", "_")
	return s, collapse(strings.ToLower(attribute))
}

// collapse trims s and turns every run of white space into one space.
func collapse(s string) string {
	return strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ")
}
