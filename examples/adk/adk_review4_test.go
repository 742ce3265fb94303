package main

// Review 4: memstack's ADK services used the way an ADK developer would,
// with ADK's real runner and agents; only the model is scripted.

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/memory"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/plugin"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/tool"
	"google.golang.org/adk/v2/tool/functiontool"
	"google.golang.org/adk/v2/tool/loadmemorytool"
	"google.golang.org/adk/v2/tool/preloadmemorytool"
	"google.golang.org/genai"

	"github.com/memstack/memstack/adapters/adk"
	"github.com/memstack/memstack/store/sqlitestore"
)

// fnModel is a model.LLM whose answers a function gives; it keeps every
// request it got.
type fnModel struct {
	mu   sync.Mutex
	name string
	fn   func(req *model.LLMRequest) *model.LLMResponse
	reqs []*model.LLMRequest
}

func (m *fnModel) Name() string { return m.name }

func (m *fnModel) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		m.mu.Lock()
		m.reqs = append(m.reqs, req)
		resp := m.fn(req)
		m.mu.Unlock()
		if resp == nil {
			yield(nil, fmt.Errorf("fnModel: no answer for %q", lastUserText(req)))
			return
		}
		resp.TurnComplete = true
		if resp.FinishReason == "" {
			resp.FinishReason = genai.FinishReasonStop
		}
		yield(resp, nil)
	}
}

func textResp(s string) *model.LLMResponse {
	return &model.LLMResponse{Content: genai.NewContentFromText(s, genai.RoleModel)}
}

func callResp(id, name string, args map[string]any) *model.LLMResponse {
	return &model.LLMResponse{Content: &genai.Content{Role: genai.RoleModel, Parts: []*genai.Part{{FunctionCall: &genai.FunctionCall{ID: id, Name: name, Args: args}}}}}
}

// lastResponse is the last function response in req's contents, if the
// last content is one.
func lastResponse(req *model.LLMRequest) *genai.FunctionResponse {
	if len(req.Contents) == 0 {
		return nil
	}
	c := req.Contents[len(req.Contents)-1]
	for _, p := range c.Parts {
		if p.FunctionResponse != nil {
			return p.FunctionResponse
		}
	}
	return nil
}

type rig struct {
	sessions *adk.SessionService
	mem      *adk.MemoryService
}

func newRig(t *testing.T, opts ...adk.Option) rig {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "agent.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	sessions, err := adk.NewSessionService(st)
	require.NoError(t, err)
	mem, err := adk.NewMemoryService(st, opts...)
	require.NoError(t, err)
	return rig{sessions, mem}
}

func (g rig) runner(t *testing.T, a agent.Agent, auto bool) *runner.Runner {
	t.Helper()
	r, err := runner.New(runner.Config{AppName: appName, Agent: a, SessionService: g.sessions, MemoryService: g.mem, AutoCreateSession: auto})
	require.NoError(t, err)
	return r
}

func runTurn(t *testing.T, r *runner.Runner, sid, text string) []*session.Event {
	t.Helper()
	var evs []*session.Event
	for ev, err := range r.Run(context.Background(), userID, sid, genai.NewContentFromText(text, genai.RoleUser), agent.RunConfig{}) {
		require.NoError(t, err, "run %q in %s", text, sid)
		evs = append(evs, ev)
	}
	return evs
}

func (g rig) get(t *testing.T, sid string) session.Session {
	t.Helper()
	got, err := g.sessions.Get(context.Background(), &session.GetRequest{AppName: appName, UserID: userID, SessionID: sid})
	require.NoError(t, err)
	return got.Session
}

func (g rig) search(t *testing.T, q string) []memory.Entry {
	t.Helper()
	res, err := g.mem.SearchMemory(context.Background(), &memory.SearchRequest{AppName: appName, UserID: userID, Query: q})
	require.NoError(t, err)
	return res.Memories
}

func entryText(e memory.Entry) string { return partsText(e.Content) }

// loadmemorytool: the model calls load_memory; the entries reach it as
// JSON; the session holding that call is then added to memory.
func TestADKReview4LoadMemoryToolFlow(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	m := &fnModel{name: "scripted", fn: func(req *model.LLMRequest) *model.LLMResponse {
		if fr := lastResponse(req); fr != nil {
			data, _ := json.Marshal(fr.Response)
			if strings.Contains(string(data), "Lisbon") {
				return textResp("Your offsite is in Lisbon.")
			}
			return textResp("I don't know.")
		}
		switch lastUserText(req) {
		case settle:
			return textResp("Noted.")
		case question:
			return callResp("call-1", "load_memory", map[string]any{"query": "offsite"})
		}
		return nil
	}}
	a, err := llmagent.New(llmagent.Config{Name: "assistant", Model: m, Tools: []tool.Tool{loadmemorytool.New()}})
	require.NoError(t, err)
	r := g.runner(t, a, true)

	runTurn(t, r, "s1", settle)
	require.NoError(t, g.mem.AddSessionToMemory(ctx, g.get(t, "s1")))

	evs := runTurn(t, r, "s2", question)
	require.NotEmpty(t, evs)
	assert.Equal(t, "Your offsite is in Lisbon.", partsText(evs[len(evs)-1].Content))

	// The function response event, as the session service stored it.
	s2 := g.get(t, "s2")
	var resp map[string]any
	for ev := range s2.Events().All() {
		if ev.Content == nil {
			continue
		}
		for _, p := range ev.Content.Parts {
			if p.FunctionResponse != nil {
				resp = p.FunctionResponse.Response
			}
		}
	}
	require.NotNil(t, resp, "the load_memory response is stored")
	data, _ := json.Marshal(resp)
	t.Logf("load_memory's response as the model and the store see it (%d bytes): %s", len(data), data)

	// Add session 2 as well, as an app would after every session.
	before := g.search(t, "offsite Lisbon")
	require.NoError(t, g.mem.AddSessionToMemory(ctx, s2))
	after := g.search(t, "offsite Lisbon")
	for _, e := range after {
		t.Logf("entry %s author=%s: %.200s", e.ID, e.Author, entryText(e))
	}
	// What the user settled is one fact; the load_memory result that
	// echoed it back should not become a second (and third...) memory.
	n := 0
	for _, e := range after {
		if strings.Contains(entryText(e), "Lisbon on 14 May") {
			n++
		}
	}
	assert.Equal(t, countLisbon(before), n, "adding a session in which load_memory ran stores the recalled memories again as a memory of their own: each search now returns the fact once more (inside a tool result)")
}

func countLisbon(es []memory.Entry) int {
	n := 0
	for _, e := range es {
		if strings.Contains(entryText(e), "Lisbon on 14 May") {
			n++
		}
	}
	return n
}

type setArgs struct {
	City string `json:"city"`
}
type setResult struct {
	OK bool `json:"ok"`
}

// State set through a tool's context: "user:", "app:", "temp:" and the
// session's own keys; what the next runs see.
func TestADKReview4ToolStateAcrossRuns(t *testing.T) {
	g := newRig(t)
	setTool, err := functiontool.New(functiontool.Config{Name: "remember_city", Description: "remembers the city"},
		func(tc agent.Context, a setArgs) (setResult, error) {
			for k, v := range map[string]any{"user:city": a.City, "app:city_count": 1, "temp:scratch": "x", "city": a.City} {
				if err := tc.State().Set(k, v); err != nil {
					return setResult{}, err
				}
			}
			return setResult{OK: true}, nil
		})
	require.NoError(t, err)
	m := &fnModel{name: "scripted", fn: func(req *model.LLMRequest) *model.LLMResponse {
		if lastResponse(req) != nil {
			return textResp("Saved.")
		}
		switch lastUserText(req) {
		case "I live in Porto.":
			return callResp("c1", "remember_city", map[string]any{"city": "Porto"})
		default:
			return textResp("ok")
		}
	}}
	var seen []map[string]any
	a, err := llmagent.New(llmagent.Config{Name: "assistant", Model: m, Tools: []tool.Tool{setTool},
		BeforeAgentCallbacks: []agent.BeforeAgentCallback{func(c agent.Context) (*genai.Content, error) {
			st := map[string]any{}
			for k, v := range c.State().All() {
				st[k] = v
			}
			seen = append(seen, st)
			return nil, nil
		}}})
	require.NoError(t, err)
	r := g.runner(t, a, true)
	runTurn(t, r, "s1", "I live in Porto.")
	runTurn(t, r, "s1", "hello again")
	runTurn(t, r, "s2", "hello from s2")
	require.Len(t, seen, 3)
	t.Logf("state seen by run 2 (same session): %v", seen[1])
	t.Logf("state seen by run 3 (new session): %v", seen[2])
	assert.Equal(t, "Porto", seen[1]["user:city"])
	assert.Equal(t, "Porto", seen[1]["city"])
	assert.EqualValues(t, 1, seen[1]["app:city_count"])
	assert.NotContains(t, seen[1], "temp:scratch")
	assert.Equal(t, "Porto", seen[2]["user:city"])
	assert.EqualValues(t, 1, seen[2]["app:city_count"])
	assert.NotContains(t, seen[2], "city")
	s1 := g.get(t, "s1")
	v, err := s1.State().Get("user:city")
	require.NoError(t, err)
	assert.Equal(t, "Porto", v)
	// The stored events' deltas hold no temp: key.
	for ev := range s1.Events().All() {
		assert.NotContains(t, ev.Actions.StateDelta, "temp:scratch")
	}
}

// Adding memory from an after-agent callback with the invocation
// context's session (ADK's wrapper, as ADK's examples/agentengine does),
// then again from a Get: each event once, authors right.
func TestADKReview4AddFromCallbackWithADKsSession(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	var cbErrs []error
	m := &fnModel{name: "scripted", fn: func(req *model.LLMRequest) *model.LLMResponse {
		return textResp("Reply to: " + lastUserText(req))
	}}
	a, err := llmagent.New(llmagent.Config{Name: "assistant", Model: m, Tools: []tool.Tool{preloadmemorytool.New()}})
	require.NoError(t, err)
	memPlugin, err := plugin.New(plugin.Config{Name: "memory", AfterRunCallback: func(ic agent.InvocationContext) {
		t.Logf("callback session type %T, %d events", ic.Session(), ic.Session().Events().Len())
		cbErrs = append(cbErrs, ic.Memory().AddSessionToMemory(ic, ic.Session()))
	}})
	require.NoError(t, err)
	r, err := runner.New(runner.Config{AppName: appName, Agent: a, SessionService: g.sessions, MemoryService: g.mem, AutoCreateSession: true,
		PluginConfig: runner.PluginConfig{Plugins: []*plugin.Plugin{memPlugin}}})
	require.NoError(t, err)
	runTurn(t, r, "s1", "The budget is 4000 euros.")
	runTurn(t, r, "s1", "The hotel is Casa Azul.")
	for _, e := range cbErrs {
		require.NoError(t, e)
	}
	require.NoError(t, g.mem.AddSessionToMemory(ctx, g.get(t, "s1")))
	es := g.search(t, "budget hotel euros Casa Azul Reply")
	texts := map[string]int{}
	for _, e := range es {
		texts[e.Author+": "+entryText(e)]++
		t.Logf("%s %s: %s", e.ID, e.Author, entryText(e))
	}
	for k, n := range texts {
		assert.Equal(t, 1, n, "%q stored once", k)
	}
	assert.Equal(t, 1, texts["user: The budget is 4000 euros."])
	assert.Equal(t, 1, texts["user: The hotel is Casa Azul."])
	assert.Equal(t, 1, texts["assistant: Reply to: The budget is 4000 euros."], "the callback's add of the final answer")
	assert.Equal(t, 1, texts["assistant: Reply to: The hotel is Casa Azul."])
}

// Two agents: a coordinator transfers to a specialist; every entry is
// labelled with the agent that said it.
func TestADKReview4SubAgentAuthors(t *testing.T) {
	ctx := context.Background()
	g := newRig(t)
	spec := &fnModel{name: "spec", fn: func(req *model.LLMRequest) *model.LLMResponse {
		return textResp("Specialist: flights to Lisbon booked for 14 May.")
	}}
	coord := &fnModel{name: "coord", fn: func(req *model.LLMRequest) *model.LLMResponse {
		if lastResponse(req) != nil {
			return textResp("")
		}
		return callResp("t1", "transfer_to_agent", map[string]any{"agent_name": "flights"})
	}}
	flights, err := llmagent.New(llmagent.Config{Name: "flights", Description: "books flights", Model: spec})
	require.NoError(t, err)
	root, err := llmagent.New(llmagent.Config{Name: "coordinator", Model: coord, SubAgents: []agent.Agent{flights}})
	require.NoError(t, err)
	r := g.runner(t, root, true)
	evs := runTurn(t, r, "s1", "Book flights to Lisbon please.")
	for _, ev := range evs {
		t.Logf("event author=%s content=%s", ev.Author, func() string { d, _ := json.Marshal(ev.Content); return string(d) }())
	}
	require.NoError(t, g.mem.AddSessionToMemory(ctx, g.get(t, "s1")))
	es := g.search(t, "flights Lisbon booked transfer")
	found := false
	for _, e := range es {
		t.Logf("%s %s: %s", e.ID, e.Author, entryText(e))
		if strings.Contains(entryText(e), "Specialist:") {
			found = true
			assert.Equal(t, "flights", e.Author)
		}
		if strings.Contains(entryText(e), "transfer_to_agent") {
			assert.Equal(t, "coordinator", e.Author)
		}
	}
	assert.True(t, found)
}

// readmeSnippet is README.md's "Google ADK for Go" snippet, verbatim
// (only the store's path is the test's).
func readmeSnippet(ctx context.Context, dbPath string, adkAgent agent.Agent) error {
	st, err := sqlitestore.Open(ctx, dbPath) // one store for sessions and memory
	if err != nil {
		return err
	}
	defer st.Close()
	sessions, err := adk.NewSessionService(st)
	if err != nil {
		return err
	}
	mem, err := adk.NewMemoryService(st, adk.WithTokenBudget(1500))
	if err != nil {
		return err
	}
	// adkAgent: an llmagent with preloadmemorytool.New() (or loadmemorytool.New()) among its tools.
	r, err := runner.New(runner.Config{AppName: "travel", Agent: adkAgent, SessionService: sessions, MemoryService: mem,
		AutoCreateSession: true}) // or sessions.Create(ctx, &session.CreateRequest{…}) first
	if err != nil {
		return err
	}
	msg := genai.NewContentFromText("Book the offsite in Lisbon for 14 May.", genai.RoleUser)
	for _, err := range r.Run(ctx, "ana", "monday", msg, agent.RunConfig{}) {
		if err != nil {
			return err
		}
	}
	got, err := sessions.Get(ctx, &session.GetRequest{AppName: "travel", UserID: "ana", SessionID: "monday"})
	if err != nil {
		return err
	}
	if err := mem.AddSessionToMemory(ctx, got.Session); err != nil { // any number of times: each event is stored once
		return err
	}
	return nil
}

// The README's snippet, run on a fresh store: it runs a session it never
// created, with a runner without AutoCreateSession.
func TestADKReview4ReadmeSnippetRuns(t *testing.T) {
	m := &fnModel{name: "scripted", fn: func(req *model.LLMRequest) *model.LLMResponse { return textResp("Booked.") }}
	a, err := llmagent.New(llmagent.Config{Name: "assistant", Model: m, Tools: []tool.Tool{preloadmemorytool.New()}})
	require.NoError(t, err)
	assert.NoError(t, readmeSnippet(context.Background(), filepath.Join(t.TempDir(), "agent.db"), a), "the README's wiring works on a fresh store")

	// readmeSnippet is the README's snippet: every line of the README's
	// block is in this file.
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	self, err := os.ReadFile("adk_review4_test.go")
	require.NoError(t, err)
	section := string(readme)[strings.Index(string(readme), "## Google ADK for Go"):]
	block := section[strings.Index(section, "```go\n")+6:]
	block = block[:strings.Index(block, "```")]
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		line = strings.TrimSpace(line)
		if strings.Contains(line, "agent.db") {
			continue // the store's path is the test's
		}
		assert.Contains(t, string(self), line, "README line not in readmeSnippet")
	}
}
