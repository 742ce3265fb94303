package memstack_test

import (
	"context"
	"fmt"

	"github.com/memstack/memstack"
)

func ExampleWithIdentity() {
	ctx := memstack.WithIdentity(context.Background(),
		memstack.Identity{Tenant: "acme", User: "u42", Conversation: "c7"})

	id, ok := memstack.IdentityFrom(ctx)
	fmt.Println(id.Tenant, id.User, id.Conversation, ok)

	_, ok = memstack.IdentityFrom(context.Background())
	fmt.Println("plain context has an identity:", ok)
	// Output:
	// acme u42 c7 true
	// plain context has an identity: false
}

func ExampleIdentity_Key() {
	a := memstack.Identity{Tenant: "a/b", User: "c"}
	b := memstack.Identity{Tenant: "a", User: "b/c"}
	fmt.Println(a.Key())
	fmt.Println(b.Key())

	back, err := memstack.ParseKey(b.Key())
	fmt.Println(back == b, err)
	// Output:
	// a%2Fb:c:
	// a:b%2Fc:
	// true <nil>
}

// KeyedHash names an identity in telemetry with a secret the application
// keeps (memories.WithHashKey), so a list of likely user ids hashed with
// Hash does not match it.
func ExampleIdentity_KeyedHash() {
	id := memstack.Identity{Tenant: "acme", User: "u42"}
	secret := []byte("keep me out of the repository")
	fmt.Println(len(id.KeyedHash(secret)), id.KeyedHash(secret) == id.Hash())
	// Output: 16 false
}
