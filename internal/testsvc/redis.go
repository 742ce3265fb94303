package testsvc

// Redis test servers.
//
// A package whose tests call Redis or StartRedis must stop the shared
// server when its test binary ends, with this TestMain:
//
//	func TestMain(m *testing.M) { code := m.Run(); testsvc.StopAll(); os.Exit(code) }
//
// (StartRedis servers are also stopped by their test's Cleanup.)
//
// How a server is started:
//
//   - Binary: /usr/bin/redis-server (Debian's redis-server package:
//     apt-get install redis-server), else redis-server on PATH. None found:
//     Missing (a skip, a failure under CI).
//   - Network: --bind 127.0.0.1 on a FreePort port (retried on another port
//     if the port was taken in between), protected mode on, no unix socket.
//   - Data: --dir is a fresh os.MkdirTemp directory, removed when the server
//     is stopped. The shared server keeps nothing on disk (--save "",
//     --appendonly no). A StartRedis server uses the append-only file with
//     --appendfsync always, so every write acknowledged before Kill is there
//     after Restart.
//   - Cluster: StartRedisCluster starts a one-node Redis Cluster that owns
//     every slot, so cluster clients and the CROSSSLOT checks can be tested
//     without six servers.
//   - Lifetime: the server runs in its own process group with a
//     parent-death signal, so it dies with the test binary even when
//     StopAll is never reached.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// redisStartTimeout bounds each server start (including loading the
// append-only file on Restart).
const redisStartTimeout = 30 * time.Second

// redisBin is where Debian's redis-server package installs the server.
const redisBin = "/usr/bin/redis-server"

var (
	redisSharedOnce sync.Once
	redisShared     *RedisServer
	redisSharedErr  error
)

// Redis returns the address (127.0.0.1:PORT) of a real Redis server shared
// by every test of this test binary, started on the first call. It keeps no
// data on disk. Tests sharing it keep apart by using their own key
// prefixes. When redis-server is not installed the test is skipped, or
// fails under CI (see Missing); when it is installed but does not start,
// the test fails.
func Redis(tb testing.TB) string {
	tb.Helper()
	addr, err := RedisAddr()
	if err != nil {
		if errors.Is(err, ErrRedisNotInstalled) {
			Missing(tb, "%v", err)
		}
		tb.Fatalf("testsvc: starting the shared Redis server: %v", err)
	}
	return addr
}

// ErrRedisNotInstalled is wrapped by RedisAddr's error when there is no
// redis-server binary.
var ErrRedisNotInstalled = errors.New("testsvc: redis-server is not installed")

// RedisAddr is Redis for code that has no testing.TB, such as a runnable
// example: it starts the shared server on the first call and returns its
// address, or the error that prevented it (wrapping ErrRedisNotInstalled
// when redis-server is missing).
func RedisAddr() (string, error) {
	redisSharedOnce.Do(func() {
		redisShared, redisSharedErr = redisStart(false, false)
		if redisSharedErr == nil {
			registerStop(redisShared.Stop)
		}
	})
	if redisSharedErr != nil {
		return "", redisSharedErr
	}
	return redisShared.Addr(), nil
}

// RedisServer is a private Redis server of one test, for fault tests: Kill
// crashes it, Restart brings it back on the same port with the same data.
// Its methods are safe for concurrent use.
type RedisServer struct {
	bin     string
	dir     string // temp directory: --dir, the append-only file, server.log
	port    int
	persist bool // append-only file with fsync on every write
	cluster bool // a one-node Redis Cluster owning all 16384 slots
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
	gone bool          // Stop has run
}

// StartRedis starts a Redis server for the calling test alone, with the
// append-only file on and fsynced on every write (--appendonly yes
// --appendfsync always), so Kill followed by Restart keeps every
// acknowledged write. It is stopped, and its data removed, when the test
// ends (and by StopAll). A missing binary is reported with Missing; a
// server that does not start fails the test.
func StartRedis(tb testing.TB) *RedisServer {
	tb.Helper()
	return startPrivate(tb, false)
}

// StartRedisCluster starts, for the calling test alone, a Redis Cluster of
// one node that owns all 16384 slots (--cluster-enabled yes, then CLUSTER
// ADDSLOTSRANGE 0 16383), and returns once the cluster state is ok. A
// cluster client (redis.NewClusterClient with Addrs: {Addr()}) works
// against it, and the node rejects a command or script whose keys are in
// different slots (CROSSSLOT), which is what tests of hash tags need. Like
// StartRedis it persists every write and is stopped when the test ends.
func StartRedisCluster(tb testing.TB) *RedisServer {
	tb.Helper()
	return startPrivate(tb, true)
}

func startPrivate(tb testing.TB, cluster bool) *RedisServer {
	tb.Helper()
	s, err := redisStart(true, cluster)
	if err != nil {
		if errors.Is(err, ErrRedisNotInstalled) {
			Missing(tb, "%v", err)
		}
		tb.Fatalf("testsvc: starting a Redis server: %v", err)
	}
	registerStop(s.Stop)
	tb.Cleanup(s.Stop)
	return s
}

// Addr returns the server's host:port (always on 127.0.0.1).
func (s *RedisServer) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Kill crashes the server with SIGKILL and waits for it to exit.
// Connections break at once; nothing is saved on the way out. Killing a
// server that is not running is a no-op.
func (s *RedisServer) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked()
}

func (s *RedisServer) killLocked() error {
	if s.cmd == nil {
		return nil
	}
	pid := s.cmd.Process.Pid
	// The negative pid names the process group (redis-server forks for
	// background saves and rewrites).
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("testsvc: killing redis-server (pid %d): %w", pid, err)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("testsvc: redis-server (pid %d) did not exit 10s after SIGKILL", pid)
	}
	s.cmd, s.done = nil, nil
	return nil
}

// Restart starts the server again on the same port with the same data
// directory, after Kill (or after a crash), and returns once it answers
// PING (and, for a cluster, once the cluster state is ok). Restarting a
// running server kills it first.
func (s *RedisServer) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return errors.New("testsvc: Restart after Stop: the server's data is gone")
	}
	if err := s.killLocked(); err != nil {
		return err
	}
	if err := s.launchLocked(); err != nil {
		return err
	}
	if s.cluster {
		return s.waitClusterOK()
	}
	return nil
}

// Stop kills the server and removes its data directory. It is safe to call
// more than once.
func (s *RedisServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return
	}
	s.gone = true
	_ = s.killLocked()
	_ = os.RemoveAll(s.dir)
}

// redisFindBin returns the redis-server binary.
func redisFindBin() (string, error) {
	if fi, err := os.Stat(redisBin); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return redisBin, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w (no %s and no redis-server on PATH): apt-get install redis-server", ErrRedisNotInstalled, redisBin)
}

// redisStart finds the binary and starts a server with a fresh data
// directory on a free port. Its error wraps ErrRedisNotInstalled when there
// is no binary.
func redisStart(persist, cluster bool) (*RedisServer, error) {
	bin, err := redisFindBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "memstack-redis-")
	if err != nil {
		return nil, fmt.Errorf("testsvc: creating the Redis data directory: %w", err)
	}
	s := &RedisServer{bin: bin, dir: dir, persist: persist, cluster: cluster, logPath: filepath.Join(dir, "server.log")}
	s.mu.Lock()
	defer s.mu.Unlock()
	// FreePort's port may be taken by someone else before the server binds
	// it: try a few ports.
	for attempt := 0; attempt < 5; attempt++ {
		if s.port, err = FreePort(); err != nil {
			break
		}
		if err = s.launchLocked(); err == nil {
			if !cluster {
				return s, nil
			}
			if err = s.assignSlots(); err == nil {
				return s, nil
			}
			_ = s.killLocked()
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, err
}

// args returns the server's command line.
func (s *RedisServer) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--protected-mode", "yes",
		"--dir", s.dir,
		"--logfile", s.logPath,
		"--daemonize", "no",
		"--save", "",
		"--loglevel", "warning",
	}
	if s.cluster {
		a = append(a, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "5000")
	}
	if s.persist {
		return append(a, "--appendonly", "yes", "--appendfsync", "always")
	}
	return append(a, "--appendonly", "no")
}

// launchLocked starts redis-server and waits until it answers PING. The
// caller holds s.mu and no server is running.
func (s *RedisServer) launchLocked() error {
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // Kill reaches forked children through the group
		Pdeathsig: syscall.SIGKILL, // never outlive the test binary
	}
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testsvc: starting redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done

	deadline := time.Now().Add(redisStartTimeout)
	for {
		err := redisPing(s.Addr())
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd, s.done = nil, nil
			return fmt.Errorf("testsvc: redis-server on %s exited during start-up: %s%s", s.Addr(), stderr.String(), s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			_ = s.killLocked()
			return fmt.Errorf("testsvc: redis-server on %s not ready after %v (last error: %v): %s", s.Addr(), redisStartTimeout, err, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// assignSlots gives the one node of a cluster every slot and waits until
// the cluster state is ok. (A restarted node finds its slots in
// nodes.conf.)
func (s *RedisServer) assignSlots() error {
	if _, err := redisCommand(s.Addr(), "CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		return fmt.Errorf("testsvc: assigning the cluster slots on %s: %w", s.Addr(), err)
	}
	return s.waitClusterOK()
}

func (s *RedisServer) waitClusterOK() error {
	deadline := time.Now().Add(redisStartTimeout)
	for {
		info, err := redisCommand(s.Addr(), "CLUSTER", "INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testsvc: Redis Cluster on %s not ok after %v (last error: %v)", s.Addr(), redisStartTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// redisCommand sends one command over a fresh connection and returns a
// simple, integer or bulk-string reply; an error reply is an error.
func redisCommand(addr string, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s: %s", args[0], line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("%s: bulk reply of length %q", args[0], line[1:])
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("%s: unexpected reply type %q", args[0], line[0])
}

// redisPing sends one PING over a fresh connection and expects PONG (a
// server still loading its data answers -LOADING, which is not ready).
func redisPing(addr string) error {
	reply, err := redisCommand(addr, "PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("PING answered %q", reply)
	}
	return nil
}

func (s *RedisServer) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}
