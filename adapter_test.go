package memstack_test

// These tests prove that memstack's memories drop into langchaingo's real
// chains and agents (chains.NewConversation, chains.NewLLMChain,
// agents.NewExecutor with a conversational agent and a real tool) with no
// other change. Only the model is a test double (recordingLLM), and the
// assertions are made on what the model was shown.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/prompts"
	"github.com/tmc/langchaingo/schema"
	"github.com/tmc/langchaingo/tools"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/tokens"
)

// ---------------------------------------------------------------------------
// helpers

// questions and answers of a scripted conversation. "Question 1?" is not a
// substring of any other question, and the same holds for the answers.
func questions(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("Question %d?", i+1)
	}
	return out
}

func answers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("Answer %d: noted, and here is some more detail for you.", i+1)
	}
	return out
}

// turns returns the messages of the first n turns: Human qs[i], AI as[i].
func turns(qs, as []string, n int) []llms.ChatMessage {
	out := make([]llms.ChatMessage, 0, 2*n)
	for i := range n {
		out = append(out, llms.HumanChatMessage{Content: qs[i]}, llms.AIChatMessage{Content: as[i]})
	}
	return out
}

// render is langchaingo's own rendering of a history (llms.GetBufferString
// with the default prefixes): what a prompt's history variable must hold.
func render(t *testing.T, msgs ...llms.ChatMessage) string {
	t.Helper()
	s, err := llms.GetBufferString(msgs, "Human", "AI")
	require.NoError(t, err)
	return s
}

// between returns the text of s between the first start and the last end
// after it.
func between(t *testing.T, s, start, end string) string {
	t.Helper()
	i := strings.Index(s, start)
	require.GreaterOrEqual(t, i, 0, "prompt has no %q:\n%s", start, s)
	rest := s[i+len(start):]
	j := strings.LastIndex(rest, end)
	require.GreaterOrEqual(t, j, 0, "prompt has no %q after %q:\n%s", end, start, s)
	return rest[:j]
}

// conversationHistory extracts the {{.history}} part of a prompt rendered by
// chains.NewConversation for the input lastInput.
func conversationHistory(t *testing.T, prompt, lastInput string) string {
	t.Helper()
	return between(t, prompt, "Current conversation:\n", "\nHuman: "+lastInput+"\nAI:")
}

// loadString loads mem's variable key and requires it to be a string.
func loadString(t *testing.T, ctx context.Context, mem schema.Memory, key string) string {
	t.Helper()
	vars, err := mem.LoadMemoryVariables(ctx, map[string]any{})
	require.NoError(t, err)
	s, ok := vars[key].(string)
	require.True(t, ok, "variable %q is %T, want string", key, vars[key])
	return s
}

func mustRecentN(t *testing.T, n int, opts ...memories.RecentNOption) *memories.RecentN {
	t.Helper()
	m, err := memories.NewRecentN(n, opts...)
	require.NoError(t, err)
	return m
}

func mustTokenWindow(t *testing.T, budget int, opts ...memories.TokenWindowOption) *memories.TokenWindow {
	t.Helper()
	m, err := memories.NewTokenWindow(budget, opts...)
	require.NoError(t, err)
	return m
}

func mustCombined(t *testing.T, children ...schema.Memory) *combined.Memory {
	t.Helper()
	m, err := combined.New(children)
	require.NoError(t, err)
	return m
}

// ---------------------------------------------------------------------------
// 1. Each memory type inside chains.NewConversation

func TestConversationChainShowsEachMemoryType(t *testing.T) {
	const nTurns = 6
	const budget = 60
	qs, as := questions(nTurns), answers(nTurns)
	system := llms.SystemChatMessage{Content: "You are terse."}
	counter, err := tokens.CL100K()
	require.NoError(t, err)

	// earlier is every message the model could have been shown on the last
	// turn: the first nTurns-1 turns.
	earlier := turns(qs, as, nTurns-1)
	full := render(t, earlier...)

	cases := []struct {
		name  string
		build func(t *testing.T) schema.Memory
		// setup runs before the first turn.
		setup func(t *testing.T, ctx context.Context, mem schema.Memory)
		// check gets the history the model saw on each turn and the memory.
		check func(t *testing.T, ctx context.Context, histories []string, mem schema.Memory)
	}{
		{
			name:  "Buffer shows every earlier turn",
			build: func(*testing.T) schema.Memory { return mustBuffer() },
			check: func(t *testing.T, _ context.Context, histories []string, _ schema.Memory) {
				assert.Empty(t, histories[0], "first turn: nothing to remember yet")
				assert.Equal(t, full, histories[nTurns-1])
				assert.Contains(t, histories[nTurns-1], "Human: "+qs[0]+"\nAI: "+as[0])
			},
		},
		{
			name:  "RecentN(3) drops old turns and keeps the system message",
			build: func(t *testing.T) schema.Memory { return mustRecentN(t, 3) },
			setup: func(t *testing.T, ctx context.Context, mem schema.Memory) {
				adder, ok := mem.(combined.MessageAdder)
				require.True(t, ok, "%T takes single messages", mem)
				require.NoError(t, adder.AddMessage(ctx, system))
			},
			check: func(t *testing.T, _ context.Context, histories []string, _ schema.Memory) {
				assert.Equal(t, render(t, system), histories[0], "the system message is shown from the first turn")
				want := render(t, append([]llms.ChatMessage{system}, earlier[len(earlier)-3:]...)...)
				assert.Equal(t, want, histories[nTurns-1])
				for i := range nTurns - 3 {
					assert.NotContains(t, histories[nTurns-1], qs[i])
					assert.NotContains(t, histories[nTurns-1], as[i])
				}
			},
		},
		{
			name:  "TokenWindow keeps the newest turns within its budget",
			build: func(t *testing.T) schema.Memory { return mustTokenWindow(t, budget) },
			check: func(t *testing.T, _ context.Context, histories []string, _ schema.Memory) {
				h := histories[nTurns-1]
				require.Greater(t, counter.CountTokens(full), budget, "the test needs a transcript longer than the budget")
				assert.LessOrEqual(t, counter.CountTokens(h), budget)
				assert.NotContains(t, h, qs[0], "oldest turn is gone")
				assert.NotContains(t, h, as[0], "oldest turn is gone")
				// The window is whole messages at the end of the transcript.
				require.NotEmpty(t, h)
				assert.True(t, strings.HasSuffix(full, "\n"+h), "window is a suffix of the transcript at a line break:\n%s", h)
				assert.True(t, strings.HasSuffix(h, "AI: "+as[nTurns-2]), "newest answer is kept")
				// And it is the largest such window: by the documented cost
				// (tokens of the line plus one for the line break), the next
				// older line would not have fitted.
				kept := strings.Count(h, "\n") + 1
				cost := 0
				for _, m := range earlier[len(earlier)-kept:] {
					cost += counter.CountTokens(render(t, m)) + 1
				}
				assert.LessOrEqual(t, cost, budget)
				require.Less(t, kept, len(earlier))
				next := earlier[len(earlier)-kept-1]
				assert.Greater(t, cost+counter.CountTokens(render(t, next))+1, budget, "the window should hold every message that fits")
			},
		},
		{
			name: "CombinedMemory feeds history and keeps its other views",
			build: func(t *testing.T) schema.Memory {
				return mustCombined(t, mustBuffer(), mustRecentN(t, 2, memories.WithMemoryKey("recent")))
			},
			check: func(t *testing.T, ctx context.Context, histories []string, mem schema.Memory) {
				assert.Equal(t, full, histories[nTurns-1])
				assert.Equal(t, []string{"history", "recent"}, mem.MemoryVariables(ctx))
				all := turns(qs, as, nTurns)
				assert.Equal(t, render(t, all[len(all)-2:]...), loadString(t, ctx, mem, "recent"))
				assert.Equal(t, render(t, all...), loadString(t, ctx, mem, "history"))
			},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			llm := newScriptedLLM(as...)
			mem := tc.build(t)
			if tc.setup != nil {
				tc.setup(t, ctx, mem)
			}
			chain := chains.NewConversation(llm, mem)
			for i := range nTurns {
				out, err := chains.Run(ctx, chain, qs[i])
				require.NoError(t, err, "turn %d", i+1)
				require.Equal(t, as[i], out)
			}
			calls := llm.Calls()
			require.Len(t, calls, nTurns)
			// The LLMChain sends the whole prompt as one human message.
			last := calls[nTurns-1]
			require.Len(t, last, 1)
			assert.Equal(t, llms.ChatMessageTypeHuman, last[0].Role)

			histories := make([]string, nTurns)
			for i, p := range llm.Prompts() {
				histories[i] = conversationHistory(t, p, qs[i])
			}
			tc.check(t, ctx, histories, mem)
		})
	}
}

// ---------------------------------------------------------------------------
// 2. One CombinedMemory feeding two variables of an LLMChain prompt

func TestLLMChainUsesTwoVariablesFromOneCombinedMemory(t *testing.T) {
	const nTurns = 5
	ctx := t.Context()
	qs, as := questions(nTurns), answers(nTurns)

	const tpl = "Full transcript:\n{{.chat_history}}\n\nLast three messages:\n{{.recent}}\n\nHuman: {{.input}}\nAI:"
	prompt := prompts.NewPromptTemplate(tpl, []string{"chat_history", "recent", "input"})
	mem := mustCombined(t,
		mustBuffer(memories.WithMemoryKey("chat_history")),
		mustRecentN(t, 3, memories.WithMemoryKey("recent")),
	)
	llm := newScriptedLLM(as...)
	chain := chains.NewLLMChain(llm, prompt)
	chain.Memory = mem

	// Turns 1..n-1 with chains.Call and an explicit input map.
	for i := range nTurns - 1 {
		out, err := chains.Call(ctx, chain, map[string]any{"input": qs[i]})
		require.NoError(t, err, "turn %d", i+1)
		assert.Equal(t, map[string]any{"text": as[i]}, out)
	}
	// The last turn with chains.Run: the memory supplies both other prompt
	// variables, so "input" is the only key the caller must give.
	out, err := chains.Run(ctx, chain, qs[nTurns-1])
	require.NoError(t, err)
	assert.Equal(t, as[nTurns-1], out)

	ps := llm.Prompts()
	require.Len(t, ps, nTurns)
	last := ps[nTurns-1]
	earlier := turns(qs, as, nTurns-1)
	gotFull := between(t, last, "Full transcript:\n", "\n\nLast three messages:\n")
	gotRecent := between(t, last, "\n\nLast three messages:\n", "\n\nHuman: "+qs[nTurns-1]+"\nAI:")
	assert.Equal(t, render(t, earlier...), gotFull)
	assert.Equal(t, render(t, earlier[len(earlier)-3:]...), gotRecent)
	assert.NotContains(t, gotRecent, qs[0])

	// The first prompt had both variables empty.
	assert.Equal(t, "Full transcript:\n\n\nLast three messages:\n\n\nHuman: "+qs[0]+"\nAI:", ps[0])
}

// ---------------------------------------------------------------------------
// 3. A conversational agent with a real tool, across several runs

// calcScript is a model that first asks for the calculator, then answers
// from the observation, for two questions. The formats are those of
// langchaingo's conversational agent (agents/prompts and parseOutput).
var (
	calcQuestions = []string{"What is 6 times 7?", "And if I add 8?"}
	calcScript    = []string{
		"Thought: Do I need to use a tool? Yes\nAction: calculator\nAction Input: 6*7",
		"Thought: Do I need to use a tool? No\nAI: 6 times 7 is 42.",
		"Thought: Do I need to use a tool? Yes\nAction: calculator\nAction Input: 42+8",
		"Thought: Do I need to use a tool? No\nAI: Adding 8 gives 50.",
	}
)

func newCalcExecutor(llm llms.Model, opts ...agents.Option) *agents.Executor {
	agent := agents.NewConversationalAgent(llm, []tools.Tool{tools.Calculator{}})
	return agents.NewExecutor(agent, opts...)
}

// agentHistory extracts the {{.history}} part of a conversational agent's
// prompt for the input input.
func agentHistory(t *testing.T, prompt, input string) string {
	t.Helper()
	return between(t, prompt, "Previous conversation history:\n", "\n\nNew input: "+input+"\n")
}

func TestConversationalAgentWithMemstackMemory(t *testing.T) {
	cases := []struct {
		name  string
		build func(t *testing.T) schema.Memory
	}{
		{"Buffer", func(*testing.T) schema.Memory { return mustBuffer() }},
		{"RecentN", func(t *testing.T) schema.Memory { return mustRecentN(t, 4) }},
		{"TokenWindow", func(t *testing.T) schema.Memory { return mustTokenWindow(t, 500) }},
		{"Combined", func(t *testing.T) schema.Memory {
			return mustCombined(t, mustBuffer(), mustRecentN(t, 3, memories.WithMemoryKey("recent")))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			mem := tc.build(t)
			llm := newScriptedLLM(calcScript...)
			exec := newCalcExecutor(llm, agents.WithMemory(mem))

			var outs []string
			for _, q := range calcQuestions {
				out, err := chains.Run(ctx, exec, q)
				require.NoError(t, err)
				outs = append(outs, out)
			}
			// The agent's final answer is the text after "AI:".
			assert.Equal(t, "6 times 7 is 42.", strings.TrimSpace(outs[0]))
			assert.Equal(t, "Adding 8 gives 50.", strings.TrimSpace(outs[1]))

			ps := llm.Prompts()
			require.Len(t, ps, 4, "two model calls per question: action, then answer")
			// The real calculator ran: its results are in the scratchpads.
			assert.Contains(t, ps[1], "Action Input: 6*7\nObservation: 42\nThought:")
			assert.Contains(t, ps[3], "Action Input: 42+8\nObservation: 50\nThought:")

			// First run: no history. Second run: the first exchange, in
			// both of its model calls.
			assert.Empty(t, agentHistory(t, ps[0], calcQuestions[0]))
			first := render(t, llms.HumanChatMessage{Content: calcQuestions[0]}, llms.AIChatMessage{Content: outs[0]})
			assert.Equal(t, first, agentHistory(t, ps[2], calcQuestions[1]))
			assert.Equal(t, first, agentHistory(t, ps[3], calcQuestions[1]))

			// Memory holds the user inputs and the final answers, and none
			// of the agent's intermediate thoughts.
			history := loadString(t, ctx, mem, "history")
			assert.Equal(t, render(t,
				llms.HumanChatMessage{Content: calcQuestions[0]}, llms.AIChatMessage{Content: outs[0]},
				llms.HumanChatMessage{Content: calcQuestions[1]}, llms.AIChatMessage{Content: outs[1]},
			), history)
			assert.NotContains(t, history, "Action:")
			assert.NotContains(t, history, "Observation:")
		})
	}
}

// With agents.WithReturnIntermediateSteps the executor's output map holds
// "output" and "intermediateSteps". memstack ignores "intermediateSteps"
// when no output key is configured; langchaingo's ConversationBuffer does
// not, and fails the call (after storing half of the turn).
func TestAgentReturningIntermediateSteps(t *testing.T) {
	t.Run("memstack memory needs no output key", func(t *testing.T) {
		ctx := t.Context()
		mem := mustCombined(t, mustBuffer(), mustRecentN(t, 3, memories.WithMemoryKey("recent")))
		llm := newScriptedLLM(calcScript...)
		exec := newCalcExecutor(llm, agents.WithMemory(mem), agents.WithReturnIntermediateSteps())

		out, err := chains.Call(ctx, exec, map[string]any{"input": calcQuestions[0]})
		require.NoError(t, err)
		require.Len(t, out, 2)
		answer, ok := out["output"].(string)
		require.True(t, ok)
		assert.Equal(t, "6 times 7 is 42.", strings.TrimSpace(answer))
		steps, ok := out["intermediateSteps"].([]schema.AgentStep)
		require.True(t, ok, "intermediateSteps is %T", out["intermediateSteps"])
		require.Len(t, steps, 1)
		assert.Equal(t, "calculator", steps[0].Action.Tool)
		assert.Equal(t, "42", steps[0].Observation)

		// chains.Run works too (it reads only "output").
		answer2, err := chains.Run(ctx, exec, calcQuestions[1])
		require.NoError(t, err)

		want := []llms.ChatMessage{
			llms.HumanChatMessage{Content: calcQuestions[0]}, llms.AIChatMessage{Content: answer},
			llms.HumanChatMessage{Content: calcQuestions[1]}, llms.AIChatMessage{Content: answer2},
		}
		assert.Equal(t, render(t, want...), loadString(t, ctx, mem, "history"))
		assert.Equal(t, render(t, want[1:]...), loadString(t, ctx, mem, "recent"))
		ps := llm.Prompts()
		require.Len(t, ps, 4)
		assert.Equal(t, render(t, want[:2]...), agentHistory(t, ps[2], calcQuestions[1]))
	})

	t.Run("langchaingo ConversationBuffer fails in the same setup", func(t *testing.T) {
		ctx := t.Context()
		lc := memory.NewConversationBuffer()
		llm := newScriptedLLM(calcScript...)
		exec := newCalcExecutor(llm, agents.WithMemory(lc), agents.WithReturnIntermediateSteps())

		out, err := chains.Call(ctx, exec, map[string]any{"input": calcQuestions[0]})
		require.ErrorIs(t, err, memory.ErrInvalidInputValues)
		assert.Contains(t, out, "intermediateSteps", "the agent itself succeeded; saving the turn failed")
		// And the failure left half a turn behind: the question, no answer.
		msgs, err := lc.ChatHistory.Messages(ctx)
		require.NoError(t, err)
		assert.Equal(t, []llms.ChatMessage{llms.HumanChatMessage{Content: calcQuestions[0]}}, msgs)
	})
}

// ---------------------------------------------------------------------------
// 4. Swapping langchaingo's memory for a memstack memory

var (
	swapQuestions = []string{"What is 6 times 7?", "And if I add 8?", "What did I ask first?"}
	swapScript    = []string{
		"Thought: Do I need to use a tool? Yes\nAction: calculator\nAction Input: 6*7",
		"Thought: Do I need to use a tool? No\nAI: 6 times 7 is 42.",
		"Thought: Do I need to use a tool? Yes\nAction: calculator\nAction Input: 42+8",
		"Thought: Do I need to use a tool? No\nAI: Adding 8 gives 50.",
		"Thought: Do I need to use a tool? No\nAI: You first asked what 6 times 7 is.",
	}
)

// agentProgram is an application's agent code. It takes any schema.Memory
// and knows nothing else about it; it returns the answers and every prompt
// the model saw.
func agentProgram(ctx context.Context, mem schema.Memory) (answers, prompts []string, err error) {
	llm := newScriptedLLM(swapScript...)
	exec := newCalcExecutor(llm, agents.WithMemory(mem))
	for _, q := range swapQuestions {
		a, err := chains.Run(ctx, exec, q)
		if err != nil {
			return nil, nil, fmt.Errorf("question %q: %w", q, err)
		}
		answers = append(answers, a)
	}
	return answers, llm.Prompts(), nil
}

func TestSwapLangchaingoMemoryForMemstack(t *testing.T) {
	ctx := t.Context()

	lcMem := memory.NewConversationBuffer()
	lcAnswers, lcPrompts, err := agentProgram(ctx, lcMem)
	require.NoError(t, err)

	msMem := mustCombined(t, mustBuffer(), mustRecentN(t, 3, memories.WithMemoryKey("recent")))
	msAnswers, msPrompts, err := agentProgram(ctx, msMem)
	require.NoError(t, err)

	require.Len(t, lcPrompts, len(swapScript))
	assert.Equal(t, lcAnswers, msAnswers)
	assert.Equal(t, lcPrompts, msPrompts, "the model sees exactly the same prompts")
	for i := range msPrompts {
		assert.Equal(t, agentHistory(t, lcPrompts[i], inputOfAgentPrompt(t, lcPrompts[i])),
			agentHistory(t, msPrompts[i], inputOfAgentPrompt(t, msPrompts[i])), "history of call %d", i+1)
	}

	// The comparison is not vacuous: the last prompt shows both earlier
	// exchanges.
	exchanges := []llms.ChatMessage{
		llms.HumanChatMessage{Content: swapQuestions[0]}, llms.AIChatMessage{Content: msAnswers[0]},
		llms.HumanChatMessage{Content: swapQuestions[1]}, llms.AIChatMessage{Content: msAnswers[1]},
	}
	assert.Equal(t, render(t, exchanges...), agentHistory(t, msPrompts[len(msPrompts)-1], swapQuestions[2]))

	// Both memories end holding the same transcript; memstack's also keeps
	// its RecentN view.
	lcHistory := loadString(t, ctx, lcMem, "history")
	assert.Equal(t, lcHistory, loadString(t, ctx, msMem, "history"))
	all := slices.Concat(exchanges, []llms.ChatMessage{
		llms.HumanChatMessage{Content: swapQuestions[2]}, llms.AIChatMessage{Content: msAnswers[2]},
	})
	assert.Equal(t, render(t, all...), lcHistory)
	assert.Equal(t, render(t, all[len(all)-3:]...), loadString(t, ctx, msMem, "recent"))
}

// inputOfAgentPrompt returns the "New input:" line of a conversational
// agent's prompt.
func inputOfAgentPrompt(t *testing.T, prompt string) string {
	t.Helper()
	const marker = "\n\nNew input: "
	i := strings.LastIndex(prompt, marker)
	require.GreaterOrEqual(t, i, 0)
	rest := prompt[i+len(marker):]
	j := strings.Index(rest, "\n")
	require.GreaterOrEqual(t, j, 0)
	return rest[:j]
}

// ---------------------------------------------------------------------------
// 5. Many identities sharing one chain concurrently

func TestConversationChainKeepsIdentitiesApart(t *testing.T) {
	const users, nTurns = 50, 5
	ctx := t.Context()

	marker := func(u int) string { return fmt.Sprintf("<user-%02d>", u) }
	input := func(u, turn int) string { return fmt.Sprintf("%s message %d", marker(u), turn) }
	reply := func(in string) string { return "ack " + in }
	// inputOf returns the last "Human: " input of a conversation prompt.
	inputOf := func(prompt string) string {
		i := strings.LastIndex(prompt, "\nHuman: ")
		if i < 0 {
			return ""
		}
		return strings.TrimSuffix(prompt[i+len("\nHuman: "):], "\nAI:")
	}
	// history returns identity u's messages before its turn `turn`.
	history := func(u, turn int) []llms.ChatMessage {
		var out []llms.ChatMessage
		for k := 1; k < turn; k++ {
			out = append(out, llms.HumanChatMessage{Content: input(u, k)}, llms.AIChatMessage{Content: reply(input(u, k))})
		}
		return out
	}

	llm := newFuncLLM(func(prompt string) string { return reply(inputOf(prompt)) })
	mem := mustCombined(t, mustBuffer(), mustRecentN(t, 4, memories.WithMemoryKey("recent")))
	chain := chains.NewConversation(llm, mem)
	idCtx := func(u int) context.Context {
		return memstack.WithIdentity(ctx, memstack.Identity{User: fmt.Sprint(u)})
	}

	errs := make([]error, users)
	var wg sync.WaitGroup
	for u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for turn := 1; turn <= nTurns; turn++ {
				out, err := chains.Run(idCtx(u), chain, input(u, turn))
				if err != nil {
					errs[u] = fmt.Errorf("user %d turn %d: %w", u, turn, err)
					return
				}
				if want := reply(input(u, turn)); out != want {
					errs[u] = fmt.Errorf("user %d turn %d: answer %q, want %q", u, turn, out, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}

	// Every prompt shows only its own identity's earlier turns.
	ps := llm.Prompts()
	require.Len(t, ps, users*nTurns)
	markerRE := regexp.MustCompile(`<user-(\d\d)>`)
	inputRE := regexp.MustCompile(`^<user-(\d\d)> message (\d+)$`)
	seen := map[string]bool{}
	for _, p := range ps {
		in := inputOf(p)
		m := inputRE.FindStringSubmatch(in)
		require.NotNil(t, m, "unexpected input %q", in)
		u, _ := strconv.Atoi(m[1])
		turn, _ := strconv.Atoi(m[2])
		require.False(t, seen[in], "input %q sent twice", in)
		seen[in] = true
		for _, found := range markerRE.FindAllString(p, -1) {
			require.Equal(t, marker(u), found, "prompt of user %d shows another identity:\n%s", u, p)
		}
		require.Equal(t, render(t, history(u, turn)...), conversationHistory(t, p, in), "user %d turn %d", u, turn)
	}

	// Each identity's memory holds exactly its own 10 messages.
	for u := range users {
		want := history(u, nTurns+1)
		require.Len(t, want, 2*nTurns)
		got := loadString(t, idCtx(u), mem, "history")
		assert.Equal(t, render(t, want...), got, "user %d", u)
		assert.Equal(t, 2*nTurns, strings.Count(got, "\n")+1)
		assert.Equal(t, render(t, want[len(want)-4:]...), loadString(t, idCtx(u), mem, "recent"), "user %d", u)
	}
	// Nothing leaked into the shared default conversation.
	assert.Empty(t, loadString(t, ctx, mem, "history"))
}

// mustBuffer is memories.NewBuffer for options that cannot fail: a test
// that gives a bad option calls NewBuffer itself.
func mustBuffer(opts ...memories.BufferOption) *memories.Buffer {
	b, err := memories.NewBuffer(opts...)
	if err != nil {
		panic(err)
	}
	return b
}
