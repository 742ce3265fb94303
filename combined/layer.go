package combined

import "github.com/memstack/memstack/layer"

// The layer contract — what a child offers a token budget and what it
// reports about its stores — lives in package layer, which package
// memories and memories of your own implement without importing combined.
// The names below are aliases, not new types: combined.Item and layer.Item
// are one type, so code written against either compiles against both.
// They are kept so that code naming them here keeps compiling; new code
// should name the layer package.

// Itemizer is [layer.Itemizer]: a child a budget loads as items it keeps
// or drops whole.
type Itemizer = layer.Itemizer

// Items is [layer.Items]: one variable loaded as items.
type Items = layer.Items

// Item is [layer.Item]: one piece of a variable that the budget keeps or
// drops whole.
type Item = layer.Item

// StoreUse is [layer.StoreUse]: how a memory uses a store that keeps its
// transcript.
type StoreUse = layer.StoreUse

// StoreUser is [layer.StoreUser]: a memory that reports its StoreUses to
// New.
type StoreUser = layer.StoreUser
