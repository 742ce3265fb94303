package memstack_test

// The summary memory inside langchaingo's real conversation chain: one model
// test double answers both the chain's prompts and the summarizer's calls,
// and the assertions are made on what the model was shown.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/summarizer"
)

var (
	saQuestion = regexp.MustCompile(`Question (\d+)\?`)
	saCovered  = regexp.MustCompile(`#(\d+)`)
)

// saModel answers a summarizer call (recognised by its "New lines of
// conversation:" block) with "Earlier questions: #i #j ..." listing the
// questions of the previous summary and of the new lines, and a
// conversation prompt with "Answer i: noted." for its last question.
func saModel() *recordingLLM {
	return newFuncLLM(func(prompt string) string {
		if strings.Contains(prompt, "New lines of conversation:") {
			var nums []string
			for _, m := range saCovered.FindAllStringSubmatch(prompt, -1) {
				nums = append(nums, "#"+m[1])
			}
			for _, m := range saQuestion.FindAllStringSubmatch(prompt, -1) {
				nums = append(nums, "#"+m[1])
			}
			return "Earlier questions: " + strings.Join(nums, " ") + "."
		}
		qs := saQuestion.FindAllStringSubmatch(prompt, -1)
		return fmt.Sprintf("Answer %s: noted.", qs[len(qs)-1][1])
	})
}

func saRaw(from, to int) string {
	var lines []string
	for i := from; i <= to; i++ {
		lines = append(lines, fmt.Sprintf("Human: Question %d?", i), fmt.Sprintf("AI: Answer %d: noted.", i))
	}
	return strings.Join(lines, "\n")
}

func saCovers(from, to int) string {
	var nums []string
	for i := from; i <= to; i++ {
		nums = append(nums, fmt.Sprintf("#%d", i))
	}
	return "Earlier questions: " + strings.Join(nums, " ") + "."
}

func TestSummaryMemoryInConversationChain(t *testing.T) {
	for _, background := range []bool{false, true} {
		t.Run(fmt.Sprintf("background=%t", background), func(t *testing.T) {
			ctx := memstack.WithIdentity(context.Background(), memstack.Identity{Tenant: "acme", User: "ana"})
			llm := saModel()
			mem, err := memories.NewSummary(summarizer.New(llm), memories.WithBackground(background))
			require.NoError(t, err)
			defer mem.Close()
			chain := chains.NewConversation(llm, mem)

			for i := 1; i <= 20; i++ {
				answer, err := chains.Run(ctx, chain, fmt.Sprintf("Question %d?", i))
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("Answer %d: noted.", i), answer)
				require.NoError(t, mem.Flush(ctx))
			}
			_, err = chains.Run(ctx, chain, "Question 21?")
			require.NoError(t, err)

			// With n = 15 and m = 6 the summarizer runs after turns 8, 11,
			// 14, 17 and 20, each time folding the 3 oldest raw turns.
			var summaryCalls, chainCalls []string
			for _, p := range llm.Prompts() {
				if strings.Contains(p, "New lines of conversation:") {
					summaryCalls = append(summaryCalls, p)
				} else {
					chainCalls = append(chainCalls, p)
				}
			}
			require.Len(t, summaryCalls, 5)
			require.Len(t, chainCalls, 21)
			assert.Equal(t, memories.SummaryStats{Calls: 5, MessagesFolded: 30}, mem.Stats())

			// The summarizer got real roles: a system instruction, then the
			// previous summary and the new lines as a human message.
			last := llm.Calls()[len(llm.Calls())-2] // turn 20's summarizer call, before turn 21's prompt
			require.Len(t, last, 2)
			assert.Equal(t, llms.ChatMessageTypeSystem, last[0].Role)
			assert.Equal(t, llms.ChatMessageTypeHuman, last[1].Role)
			assert.Equal(t, "Summary so far:\n"+saCovers(1, 12)+"\n\nNew lines of conversation:\n"+saRaw(13, 15),
				textOf(last[1:]))

			// The final prompt: the summary line, then the recent raw turns.
			final := chainCalls[20]
			history := conversationHistory(t, final, "Question 21?")
			assert.Equal(t, "Summary of earlier conversation: "+saCovers(1, 15)+"\n"+saRaw(16, 20), history)
			assert.Contains(t, final, "Summary of earlier conversation:")
			assert.NotContains(t, final, "Question 15?", "folded turns are shown only through the summary")
		})
	}
}
