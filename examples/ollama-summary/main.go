// Command ollama-summary summarizes a long conversation locally with
// Ollama: a scripted 40-turn conversation (a team offsite being planned) is
// saved turn by turn into a memories.Summary whose summarizer is
// summarizer.New over langchaingo's llms/ollama model. Each time the memory
// folds old messages into its running summary the program prints the new
// summary; at the end it prints what a chain would load from the memory and
// checks that nothing was lost.
//
// Usage:
//
//	ollama serve &                # if no server runs yet
//	ollama pull llama3.2          # once
//	go run ./examples/ollama-summary [-model llama3.2] [-server http://127.0.0.1:11434]
//	go run ./examples/ollama-summary -offline   # no server, no model
//
// -model defaults to $OLLAMA_MODEL, else llama3.2; -server to $OLLAMA_HOST
// (which may omit the scheme and the port, as Ollama's own clients accept),
// else http://127.0.0.1:11434. -offline uses summarizer.NewExtractive
// instead of a model.
//
// Before the conversation starts the program asks the server, within a few
// seconds, whether it answers and has the model; if not it prints one line
// saying which server and which model, and how to fix it (ollama serve,
// ollama pull), and exits with status 1. It never pulls a model itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/ollama"

	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
)

const (
	defaultModel  = "llama3.2"
	defaultServer = "http://127.0.0.1:11434"
	// checkTimeout bounds the up-front reachability and model check.
	checkTimeout = 5 * time.Second
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2) // the flag package has printed the problem and the usage
	default:
		fmt.Fprintln(os.Stderr, "ollama-summary:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage error")

// config is what the flags select.
type config struct {
	model, server string
	offline       bool
	turns         int
	maxMessages   int
	batch         int
	timeout       time.Duration
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("ollama-summary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.model, "model", envOr("OLLAMA_MODEL", defaultModel), "Ollama model that writes the summaries ($OLLAMA_MODEL)")
	fs.StringVar(&c.server, "server", envOr("OLLAMA_HOST", defaultServer), "Ollama server URL ($OLLAMA_HOST)")
	fs.BoolVar(&c.offline, "offline", false, "summarize with the offline extractive summarizer: no server, no model")
	fs.IntVar(&c.turns, "turns", len(script), fmt.Sprintf("how many turns of the scripted conversation to play (1-%d)", len(script)))
	fs.IntVar(&c.maxMessages, "max-messages", memories.DefaultMaxMessages, "messages the memory keeps raw before it summarizes (memories.WithMaxMessages)")
	fs.IntVar(&c.batch, "batch", memories.DefaultBatchSize, "least messages folded per summarization (memories.WithBatchSize)")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Minute, "time limit of one turn, summarization included")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %q\n", fs.Args())
		fs.Usage()
		return c, errUsage
	}
	if c.turns < 1 || c.turns > len(script) {
		fmt.Fprintf(stderr, "-turns %d: must be between 1 and %d\n", c.turns, len(script))
		return c, errUsage
	}
	if c.timeout <= 0 {
		fmt.Fprintf(stderr, "-timeout %v: must be positive\n", c.timeout)
		return c, errUsage
	}
	return c, nil
}

func envOr(key, def string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return def
}

// run is the program; it returns an error instead of exiting so that tests
// can check it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}

	var sum summarizer.Summarizer
	if c.offline {
		sum = summarizer.NewExtractive()
		fmt.Fprintf(stdout, "Summarizing %d turns with the offline extractive summarizer (no model).\n", c.turns)
	} else {
		base, err := serverURL(c.server)
		if err != nil {
			return err
		}
		if err := checkServer(ctx, base, c.model); err != nil {
			return err
		}
		// Never ollama.WithPullModel: it pulls before every call.
		llm, err := ollama.New(ollama.WithServerURL(base.String()), ollama.WithModel(c.model))
		if err != nil {
			return fmt.Errorf("creating the Ollama client for %s: %w", base, err)
		}
		sum = summarizer.New(llm)
		fmt.Fprintf(stdout, "Summarizing %d turns with Ollama model %s at %s.\n", c.turns, c.model, base)
	}

	// The hook is called on this goroutine (synchronous mode), after each
	// summarization attempt.
	var mu sync.Mutex
	var events []memories.SummaryEvent
	mem, err := memories.NewSummary(sum,
		memories.WithMaxMessages(c.maxMessages),
		memories.WithBatchSize(c.batch),
		memories.WithSummaryHook(func(e memories.SummaryEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}))
	if err != nil {
		return err
	}
	defer mem.Close()
	fmt.Fprintf(stdout, "Memory: %s\n\n", mem)

	var sent []llms.ChatMessage
	for i, t := range script[:c.turns] {
		turnCtx, cancel := context.WithTimeout(ctx, c.timeout)
		err := mem.SaveContext(turnCtx, map[string]any{"input": t.human}, map[string]any{"output": t.ai})
		cancel()
		mu.Lock()
		evs := events
		events = nil
		mu.Unlock()
		if err != nil && !failedSummary(evs) {
			return fmt.Errorf("saving turn %d: %w", i+1, err)
		}
		sent = append(sent, llms.HumanChatMessage{Content: t.human}, llms.AIChatMessage{Content: t.ai})
		for _, e := range evs {
			if e.Err != nil {
				fmt.Fprintf(stdout, "Turn %d: summarizing %d messages failed after %v; they stay raw and are retried later: %v\n\n",
					i+1, e.Messages, e.Duration.Round(time.Millisecond), e.Err)
				continue
			}
			summary, _, err := loadSummary(ctx, mem, sent)
			if err != nil {
				return err
			}
			st := mem.Stats()
			fmt.Fprintf(stdout, "Turn %d: summary %d folds %d messages (%d folded so far, %v):\n  %s\n\n",
				i+1, st.Calls-st.Failures, e.Messages, st.MessagesFolded, e.Duration.Round(time.Millisecond),
				strings.ReplaceAll(summary, "\n", "\n  "))
		}
	}

	vars, err := mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Final memory (what a chain's {{.history}} gets):\n%s\n\n", vars["history"])

	_, raw, err := loadSummary(ctx, mem, sent)
	if err != nil {
		return err
	}
	st := mem.Stats()
	fmt.Fprintf(stdout, "Stats: %d summarizer calls, %d failed, %d messages folded + %d raw = %d messages sent.\n",
		st.Calls, st.Failures, st.MessagesFolded, raw, len(sent))
	if st.MessagesFolded+int64(raw) != int64(len(sent)) {
		return fmt.Errorf("messages lost: %d folded + %d raw != %d sent", st.MessagesFolded, raw, len(sent))
	}
	return nil
}

// failedSummary reports whether one of the events is a failed
// summarization: then SaveContext's error means "stored, but summarizing
// failed", and the conversation goes on.
func failedSummary(evs []memories.SummaryEvent) bool {
	for _, e := range evs {
		if e.Err != nil {
			return true
		}
	}
	return false
}

// loadSummary loads the memory and splits it into the running summary and
// the raw messages, checking that the raw messages are exactly the newest
// of sent: the loaded history must be
// memories.SummaryPrefix+summary+"\n"+transcript(sent[folded:]).
func loadSummary(ctx context.Context, mem *memories.Summary, sent []llms.ChatMessage) (summary string, raw int, err error) {
	vars, err := mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		return "", 0, err
	}
	history, _ := vars["history"].(string)
	folded := int(mem.Stats().MessagesFolded)
	if folded > len(sent) {
		return "", 0, fmt.Errorf("the memory reports %d messages folded, but only %d were sent", folded, len(sent))
	}
	transcript, err := llms.GetBufferString(sent[folded:], "Human", "AI")
	if err != nil {
		return "", 0, err
	}
	if folded == 0 {
		if history != transcript {
			return "", 0, errors.New("the loaded memory is not the transcript of the messages sent")
		}
		return "", len(sent), nil
	}
	rest, ok := strings.CutPrefix(history, memories.SummaryPrefix)
	if ok && transcript != "" {
		rest, ok = strings.CutSuffix(rest, "\n"+transcript)
	}
	if !ok {
		return "", 0, fmt.Errorf("the loaded memory is not the summary followed by the %d messages not folded", len(sent)-folded)
	}
	return rest, len(sent) - folded, nil
}

// serverURL turns the -server value (or $OLLAMA_HOST) into a base URL. Like
// Ollama's own clients it accepts a bare host or host:port; the scheme
// defaults to http and the port to 11434.
func serverURL(s string) (*url.URL, error) {
	raw := strings.TrimSpace(s)
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("-server %q is not a server URL such as %s (or set OLLAMA_HOST)", s, defaultServer)
	}
	if u.Port() == "" {
		port := "11434"
		if strings.Contains(s, "://") {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// checkServer asks the server, within checkTimeout, whether it answers and
// has the model, and returns a one-line error saying how to fix it if not.
func checkServer(ctx context.Context, base *url.URL, model string) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	client := api.NewClient(base, &http.Client{Timeout: checkTimeout})
	list, err := client.List(ctx)
	if err != nil {
		var se api.StatusError
		if errors.As(err, &se) {
			return fmt.Errorf("the server at %s is not an Ollama server that answers /api/tags (%s): start one with `ollama serve` and point -server (or OLLAMA_HOST) at it, or run with -offline", base, oneLine(err))
		}
		return fmt.Errorf("no Ollama server answers at %s (%s): start one with `ollama serve` and run `ollama pull %s`, point -server (or OLLAMA_HOST) at a running server, or run with -offline", base, oneLine(err), model)
	}
	var have []string
	for _, m := range list.Models {
		if sameModel(m.Name, model) || sameModel(m.Model, model) {
			return nil
		}
		have = append(have, m.Name)
	}
	sort.Strings(have)
	installed := "it has no models"
	if len(have) > 0 {
		installed = "it has " + strings.Join(have, ", ")
	}
	return fmt.Errorf("the Ollama server at %s has no model %q (%s): run `ollama pull %s`, choose an installed one with -model (or OLLAMA_MODEL), or run with -offline", base, model, installed, model)
}

// sameModel reports whether an installed model name matches the requested
// one; a name without a tag means the tag "latest".
func sameModel(installed, want string) bool {
	tag := func(s string) string {
		if i := strings.LastIndex(s, ":"); i >= 0 && !strings.Contains(s[i:], "/") {
			return s
		}
		return s + ":latest"
	}
	return installed != "" && tag(installed) == tag(want)
}

// oneLine keeps an error message on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
