package redisstore_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/redisstore"
)

// TestLeastPrivilegeUser runs every call as an ACL user with exactly the
// permissions the package documentation lists ("Production settings"):
// the prefix's keys and the read, write, scripting, connection, TIME and
// CONFIG GET commands.
func TestLeastPrivilegeUser(t *testing.T) {
	addr := testsvc.Redis(t)
	ctx := context.Background()
	admin := rawClient(t, addr)
	user, prefix := "memstack-"+randomHex(6), uniquePrefix()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", user, "on", ">secret", "~"+prefix+":*", "resetchannels",
		"-@all", "+@read", "+@write", "+@scripting", "+@connection", "+time", "+config|get").Err())
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", user).Err() })
	s := open(t, "redis://"+user+":secret@"+addr, redisstore.WithKeyPrefix(prefix))

	calls := []struct {
		name string
		call func() error
	}{
		{"Append", func() error { return s.Append(ctx, alice, system("rules"), human("q"), ai("a")) }},
		{"Last", func() error { _, err := s.Last(ctx, alice, 2); return err }},
		{"All", func() error { _, err := s.All(ctx, alice); return err }},
		{"Stat", func() error { _, err := s.Stat(ctx, alice); return err }},
		{"GetState and PutState", func() error {
			st, err := s.GetState(ctx, alice, "summary")
			if err != nil {
				return err
			}
			_, err = s.PutState(ctx, alice, "summary", []byte("s"), st.Version)
			return err
		}},
		{"RemovePrefix", func() error { _, err := s.RemovePrefix(ctx, alice, math.MaxInt64); return err }},
		{"Rewrite", func() error { _, err := s.Rewrite(ctx, alice, math.MaxInt64, true, human("r")); return err }},
		{"Clear", func() error { return s.Clear(ctx, alice) }},
		{"Identities", func() error { _, err := s.Identities(ctx, store.UserScope("acme", "alice")); return err }},
		{"Export", func() error { _, err := s.Export(ctx, store.UserScope("acme", "alice")); return err }},
		{"Forget", func() error { return s.Forget(ctx, alice) }},
		{"ForgetScope", func() error { _, err := s.ForgetScope(ctx, store.UserScope("acme", "alice")); return err }},
	}
	for _, c := range calls {
		assert.NoError(t, c.call(), c.name)
	}
}
