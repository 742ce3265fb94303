package testsvc

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func redisClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestRedisSharedServer(t *testing.T) {
	addr := Redis(t)
	host, _, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host, "servers listen on loopback only")
	assert.Equal(t, addr, Redis(t), "one shared server per test binary")

	ctx := context.Background()
	c := redisClient(t, addr)
	require.NoError(t, c.Set(ctx, "testsvc:shared", "v", 0).Err())
	got, err := c.Get(ctx, "testsvc:shared").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", got)

	// The shared server keeps nothing on disk.
	cfg, err := c.ConfigGet(ctx, "appendonly").Result()
	require.NoError(t, err)
	assert.Equal(t, "no", cfg["appendonly"])
	cfg, err = c.ConfigGet(ctx, "save").Result()
	require.NoError(t, err)
	assert.Equal(t, "", cfg["save"])
	cfg, err = c.ConfigGet(ctx, "bind").Result()
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", cfg["bind"])
}

func TestRedisPrivateServerKillRestart(t *testing.T) {
	s := StartRedis(t)
	require.NotEqual(t, Redis(t), s.Addr(), "a private server is not the shared one")
	ctx := context.Background()
	c := redisClient(t, s.Addr())
	require.NoError(t, c.Set(ctx, "k", "acknowledged", 0).Err())

	require.NoError(t, s.Kill())
	require.Error(t, redisPing(s.Addr()), "a killed server does not answer")
	require.Error(t, c.Get(ctx, "k").Err(), "calls fail while the server is down")
	require.NoError(t, s.Kill(), "killing a stopped server is a no-op")

	require.NoError(t, s.Restart())
	// The append-only file (fsync always) kept the acknowledged write, and
	// the same client reconnects by itself.
	got, err := c.Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "acknowledged", got)

	// Restart of a running server kills it first and comes back too.
	require.NoError(t, s.Restart())
	require.NoError(t, redisPing(s.Addr()))

	s.Stop()
	s.Stop() // idempotent
	err = s.Restart()
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "after Stop"), err.Error())
	require.Error(t, redisPing(s.Addr()))
}

func TestRedisFindBin(t *testing.T) {
	bin, err := redisFindBin()
	if err != nil {
		Missing(t, "%v", err)
	}
	assert.True(t, strings.HasSuffix(bin, "redis-server"), bin)
}

func TestRedisCluster(t *testing.T) {
	s := StartRedisCluster(t)
	ctx := context.Background()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr()}})
	t.Cleanup(func() { _ = c.Close() })

	require.NoError(t, c.Set(ctx, "{tag}:a", "1", 0).Err())
	require.NoError(t, c.Set(ctx, "{tag}:b", "2", 0).Err())
	got, err := c.MGet(ctx, "{tag}:a", "{tag}:b").Result()
	require.NoError(t, err, "keys sharing a hash tag live in one slot")
	assert.Equal(t, []any{"1", "2"}, got)

	// The node really is a cluster: keys of different slots in one command
	// are refused.
	raw := redisClient(t, s.Addr())
	err = raw.MGet(ctx, "a", "b").Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CROSSSLOT")

	slot, err := raw.ClusterKeySlot(ctx, "{tag}:a").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(crc16("tag")%16384), slot)

	// After a crash the node comes back with its slots and data.
	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart())
	v, err := c.Get(ctx, "{tag}:b").Result()
	require.NoError(t, err)
	assert.Equal(t, "2", v)
}

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func TestRedisCommandErrors(t *testing.T) {
	addr := Redis(t)
	_, err := redisCommand(addr, "NOSUCHCOMMAND")
	require.Error(t, err)
	v, err := redisCommand(addr, "ECHO", "hello")
	require.NoError(t, err)
	assert.Equal(t, "hello", v)
	port, err := FreePort()
	require.NoError(t, err)
	_, err = redisCommand(net.JoinHostPort("127.0.0.1", fmt.Sprint(port)), "PING")
	require.Error(t, err, "nothing listens there")
}
