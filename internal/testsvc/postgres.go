package testsvc

// PostgreSQL test servers.
//
// A package whose tests call Postgres or StartPostgres must stop the shared
// server when its test binary ends, with this TestMain:
//
//	func TestMain(m *testing.M) { code := m.Run(); testsvc.StopAll(); os.Exit(code) }
//
// (StartPostgres servers are also stopped by their test's Cleanup.)
//
// How a server is started:
//
//   - Binaries: the newest /usr/lib/postgresql/<version>/bin (Debian's
//     postgresql package: apt-get install postgresql), else initdb and
//     postgres on PATH. None found: Missing (a skip, a failure under CI).
//   - Data: initdb into a fresh os.MkdirTemp directory (UTF8, no locale,
//     trust authentication, superuser "postgres"), removed when the server
//     is stopped.
//   - Network: listen_addresses=127.0.0.1 on a FreePort port; the unix
//     socket lives in the temp directory, never in /var/run/postgresql.
//   - Root: initdb and postgres refuse to run as root. When the test runs
//     as root (CI containers do) both run as the "postgres" system user
//     (created by the Debian package): the process gets that user's uid and
//     gid through SysProcAttr.Credential and the temp directory is chowned
//     to it.
//   - Speed: fsync=off and full_page_writes=off. Commits still write the WAL
//     to the OS before they are acknowledged (synchronous_commit stays on),
//     so a killed server keeps every acknowledged write — the OS page cache
//     outlives the process; only a machine crash would lose data, and these
//     are throwaway servers.
//   - Lifetime: the postmaster gets a parent-death signal, so it dies with
//     the test binary even when StopAll is never reached; its backends then
//     notice the postmaster is gone and exit.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pgStartTimeout bounds initdb and each server start.
const pgStartTimeout = 60 * time.Second

var (
	pgSharedOnce sync.Once
	pgShared     *PostgresServer
	pgSharedErr  error
	pgSharedMiss bool // pgSharedErr means "not installed", not "broken"
)

// Postgres returns the DSN of a real PostgreSQL server shared by every test
// of this test binary (postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable).
// The server is started on the first call. Tests sharing it keep apart by
// using their own names (table prefixes, namespaces). When PostgreSQL is not
// installed the test is skipped, or fails under CI (see Missing); when it is
// installed but does not start, the test fails.
func Postgres(tb testing.TB) string {
	tb.Helper()
	pgSharedOnce.Do(func() {
		pgShared, pgSharedMiss, pgSharedErr = pgStart()
		if pgSharedErr == nil {
			registerStop(pgShared.Stop)
		}
	})
	if pgSharedErr != nil {
		if pgSharedMiss {
			Missing(tb, "%v", pgSharedErr)
		}
		tb.Fatalf("testsvc: starting the shared PostgreSQL server: %v", pgSharedErr)
	}
	return pgShared.DSN()
}

// PostgresServer is a private PostgreSQL server of one test, for fault
// tests: Kill crashes it, Restart brings it back on the same port with the
// same data. Its methods are safe for concurrent use.
type PostgresServer struct {
	bin     string // directory of initdb and postgres
	root    string // temp directory: data/, the socket, server.log
	port    int
	cred    *syscall.Credential // nil unless running as root
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
	gone bool          // Stop has run
}

// StartPostgres starts a PostgreSQL server for the calling test alone. It
// is stopped, and its data removed, when the test ends (and by StopAll).
// Missing binaries are reported with Missing; a server that does not start
// fails the test.
func StartPostgres(tb testing.TB) *PostgresServer {
	tb.Helper()
	s, missing, err := pgStart()
	if err != nil {
		if missing {
			Missing(tb, "%v", err)
		}
		tb.Fatalf("testsvc: starting a PostgreSQL server: %v", err)
	}
	registerStop(s.Stop)
	tb.Cleanup(s.Stop)
	return s
}

// DSN returns the server's connection string (user postgres, database
// postgres, no TLS, trust authentication).
func (s *PostgresServer) DSN() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr())
}

// Addr returns the server's host:port (always on 127.0.0.1).
func (s *PostgresServer) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Kill crashes the server: SIGKILL to every backend and to the postmaster,
// then waits for the postmaster to exit. Connections break
// at once; nothing is shut down cleanly. Killing a server that is not
// running is a no-op.
func (s *PostgresServer) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killLocked()
}

func (s *PostgresServer) killLocked() error {
	if s.cmd == nil {
		return nil
	}
	pid := s.cmd.Process.Pid
	// Every backend calls setsid, so the postmaster's process group does
	// not reach them. Freeze the postmaster so it forks no new child, kill
	// its children, then kill it.
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	children := pgChildren(pid)
	for _, child := range children {
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("testsvc: killing PostgreSQL (pid %d): %w", pid, err)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("testsvc: PostgreSQL (pid %d) did not exit 10s after SIGKILL", pid)
	}
	// The backends, reparented when the postmaster died, may still be
	// exiting and holding the shared memory block: a restart before they
	// are gone fails with "pre-existing shared memory block is still in
	// use" (seen on a loaded machine).
	deadline := time.Now().Add(10 * time.Second)
	for _, child := range children {
		for pgAlive(child) {
			if time.Now().After(deadline) {
				return fmt.Errorf("testsvc: PostgreSQL backend (pid %d) did not exit 10s after SIGKILL", child)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	s.cmd, s.done = nil, nil
	return nil
}

// pgAlive reports whether pid is a live process: it exists and is not a
// zombie (a zombie holds no memory any more; its parent may never reap it).
func pgAlive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// Restart starts the server again on the same port with the same data
// directory, after Kill (or after a crash), and returns once it accepts
// connections. PostgreSQL runs crash recovery from its WAL, so every
// acknowledged commit is there again. Restarting a running server kills it
// first.
func (s *PostgresServer) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return errors.New("testsvc: Restart after Stop: the server's data is gone")
	}
	if err := s.killLocked(); err != nil {
		return err
	}
	return s.launchLocked()
}

// Stop kills the server and removes its data directory. It is safe to call
// more than once.
func (s *PostgresServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return
	}
	s.gone = true
	_ = s.killLocked()
	_ = os.RemoveAll(s.root)
}

// pgStart finds the binaries, runs initdb and starts a server. missing is
// true when the error means PostgreSQL is not installed (or cannot run here
// for lack of the postgres user).
func pgStart() (s *PostgresServer, missing bool, err error) {
	bin, err := pgFindBin()
	if err != nil {
		return nil, true, err
	}
	var cred *syscall.Credential
	var uid, gid = -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, true, fmt.Errorf("running as root, and PostgreSQL refuses to run as root, but there is no \"postgres\" user to run it as (%v): install Debian's postgresql package, which creates it", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		// No supplementary groups: the server keeps none of root's.
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	root, err := os.MkdirTemp(pgTempParent(cred != nil), "memstack-pg-")
	if err != nil {
		return nil, false, fmt.Errorf("creating the data directory: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(root)
		}
	}()
	if cred != nil {
		if err := os.Chown(root, uid, gid); err != nil {
			return nil, false, fmt.Errorf("chown %s to the postgres user: %w", root, err)
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, false, err
	}
	s = &PostgresServer{bin: bin, root: root, port: port, cred: cred, logPath: filepath.Join(root, "server.log")}

	ctx, cancel := context.WithTimeout(context.Background(), pgStartTimeout)
	defer cancel()
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", filepath.Join(root, "data"), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--no-locale", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = root
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, false, fmt.Errorf("initdb in %s: %w: %s", root, err, pgTail(out))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.launchLocked(); err != nil {
		return nil, false, err
	}
	return s, false, nil
}

// launchLocked starts the postmaster and waits until it accepts
// connections. The caller holds s.mu and no postmaster is running.
func (s *PostgresServer) launchLocked() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testsvc: opening the PostgreSQL log: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(filepath.Join(s.bin, "postgres"),
		"-D", filepath.Join(s.root, "data"),
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+s.root,
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "shared_buffers=64MB",
		"-c", "log_min_messages=warning",
		"-c", "logging_collector=off",
	)
	cmd.Dir = s.root
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: s.cred,
		Setpgid:    true,            // off the test binary's terminal signals
		Pdeathsig:  syscall.SIGKILL, // never outlive the test binary
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testsvc: starting postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done

	deadline := time.Now().Add(pgStartTimeout)
	for {
		err := s.ping()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd, s.done = nil, nil
			return fmt.Errorf("testsvc: postgres on %s exited during start-up: %s", s.Addr(), s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			_ = s.killLocked()
			return fmt.Errorf("testsvc: postgres on %s not ready after %v (last error: %v): %s", s.Addr(), pgStartTimeout, err, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ping connects once and runs SELECT 1, with the server's own psql (so
// this package needs no driver module).
func (s *PostgresServer) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "psql"), "-X", "-q", "-t", "-A", "-w", "-c", "SELECT 1", s.DSN())
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("psql: %w: %s", err, bytes.TrimSpace(out))
	}
	if got := string(bytes.TrimSpace(out)); got != "1" {
		return fmt.Errorf("psql: SELECT 1 answered %q", got)
	}
	return nil
}

func (s *PostgresServer) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	return pgTail(b)
}

// pgChildren returns the pids of the live processes whose parent is ppid,
// from /proc.
func pgChildren(ppid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 2 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

// pgTail returns the last lines of a log, for error messages.
func pgTail(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}

// pgFindBin returns the directory holding initdb and postgres: the newest
// /usr/lib/postgresql/<version>/bin, else the directory of initdb on PATH.
func pgFindBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		if pgExecutable(filepath.Join(d, "initdb")) && pgExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		d := filepath.Dir(p)
		if pgExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb and no initdb on PATH): apt-get install postgresql")
}

// pgVersion returns the major version in /usr/lib/postgresql/<v>/bin, or -1.
func pgVersion(dir string) float64 {
	v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
	if err != nil {
		return -1
	}
	return v
}

func pgExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// pgTempParent returns where to create the data directory. When the server
// runs as another user, every parent of the directory must be searchable by
// that user; os.TempDir may not be (TMPDIR under /root), so /tmp is used
// then.
func pgTempParent(otherUser bool) string {
	dir := os.TempDir()
	if !otherUser {
		return dir
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}
