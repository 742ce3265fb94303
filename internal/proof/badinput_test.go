package proof_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/memory"
	"github.com/tmc/langchaingo/schema"

	"github.com/memstack/memstack"
	"github.com/memstack/memstack/adapter"
	"github.com/memstack/memstack/combined"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/store/pgstore"
	"github.com/memstack/memstack/store/redisstore"
	"github.com/memstack/memstack/store/sqlitestore"
	"github.com/memstack/memstack/summarizer"
)

// badCase is one row of TestBadInput.
type badCase struct {
	name string
	// run makes the call under test and returns its error, and a check of
	// what the call left in the store(s) (nil when there is no store to
	// read: a constructor that failed).
	run func(t *testing.T) (error, func(t *testing.T))
	// want are substrings the error must contain: the key, option or
	// argument at fault. Empty want means the input is valid and must be
	// accepted (a 10 MB message, NUL bytes, adversarial identities).
	want []string
	// is, if set, must be in the error's chain.
	is error
}

var (
	alice  = memstack.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	ctxOf  = func(id memstack.Identity) context.Context { return memstack.WithIdentity(context.Background(), id) }
	turnIn = map[string]any{"input": "Hello"}
	turnOK = map[string]any{"output": "Hi!"}
)

// noNilCtx is a nil context.Context held in a variable, as a caller's bug
// would pass it.
var noNilCtx context.Context

// emptyFor checks that s holds nothing for ids.
func emptyFor(s store.Store, ids ...memstack.Identity) func(t *testing.T) {
	return func(t *testing.T) {
		t.Helper()
		for _, id := range ids {
			recs, err := s.All(context.Background(), id)
			require.NoError(t, err)
			assert.Empty(t, recs, "nothing stored for %s", id)
		}
	}
}

// holds checks that s holds exactly msgs for id.
func holds(s store.Store, id memstack.Identity, msgs ...llms.ChatMessage) func(t *testing.T) {
	return func(t *testing.T) {
		t.Helper()
		recs, err := s.All(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, msgs, messagesOf(recs))
	}
}

func both(fs ...func(t *testing.T)) func(t *testing.T) {
	return func(t *testing.T) {
		t.Helper()
		for _, f := range fs {
			f(t)
		}
	}
}

// customMessage is a message type langchaingo does not define.
type customMessage struct{}

func (customMessage) GetType() llms.ChatMessageType { return "custom" }
func (customMessage) GetContent() string            { return "custom content" }

// TestBadInput is one table of bad (and borderline valid) input across the
// public constructors and methods. For every row: no panic (each call runs
// under a recover that fails the row), an error naming the key, option or
// argument at fault — or, for valid input, acceptance — and nothing
// half-written, checked by reading the store afterwards.
//
// What the backends do with borderline input (the rows named <backend>:):
//
//   - a 10 MB message: accepted by every backend, stored whole, read back
//     byte for byte;
//   - NUL bytes: accepted and round-tripped by every backend;
//   - invalid UTF-8: the persistent backends reject it (storekit.EncodeMessage
//     refuses what JSON cannot carry) and store nothing; the rows require
//     every backend, the in-memory one included, to reject it with an error
//     saying UTF-8, so a stack of memories on mixed backends cannot store a
//     turn in one layer and not in another (see the row "combined over
//     in-memory and SQLite: invalid UTF-8");
//   - a cancelled context: every method fails with context.Canceled and
//     changes nothing;
//   - a nil context (a caller's bug): an error saying so, never a panic —
//     as the memories, combined.Memory and redisstore already do;
//   - identities with separators, wildcards and brace tags: kept apart.
func TestBadInput(t *testing.T) {
	var cases []badCase
	add := func(c ...badCase) { cases = append(cases, c...) }

	// --- memories: constructors and options ---------------------------
	add(badCase{
		name: "NewBuffer: WithStore(nil)",
		run: func(t *testing.T) (error, func(*testing.T)) {
			m, err := memories.NewBuffer(memories.WithStore(nil))
			assert.Nil(t, m)
			return err, nil
		},
		want: []string{"WithStore(nil)"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewBuffer: nil option and empty memory key",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := store.NewInMemory()
			m, err := memories.NewBuffer(memories.WithStore(st), nil, memories.WithMemoryKey(""))
			assert.Nil(t, m)
			return err, emptyFor(st, alice)
		},
		want: []string{"option 2 of 3 is nil", "WithMemoryKey"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewBuffer: negative cache size",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := store.NewInMemory()
			m, err := memories.NewBuffer(memories.WithStore(st), memories.WithCacheSize(-1))
			assert.Nil(t, m)
			return err, emptyFor(st, alice)
		},
		want: []string{"WithCacheSize(-1)"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewRecentN: zero size",
		run: func(t *testing.T) (error, func(*testing.T)) {
			m, err := memories.NewRecentN(0)
			assert.Nil(t, m)
			return err, nil
		},
		want: []string{"n=0"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewRecentN: negative size",
		run: func(t *testing.T) (error, func(*testing.T)) {
			m, err := memories.NewRecentN(-5)
			assert.Nil(t, m)
			return err, nil
		},
		want: []string{"n=-5"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewTokenWindow: zero and negative budgets",
		run: func(t *testing.T) (error, func(*testing.T)) {
			m, err := memories.NewTokenWindow(-1)
			assert.Nil(t, m)
			_, err0 := memories.NewTokenWindow(0)
			assert.ErrorContains(t, err0, "maxTokens=0")
			return err, nil
		},
		want: []string{"maxTokens=-1"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewTokenWindow: nil token counter",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := memories.NewTokenWindow(100, memories.WithTokenCounter(nil))
			return err, nil
		},
		want: []string{"WithTokenCounter(nil)"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewSummary: nil summarizer",
		run: func(t *testing.T) (error, func(*testing.T)) {
			m, err := memories.NewSummary(nil)
			assert.Nil(t, m)
			return err, nil
		},
		want: []string{"summarizer is nil"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewSummary: typed nil summarizer",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := memories.NewSummary((*summarizer.Extractive)(nil))
			return err, nil
		},
		want: []string{"nil *summarizer.Extractive"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewSummary over summarizer.New(nil model)",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := memories.NewSummary(summarizer.New(nil))
			return err, nil
		},
		want: []string{"model"}, is: summarizer.ErrNilModel,
	}, badCase{
		name: "NewSummary over summarizer.New(typed nil model)",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := memories.NewSummary(summarizer.New((*faultyModel)(nil)))
			return err, nil
		},
		want: []string{"needs a model"}, is: summarizer.ErrNilModel,
	}, badCase{
		name: "NewSummary: zero WithMaxMessages",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithMaxMessages(0))
			return err, nil
		},
		want: []string{"WithMaxMessages(0)"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewSummary: batch larger than the raw window",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithMaxMessages(4), memories.WithBatchSize(5))
			return err, nil
		},
		want: []string{"WithBatchSize(5)", "WithMaxMessages(4)"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewSummary: token mode mixed with count mode",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithMaxTokens(100), memories.WithBatchSize(2))
			return err, nil
		},
		want: []string{"WithMaxTokens(100)", "WithBatchSize"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "NewSummary: negative retry backoff and nil hook",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := memories.NewSummary(summarizer.NewExtractive(),
				memories.WithRetryBackoff(-time.Second, 0), memories.WithSummaryHook(nil))
			return err, nil
		},
		want: []string{"WithRetryBackoff(-1s, 0s)", "WithSummaryHook(nil)"}, is: memories.ErrInvalidOption,
	}, badCase{
		name: "summarizer.New: zero WithMaxTokens and nil call option",
		run: func(t *testing.T) (error, func(*testing.T)) {
			s := summarizer.New(&faultyModel{}, summarizer.WithMaxTokens(0), summarizer.WithCallOptions(nil))
			_, serr := s.Summarize(context.Background(), "", []llms.ChatMessage{llms.HumanChatMessage{Content: "x"}})
			assert.ErrorIs(t, serr, summarizer.ErrInvalidOption, "Summarize returns the configuration error")
			return s.Validate(), nil
		},
		want: []string{"WithMaxTokens(0)", "WithCallOptions"}, is: summarizer.ErrInvalidOption,
	}, badCase{
		name: "summarizer.NewExtractive: negative budget, nil counter",
		run: func(t *testing.T) (error, func(*testing.T)) {
			s := summarizer.NewExtractive(summarizer.WithBudget(-1), summarizer.WithExtractiveTokenCounter(nil))
			return s.Validate(), nil
		},
		want: []string{"WithBudget(-1)", "WithExtractiveTokenCounter(nil)"}, is: summarizer.ErrInvalidOption,
	})

	// --- combined.New ---------------------------------------------------
	add(badCase{
		name: "combined.New: no children",
		run: func(t *testing.T) (error, func(*testing.T)) {
			m, err := combined.New(nil)
			assert.Nil(t, m)
			return err, nil
		},
		want: []string{"empty"}, is: combined.ErrInvalid,
	}, badCase{
		name: "combined.New: nil child",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := combined.New([]schema.Memory{mustBuffer(), nil})
			return err, nil
		},
		want: []string{"child 2 of 2 is nil"}, is: combined.ErrInvalid,
	}, badCase{
		name: "combined.New: typed nil child",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := combined.New([]schema.Memory{(*memories.RecentN)(nil)})
			return err, nil
		},
		want: []string{"child 1 of 1 is nil"}, is: combined.ErrInvalid,
	}, badCase{
		name: "combined.New: strict keys collide",
		run: func(t *testing.T) (error, func(*testing.T)) {
			r, err := memories.NewRecentN(3)
			require.NoError(t, err)
			_, err = combined.New([]schema.Memory{mustBuffer(), r}, combined.WithStrictKeys())
			return err, nil
		},
		want: []string{`"history"`, "child 1", "child 2"}, is: combined.ErrInvalid,
	}, badCase{
		name: "combined.New: nil option",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := combined.New([]schema.Memory{mustBuffer()}, nil)
			return err, nil
		},
		want: []string{"option 1 of 1 is nil"}, is: combined.ErrInvalid,
	})

	// --- SaveContext, AddMessage, contexts, identities ------------------
	saveCase := func(name string, opts []memories.BufferOption, in, out map[string]any, want ...string) badCase {
		return badCase{
			name: "SaveContext: " + name,
			run: func(t *testing.T) (error, func(*testing.T)) {
				st := store.NewInMemory()
				m := mustBuffer(append([]memories.BufferOption{memories.WithStore(st)}, opts...)...)
				return m.SaveContext(ctxOf(alice), in, out), emptyFor(st, alice)
			},
			want: want, is: adapter.ErrInvalidValues,
		}
	}
	add(
		saveCase("nil inputs", nil, nil, turnOK, "input values are empty"),
		saveCase("empty outputs (the valid input is not written)", nil, turnIn, map[string]any{}, "output values are empty"),
		saveCase("missing input key", []memories.BufferOption{memories.WithInputKey("question")}, turnIn, turnOK, `no key "question"`, `"input"`),
		saveCase("missing output key", []memories.BufferOption{memories.WithOutputKey("answer")}, turnIn, turnOK, `no key "answer"`, `"output"`),
		saveCase("ambiguous inputs", nil, map[string]any{"input": "a", "context": "b"}, turnOK, "WithInputKey", `"context"`, `"input"`),
		saveCase("ambiguous outputs", nil, turnIn, map[string]any{"text": "a", "output": "b"}, "WithOutputKey", `"output"`, `"text"`),
		saveCase("non-string input", nil, map[string]any{"input": 42}, turnOK, `input key "input"`, "int"),
		saveCase("non-string output", nil, turnIn, map[string]any{"output": []byte("x")}, `output key "output"`, "[]uint8"),
		saveCase("only intermediate steps", nil, turnIn, map[string]any{adapter.IntermediateStepsKey: []string{"step"}}, `"intermediateSteps"`, "not a string"),
	)
	add(badCase{
		name: "SaveContext through combined: a bad output writes nothing in any child",
		run: func(t *testing.T) (error, func(*testing.T)) {
			s1, s2 := store.NewInMemory(), store.NewInMemory()
			r, err := memories.NewRecentN(3, memories.WithStore(s2), memories.WithMemoryKey("recent"))
			require.NoError(t, err)
			m, err := combined.New([]schema.Memory{mustBuffer(memories.WithStore(s1)), r})
			require.NoError(t, err)
			err = m.SaveContext(ctxOf(alice), turnIn, map[string]any{"output": 3.5})
			return err, both(emptyFor(s1, alice), emptyFor(s2, alice))
		},
		want: []string{"child 1", "child 2", `output key "output"`, "float64"}, is: memory.ErrInvalidInputValues,
	}, badCase{
		name: "AddMessage: nil message",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := store.NewInMemory()
			r, err := memories.NewRecentN(3, memories.WithStore(st))
			require.NoError(t, err)
			return r.AddMessage(ctxOf(alice), nil), emptyFor(st, alice)
		},
		want: []string{"message is nil"}, is: adapter.ErrInvalidValues,
	}, badCase{
		name: "AddMessage: typed nil message",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := store.NewInMemory()
			m := mustBuffer(memories.WithStore(st))
			return m.AddMessage(ctxOf(alice), (*llms.HumanChatMessage)(nil)), emptyFor(st, alice)
		},
		want: []string{"nil *llms.HumanChatMessage"}, is: adapter.ErrInvalidValues,
	}, badCase{
		name: "AddMessage through combined: a message type langchaingo does not define",
		run: func(t *testing.T) (error, func(*testing.T)) {
			s1, s2 := store.NewInMemory(), store.NewInMemory()
			r, err := memories.NewRecentN(3, memories.WithStore(s2), memories.WithMemoryKey("recent"))
			require.NoError(t, err)
			m, err := combined.New([]schema.Memory{mustBuffer(memories.WithStore(s1)), r})
			require.NoError(t, err)
			return m.AddMessage(ctxOf(alice), customMessage{}), both(emptyFor(s1, alice), emptyFor(s2, alice))
		},
		want: []string{`message type "custom"`, "proof_test.customMessage"}, is: adapter.ErrInvalidValues,
	}, badCase{
		name: "nil context: memories and combined",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := store.NewInMemory()
			b := mustBuffer(memories.WithStore(st))
			m, err := combined.New([]schema.Memory{b})
			require.NoError(t, err)
			_, lerr := b.LoadMemoryVariables(noNilCtx, nil)
			assert.ErrorContains(t, lerr, "nil context")
			assert.ErrorContains(t, m.SaveContext(noNilCtx, turnIn, turnOK), "nil context")
			assert.ErrorContains(t, m.Clear(noNilCtx), "nil context")
			return b.SaveContext(noNilCtx, turnIn, turnOK), emptyFor(st, memstack.Identity{})
		},
		want: []string{"nil context"},
	}, badCase{
		name: "WithRequireIdentity: a call without an identity",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := store.NewInMemory()
			r, err := memories.NewRecentN(3, memories.WithStore(st), memories.WithRequireIdentity())
			require.NoError(t, err)
			return r.SaveContext(context.Background(), turnIn, turnOK), emptyFor(st, memstack.Identity{})
		},
		want: []string{"no identity"}, is: memstack.ErrNoIdentity,
	}, badCase{
		name: "Summary: a closed memory",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := store.NewInMemory()
			s, err := memories.NewSummary(summarizer.NewExtractive(), memories.WithStore(st))
			require.NoError(t, err)
			require.NoError(t, s.Close())
			return s.SaveContext(ctxOf(alice), turnIn, turnOK), emptyFor(st, alice)
		},
		want: []string{"closed"}, is: memories.ErrClosed,
	})

	// --- package store and adapter --------------------------------------
	add(badCase{
		name: "store.FromHistory(nil)",
		run: func(t *testing.T) (error, func(*testing.T)) {
			h, err := store.FromHistory(nil, alice)
			assert.Nil(t, h)
			return err, nil
		},
		want: []string{"history is nil"}, is: store.ErrInvalidArgument,
	}, badCase{
		name: "store.FromHistory: a call for another identity",
		run: func(t *testing.T) (error, func(*testing.T)) {
			h, err := store.FromHistory(memory.NewChatMessageHistory(), alice)
			require.NoError(t, err)
			bob := memstack.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
			m := mustBuffer(memories.WithStore(h))
			return m.SaveContext(ctxOf(bob), turnIn, turnOK), emptyFor(h, alice)
		},
		want: []string{"acme:alice:c1", "acme:bob:c1"}, is: store.ErrWrongIdentity,
	}, badCase{
		name: "store.AsHistory(nil store)",
		run: func(t *testing.T) (error, func(*testing.T)) {
			h := store.AsHistory(nil, alice)
			_, merr := h.Messages(context.Background())
			assert.ErrorContains(t, merr, "store is nil")
			return h.AddUserMessage(context.Background(), "x"), nil
		},
		want: []string{"store is nil"}, is: store.ErrInvalidArgument,
	}, badCase{
		name: "store.AsHistory: SetMessages with a nil message keeps the old history",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := store.NewInMemory()
			old := llms.HumanChatMessage{Content: "kept"}
			require.NoError(t, st.Append(context.Background(), alice, old))
			h := store.AsHistory(st, alice)
			err := h.SetMessages(context.Background(), []llms.ChatMessage{llms.AIChatMessage{Content: "new"}, nil})
			return err, holds(st, alice, old)
		},
		want: []string{"message 2 of 2 is nil"}, is: store.ErrInvalidArgument,
	}, badCase{
		name: "adapter.MessageContents: a nil message",
		run: func(t *testing.T) (error, func(*testing.T)) {
			mc, err := adapter.MessageContents([]llms.ChatMessage{llms.HumanChatMessage{Content: "x"}, nil})
			assert.Nil(t, mc)
			return err, nil
		},
		want: []string{"message 2", "message is nil"}, is: adapter.ErrInvalidValues,
	}, badCase{
		name: "adapter.Turn: valid input, invalid output",
		run: func(t *testing.T) (error, func(*testing.T)) {
			h, a, err := adapter.Turn(turnIn, map[string]any{"a": "1", "b": "2"}, "", "")
			assert.Empty(t, h+a, "no half result")
			return err, nil
		},
		want: []string{"output values have 2 keys", "WithOutputKey"}, is: adapter.ErrInvalidValues,
	})

	// --- backends: constructors -------------------------------------------
	add(badCase{
		name: "sqlitestore.Open: empty path, empty namespace",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := sqlitestore.Open(context.Background(), "")
			assert.ErrorContains(t, err, "path is empty")
			s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), sqlitestore.WithNamespace(""))
			assert.Nil(t, s)
			return err, nil
		},
		want: []string{"WithNamespace"}, is: store.ErrInvalidArgument,
	}, badCase{
		name: "sqlitestore.Open: nil context",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := sqlitestore.Open(noNilCtx, filepath.Join(t.TempDir(), "x.db"))
			return err, nil
		},
		want: []string{"nil context"},
	}, badCase{
		name: "redisstore.Open: empty address, bad namespace, brace in key prefix, nil client",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := redisstore.Open(context.Background(), "")
			assert.ErrorContains(t, err, "empty address")
			_, err = redisstore.Open(context.Background(), "127.0.0.1:1", redisstore.WithNamespace("a b"))
			assert.ErrorContains(t, err, `WithNamespace("a b")`)
			_, err = redisstore.New(context.Background(), nil)
			assert.ErrorContains(t, err, "client is nil")
			_, err = redisstore.Open(context.Background(), "127.0.0.1:1", redisstore.WithKeyPrefix("app{1}"))
			return err, nil
		},
		want: []string{`WithKeyPrefix("app{1}")`}, is: store.ErrInvalidArgument,
	}, badCase{
		name: "pgstore.Open: bad table prefix, bad DSN, nil pool",
		run: func(t *testing.T) (error, func(*testing.T)) {
			_, err := pgstore.Open(context.Background(), "postgres://[::1")
			assert.ErrorContains(t, err, "DSN")
			_, err = pgstore.New(context.Background(), nil)
			assert.ErrorContains(t, err, "pool is nil")
			_, err = pgstore.Open(context.Background(), "postgres://postgres@127.0.0.1:1/postgres", pgstore.WithTablePrefix("Bad-Prefix"))
			return err, nil
		},
		want: []string{`WithTablePrefix("Bad-Prefix")`},
	})

	// --- every backend: borderline messages, contexts, identities ---------
	for _, b := range backends() {
		add(backendCases(b)...)
	}
	add(badCase{
		name: "combined over in-memory and SQLite: invalid UTF-8 writes nothing in any child",
		run: func(t *testing.T) (error, func(*testing.T)) {
			s1 := store.NewInMemory()
			s2, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s2.Close() })
			r, err := memories.NewRecentN(3, memories.WithStore(s2), memories.WithMemoryKey("recent"))
			require.NoError(t, err)
			m, err := combined.New([]schema.Memory{mustBuffer(memories.WithStore(s1)), r})
			require.NoError(t, err)
			err = m.SaveContext(ctxOf(alice), map[string]any{"input": "caf\xe9"}, turnOK)
			return err, both(emptyFor(s1, alice), emptyFor(s2, alice))
		},
		want: []string{"UTF-8"},
	})

	require.GreaterOrEqual(t, len(cases), 20)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var (
				err      error
				check    func(*testing.T)
				panicked bool
			)
			func() {
				defer func() {
					if r := recover(); r != nil {
						panicked = true
						t.Errorf("panic: %v\n%s", r, debug.Stack())
					}
				}()
				err, check = c.run(t)
			}()
			if panicked {
				return
			}
			if len(c.want) == 0 {
				assert.NoError(t, err, "valid input is accepted")
			} else if assert.Error(t, err, "bad input is an error") {
				for _, w := range c.want {
					assert.Contains(t, err.Error(), w, "the error names the problem")
				}
				if c.is != nil {
					assert.ErrorIs(t, err, c.is)
				}
			}
			if check != nil {
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("panic while checking the store: %v\n%s", r, debug.Stack())
						}
					}()
					check(t)
				}()
			}
		})
	}
}

// backendCases are the rows run on every backend.
func backendCases(b backend) []badCase {
	bigText := strings.Repeat("Ünïcødé and ascii, 10 MB of it. ", 10<<20/34)
	human := func(s string) llms.ChatMessage { return llms.HumanChatMessage{Content: s} }
	aiMsg := func(s string) llms.ChatMessage { return llms.AIChatMessage{Content: s} }
	return []badCase{{
		name: b.name + ": a 10 MB message is stored whole and read back byte for byte",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := b.space(t)("big")
			m := mustBuffer(memories.WithStore(st))
			err := m.SaveContext(ctxOf(alice), map[string]any{"input": bigText}, turnOK)
			return err, both(holds(st, alice, human(bigText), aiMsg("Hi!")), func(t *testing.T) {
				vars, err := m.LoadMemoryVariables(ctxOf(alice), nil)
				require.NoError(t, err)
				assert.True(t, vars["history"] == "Human: "+bigText+"\nAI: Hi!", "the load renders the whole message")
			})
		},
	}, {
		name: b.name + ": invalid UTF-8 is rejected and nothing is stored",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := b.space(t)("utf8")
			r, err := memories.NewRecentN(4, memories.WithStore(st))
			require.NoError(t, err)
			aerr := r.AddMessage(ctxOf(alice), llms.SystemChatMessage{Content: "bad \xff\xfe system prompt"})
			assert.ErrorContains(t, aerr, "UTF-8", "AddMessage rejects invalid UTF-8 too")
			err = r.SaveContext(ctxOf(alice), turnIn, map[string]any{"output": "bad \xc3\x28 answer"})
			return err, emptyFor(st, alice)
		},
		want: []string{"UTF-8"},
	}, {
		name: b.name + ": invalid UTF-8 outside the content is rejected and nothing is stored",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := b.space(t)("utf8f")
			m := mustBuffer(memories.WithStore(st))
			for name, msg := range map[string]llms.ChatMessage{
				"a tool message's ID":      llms.ToolChatMessage{Content: "42", ID: "call\xff"},
				"a generic message's role": llms.GenericChatMessage{Content: "ok", Role: "crit\xc3\x28ic", Name: "bob"},
				"reasoning content":        llms.AIChatMessage{Content: "ok", ReasoningContent: "because \xfe"},
			} {
				assert.ErrorContains(t, m.AddMessage(ctxOf(alice), msg), "UTF-8", "AddMessage of %s", name)
			}
			call := llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function",
				FunctionCall: &llms.FunctionCall{Name: "search", Arguments: "{\"q\":\"caf\xe9\"}"}}}}
			return m.AddMessage(ctxOf(alice), call), emptyFor(st, alice)
		},
		want: []string{"UTF-8"},
	}, {
		name: b.name + ": NUL bytes round-trip",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := b.space(t)("nul")
			m := mustBuffer(memories.WithStore(st), memories.WithReturnMessages(true))
			in, out := "before\x00after", "\x00"
			err := m.SaveContext(ctxOf(alice), map[string]any{"input": in}, map[string]any{"output": out})
			return err, both(holds(st, alice, human(in), aiMsg(out)), func(t *testing.T) {
				vars, err := m.LoadMemoryVariables(ctxOf(alice), nil)
				require.NoError(t, err)
				assert.Equal(t, []llms.ChatMessage{human(in), aiMsg(out)}, vars["history"])
			})
		},
	}, {
		name: b.name + ": a cancelled context fails every method and changes nothing",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := b.space(t)("cancel")
			require.NoError(t, st.Append(context.Background(), alice, human("kept")))
			r, err := memories.NewRecentN(4, memories.WithStore(st))
			require.NoError(t, err)
			m, err := combined.New([]schema.Memory{r})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(ctxOf(alice))
			cancel()
			for name, f := range map[string]func() error{
				"RecentN.LoadMemoryVariables": func() error { _, err := r.LoadMemoryVariables(ctx, nil); return err },
				"RecentN.AddMessage":          func() error { return r.AddMessage(ctx, human("x")) },
				"RecentN.Clear":               func() error { return r.Clear(ctx) },
				"combined.SaveContext":        func() error { return m.SaveContext(ctx, turnIn, turnOK) },
				"store.Append":                func() error { return st.Append(ctx, alice, human("x")) },
				"store.Clear":                 func() error { return st.Clear(ctx, alice) },
			} {
				assert.ErrorIs(t, f(), context.Canceled, name)
			}
			return r.SaveContext(ctx, turnIn, turnOK), holds(st, alice, human("kept"))
		},
		want: []string{"context canceled"}, is: context.Canceled,
	}, {
		name: b.name + ": a nil context is an error, not a panic",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := b.space(t)("nilctx")
			_, err := st.All(noNilCtx, alice)
			return err, emptyFor(st, alice)
		},
		want: []string{"nil context"},
	}, {
		name: b.name + ": Last(n=0) and a nil message in a turn",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := b.space(t)("args")
			_, lerr := st.Last(context.Background(), alice, 0)
			assert.ErrorIs(t, lerr, store.ErrInvalidArgument)
			assert.ErrorContains(t, lerr, "n=0")
			return st.Append(context.Background(), alice, human("first"), nil), emptyFor(st, alice)
		},
		want: []string{"message 2 of 2"}, is: store.ErrInvalidArgument,
	}, {
		name: b.name + ": identities with separators, wildcards and brace tags stay apart",
		run: func(t *testing.T) (error, func(*testing.T)) {
			st := b.space(t)("ids")
			m := mustBuffer(memories.WithStore(st))
			ids := []memstack.Identity{
				{Tenant: "a:b", User: "c"}, {Tenant: "a", User: "b:c"},
				{Tenant: "a/b", User: "c"}, {Tenant: "a", User: "b/c"},
				{Tenant: "*", User: "*", Conversation: "*"}, {Tenant: "a*"}, {Tenant: "a"}, {Tenant: "ab"},
				{Tenant: "{x}", User: "}{"}, {Tenant: "%", User: "%25"}, {Tenant: "[a-z]?", User: "\\"},
				{Tenant: "", User: "", Conversation: ""}, {Tenant: "\x00", Conversation: "\n"},
			}
			for i, id := range ids {
				if err := m.SaveContext(ctxOf(id), map[string]any{"input": fmt.Sprint("from ", i)}, turnOK); err != nil {
					return err, nil
				}
			}
			// Clearing the all-wildcard identity clears only itself.
			if err := m.Clear(ctxOf(ids[4])); err != nil {
				return err, nil
			}
			return nil, func(t *testing.T) {
				for i, id := range ids {
					if i == 4 {
						emptyFor(st, id)(t)
						continue
					}
					holds(st, id, human(fmt.Sprint("from ", i)), aiMsg("Hi!"))(t)
				}
			}
		},
	}}
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
