package extract_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/memstack/memstack/extract"
	"github.com/tmc/langchaingo/llms"
)

func ExampleNewPatterns() {
	p, err := extract.NewPatterns()
	if err != nil {
		panic(err)
	}
	facts, err := p.Extract(context.Background(), []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Hi, I'm Ana. I'm tired: I just moved to Porto and I love hiking."},
		llms.AIChatMessage{Content: "Welcome! Shall we book the coastal trail?"},
		llms.HumanChatMessage{Content: "Yes, let's go with the coastal trail."},
	})
	if err != nil {
		panic(err)
	}
	for _, f := range facts {
		fmt.Printf("%s = %q (messages %v, rule %s)\n", f.Key(), f.Value, f.Sources, f.Rule)
	}
	// Output:
	// user name = "Ana" (messages [0], rule name/i-am)
	// user location = "Porto" (messages [0], rule location/moved-to)
	// user preference:hiking = "loves hiking" (messages [0], rule preference/love)
	// we decision:the coastal trail = "the coastal trail" (messages [2], rule decision/go-with)
}

func ExampleWithRules() {
	p, err := extract.NewPatterns(extract.WithRules(extract.Rule{
		Name:      "pet",
		Pattern:   regexp.MustCompile(`(?i)\bmy\s+(?P<kind>dog|cat)\s+is\s+called\s+(?P<value>\p{Lu}\p{L}*)`),
		Attribute: "pet:${kind}",
	}))
	if err != nil {
		panic(err)
	}
	facts, _ := p.Extract(context.Background(), []llms.ChatMessage{
		llms.HumanChatMessage{Content: "My dog is called Rex."},
	})
	for _, f := range facts {
		fmt.Println(f.Key(), "=", f.Value)
	}
	// Output:
	// user pet:dog = Rex
}

// answerModel is a stand-in for a real llms.Model that always gives the
// same answer.
type answerModel string

func (a answerModel) GenerateContent(context.Context, []llms.MessageContent, ...llms.CallOption) (*llms.ContentResponse, error) {
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: string(a)}}}, nil
}

func (a answerModel) Call(context.Context, string, ...llms.CallOption) (string, error) {
	return string(a), nil
}

func ExampleNewLLM() {
	model := answerModel(`{"facts":[{"subject":"user","attribute":"preference:coffee","value":"black, no sugar","sources":[0]}]}`)
	l, err := extract.NewLLM(model)
	if err != nil {
		panic(err)
	}
	facts, err := l.Extract(context.Background(), []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Coffee? Black, no sugar, always."},
	})
	fmt.Println(facts[0].Key(), "=", facts[0].Value, err)

	chatty, _ := extract.NewLLM(answerModel("Sure! The user likes coffee."))
	facts, err = chatty.Extract(context.Background(), []llms.ChatMessage{
		llms.HumanChatMessage{Content: "Coffee? Black, no sugar, always."},
	})
	fmt.Println(len(facts), err, errors.Is(err, extract.ErrMalformed))
	// Output:
	// user preference:coffee = black, no sugar <nil>
	// 0 extract: malformed model output: the answer is not a JSON object true
}
