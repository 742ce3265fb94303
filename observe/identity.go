package observe

import (
	"context"

	"github.com/memstack/memstack"
)

// IdentityResolver is implemented by memories that know which identity a
// call works on. Every memory in package memories implements it: the
// identity in the context, else the memory's default identity, else
// memstack.ErrNoIdentity (with memories.WithRequireIdentity).
type IdentityResolver interface {
	ResolveIdentity(ctx context.Context) (memstack.Identity, error)
}

// IdentityHash returns memstack.Identity.Hash of the identity a call of
// mem with ctx works on, for a Report: mem's own answer if mem is an
// IdentityResolver, else the identity in ctx, else the zero Identity's
// hash (the shared conversation a memory without identities keeps). It
// returns "" when mem says the call has no identity (the call then fails).
func IdentityHash(ctx context.Context, mem any) string {
	if r, ok := mem.(IdentityResolver); ok && ctx != nil {
		id, err := r.ResolveIdentity(ctx)
		if err != nil {
			return ""
		}
		return id.Hash()
	}
	id, _ := memstack.IdentityFrom(ctx)
	return id.Hash()
}
