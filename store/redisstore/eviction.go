package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrEvictionPolicy is wrapped by New's and Open's error when the server's
// maxmemory-policy may evict keys, or cannot be read, and
// WithEvictionAllowed was not given.
var ErrEvictionPolicy = errors.New("redisstore: the Redis server may evict keys")

// checkEvictionPolicy reads maxmemory-policy from every node the client
// writes to and returns an error wrapping ErrEvictionPolicy unless each one
// is noeviction.
func (s *Store) checkEvictionPolicy(ctx context.Context) error {
	var mu sync.Mutex
	var bad []string
	check := func(ctx context.Context, c redis.Cmdable, node string) error {
		got, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		var rerr redis.Error
		switch {
		case err != nil && errors.As(err, &rerr) && ctx.Err() == nil:
			// The server answered, but not with its policy (CONFIG is
			// refused or renamed, as on some managed services).
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%s: cannot read maxmemory-policy (CONFIG GET: %v)", node, err))
			mu.Unlock()
		case err != nil:
			return fmt.Errorf("reading maxmemory-policy of %s: %w", node, err)
		case got["maxmemory-policy"] != "noeviction":
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%s: maxmemory-policy is %q", node, got["maxmemory-policy"]))
			mu.Unlock()
		}
		return nil
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return check(ctx, n, n.Options().Addr) })
	case *redis.Ring:
		err = c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return check(ctx, n, n.Options().Addr) })
	default:
		err = check(ctx, s.client, s.addr)
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
		return fmt.Errorf("redisstore: connecting to Redis at %s: %w", s.addr, err)
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("%w: %s; the store needs maxmemory-policy noeviction (eviction can leave a forgotten user's keys behind "+
		"and let a write from before a Clear or Forget land after it): set it, or pass redisstore.WithEvictionAllowed() "+
		"to accept evictions (Forget then also finds keys with SCAN)", ErrEvictionPolicy, strings.Join(bad, "; "))
}
