package combined_test

import (
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/layer"
)

// The layer contract's names in combined are aliases: one type each, so
// code written against either package compiles against both.
var (
	_ *layer.Item      = (*combined.Item)(nil)
	_ *layer.Items     = (*combined.Items)(nil)
	_ *layer.StoreUse  = (*combined.StoreUse)(nil)
	_ *layer.Itemizer  = (*combined.Itemizer)(nil)
	_ *layer.StoreUser = (*combined.StoreUser)(nil)
	_ layer.StoreUser  = (*combined.Memory)(nil)
)
