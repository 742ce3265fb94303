package memories_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/retrieval"
	"github.com/memstack/memstack/summarizer"
)

// TestOptions_OfAnotherTypeDoNotCompile: options are typed (issue 18), so
// an option given to a memory type it does not apply to is a compile
// error naming the option and the type's option interface — where it used
// to be an error at run time. Each program is built with `go vet` in a
// module of its own that uses this checkout through a go.work; the
// control program, which uses every kind of option where it applies,
// must compile.
func TestOptions_OfAnotherTypeDoNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs with the go command")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("go.mod", "module optioncheck\n\ngo 1.26.0\n")
	write("go.work", fmt.Sprintf("go 1.26.0\n\nuse (\n\t.\n\t%s\n)\n", root))
	if sum, err := os.ReadFile(filepath.Join(root, "go.work.sum")); err == nil {
		write("go.work.sum", string(sum))
	}
	program := func(body string) string {
		return `package main

import (
	"time"

	"github.com/memstack/memstack/extract"
	"github.com/memstack/memstack/memories"
	"github.com/memstack/memstack/store"
	"github.com/memstack/memstack/summarizer"
	"github.com/memstack/memstack/tokens"
)

var (
	_ = time.Second
	_ extract.Extractor
	_ store.Store
	_ summarizer.Summarizer
	_ tokens.Counter
)

func main() {
` + body + `}
`
	}
	vet := func(pkg string) (string, error) {
		cmd := exec.Command("go", "vet", "./"+pkg)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	for i, tc := range []struct {
		call string
		want []string // in the compiler's message, each
	}{
		{"_, _ = memories.NewBuffer(memories.WithK(2))", []string{"memories.WithK(2)", "memories.BufferOption"}},
		{"_, _ = memories.NewRecentN(4, memories.WithBatchSize(3))", []string{"memories.WithBatchSize(3)", "memories.RecentNOption"}},
		{"_, _ = memories.NewRecall(memories.WithBackground(true))", []string{"memories.WithBackground(true)", "memories.RecallOption"}},
		{"_, _ = memories.NewBuffer(memories.WithTokenCounter(nil))", []string{"memories.WithTokenCounter(nil)", "memories.BufferOption"}},
		{"_, _ = memories.NewBuffer(memories.WithRetention(memories.KeepLast(5)))", []string{"memories.WithRetention", "memories.BufferOption"}},
		{"_, _ = memories.NewFacts(nil, memories.WithRetention(memories.KeepLast(5)))", []string{"memories.WithRetention", "memories.FactsOption"}},
		{"_, _ = memories.NewTokenWindow(9, memories.WithMaxFacts(3))", []string{"memories.WithMaxFacts(3)", "memories.TokenWindowOption"}},
		{"_, _ = memories.NewSummary(nil, memories.WithThreshold(0.5))", []string{"memories.WithThreshold(0.5)", "memories.SummaryOption"}},
		{"_ = []memories.Option{memories.WithMaxMessages(4)}", []string{"memories.WithMaxMessages(4)", "memories.Option"}},
	} {
		t.Run(tc.call, func(t *testing.T) {
			pkg := fmt.Sprintf("bad%d", i)
			write(pkg+"/main.go", program("\t"+tc.call+"\n"))
			out, err := vet(pkg)
			require.Error(t, err, "compiled, but must not:\n%s", out)
			for _, w := range tc.want {
				assert.Contains(t, out, w)
			}
			assert.Contains(t, out, "does not implement", out)
		})
	}

	t.Run("control: every option where it applies compiles", func(t *testing.T) {
		write("good/main.go", program(`	st := store.NewInMemory()
	var c tokens.Counter
	shared := []memories.Option{memories.WithStore(st), memories.WithMemoryKey("k"), memories.WithReturnMessages(true),
		memories.WithInputKey("in"), memories.WithOutputKey("out"), memories.WithHumanPrefix("U"), memories.WithAIPrefix("B"),
		memories.WithRequireIdentity(), memories.WithHashKey([]byte("s")), memories.WithCacheSize(4)}
	_, _ = memories.NewBuffer(shared[0], shared[1], shared[9])
	_, _ = memories.NewRecentN(4, memories.WithStore(st), memories.WithRetention(memories.KeepLast(8)))
	_, _ = memories.NewTokenWindow(100, memories.WithTokenCounter(c), memories.WithRetention(memories.KeepLast(8)), memories.WithCacheSize(2))
	_, _ = memories.NewSummary(summarizer.NewExtractive(), memories.WithMaxMessages(8), memories.WithBatchSize(4),
		memories.WithBackground(true), memories.WithRetention(memories.KeepLast(8)), memories.WithTokenCounter(c),
		memories.WithSummaryTimeout(time.Second), memories.WithRetryBackoff(0, 0), memories.WithStore(st))
	var ext extract.Extractor
	_, _ = memories.NewFacts(ext, memories.WithMaxFacts(3), memories.WithBackground(true), memories.WithTokenCounter(c), memories.WithStore(st))
	_, _ = memories.NewRecall(memories.WithK(2), memories.WithThreshold(0.1), memories.WithTokenCounter(c), memories.WithStore(st))
	summary := []memories.SummaryOption{memories.WithStore(st), memories.WithMaxMessages(4)}
	_, _ = memories.NewSummary(summarizer.NewExtractive(), summary...)
`))
		out, err := vet("good")
		require.NoError(t, err, out)
	})
}

// badOption is an option with a bad value and what the error must name.
type badOption struct {
	name string
	opt  any // an option of one or more types (memories.Option, memories.SummaryOption...)
	want []string
}

// optionCtor is one constructor tried with an option of any type: ok is
// false when the option is not of the constructor's option type (it would
// not compile).
type optionCtor struct {
	name  string
	build func(opt any) (ok bool, err error)
}

// tryOption builds with the option opt if it is an O.
func tryOption[O any](opt any, build func(...O) error) (bool, error) {
	o, ok := opt.(O)
	if !ok {
		return false, nil
	}
	return true, build(o)
}

func optionCtors(t *testing.T) []optionCtor {
	patterns, err := extract.NewPatterns()
	require.NoError(t, err)
	return []optionCtor{
		{"Buffer", func(opt any) (bool, error) {
			return tryOption(opt, func(o ...memories.BufferOption) error {
				m, err := memories.NewBuffer(o...)
				assert.True(t, m == nil || err == nil)
				return err
			})
		}},
		{"RecentN", func(opt any) (bool, error) {
			return tryOption(opt, func(o ...memories.RecentNOption) error {
				m, err := memories.NewRecentN(4, o...)
				assert.True(t, m == nil || err == nil)
				return err
			})
		}},
		{"TokenWindow", func(opt any) (bool, error) {
			return tryOption(opt, func(o ...memories.TokenWindowOption) error {
				m, err := memories.NewTokenWindow(100, o...)
				assert.True(t, m == nil || err == nil)
				return err
			})
		}},
		{"Summary", func(opt any) (bool, error) {
			return tryOption(opt, func(o ...memories.SummaryOption) error {
				m, err := memories.NewSummary(summarizer.NewExtractive(), o...)
				assert.True(t, m == nil || err == nil)
				return err
			})
		}},
		{"Facts", func(opt any) (bool, error) {
			return tryOption(opt, func(o ...memories.FactsOption) error {
				m, err := memories.NewFacts(patterns, o...)
				assert.True(t, m == nil || err == nil)
				return err
			})
		}},
		{"Recall", func(opt any) (bool, error) {
			return tryOption(opt, func(o ...memories.RecallOption) error {
				m, err := memories.NewRecall(o...)
				assert.True(t, m == nil || err == nil)
				return err
			})
		}},
	}
}

// TestOptions_BadValuesAreErrorsEverywhere tries every option with a bad
// value on every constructor whose option type it satisfies: each returns
// an error wrapping ErrInvalidOption that names the option, and none
// panics. The table also pins which types
// each option applies to.
func TestOptions_BadValuesAreErrorsEverywhere(t *testing.T) {
	all := []string{"Buffer", "RecentN", "TokenWindow", "Summary", "Facts", "Recall"}
	applies := map[string][]string{
		"shared":     all,
		"counter":    {"TokenWindow", "Summary", "Facts", "Recall"},
		"retention":  {"RecentN", "TokenWindow", "Summary"},
		"background": {"Summary", "Facts"},
		"summary":    {"Summary"},
		"facts":      {"Facts"},
		"recall":     {"Recall"},
	}
	for _, group := range []struct {
		kind string
		opts []badOption
	}{
		{"shared", []badOption{
			{"WithMemoryKey", memories.WithMemoryKey(""), []string{"WithMemoryKey"}},
			{"WithStore", memories.WithStore(nil), []string{"WithStore(nil)"}},
			{"WithHashKey", memories.WithHashKey(nil), []string{"WithHashKey"}},
			{"WithCacheSize", memories.WithCacheSize(-1), []string{"WithCacheSize(-1)"}},
		}},
		{"counter", []badOption{{"WithTokenCounter", memories.WithTokenCounter(nil), []string{"WithTokenCounter(nil)"}}}},
		{"retention", []badOption{{"WithRetention", memories.WithRetention(memories.KeepLast(-1)), []string{"WithRetention(KeepLast(-1))"}}}},
		// WithBackground has no bad value; it is here for its types.
		{"background", nil},
		{"summary", []badOption{
			{"WithEarlierSummaries", memories.WithEarlierSummaries(0), []string{"WithEarlierSummaries(0)"}},
			{"WithMaxMessages", memories.WithMaxMessages(0), []string{"WithMaxMessages(0)"}},
			{"WithBatchSize", memories.WithBatchSize(0), []string{"WithBatchSize(0)"}},
			{"WithMaxTokens", memories.WithMaxTokens(0), []string{"WithMaxTokens(0)"}},
			{"WithSummaryHook", memories.WithSummaryHook(nil), []string{"WithSummaryHook(nil)"}},
			{"WithSummaryTimeout", memories.WithSummaryTimeout(-time.Second), []string{"WithSummaryTimeout(-1s)"}},
			{"WithRetryBackoff", memories.WithRetryBackoff(2*time.Second, time.Second), []string{"WithRetryBackoff(2s, 1s)"}},
		}},
		{"facts", []badOption{
			{"WithMaxPerTurn", memories.WithMaxPerTurn(0), []string{"WithMaxPerTurn(0)"}},
			{"WithMaxFacts", memories.WithMaxFacts(0), []string{"WithMaxFacts(0)"}},
			{"WithFactTokens", memories.WithFactTokens(0), []string{"WithFactTokens(0)"}},
			{"WithClock", memories.WithClock(nil), []string{"WithClock(nil)"}},
			{"WithFactsHook", memories.WithFactsHook(nil), []string{"WithFactsHook(nil)"}},
			{"WithExtractTimeout", memories.WithExtractTimeout(-time.Second), []string{"WithExtractTimeout(-1s)"}},
		}},
		{"recall", []badOption{
			{"WithK", memories.WithK(0), []string{"WithK(0)"}},
			{"WithThreshold", memories.WithThreshold(math.NaN()), []string{"WithThreshold(NaN)"}},
			{"WithNeighbours", memories.WithNeighbours(-1), []string{"WithNeighbours(-1)"}},
			{"WithRecallUnit", memories.WithRecallUnit(memories.RecallUnit(7)), []string{"WithRecallUnit(7)"}},
			{"WithRecallScope", memories.WithRecallScope(memories.RecallScope(9)), []string{"WithRecallScope(9)"}},
			{"WithContextWeight", memories.WithContextWeight(2), []string{"WithContextWeight(2)"}},
			{"WithNeighbourShare", memories.WithNeighbourShare(1), []string{"WithNeighbourShare(1)"}},
			{"WithExcludeRecent", memories.WithExcludeRecent(-1), []string{"WithExcludeRecent(-1)"}},
			{"WithIndex", memories.WithIndex(nil), []string{"WithIndex(nil)"}},
			{"WithVector", memories.WithVector(nil, nil), []string{"WithVector"}},
			{"WithHybrid", memories.WithHybrid(nil, nil), []string{"WithHybrid"}},
			{"WithVector's option", memories.WithVector(newRCEmbedder(), nil, retrieval.WithDimension(0)), []string{"WithVector", "WithDimension(0)"}},
			{"WithRecallTimeout", memories.WithRecallTimeout(-time.Second), []string{"WithRecallTimeout(-1s)"}},
			{"WithRecallStateName", memories.WithRecallStateName("bad\tname"), []string{"WithRecallStateName", "bad"}},
			{"WithRecallStateName empty", memories.WithRecallStateName(""), []string{"WithRecallStateName(\"\")"}},
			{"WithRecallHook", memories.WithRecallHook(nil), []string{"WithRecallHook(nil)"}},
		}},
	} {
		if group.kind == "background" {
			group.opts = []badOption{{"WithBackground", memories.WithBackground(true), nil}}
		}
		for _, bo := range group.opts {
			for _, c := range optionCtors(t) {
				t.Run(bo.name+"/"+c.name, func(t *testing.T) {
					var ok bool
					var err error
					require.NotPanics(t, func() { ok, err = c.build(bo.opt) })
					assert.Equal(t, slices.Contains(applies[group.kind], c.name), ok, "%s applies to %v", bo.name, applies[group.kind])
					if !ok || bo.want == nil {
						if ok {
							require.NoError(t, err)
						}
						return
					}
					require.ErrorIs(t, err, memories.ErrInvalidOption)
					for _, w := range bo.want {
						assert.Contains(t, err.Error(), w)
					}
				})
			}
		}
	}
	// A nil option of each type is an error naming its position.
	for _, c := range optionCtors(t) {
		t.Run("nil option/"+c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() {
				switch c.name {
				case "Buffer":
					_, err = memories.NewBuffer(memories.WithMemoryKey("k"), nil)
				case "RecentN":
					_, err = memories.NewRecentN(4, memories.WithMemoryKey("k"), nil)
				case "TokenWindow":
					_, err = memories.NewTokenWindow(9, memories.WithMemoryKey("k"), nil)
				case "Summary":
					_, err = memories.NewSummary(summarizer.NewExtractive(), memories.WithMemoryKey("k"), nil)
				case "Facts":
					var p extract.Extractor
					p, err = extract.NewPatterns()
					require.NoError(t, err)
					_, err = memories.NewFacts(p, memories.WithMemoryKey("k"), nil)
				case "Recall":
					_, err = memories.NewRecall(memories.WithMemoryKey("k"), nil)
				}
			})
			require.ErrorIs(t, err, memories.ErrInvalidOption)
			assert.Regexp(t, regexp.MustCompile(`option 2 of 2 is nil`), err.Error())
		})
	}
}
