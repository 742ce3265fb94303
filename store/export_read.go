package store

import (
	"encoding/json"
	"fmt"
	"github.com/memstack/memstack/internal/jsonerr"
	"io"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/store/internal/kit"
)

// ReadExport reads an export written by Export.WriteJSON — the inverse of
// WriteJSON: the scope (a document without "user" is a TenantScope), the
// identities in the order written, each namespace's messages with their
// Seq and time (decoded as storekit.DecodeRecord decodes them), its state
// values (from "value" or "bytes") and its Clear mark. The "exported_at"
// line is not kept.
//
// Input that WriteJSON could not have written — not one JSON document,
// trailing data, a missing "identities" or "tenant", an identity outside
// the scope, a message the codec refuses, a state with both or neither of
// "value" and "bytes" — is an error wrapping ErrInvalidArgument (and, for
// a message, kit's ErrCorrupt). Errors name the identity, the namespace and
// the message's Seq or the state's name, never a message's content.
func ReadExport(r io.Reader) (Export, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Export{}, fmt.Errorf("store: reading an export: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Export{}, fmt.Errorf("%w: store: not an export (%d bytes): %s", ErrInvalidArgument, len(data), jsonerr.Problem(err))
	}
	for _, key := range []string{"tenant", "identities"} {
		if _, ok := raw[key]; !ok {
			return Export{}, fmt.Errorf("%w: store: not an export: no %q field", ErrInvalidArgument, key)
		}
	}
	var in exportJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return Export{}, fmt.Errorf("%w: store: not an export: %s", ErrInvalidArgument, jsonerr.Problem(err))
	}
	e := Export{Scope: TenantScope(in.Tenant)}
	if in.User != nil {
		e.Scope = UserScope(in.Tenant, *in.User)
	}
	for i, f := range in.Identities {
		id := memstack.Identity{Tenant: f.Tenant, User: f.User, Conversation: f.Conversation}
		if !e.Scope.Contains(id) {
			return Export{}, fmt.Errorf("%w: store: identity %d of the export (%s) is outside its scope, %s", ErrInvalidArgument, i+1, id.Key(), e.Scope)
		}
		ie := IdentityExport{Identity: id, Namespaces: make([]NamespaceExport, 0, len(f.Namespaces))}
		for _, n := range f.Namespaces {
			ne, err := readNamespace(id, n)
			if err != nil {
				return Export{}, err
			}
			ie.Namespaces = append(ie.Namespaces, ne)
		}
		e.Identities = append(e.Identities, ie)
	}
	return e, nil
}

// readNamespace decodes one namespace of identity id.
func readNamespace(id memstack.Identity, n namespaceJSON) (NamespaceExport, error) {
	ne := NamespaceExport{Namespace: n.Namespace, Cleared: n.Cleared, Messages: make([]Record, 0, len(n.Messages)), States: make(map[string]State, len(n.States))}
	where := fmt.Sprintf("%s, namespace %q", id.Key(), n.Namespace)
	var last int64
	for i, m := range n.Messages {
		if i > 0 && m.Seq <= last {
			return NamespaceExport{}, fmt.Errorf("%w: store: message Seq %d of %s follows Seq %d: Seqs must increase", ErrInvalidArgument, m.Seq, where, last)
		}
		last = m.Seq
		msg, at, err := kit.Decode(m.Message)
		if err != nil {
			return NamespaceExport{}, fmt.Errorf("%w: store: message Seq %d of %s: %w", ErrInvalidArgument, m.Seq, where, err)
		}
		ne.Messages = append(ne.Messages, Record{Seq: m.Seq, Message: msg, Time: at})
	}
	for name, sj := range n.States {
		switch {
		case sj.Value != nil && sj.Bytes != nil:
			return NamespaceExport{}, fmt.Errorf("%w: store: state %q of %s has both a value and bytes", ErrInvalidArgument, name, where)
		case sj.Value != nil:
			ne.States[name] = State{Value: []byte(*sj.Value), Version: sj.Version}
		case sj.Bytes != nil:
			ne.States[name] = State{Value: sj.Bytes, Version: sj.Version}
		default:
			return NamespaceExport{}, fmt.Errorf("%w: store: state %q of %s has neither a value nor bytes", ErrInvalidArgument, name, where)
		}
	}
	return ne, nil
}
