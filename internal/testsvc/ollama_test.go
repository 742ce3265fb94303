package testsvc

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/internal/tinymodel"
)

func TestOllamaSharedServer(t *testing.T) {
	base := Ollama(t)
	assert.Equal(t, base, Ollama(t), "one shared server per test binary")
	u, err := url.Parse(base)
	require.NoError(t, err)
	assert.Equal(t, "http", u.Scheme)
	assert.Equal(t, "127.0.0.1", u.Hostname(), "servers listen on loopback only")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &ollamaClient{base: base, http: http.DefaultClient}
	require.NoError(t, client.Heartbeat(ctx))

	list, err := client.List(ctx)
	require.NoError(t, err)
	require.Len(t, list.Models, 1)
	assert.Equal(t, OllamaModel+":latest", list.Models[0].Name)
	assert.Equal(t, "llama", list.Models[0].Details.Family)

	var show struct {
		Template   string `json:"template"`
		Parameters string `json:"parameters"`
	}
	require.NoError(t, client.do(ctx, http.MethodPost, "/api/show", map[string]any{"model": OllamaModel}, &show))
	assert.Equal(t, tinymodel.Template, show.Template)
	assert.Contains(t, show.Parameters, "num_ctx")
	assert.Contains(t, show.Parameters, "num_thread")

	var gen struct {
		Response string `json:"response"`
		Done     bool   `json:"done"`
	}
	require.NoError(t, client.do(ctx, http.MethodPost, "/api/generate", map[string]any{"model": OllamaModel, "prompt": "Say hi", "stream": false}, &gen))
	answer, done := gen.Response, gen.Done
	assert.True(t, done)
	assert.Equal(t, tinymodel.Answer, answer)
}

func TestOllamaBinLookup(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "ollama")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755))
	notExec := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(notExec, []byte("x"), 0o644))
	cache := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(cache, "memstack", "ollama", "bin"), 0o755))
	cached := filepath.Join(cache, "memstack", "ollama", "bin", "ollama")
	require.NoError(t, os.WriteFile(cached, []byte("#!/bin/sh\n"), 0o755))
	empty := t.TempDir()

	tests := []struct {
		name                 string
		bin, prefix, xdg, pt string
		want                 string
		wantErr              string
		missing              bool
	}{
		{name: "explicit binary wins", bin: fake, xdg: cache, pt: dir, want: fake},
		{name: "explicit non-executable fails", bin: notExec, xdg: cache, wantErr: "is not an executable file"},
		{name: "explicit missing file fails", bin: filepath.Join(dir, "nope"), xdg: cache, wantErr: "is not an executable file"},
		{name: "script's cache under XDG_CACHE_HOME", xdg: cache, pt: dir, want: cached},
		{name: "script's cache under MEMSTACK_OLLAMA_PREFIX", prefix: filepath.Join(cache, "memstack", "ollama"), xdg: empty, want: cached},
		{name: "PATH last", xdg: empty, pt: dir, want: fake},
		{name: "nothing found", xdg: empty, pt: empty, wantErr: "scripts/ollama.sh", missing: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("MEMSTACK_OLLAMA_BIN", tt.bin)
			t.Setenv("MEMSTACK_OLLAMA_PREFIX", tt.prefix)
			t.Setenv("XDG_CACHE_HOME", tt.xdg)
			t.Setenv("PATH", tt.pt)
			got, err := OllamaBin()
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Equal(t, tt.missing, err == errOllamaMissing)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
