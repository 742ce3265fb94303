package observe

import (
	"context"
	"strings"

	"github.com/memstack/memstack"
)

// IdentityResolver is implemented by memories that know which identity a
// call works on. Every memory in package memories implements it: the
// identity in the context, else the memory's default identity, else
// memstack.ErrNoIdentity (with memories.WithRequireIdentity).
type IdentityResolver interface {
	ResolveIdentity(ctx context.Context) (memstack.Identity, error)
}

// IdentityHash returns the hash of the identity a call of mem with ctx
// works on, for a Report: the identity is mem's own answer if mem is an
// IdentityResolver, else the identity in ctx, else the zero Identity (the
// shared conversation a memory without identities keeps); the hash is
// mem's if it is an IdentityHasher (a keyed hash), else
// memstack.Identity.Hash. It returns "" when mem says the call has no
// identity (the call then fails).
func IdentityHash(ctx context.Context, mem any) string {
	if r, ok := mem.(IdentityResolver); ok && ctx != nil {
		id, err := r.ResolveIdentity(ctx)
		if err != nil {
			return ""
		}
		return hashOf(mem, id)
	}
	id, _ := memstack.IdentityFrom(ctx)
	return hashOf(mem, id)
}

// IdentityHasher is implemented by memories that name identities in
// reports with their own hash (memories.WithHashKey: a keyed hash);
// IdentityHash and RedactFor use it.
type IdentityHasher interface {
	HashIdentity(id memstack.Identity) string
}

func hashOf(mem any, id memstack.Identity) string {
	if h, ok := mem.(IdentityHasher); ok {
		return h.HashIdentity(id)
	}
	return id.Hash()
}

// Redact returns err with id's key (memstack.Identity.Key) replaced, in
// its message, by "identity " and the start of id's hash: reports and
// events carry no identities, even inside an error's text. errors.Is and
// errors.As see the original error (Unwrap returns it). A nil err, an
// error that does not name id, and the zero Identity (whose key names
// nobody) are returned as they are.
func Redact(err error, id memstack.Identity) error {
	return RedactWith(err, id, id.Hash())
}

// RedactWith is Redact naming the identity by hash (a keyed hash, say)
// rather than by id.Hash.
func RedactWith(err error, id memstack.Identity, hash string) error {
	if err == nil || id == (memstack.Identity{}) {
		return err
	}
	key, msg := id.Key(), err.Error()
	if !strings.Contains(msg, key) {
		return err
	}
	return redacted{err: err, msg: strings.ReplaceAll(msg, key, "identity "+hash[:min(12, len(hash))])}
}

// RedactFor is Redact for the identity a call of mem with ctx works on
// (see IdentityHash).
func RedactFor(ctx context.Context, mem any, err error) error {
	if err == nil {
		return nil
	}
	if r, ok := mem.(IdentityResolver); ok && ctx != nil {
		if id, rerr := r.ResolveIdentity(ctx); rerr == nil {
			return RedactWith(err, id, hashOf(mem, id))
		}
		return err
	}
	id, _ := memstack.IdentityFrom(ctx)
	return RedactWith(err, id, hashOf(mem, id))
}

type redacted struct {
	err error
	msg string
}

func (r redacted) Error() string { return r.msg }
func (r redacted) Unwrap() error { return r.err }
