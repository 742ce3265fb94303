package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/internal/testsvc"
	"github.com/memstack/memstack/internal/tinymodel"
)

// runMainEnv makes the test binary run main() instead of the tests, so a
// test can check the program's exit status and output (see runMain).
const runMainEnv = "OLLAMA_SUMMARY_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	code := m.Run()
	testsvc.StopAll()
	os.Exit(code)
}

// runMain runs the program in a child process with args and returns its
// exit status, stdout and stderr.
func runMain(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		require.True(t, ok, "running the program: %v", err)
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// closedPortURL returns an http://127.0.0.1 URL on which nothing listens.
func closedPortURL(t *testing.T) string {
	t.Helper()
	port, err := testsvc.FreePort()
	require.NoError(t, err)
	return "http://127.0.0.1:" + strconv.Itoa(port)
}

// assertInOrder checks that every text appears in out, in order.
func assertInOrder(t *testing.T, out string, texts ...string) {
	t.Helper()
	rest := out
	for _, text := range texts {
		i := strings.Index(rest, text)
		if !assert.GreaterOrEqual(t, i, 0, "%q not found (in order) in output:\n%s", text, out) {
			return
		}
		rest = rest[i+len(text):]
	}
}

func TestOfflineRun(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-offline"}, &stdout, &stderr))
	out := stdout.String()
	assert.Empty(t, stderr.String())

	// With 15 raw messages and batches of 6, 40 turns fold at turn 8 and
	// then every 3 turns: 11 summaries of 6 messages each.
	want := []string{
		"Summarizing 40 turns with the offline extractive summarizer (no model).\n",
		"Memory: Summary(max_messages=15, batch=6, background=false, summarizer=*summarizer.Extractive",
	}
	for k := 1; k <= 11; k++ {
		want = append(want, fmt.Sprintf("Turn %d: summary %d folds 6 messages (%d folded so far, ", 5+3*k, k, 6*k))
	}
	want = append(want,
		"Final memory (what a chain's {{.history}} gets):\nSummary of earlier conversation: ",
		// The 14 newest messages stay raw, the oldest of them first.
		"\nHuman: And I will lead the roadmap day myself.\nAI: Noted: Maria Lopez leads the roadmap day on Wednesday 14 May.\n",
		"\nHuman: Thanks, that's everything for now. Bye!\nAI: Goodbye Maria, and enjoy the offsite in Lisbon!\n\n",
		"Stats: 11 summarizer calls, 0 failed, 66 messages folded + 14 raw = 80 messages sent.\n",
	)
	assertInOrder(t, out, want...)
	assert.Equal(t, 11, strings.Count(out, ": summary "), "one block per summary")
	assert.NotContains(t, out, "failed after")
	// The extractive summary keeps the decisions and numbers.
	final := out[strings.Index(out, "Final memory"):]
	for _, fact := range []string{"LX Factory", "Hotel Ribeira", "5,040 euros", "14 May"} {
		assert.Contains(t, final, fact)
	}
}

func TestOfflineRunFewTurns(t *testing.T) {
	var stdout bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-offline", "-turns", "7"}, &stdout, &bytes.Buffer{}))
	out := stdout.String()
	assert.NotContains(t, out, ": summary ", "14 messages fit in the 15 kept raw: no summary")
	assert.NotContains(t, out, memorySummaryLine)
	assert.Contains(t, out, "Stats: 0 summarizer calls, 0 failed, 0 messages folded + 14 raw = 14 messages sent.\n")
}

const memorySummaryLine = "Summary of earlier conversation: "

func TestNoServerIsOneClearLine(t *testing.T) {
	url := closedPortURL(t)
	tests := []struct {
		name      string
		args, env []string
		model     string
	}{
		{name: "flags", args: []string{"-server", url, "-model", "llama3.2"}, model: "llama3.2"},
		{name: "environment", env: []string{"OLLAMA_HOST=" + strings.TrimPrefix(url, "http://"), "OLLAMA_MODEL=qwen2.5:0.5b"}, model: "qwen2.5:0.5b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, kv := range tt.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			start := time.Now()
			var stdout bytes.Buffer
			err := run(context.Background(), tt.args, &stdout, &bytes.Buffer{})
			require.Error(t, err)
			assert.Less(t, time.Since(start), checkTimeout+time.Second, "the check is bounded")
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, "no Ollama server answers at "+url+" ("), msg)
			assert.Contains(t, msg, "connection refused")
			assert.Contains(t, msg, "start one with `ollama serve` and run `ollama pull "+tt.model+"`")
			assert.Contains(t, msg, "or run with -offline")
			assert.NotContains(t, msg, "\n")
			assert.Empty(t, stdout.String(), "nothing is printed before the check")
		})
	}
}

func TestNoServerExitsWithStatus1(t *testing.T) {
	url := closedPortURL(t)
	code, stdout, stderr := runMain(t, nil, "-server", url, "-model", "llama3.2")
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "exactly one line:\n%s", stderr)
	assert.True(t, strings.HasPrefix(stderr, "ollama-summary: no Ollama server answers at "+url), stderr)
	assert.NotContains(t, stderr, "goroutine", "no stack trace")
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-turns", "0"},
		{"-turns", "41"},
		{"-timeout", "0s"},
		{"-no-such-flag"},
		{"extra"},
	} {
		code, stdout, stderr := runMain(t, nil, args...)
		assert.Equal(t, 2, code, "%q", args)
		assert.Empty(t, stdout, "%q", args)
		assert.NotEmpty(t, stderr, "%q", args)
	}
	code, _, stderr := runMain(t, nil, "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, stderr, "-offline")
}

func TestNotAnOllamaServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler()) // some other HTTP server
	defer srv.Close()
	err := run(context.Background(), []string{"-server", srv.URL}, &bytes.Buffer{}, &bytes.Buffer{})
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "the server at "+srv.URL+" is not an Ollama server"), err.Error())
	assert.NotContains(t, err.Error(), "\n")
}

func TestServerURL(t *testing.T) {
	tests := []struct{ in, want, wantErr string }{
		{in: "http://127.0.0.1:11434", want: "http://127.0.0.1:11434"},
		{in: "http://127.0.0.1:11434/", want: "http://127.0.0.1:11434"},
		{in: "127.0.0.1:8080", want: "http://127.0.0.1:8080"},
		{in: "localhost", want: "http://localhost:11434"},
		{in: " 10.0.0.5 ", want: "http://10.0.0.5:11434"},
		{in: "https://ollama.internal", want: "https://ollama.internal:443"},
		{in: "http://example.com/ollama/", want: "http://example.com:80/ollama"},
		{in: "[::1]:11434", want: "http://[::1]:11434"},
		{in: "", wantErr: `-server "" is not a server URL`},
		{in: "ftp://host", wantErr: `-server "ftp://host" is not a server URL`},
		{in: "http://", wantErr: `is not a server URL`},
	}
	for _, tt := range tests {
		u, err := serverURL(tt.in)
		if tt.wantErr != "" {
			if assert.Error(t, err, "%q", tt.in) {
				assert.Contains(t, err.Error(), tt.wantErr)
			}
			continue
		}
		if assert.NoError(t, err, "%q", tt.in) {
			assert.Equal(t, tt.want, u.String(), "%q", tt.in)
		}
	}
}

func TestSameModel(t *testing.T) {
	tests := []struct {
		installed, want string
		same            bool
	}{
		{"llama3.2:latest", "llama3.2", true},
		{"llama3.2:latest", "llama3.2:latest", true},
		{"llama3.2", "llama3.2:latest", true},
		{"llama3.2:1b", "llama3.2", false},
		{"llama3.2:1b", "llama3.2:1b", true},
		{"registry.local:5000/team/model:latest", "registry.local:5000/team/model", true},
		{"", "llama3.2", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.same, sameModel(tt.installed, tt.want), "%q vs %q", tt.installed, tt.want)
	}
}

// The tests below run against a real `ollama serve` with the tiny model.

func TestModelMissingOnRealServer(t *testing.T) {
	base := testsvc.Ollama(t)
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"-server", base, "-model", "llama3.2"}, &stdout, &bytes.Buffer{})
	require.Error(t, err)
	assert.Equal(t, `the Ollama server at `+base+` has no model "llama3.2" (it has tiny:latest): `+
		"run `ollama pull llama3.2`, choose an installed one with -model (or OLLAMA_MODEL), or run with -offline", err.Error())
	assert.Empty(t, stdout.String())
}

func TestRunWithOllama(t *testing.T) {
	base := testsvc.Ollama(t)
	var stdout bytes.Buffer
	// 11 turns: folds at turns 8 and 11.
	err := run(context.Background(), []string{"-server", base, "-model", testsvc.OllamaModel, "-turns", "11"}, &stdout, &bytes.Buffer{})
	require.NoError(t, err)
	out := stdout.String()
	assertInOrder(t, out,
		"Summarizing 11 turns with Ollama model tiny at "+base+".\n",
		"Memory: Summary(max_messages=15, batch=6, background=false, summarizer=*summarizer.LLM",
		"Turn 8: summary 1 folds 6 messages (6 folded so far, ", "):\n  "+tinymodel.Answer+"\n\n",
		"Turn 11: summary 2 folds 6 messages (12 folded so far, ", "):\n  "+tinymodel.Answer+"\n\n",
		"Final memory (what a chain's {{.history}} gets):\n"+memorySummaryLine+tinymodel.Answer+"\n"+
			"Human: Thanks, that sounds good.\n",
		"Stats: 2 summarizer calls, 0 failed, 12 messages folded + 10 raw = 22 messages sent.\n",
	)
	assert.Equal(t, 2, strings.Count(out, ": summary "))
}
