// Package tokens counts tokens for memories that keep within a token budget.
//
// Counter is the one small interface a memory needs. CL100K is the default:
// OpenAI's cl100k_base encoding (GPT-3.5/GPT-4 family), computed fully
// offline from the BPE ranks embedded by
// github.com/pkoukk/tiktoken-go-loader. It never touches the network and
// never logs. Other models tokenise differently; plug their counter in with
// memories.WithTokenCounter.
package tokens

import (
	"fmt"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// Counter counts the tokens of a text. Implementations must be safe for
// concurrent use and must not fail: a counter that cannot tokenise should
// return an over-estimate rather than an error.
type Counter interface {
	CountTokens(text string) int
}

// CounterFunc adapts a function to Counter.
type CounterFunc func(text string) int

// CountTokens implements Counter.
func (f CounterFunc) CountTokens(text string) int { return f(text) }

var (
	cl100kOnce sync.Once
	cl100k     *tiktoken.Tiktoken
	cl100kErr  error
)

// tiktoken-go keeps its BPE loader in a package variable; set it to the
// offline loader once, before the first encoding is built, so neither our
// counter nor anything else in the process (langchaingo's llms.CountTokens
// among them) downloads BPE files.
func loadCL100K() {
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	cl100k, cl100kErr = tiktoken.GetEncoding("cl100k_base")
}

// CL100K returns the offline cl100k_base counter. The encoding is loaded on
// first use (about 100 ms) and shared by every caller.
func CL100K() (Counter, error) {
	cl100kOnce.Do(loadCL100K)
	if cl100kErr != nil {
		return nil, fmt.Errorf("tokens: loading cl100k_base: %w", cl100kErr)
	}
	return tiktokenCounter{cl100k}, nil
}

type tiktokenCounter struct{ t *tiktoken.Tiktoken }

// CountTokens counts ordinary tokens: special-token text such as
// "<|endoftext|>" in a message counts as plain text and never panics.
func (c tiktokenCounter) CountTokens(text string) int {
	if text == "" {
		return 0
	}
	return len(c.t.EncodeOrdinary(text))
}
