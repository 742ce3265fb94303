// Command memstack-recall is memstack's recall benchmark on real data:
// LoCoMo's long multi-session conversations (read by the core module's
// internal/recallbench/locomo). It replays each conversation through
// several memories side by side —
// langchaingo's ConversationBuffer and ConversationTokenBuffer, memstack's
// TokenWindow and memstack's stacks of RecentN and Recall under one token
// budget — asks every question that has evidence, and reports, per
// memory, the evidence recall (the share of the question's evidence turns
// whose text the loaded variables hold verbatim), the context's cl100k
// tokens and the load latency, overall, per question category and per
// conversation, with an ablation table of Recall variants and the speed of
// the default stack at LoCoMo size and at 10,000 messages.
//
//	go run ./cmd/memstack-recall [-locomo FILE] [-budget 1000] [-out docs/recall/results.md]
//	go run ./cmd/memstack-recall -embedder ollama -model nomic-embed-text [-ollama-url http://127.0.0.1:11434]
//
// Flags:
//
//	-locomo FILE        a file in LoCoMo's published format (locomo10.json);
//	                    default ../shared/locomo/locomo10-dev.json relative to
//	                    the repository root
//	-budget N           the token budget of every budgeted memory (1000)
//	-out FILE           where to write the report as well as to stdout
//	                    (docs/recall/results.md, relative to the repository
//	                    root; "" writes nothing)
//	-embedder ollama    add the vector and hybrid stacks, embedding with
//	                    langchaingo's Ollama client (needs -model)
//	-model M            the Ollama embedding model
//	-ollama-url URL     the Ollama server (default: langchaingo's, i.e.
//	                    $OLLAMA_HOST or http://127.0.0.1:11434)
//	-speed-messages N   the size of the long history of the Speed section
//	                    (10000; 0 leaves it out)
//
// The defaults are resolved against the repository root (the nearest
// directory above the working directory holding memstack's go.mod), or
// the working directory outside the repository; paths given on the command
// line are relative to the working directory. The model is never pulled:
// it must already be on the server.
//
// The report is deterministic except for its timing columns: the same
// file and flags give the same figures. It holds no text from the data.
// LoCoMo is licensed CC BY-NC 4.0: the command reads it and copies none
// of it.
//
// langchaingo v0.1.14's ConversationTokenBuffer logs a warning on every
// save (its token counter falls back to characters/4); the command
// silences the standard logger while it runs.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/memstack/memstack/internal/testsvc"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "memstack-recall:", err)
		os.Exit(2)
	}
}

// The defaults of -locomo and -out, relative to the repository root.
const (
	defaultLoCoMo = "../shared/locomo/locomo10-dev.json"
	defaultOut    = "docs/recall/results.md"
	// defaultBudget is the context budget, in cl100k tokens.
	defaultBudget = 1000
	// defaultSpeedMessages is the size of the Speed section's long history.
	defaultSpeedMessages = 10000
	// modulePath identifies the repository's go.mod.
	modulePath = "github.com/memstack/memstack"
)

// options are the command's flags.
type options struct {
	locomo        string
	budget        int
	out           string
	embedder      string
	model         string
	ollamaURL     string
	speedMessages int
	// store is -store: "memory" or "sqlite".
	store string
	// args are the arguments as given, for the report.
	args []string
}

// parse reads and checks the flags; usage goes to stderr.
func parse(args []string, stderr io.Writer) (options, error) {
	o := options{args: args}
	fs := flag.NewFlagSet("memstack-recall", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.locomo, "locomo", defaultLoCoMo, "LoCoMo file (published locomo10.json format); the default is relative to the repository root")
	fs.IntVar(&o.budget, "budget", defaultBudget, "token budget (cl100k) of every budgeted memory")
	fs.StringVar(&o.out, "out", defaultOut, `file to write the report to as well as stdout ("" for none); the default is relative to the repository root`)
	fs.StringVar(&o.embedder, "embedder", "", `embedder for the vector and hybrid stacks: "ollama" (needs -model), or "" for none`)
	fs.StringVar(&o.model, "model", "", "Ollama embedding model (with -embedder ollama); never pulled")
	fs.StringVar(&o.ollamaURL, "ollama-url", "", "Ollama server URL (with -embedder ollama; default $OLLAMA_HOST or http://127.0.0.1:11434)")
	fs.IntVar(&o.speedMessages, "speed-messages", defaultSpeedMessages, "messages in the Speed section's long history (0: leave it out)")
	fs.StringVar(&o.store, "store", "memory", `store of the memstack stacks: "memory" (store.NewInMemory), "sqlite" (a fresh SQLite file per stack and conversation, with its recall index on (sqlitestore.WithRecallIndex), which the Recall searches) or "postgres" (fresh tables per stack and conversation on a throwaway PostgreSQL server, with the recall index on (pgstore.WithRecallIndex))`)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := o.check(set); err != nil {
		return o, err
	}
	root := repoRoot()
	if !set["locomo"] {
		o.locomo = filepath.Join(root, defaultLoCoMo)
	}
	if !set["out"] {
		o.out = filepath.Join(root, defaultOut)
	}
	return o, nil
}

// check validates the flags; set tells which were given.
func (o options) check(set map[string]bool) error {
	switch {
	case o.store != "memory" && o.store != "sqlite" && o.store != "postgres":
		return fmt.Errorf(`-store %q: the store must be "memory", "sqlite" or "postgres"`, o.store)
	case o.locomo == "":
		return errors.New(`-locomo "": name a LoCoMo file`)
	case o.budget < 1:
		return fmt.Errorf("-budget %d: must be at least 1", o.budget)
	case o.speedMessages < 0:
		return fmt.Errorf("-speed-messages %d: must not be negative (0 leaves the long history out)", o.speedMessages)
	case o.embedder != "" && o.embedder != "ollama":
		return fmt.Errorf(`-embedder %q: the only embedder is "ollama"`, o.embedder)
	case o.embedder == "" && (set["model"] || set["ollama-url"]):
		return errors.New("-model and -ollama-url go with -embedder ollama")
	case o.embedder == "ollama" && strings.TrimSpace(o.model) == "":
		return errors.New("-embedder ollama needs -model (an embedding model already on the server)")
	}
	if o.ollamaURL != "" {
		u, err := url.Parse(o.ollamaURL)
		if err != nil {
			return fmt.Errorf("-ollama-url %q: %w", o.ollamaURL, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("-ollama-url %q: want http:// or https:// and a host", o.ollamaURL)
		}
	}
	return nil
}

// repoRoot returns the nearest directory at or above the working directory
// whose go.mod declares memstack's module, or "" (the working directory)
// when there is none.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if isModuleRoot(filepath.Join(dir, "go.mod")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func isModuleRoot(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == modulePath
		}
	}
	return false
}

// run runs the benchmark the flags in args describe, writes the report to
// stdout and, unless -out is "", to the -out file.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	o, err := parse(args, stdout)
	if err != nil {
		return err
	}
	// langchaingo's ConversationTokenBuffer logs on every save.
	prev := log.Writer()
	log.SetOutput(io.Discard)
	defer log.SetOutput(prev)

	if o.store == "sqlite" {
		dir, err := os.MkdirTemp("", "memstack-recall-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		stores = &storeKit{kind: "sqlite", dir: dir}
		defer func() { _ = stores.close(); stores = &storeKit{kind: "memory"} }()
	}
	if o.store == "postgres" {
		srv, err := testsvc.StartPostgresServer()
		if err != nil {
			return fmt.Errorf("-store postgres: %w", err)
		}
		defer srv.Stop()
		stores = &storeKit{kind: "postgres", dsn: srv.DSN()}
		defer func() { _ = stores.close(); stores = &storeKit{kind: "memory"} }()
	}
	report, err := benchmark(ctx, o)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(stdout, report); err != nil {
		return err
	}
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return fmt.Errorf("creating the directory of -out %s: %w", o.out, err)
	}
	if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
		return fmt.Errorf("writing -out %s: %w", o.out, err)
	}
	return nil
}
