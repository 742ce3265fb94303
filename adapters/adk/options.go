package adk

import (
	"fmt"
	"strings"

	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/tokens"
)

// Option configures a SessionService or a MemoryService. Each says which
// it is for; a MemoryService's option given to NewSessionService is an
// error.
type Option func(*config)

type config struct {
	maxEvent   int
	budget     int
	recallOpts []memories.RecallOption
	counter    tokens.Counter
	counterSet bool
	skipTools  []string
	problems   []string
}

// WithMaxEventBytes sets the largest event a SessionService stores (its
// JSON form) and the most text of one event a MemoryService adds
// (default DefaultMaxEventBytes). A larger one is an error wrapping
// ErrInvalidEvent that names the event, and nothing of the call is
// stored. n < 1 is an error.
func WithMaxEventBytes(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.problems = append(c.problems, fmt.Sprintf("WithMaxEventBytes(%d): the limit must be at least 1", n))
			return
		}
		c.maxEvent = n
	}
}

func newConfig(opts []Option) (config, error) {
	c := config{maxEvent: DefaultMaxEventBytes, budget: DefaultTokenBudget}
	for _, o := range opts {
		if o == nil {
			c.problems = append(c.problems, "nil Option")
			continue
		}
		o(&c)
	}
	if len(c.problems) > 0 {
		return c, fmt.Errorf("adk: %s", strings.Join(c.problems, "; "))
	}
	return c, nil
}

// DefaultTokenBudget is how many tokens of entries SearchMemory returns at
// most, unless WithTokenBudget says otherwise.
const DefaultTokenBudget = 2000

// DefaultSkipTools are the tools whose calls and results a MemoryService
// does not add unless WithSkipTools says otherwise: ADK's memory tools
// (their results are memory already: adding them would copy the memory
// into itself at every search) and the hand-over between agents.
var DefaultSkipTools = []string{"load_memory", "preload_memory", "transfer_to_agent"}

// WithSkipTools sets the tools whose calls and results AddSessionToMemory
// leaves out (default DefaultSkipTools; pass none to add every call).
// The text of the events that carry them is still added.
func WithSkipTools(names ...string) Option {
	return func(c *config) { c.skipTools = append([]string{}, names...) }
}

// WithTokenBudget sets how many tokens the entries SearchMemory returns
// may hold together (default DefaultTokenBudget), counted with the
// WithTokenCounter counter on each entry as JSON — what loadmemorytool
// hands the model, and more than preloadmemorytool shows. n < 1 is an
// error.
func WithTokenBudget(n int) Option {
	return func(c *config) {
		if n < 1 {
			c.problems = append(c.problems, fmt.Sprintf("WithTokenBudget(%d): the budget must be at least 1", n))
			return
		}
		c.budget = n
	}
}

// WithTokenCounter sets how a MemoryService counts an entry's tokens
// against WithTokenBudget (default tokens.CL100K, OpenAI's cl100k_base;
// pass the counter of the model the agent uses).
func WithTokenCounter(counter tokens.Counter) Option {
	return func(c *config) {
		if counter == nil {
			c.problems = append(c.problems, "WithTokenCounter(nil): the counter is nil")
			return
		}
		c.counter, c.counterSet = counter, true
	}
}

// WithRecallOptions configures the memories.Recall a MemoryService
// searches with: WithHybrid or WithVector for vector or hybrid retrieval
// (BM25 by default), WithK, WithThreshold, WithNeighbourShare,
// WithRecallUnit, WithCacheSize... The service sets, after these, the
// store it was given, RecallScopeUser and WithRequireIdentity: a
// WithStore or WithRecallScope among them has no effect (another store
// would hide the turns from ForgetUser and ExportUser; a tenant scope
// would show a user other users' turns).
func WithRecallOptions(opts ...memories.RecallOption) Option {
	return func(c *config) { c.recallOpts = append(c.recallOpts, opts...) }
}
