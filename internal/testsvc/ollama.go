package testsvc

// Ollama test server.
//
// A package whose tests call Ollama must stop the shared server when its
// test binary ends, with this TestMain:
//
//	func TestMain(m *testing.M) { code := m.Run(); testsvc.StopAll(); os.Exit(code) }
//
// How the server is started:
//
//   - Binary: $MEMSTACK_OLLAMA_BIN; else the binary scripts/ollama.sh
//     builds, $MEMSTACK_OLLAMA_PREFIX/bin/ollama with the prefix defaulting
//     to ${XDG_CACHE_HOME:-$HOME/.cache}/memstack/ollama; else ollama on
//     PATH. None found: Missing (a skip, a failure under CI). A
//     MEMSTACK_OLLAMA_BIN that is not an executable file fails the test.
//   - Network: OLLAMA_HOST=127.0.0.1:<FreePort port>, retried on another
//     port when the server exits during start-up (the port was taken in
//     between).
//   - Environment: every OLLAMA_* variable of the test process is dropped;
//     OLLAMA_MODELS and HOME point into a fresh os.MkdirTemp directory
//     (removed at stop), OLLAMA_NO_CLOUD=1 (no cloud models, no sign-in),
//     OLLAMA_KEEP_ALIVE=-1 (the model stays loaded between tests).
//   - Model: "tiny" (OllamaModel), created over the HTTP API with the
//     few HTTP calls of ollamaClient from the GGUF that
//     internal/tinymodel generates: the blob is uploaded, then created with
//     tinymodel.Template and num_ctx 512, num_thread 1 (two threads on two
//     cores are ten times slower), stop ["</s>"]. It answers
//     tinymodel.Answer ("Hello from tiny model!") to every prompt. Nothing
//     is ever pulled: the server never leaves loopback.
//   - Lifetime: the server runs in its own process group, and StopAll sends
//     SIGTERM to the group (then SIGKILL after ollamaStopTimeout): SIGKILL
//     of `ollama serve` alone would leave its llama runner child alive. A
//     parent-death signal (SIGTERM) stops it when the test binary dies
//     without reaching StopAll; the server is started from a goroutine
//     locked to its OS thread for the server's lifetime, because Linux sends
//     that signal when the starting thread, not the process, exits
//     (checked: SIGKILL of a test binary mid-test takes serve and its runner
//     down with it; only the temp directory is left behind then).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memstack/memstack/internal/tinymodel"
)

// OllamaModel is the name of the model the Ollama server is created with.
const OllamaModel = "tiny"

const (
	// ollamaStartTimeout bounds the start of the server and the creation
	// of the model.
	ollamaStartTimeout = 60 * time.Second
	// ollamaStopTimeout is how long the server may take to exit after
	// SIGTERM before its process group is killed.
	ollamaStopTimeout = 10 * time.Second
)

var (
	ollamaOnce    sync.Once
	ollamaShared  *ollamaServer
	ollamaErr     error
	ollamaMissing bool // ollamaErr means "no binary", not "broken"
)

// Ollama returns the base URL (http://127.0.0.1:PORT) of a real `ollama
// serve` shared by every test of this test binary, started on the first
// call, with the model OllamaModel ("tiny") created and ready. Every prompt
// to it is answered with tinymodel.Answer. When no ollama binary is found
// the test is skipped, or fails under CI (see Missing); when the binary is
// there but the server does not start, the test fails with the server's log.
func Ollama(tb testing.TB) string {
	tb.Helper()
	ollamaOnce.Do(func() {
		ollamaShared, ollamaMissing, ollamaErr = ollamaStart()
		if ollamaErr == nil {
			registerStop(ollamaShared.stop)
		}
	})
	if ollamaErr != nil {
		if ollamaMissing {
			Missing(tb, "%v", ollamaErr)
		}
		tb.Fatalf("testsvc: starting the shared Ollama server: %v", ollamaErr)
	}
	return ollamaShared.baseURL
}

// OllamaBin returns the ollama binary Ollama would start (see the lookup
// order above), or an error saying how to get one.
func OllamaBin() (string, error) {
	if p := os.Getenv("MEMSTACK_OLLAMA_BIN"); p != "" {
		if !ollamaExecutable(p) {
			return "", fmt.Errorf("testsvc: MEMSTACK_OLLAMA_BIN=%s is not an executable file", p)
		}
		return p, nil
	}
	if p := ollamaCachedBin(); p != "" && ollamaExecutable(p) {
		return p, nil
	}
	if p, err := exec.LookPath("ollama"); err == nil {
		return p, nil
	}
	return "", errOllamaMissing
}

var errOllamaMissing = errors.New("Ollama is not installed (no $MEMSTACK_OLLAMA_BIN, no " +
	"${XDG_CACHE_HOME:-$HOME/.cache}/memstack/ollama/bin/ollama, no ollama on PATH): " +
	"run MEMSTACK_OLLAMA_BIN=$(./scripts/ollama.sh) to build it (about 3 minutes, once)")

// ollamaCachedBin returns where scripts/ollama.sh puts the binary.
func ollamaCachedBin() string {
	prefix := os.Getenv("MEMSTACK_OLLAMA_PREFIX")
	if prefix == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return ""
			}
			cache = filepath.Join(home, ".cache")
		}
		prefix = filepath.Join(cache, "memstack", "ollama")
	}
	return filepath.Join(prefix, "bin", "ollama")
}

func ollamaExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// ollamaServer is one running `ollama serve`.
type ollamaServer struct {
	dir     string // temp directory: HOME and OLLAMA_MODELS
	baseURL string
	pid     int
	done    chan struct{} // closed when the process has been waited for
	logPath string        // the server's stdout and stderr
	once    sync.Once
}

// ollamaStart finds the binary, starts the server and creates the model.
// missing is true when the error means there is no binary.
func ollamaStart() (s *ollamaServer, missing bool, err error) {
	bin, err := OllamaBin()
	if err != nil {
		return nil, errors.Is(err, errOllamaMissing), err
	}
	dir, err := os.MkdirTemp("", "memstack-ollama-")
	if err != nil {
		return nil, false, fmt.Errorf("creating the server's directory: %w", err)
	}
	for attempt := 0; attempt < 3; attempt++ {
		var port int
		if port, err = FreePort(); err != nil {
			break
		}
		s, err = ollamaLaunch(bin, dir, port)
		if err == nil || !errors.Is(err, errOllamaExited) {
			break
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ollamaStartTimeout)
	defer cancel()
	if err := s.createModel(ctx); err != nil {
		s.stop()
		return nil, false, err
	}
	return s, false, nil
}

var errOllamaExited = errors.New("ollama serve exited during start-up")

// ollamaLaunch starts `ollama serve` on port and waits until it answers.
func ollamaLaunch(bin, dir string, port int) (*ollamaServer, error) {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s := &ollamaServer{
		dir:     dir,
		baseURL: "http://" + addr,
		done:    make(chan struct{}),
		logPath: filepath.Join(dir, "serve.log"),
	}
	// A file, not a pipe: the runner child inherits it, and with a pipe
	// cmd.Wait would wait for the runner too.
	logFile, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("testsvc: creating the ollama serve log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(bin, "serve")
	cmd.Dir = dir
	cmd.Env = append(ollamaEnviron(),
		"OLLAMA_HOST="+addr,
		"OLLAMA_MODELS="+filepath.Join(dir, "models"),
		"HOME="+filepath.Join(dir, "home"),
		"OLLAMA_NO_CLOUD=1",
		"OLLAMA_KEEP_ALIVE=-1",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // the llama runner joins the group; stop signals the group
		Pdeathsig: syscall.SIGTERM, // stop (and stop the runner) if the test binary dies
	}

	// The parent-death signal fires when the thread that started the child
	// exits: keep that thread locked and alive until the server has exited.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("testsvc: starting %s serve: %w", bin, err)
	}
	s.pid = cmd.Process.Pid

	client := s.client()
	deadline := time.Now().Add(ollamaStartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := client.Heartbeat(ctx)
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("testsvc: %w on %s: %s", errOllamaExited, addr, s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("testsvc: ollama serve on %s not ready after %v (last error: %v): %s",
				addr, ollamaStartTimeout, err, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ollamaEnviron returns the test process's environment without OLLAMA_*
// variables, so a developer's own Ollama settings cannot leak in.
func ollamaEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OLLAMA_") {
			env = append(env, kv)
		}
	}
	return env
}

// client returns a client of the server's HTTP API. It speaks the few
// endpoints the helper needs with net/http, so this package (and every
// module whose tests use it) needs no Ollama module.
func (s *ollamaServer) client() *ollamaClient {
	return &ollamaClient{base: s.baseURL, http: &http.Client{Timeout: ollamaStartTimeout}}
}

// ollamaClient calls the Ollama HTTP API (docs/api.md of ollama/ollama).
type ollamaClient struct {
	base string
	http *http.Client
}

// do sends a request with body (JSON-encoded unless an io.Reader) and
// decodes a JSON answer into out (if not nil).
func (c *ollamaClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
		}
	}
	return nil
}

// Heartbeat is HEAD /.
func (c *ollamaClient) Heartbeat(ctx context.Context) error {
	return c.do(ctx, http.MethodHead, "/", nil, nil)
}

// CreateBlob uploads a blob.
func (c *ollamaClient) CreateBlob(ctx context.Context, digest string, r io.Reader) error {
	return c.do(ctx, http.MethodPost, "/api/blobs/"+digest, r, nil)
}

// ollamaCreate is the body of POST /api/create.
type ollamaCreate struct {
	Model      string            `json:"model"`
	Files      map[string]string `json:"files"`
	Template   string            `json:"template"`
	Parameters map[string]any    `json:"parameters"`
	Stream     bool              `json:"stream"`
}

// Create creates a model (not streamed) and returns its final status.
func (c *ollamaClient) Create(ctx context.Context, req ollamaCreate) (string, error) {
	var resp struct {
		Status string `json:"status"`
	}
	err := c.do(ctx, http.MethodPost, "/api/create", req, &resp)
	return resp.Status, err
}

// ollamaModels is the answer of GET /api/tags.
type ollamaModels struct {
	Models []struct {
		Name    string `json:"name"`
		Details struct {
			Family string `json:"family"`
		} `json:"details"`
	} `json:"models"`
}

// List lists the models.
func (c *ollamaClient) List(ctx context.Context) (ollamaModels, error) {
	var out ollamaModels
	err := c.do(ctx, http.MethodGet, "/api/tags", nil, &out)
	return out, err
}

// createModel uploads the tiny GGUF as a blob, creates OllamaModel from it
// and checks that the server lists it.
func (s *ollamaServer) createModel(ctx context.Context) error {
	client := s.client()
	data := tinymodel.Bytes()
	sum := sha256.Sum256(data)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if err := client.CreateBlob(ctx, digest, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("testsvc: uploading the tiny model blob to %s: %w: %s", s.baseURL, err, s.logTail())
	}
	last, err := client.Create(ctx, ollamaCreate{
		Model:    OllamaModel,
		Files:    map[string]string{"tiny.gguf": digest},
		Template: tinymodel.Template,
		Parameters: map[string]any{
			"num_ctx":    512,
			"num_thread": 1,
			"stop":       []string{"</s>"},
		},
	})
	if err != nil {
		return fmt.Errorf("testsvc: creating model %q on %s: %w: %s", OllamaModel, s.baseURL, err, s.logTail())
	}
	if last != "success" {
		return fmt.Errorf("testsvc: creating model %q on %s: final status %q, want \"success\": %s", OllamaModel, s.baseURL, last, s.logTail())
	}
	list, err := client.List(ctx)
	if err != nil {
		return fmt.Errorf("testsvc: listing models on %s: %w", s.baseURL, err)
	}
	for _, m := range list.Models {
		if m.Name == OllamaModel+":latest" || m.Name == OllamaModel {
			return nil
		}
	}
	return fmt.Errorf("testsvc: model %q was created but %s does not list it", OllamaModel, s.baseURL)
}

// stop sends SIGTERM to the server's process group, waits for the server
// to exit (SIGKILL to the group after ollamaStopTimeout) and removes its
// directory. It is safe to call more than once.
func (s *ollamaServer) stop() {
	s.once.Do(func() {
		_ = syscall.Kill(-s.pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(ollamaStopTimeout):
			_ = syscall.Kill(-s.pid, syscall.SIGKILL)
			<-s.done
		}
		// The runner may outlive serve by a moment; it is in the group.
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		_ = os.RemoveAll(s.dir)
	})
}

// logTail returns the last 20 lines of the server's log file.
func (s *ollamaServer) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no ollama serve log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "ollama serve log:\n" + strings.Join(lines, "\n")
}
