// Command adk makes memstack the memory of an agent built with Google's
// Agent Development Kit for Go (google.golang.org/adk/v2). It runs
// offline: no services, no API keys, and a scripted stand-in for the
// model.
//
// One SQLite file (sqlitestore, in a temporary directory removed at the
// end) backs both of ADK's services: the sessions (adk.NewSessionService)
// and the long-term memory (adk.NewMemoryService). A real ADK runner runs
// an llmagent whose tools include ADK's preloadmemorytool, which searches
// the memory with the user's message before every model call and puts
// what it finds in the model's system instruction.
//
//  1. In a first session the user settles where the team's offsite is; the
//     session is then added to memory (AddSessionToMemory).
//  2. In a second session the user asks where the offsite is. The scripted
//     model answers only from what the preload put in its request, and the
//     program prints what it received; SearchMemory is also called
//     directly.
//  3. The user is forgotten (ForgetUser), after ExportUser shows what the
//     file holds for them: the same question in a third session recalls
//     nothing, and the model says it does not know.
//
// Run it from the repository root:
//
//	go run ./examples/adk
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/preloadmemorytool"
	"google.golang.org/genai"

	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/store/sqlitestore"
)

// The application, its user and what the user says.
const (
	appName  = "offsite-planner"
	userID   = "ana"
	settle   = "Our offsite is in Lisbon on 14 May."
	question = "Where is our offsite?"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "adk:", err)
		os.Exit(1)
	}
}

// run writes the three sessions, and what memory holds between them, to w.
func run(w io.Writer) (err error) {
	ctx := context.Background()

	dir, err := os.MkdirTemp("", "memstack-adk-example-")
	if err != nil {
		return err
	}
	defer func() {
		if rerr := os.RemoveAll(dir); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()

	// One store for both services: sessions and memory live side by side
	// in one file, and forgetting a user removes both.
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "agent.db"))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	sessions, err := adk.NewSessionService(st)
	if err != nil {
		return err
	}
	mem, err := adk.NewMemoryService(st)
	if err != nil {
		return err
	}

	assistant, err := llmagent.New(llmagent.Config{
		Name:        "assistant",
		Description: "Plans the team's offsite.",
		Instruction: "You help the team plan its offsite. Use what you remember of past conversations.",
		Model:       newScriptedModel(w),
		// Before every model call: search memory with the user's
		// message and add what is found to the system instruction.
		Tools: []tool.Tool{preloadmemorytool.New()},
	})
	if err != nil {
		return err
	}
	r, err := runner.New(runner.Config{
		AppName:        appName,
		Agent:          assistant,
		SessionService: sessions,
		MemoryService:  mem,
	})
	if err != nil {
		return err
	}
	c := chat{w: w, runner: r, sessions: sessions}

	fmt.Fprintln(w, "== Session 1: the user settles something ==")
	s1, err := c.turn(ctx, "session-1", settle)
	if err != nil {
		return err
	}
	if err := mem.AddSessionToMemory(ctx, s1); err != nil {
		return err
	}
	fmt.Fprintf(w, "Added session %q to memory (%d events).\n", s1.ID(), s1.Events().Len())

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Session 2: a new session recalls it ==")
	if _, err := c.turn(ctx, "session-2", question); err != nil {
		return err
	}
	if err := showSearch(ctx, w, mem, question); err != nil {
		return err
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Forgetting the user ==")
	if err := showExport(ctx, w, mem); err != nil {
		return err
	}
	n, err := mem.ForgetUser(ctx, appName, userID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "ForgetUser(%q, %q) removed %d identities.\n", appName, userID, n)
	left, err := sessions.List(ctx, &session.ListRequest{AppName: appName, UserID: userID})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Sessions left for %q: %d\n", userID, len(left.Sessions))

	fmt.Fprintln(w)
	fmt.Fprintln(w, "== Session 3: the same question, nothing to recall ==")
	if _, err := c.turn(ctx, "session-3", question); err != nil {
		return err
	}
	return showSearch(ctx, w, mem, question)
}

// chat runs one user message at a time through the runner.
type chat struct {
	w        io.Writer
	runner   *runner.Runner
	sessions *adk.SessionService
}

// turn creates session sid, sends text in it, prints the agent's final
// answer and returns the session as the session service now holds it.
func (c chat) turn(ctx context.Context, sid, text string) (session.Session, error) {
	if _, err := c.sessions.Create(ctx, &session.CreateRequest{AppName: appName, UserID: userID, SessionID: sid}); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.w, "[%s] user: %s\n", sid, text)
	answered := false
	for ev, err := range c.runner.Run(ctx, userID, sid, genai.NewContentFromText(text, genai.RoleUser), agent.RunConfig{}) {
		if err != nil {
			return nil, err
		}
		if ev.Author == "user" || !ev.IsFinalResponse() || ev.Content == nil {
			continue
		}
		fmt.Fprintf(c.w, "[%s] %s: %s\n", sid, ev.Author, partsText(ev.Content))
		answered = true
	}
	if !answered {
		return nil, fmt.Errorf("session %q: the agent gave no answer", sid)
	}
	got, err := c.sessions.Get(ctx, &session.GetRequest{AppName: appName, UserID: userID, SessionID: sid})
	if err != nil {
		return nil, err
	}
	return got.Session, nil
}

// showSearch prints what SearchMemory returns for query: the entries the
// preload tool turned into the model's past conversations.
func showSearch(ctx context.Context, w io.Writer, mem *adk.MemoryService, query string) error {
	res, err := mem.SearchMemory(ctx, &memory.SearchRequest{AppName: appName, UserID: userID, Query: query})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "SearchMemory(%q): %d entries\n", query, len(res.Memories))
	for _, e := range res.Memories {
		fmt.Fprintf(w, "  - %s at %s, session_id=%v: %s\n",
			e.Author, e.Timestamp.Format(time.RFC3339), e.CustomMetadata["session_id"], partsText(e.Content))
	}
	return nil
}

// showExport prints what the store holds for the user (ExportUser): the
// sessions the session service keeps (each a record and its events, in
// conversations named with a leading NUL, which no memory layer shows)
// beside the conversations the memory service added.
func showExport(ctx context.Context, w io.Writer, mem *adk.MemoryService) error {
	exp, err := mem.ExportUser(ctx, appName, userID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "ExportUser(%q, %q): %d identities\n", appName, userID, len(exp.Identities))
	var lines []string
	for _, id := range exp.Identities {
		msgs, states := 0, 0
		for _, ns := range id.Namespaces {
			msgs += len(ns.Messages)
			states += len(ns.States)
		}
		lines = append(lines, fmt.Sprintf("  - %s: %d messages, %d states\n", describe(id.Identity.Conversation), msgs, states))
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprint(w, l)
	}
	return nil
}

// describe names what a conversation of the export holds.
func describe(conversation string) string {
	if sid, ok := strings.CutPrefix(conversation, adk.SessionConversationPrefix); ok {
		return fmt.Sprintf("session %q (its record)", sid)
	}
	if rest, ok := strings.CutPrefix(conversation, adk.EventsConversationPrefix); ok {
		_, sid, _ := strings.Cut(rest, ":") // after the session's generation
		return fmt.Sprintf("session %q (its events)", sid)
	}
	return fmt.Sprintf("memory of session %q", conversation)
}

// partsText joins the text parts of c.
func partsText(c *genai.Content) string {
	if c == nil {
		return ""
	}
	var texts []string
	for _, p := range c.Parts {
		if p != nil && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// scriptedModel is a model.LLM that answers from a script instead of a
// real model (gemini.NewModel, or any other model.LLM). It prints what it
// received from memory, so the wiring shows.
type scriptedModel struct {
	mu     sync.Mutex
	w      io.Writer
	script map[string]func(recalled []string) string
}

var _ model.LLM = (*scriptedModel)(nil)

func newScriptedModel(w io.Writer) *scriptedModel {
	return &scriptedModel{w: w, script: map[string]func([]string) string{
		settle: func([]string) string { return "Noted: the offsite is in Lisbon on 14 May." },
		// The answer to the question is not in the script: it is read
		// from the past conversations the request carries.
		question: func(recalled []string) string {
			if fact := recall(recalled, "offsite is "); fact != "" {
				return "Your offsite is " + fact + ", as you told me in an earlier conversation."
			}
			return "I don't know where your offsite is: nothing about it was recalled."
		},
	}}
}

func (m *scriptedModel) Name() string { return "scripted" }

// GenerateContent answers the last user message of req with its scripted
// reply, given the lines of the request's <PAST_CONVERSATIONS> block.
func (m *scriptedModel) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		said := lastUserText(req)
		reply, ok := m.script[said]
		if !ok {
			yield(nil, fmt.Errorf("scripted model: no reply for %q", said))
			return
		}
		recalled := pastConversations(req)
		if len(recalled) == 0 {
			fmt.Fprintln(m.w, "  (model received from memory: nothing)")
		} else {
			fmt.Fprintln(m.w, "  (model received from memory, in its system instruction:")
			for _, line := range recalled {
				fmt.Fprintf(m.w, "     %s\n", line)
			}
			fmt.Fprintln(m.w, "  )")
		}
		yield(&model.LLMResponse{
			Content:      genai.NewContentFromText(reply(recalled), genai.RoleModel),
			TurnComplete: true,
			FinishReason: genai.FinishReasonStop,
		}, nil)
	}
}

// lastUserText is the text of the last user content of req.
func lastUserText(req *model.LLMRequest) string {
	for i := len(req.Contents) - 1; i >= 0; i-- {
		if c := req.Contents[i]; c != nil && c.Role == genai.RoleUser {
			if text := partsText(c); text != "" {
				return text
			}
		}
	}
	return ""
}

// pastConversations returns the lines preloadmemorytool put between
// <PAST_CONVERSATIONS> and </PAST_CONVERSATIONS> in req's system
// instruction, or nil when it put nothing there.
func pastConversations(req *model.LLMRequest) []string {
	if req.Config == nil {
		return nil
	}
	_, rest, ok := strings.Cut(partsText(req.Config.SystemInstruction), "<PAST_CONVERSATIONS>\n")
	if !ok {
		return nil
	}
	block, _, ok := strings.Cut(rest, "\n</PAST_CONVERSATIONS>")
	if !ok {
		return nil
	}
	return strings.Split(block, "\n")
}

// recall returns what the user said follows key ("in Lisbon on 14 May"
// for "offsite is "), from the first recalled user line that has it.
func recall(recalled []string, key string) string {
	for _, line := range recalled {
		said, ok := strings.CutPrefix(line, "user: ")
		if !ok {
			continue
		}
		if _, fact, ok := strings.Cut(said, key); ok {
			return strings.TrimSuffix(fact, ".")
		}
	}
	return ""
}
