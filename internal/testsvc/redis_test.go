package testsvc

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// redisArray sends one command and reads an array of bulk strings (this
// module has no Redis client; redisCommand reads single replies).
func redisArray(addr string, args ...string) ([]string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "-") {
		return nil, fmt.Errorf("%s: %s", args[0], line[1:])
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("%s: not an array: %q", args[0], line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, n)
	for range n {
		h, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		h = strings.TrimRight(h, "\r\n")
		l, err := strconv.Atoi(strings.TrimPrefix(h, "$"))
		if err != nil || !strings.HasPrefix(h, "$") {
			return nil, fmt.Errorf("%s: element %q", args[0], h)
		}
		if l < 0 {
			out = append(out, "")
			continue
		}
		buf := make([]byte, l+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		out = append(out, string(buf[:l]))
	}
	return out, nil
}

func mustRedis(t *testing.T, addr string, args ...string) string {
	t.Helper()
	v, err := redisCommand(addr, args...)
	require.NoError(t, err, "%v", args)
	return v
}

func redisConfig(t *testing.T, addr, name string) string {
	t.Helper()
	kv, err := redisArray(addr, "CONFIG", "GET", name)
	require.NoError(t, err)
	require.Len(t, kv, 2)
	return kv[1]
}

func TestRedisSharedServer(t *testing.T) {
	addr := Redis(t)
	host, _, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host, "servers listen on loopback only")
	assert.Equal(t, addr, Redis(t), "one shared server per test binary")

	mustRedis(t, addr, "SET", "testsvc:shared", "v")
	assert.Equal(t, "v", mustRedis(t, addr, "GET", "testsvc:shared"))

	// The shared server keeps nothing on disk.
	assert.Equal(t, "no", redisConfig(t, addr, "appendonly"))
	assert.Equal(t, "", redisConfig(t, addr, "save"))
	assert.Equal(t, "127.0.0.1", redisConfig(t, addr, "bind"))
}

func TestRedisPrivateServerKillRestart(t *testing.T) {
	s := StartRedis(t)
	require.NotEqual(t, Redis(t), s.Addr(), "a private server is not the shared one")
	mustRedis(t, s.Addr(), "SET", "k", "acknowledged")

	require.NoError(t, s.Kill())
	require.Error(t, redisPing(s.Addr()), "a killed server does not answer")
	_, err := redisCommand(s.Addr(), "GET", "k")
	require.Error(t, err, "calls fail while the server is down")
	require.NoError(t, s.Kill(), "killing a stopped server is a no-op")

	require.NoError(t, s.Restart())
	// The append-only file (fsync always) kept the acknowledged write, on
	// the same address.
	assert.Equal(t, "acknowledged", mustRedis(t, s.Addr(), "GET", "k"))

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
	mustRedis(t, s.Addr(), "SET", "{tag}:a", "1")
	mustRedis(t, s.Addr(), "SET", "{tag}:b", "2")
	got, err := redisArray(s.Addr(), "MGET", "{tag}:a", "{tag}:b")
	require.NoError(t, err, "keys sharing a hash tag live in one slot")
	assert.Equal(t, []string{"1", "2"}, got)

	// The node really is a cluster: keys of different slots in one command
	// are refused.
	_, err = redisArray(s.Addr(), "MGET", "a", "b")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CROSSSLOT")

	assert.Equal(t, fmt.Sprint(crc16("tag")%16384), mustRedis(t, s.Addr(), "CLUSTER", "KEYSLOT", "{tag}:a"))

	// After a crash the node comes back with its slots and data.
	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart())
	assert.Equal(t, "2", mustRedis(t, s.Addr(), "GET", "{tag}:b"))
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
