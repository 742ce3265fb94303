package summarizer_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/memstack/memstack/summarizer"
	"github.com/tmc/langchaingo/llms"
)

// ExampleNew summarizes with a model. A scripted test double stands in for
// the model here; any llms.Model works (OpenAI, Ollama, ...).
func ExampleNew() {
	model := scripted("Ana (bakery in Porto) chose Moinhos Lda at 850 euros a month; first delivery 6 May.")
	s := summarizer.New(model,
		summarizer.WithCallOptions(llms.WithTemperature(0)),
		summarizer.WithMaxTokens(60))

	summary, err := s.Summarize(context.Background(), "", bakery())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(summary)

	call := model.Calls()[0]
	fmt.Println(call.Messages[0].Role, "then", call.Messages[1].Role, "- max tokens", call.Options.MaxTokens)

	// An answer that would not save anything is rejected.
	_, err = summarizer.New(scripted(bakeryText()+bakeryText())).Summarize(context.Background(), "", bakery())
	fmt.Println(errors.Is(err, summarizer.ErrNotShorter))
	// Output:
	// Ana (bakery in Porto) chose Moinhos Lda at 850 euros a month; first delivery 6 May.
	// system then human - max tokens 60
	// true
}

func bakeryText() string {
	var s string
	for _, m := range bakery() {
		s += m.GetContent() + " "
	}
	return s
}

// ExampleNewExtractive summarizes offline, with no model.
func ExampleNewExtractive() {
	s := summarizer.NewExtractive(summarizer.WithBudget(60))
	summary, err := s.Summarize(context.Background(), "", []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Hi! I'm Ana Lopez. I need 40 boxes of flour every Monday."},
		llms.AIChatMessage{Content: "Hello Ana. Moinhos Lda charges 850 euros a month."},
		llms.HumanChatMessage{Content: "Great, thanks. Let's book Moinhos."},
		llms.AIChatMessage{Content: "Done: we agreed on Moinhos Lda, first delivery on 6 May."},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(summary)
	// Output:
	// Human: I'm Ana Lopez. I need 40 boxes of flour every Monday. AI: Moinhos Lda charges 850 euros a month. Human: Let's book Moinhos. AI: Done: we agreed on Moinhos Lda, first delivery on 6 May.
}
