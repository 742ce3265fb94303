package proof_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestREADMESnippetsCompile compiles every Go snippet of the README as
// written: each statement snippet becomes the body of a block inside a
// function that returns an error, with the names the README's prose
// assumes (ctx, llm, tools, a chain...) as parameters, so a snippet that
// drops an error or declares what it never uses fails `go vet`. Snippets
// that are whole declarations (a test function for your own backend) are
// skipped. The snippets are built in a module of their own in a temporary
// directory, against this checkout's modules through a go.work.
func TestREADMESnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the README's snippets")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)

	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatchIndex(readme, -1)
	require.NotEmpty(t, blocks)
	var src strings.Builder
	src.WriteString(snippetPrelude)
	compiled := 0
	for i, b := range blocks {
		body := string(readme[b[2]:b[3]])
		if strings.HasPrefix(strings.TrimSpace(body), "func ") {
			continue
		}
		line := bytes.Count(readme[:b[2]], []byte("\n")) + 1
		fmt.Fprintf(&src, "\n// README.md:%d\nfunc snippet%d(ctx context.Context, llm llms.Model, tools []tools.Tool, layers []schema.Memory, chain, other *chains.LLMChain, adkAgent agent.Agent, s store.Store, recent, facts, recall, mem schema.Memory, inputs, outputs map[string]any, turn struct{ At time.Time }) (err error) {\n\t{\n//line README.md:%d\n%s\t}\n\treturn nil\n}\n", line, i, line, body)
		compiled++
	}
	require.Positive(t, compiled)

	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("snippets.go", src.String())
	write("go.mod", "module readmesnippets\n\ngo 1.26.0\n")
	work, err := os.ReadFile(filepath.Join(root, "go.work"))
	require.NoError(t, err)
	// The checkout's go.work with its paths made absolute, plus this module.
	w := regexp.MustCompile(`(?m)^\t(\.[^\s]*)$`).ReplaceAllStringFunc(string(work), func(m string) string {
		return "\t" + filepath.Join(root, strings.TrimSpace(m))
	})
	w = strings.Replace(w, "use (\n", "use (\n\t"+dir+"\n", 1)
	write("go.work", w)
	if sum, err := os.ReadFile(filepath.Join(root, "go.work.sum")); err == nil {
		write("go.work.sum", string(sum))
	}
	cmd := exec.Command("go", "vet", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "a README snippet does not compile or vet as written:\n%s", out)
}

// snippetPrelude imports every package the README's snippets use and
// keeps each import used.
const snippetPrelude = `package readmesnippets

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/prompts"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/tools"
	"go.opentelemetry.io/otel"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/observe"
	"github.com/memstack/memstack/observe/otelobserve"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/summarizer"
)

var (
	_ = pgstore.Open
	_ = redisstore.Open
	_ = sqlitestore.Open
	_ = context.Background
	_ = errors.New
	_ = fmt.Sprint
	_ = log.Println
	_ = slog.Default
	_ = os.Stdout
	_ = time.Now
	_ = agents.NewExecutor
	_ = chains.Run
	_ = llms.SystemChatMessage{}
	_ = prompts.NewPromptTemplate
	_ schema.Memory
	_ tools.Tool
	_ = otel.GetTracerProvider
	_ = adk.NewMemoryService
	_ = runner.New
	_ session.Session
	_ = genai.NewContentFromText
	_ agent.Agent
	_ = memstack.WithIdentity
	_ = combined.New
	_ = extract.NewPatterns
	_ = memories.NewBuffer
	_ = observe.Slog
	_ = otelobserve.New
	_ store.Store
	_ = summarizer.New
)
`
