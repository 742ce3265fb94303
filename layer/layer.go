// Package layer is the contract between a memory and the stack that holds
// it: what a layer of a combined.Memory offers a token budget (Itemizer)
// and what it tells combined.New about the stores it keeps its transcript
// in (StoreUser). Package memories implements the contract, package
// combined relies on it, and neither imports the other: both import this
// package, as database/sql and its drivers both import database/sql/driver.
// A memory of your own implements the contract by importing this package
// alone.
//
// The package is named for what it describes: combined.New stacks memories
// as layers (the names of combined.WithLayerNames, the Layer of an
// observe.Report), and this is what a layer promises the stack. It holds
// types and constants only — no behaviour, no state — so a memory's policy
// (which items it offers, in what drop order) is documented on the memory,
// and the stack's mechanism (how a budget trims) on package combined.
//
// Both interfaces are optional. A stack loads a child that does not
// implement Itemizer with its LoadMemoryVariables and trims the value by
// its own rules, and checks a child that does not implement StoreUser as
// one that keeps nothing in a shared store (unless it is a langchaingo
// memory over store.AsHistory, which the stack recognises itself).
//
// # Items under a token budget
//
// Under a token budget (combined.WithTokenBudget) a stack loads every
// child that implements Itemizer with LoadItems instead of
// LoadMemoryVariables, and gets its variable as a list of items that it
// keeps or drops whole — never half a message: a message may span several
// lines of a rendered history, so a string cannot be trimmed safely by
// lines. The budget:
//
//  1. counts each item's Text (the counts are cached) to plan what to
//     drop: the items of the child it ranks lowest (combined.WithPriorities)
//     first, all of them in the child's drop order (Item.Priority), before
//     any item of the next child;
//  2. renders each variable from the items it keeps (Items.Render) and
//     counts the result exactly, dropping more while the total is over the
//     budget;
//  3. takes back, the most important first, every dropped item that fits
//     in the room left; and
//  4. reports what it kept (observe.Recorder.Injected) and dropped
//     (Dropped, with observe.ReasonBudget), each item named by its Kind,
//     ID, Score and Time.
//
// An Itemizer answers for steps 1 and 2 (see Itemizer for what it
// promises); the stack does the rest.
//
// # Drop order
//
// Within one child, the item with the lowest Priority is dropped first and,
// among equal priorities, the one listed first; items with the same
// non-zero Group are kept or dropped together. Which item a layer shows
// last is its policy, documented on its LoadItems. The layers that render
// a transcript share one scheme, in the constants below: other messages
// (PriorityMessage) go before a summary of older messages
// (PrioritySummary), which goes before system messages (PrioritySystem),
// the oldest first within each; an AI message that calls tools shares a
// Group with the tool results that follow it. A stack trims the messages
// of a child that does not implement Itemizer by the same scheme. Layers
// that rank what they show use other priorities (a relevance score, a
// rank by age), compared only with their own items.
//
// # Stores shared by layers
//
// Layers of one stack may keep their messages in one store; combined.New
// asks every child that implements StoreUser how it uses its stores (one
// StoreUse per store) and refuses a stack in which one layer would remove
// messages that another on the same store reads, or two layers would keep
// state under the same name there. See StoreUse.
package layer

import (
	"context"
	"time"
)

// Drop priorities of the items of a layer that renders a transcript (see
// "Drop order" above): lower is dropped first. Items of one child are
// compared only with each other, so a layer that ranks its items some
// other way does not use these.
const (
	// PriorityMessage is a message that is neither a system message nor a
	// summary: dropped first, the oldest first.
	PriorityMessage = 0
	// PrioritySummary is a summary of the messages before those shown:
	// dropped after the messages it precedes.
	PrioritySummary = 1
	// PrioritySystem is a system message: dropped last.
	PrioritySystem = 2
)

// Itemizer is implemented by memories whose loaded variable is a list of
// items that a token budget can trim whole: a stack with a budget loads a
// child that implements it with LoadItems instead of LoadMemoryVariables.
// Every memory of package memories implements it.
//
// The contract:
//
//   - LoadItems loads, for the same context and inputs, what
//     LoadMemoryVariables would — or more, for a layer that can use a
//     budget's room (a layer that ranks what it shows may offer more
//     candidates than it shows unbudgeted) — as one variable (Items.Key)
//     made of items (Items.List), in the order they appear in the
//     variable.
//   - Items.Render(keep) returns the variable's value made of the items
//     whose keep entry is true (keep has one entry per item of List). With
//     every entry true it returns every item offered (for a layer that
//     offers no more than it shows, exactly what LoadMemoryVariables
//     returns under Key); with none true it returns an empty value ("" or
//     an empty slice). It may be called several times, and concurrently
//     with other children's calls, but not concurrently with itself.
//   - Each Item's Text is the item's text as it appears in the variable
//     (a message's rendered line or lines): the budget counts it to plan
//     what to drop, then counts the rendered result exactly.
//   - Priority orders dropping within the child (see "Drop order" in the
//     package documentation): the item with the lowest Priority is dropped
//     first, and among equal priorities the one listed first. Items with
//     the same non-zero Group are kept or dropped together.
//   - LoadItems records on the observe.Recorder in its context only what
//     the budget cannot know: items it left out itself (a window's older
//     messages, with their reason), model calls. The stack records the
//     items it keeps as Injected, those it drops as Dropped with
//     observe.ReasonBudget, and the variable's tokens.
type Itemizer interface {
	LoadItems(ctx context.Context, inputs map[string]any) (Items, error)
}

// Items is one variable loaded as items (see Itemizer).
type Items struct {
	// Key is the variable's name (the memory key).
	Key string
	// List holds the items in the order they appear in the variable.
	List []Item
	// Render returns the variable's value made of the items whose keep
	// entry is true.
	Render func(keep []bool) (any, error)
}

// Item is one piece of a variable that the budget keeps or drops whole.
type Item struct {
	// Text is the item's text as it appears in the variable.
	Text string
	// Kind, ID and Score name the item in reports (see observe.Item):
	// "message" and its Seq, "summary", "fact" and its key...
	Kind  string
	ID    string
	Score float64
	// Time is the stored time of what the item stands for (a message's
	// store.Record.Time, the time a fact became valid, an exchange's
	// time), zero when unknown; the budget copies it into the observe.Item
	// it reports for the item (Injected, Dropped, and combined.Trim's
	// Dropped).
	Time time.Time
	// Priority: lower is dropped first; ties go by position, earlier first
	// (see "Drop order" in the package documentation).
	Priority float64
	// Group: items with the same non-zero Group are kept or dropped
	// together.
	Group int
}
