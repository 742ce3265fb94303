// Command lc is the baseline of scripts/modgraph.sh: a langchaingo
// conversation chain on langchaingo's own ConversationTokenBuffer.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms/fake"
	"github.com/tmc/langchaingo/memory"
)

func main() {
	llm := fake.NewFakeLLM([]string{"Hello!", "Noted."})
	chain := chains.NewConversation(llm, memory.NewConversationTokenBuffer(llm, 2000))
	for _, q := range []string{"Hi, I'm Ana.", "I live in Lisbon."} {
		out, err := chains.Run(context.Background(), chain, q)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(out)
	}
}
