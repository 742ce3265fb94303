package extract_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/memstack/memstack/extract"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

func newPatterns(t testing.TB, opts ...extract.PatternOption) *extract.Patterns {
	t.Helper()
	p, err := extract.NewPatterns(opts...)
	require.NoError(t, err)
	return p
}

// fact is a candidate reduced to what the rule table checks.
type fact struct{ key, value string }

func facts(cs []extract.Candidate) []fact {
	out := make([]fact, 0, len(cs))
	for _, c := range cs {
		out = append(out, fact{c.Key(), c.Value})
	}
	return out
}

func human(text string) []llms.ChatMessage {
	return []llms.ChatMessage{llms.HumanChatMessage{Content: text}}
}

func TestPatterns_BuiltInRules(t *testing.T) {
	p := newPatterns(t)
	cases := []struct {
		name string
		text string
		want []fact // nil: no facts
	}{
		// name
		{"my name is", "Hi! My name is Ana.", []fact{{"user name", "Ana"}}},
		{"my name is, lower case, stops at and", "my name is ana and I need help", []fact{{"user name", "ana"}}},
		{"my name's two words", "My name's Ana Silva, nice to meet you", []fact{{"user name", "Ana Silva"}}},
		{"my name is not a name", "my name is not important", nil},
		{"I'm Name", "Hello, I'm Ana.", []fact{{"user name", "Ana"}}},
		{"I am Name Surname", "I am Ana Silva", []fact{{"user name", "Ana Silva"}}},
		{"I'm with curly apostrophe", "I’m Bruno", []fact{{"user name", "Bruno"}}},
		{"unicode name", "I'm José", []fact{{"user name", "José"}}},
		{"I'm tired is not a name", "I'm tired", nil},
		{"I'm Tired capitalised is not a name", "I'm Tired of this", nil},
		{"I'm Sorry is not a name", "I'm Sorry, what?", nil},
		{"I'm not sure", "I'm not sure about that", nil},
		{"I'm Not Sure title case", "I'm Not Sure", nil},
		{"I'm Going is not a name", "I'm Going to try", nil},
		{"I'm OK is not a name", "I'm OK thanks", nil},
		{"I'm Canadian is not a name", "I'm Canadian", nil},
		{"call me Name", "Please call me Bob.", []fact{{"user name", "Bob"}}},
		{"call me back", "call me back tomorrow", nil},
		{"call me Monday", "Call me Monday", nil},
		{"I'm Ana And ...", "I'm Ana And I like tea", []fact{{"user name", "Ana"}, {"user preference:tea", "likes tea"}}},
		// location
		{"I live in", "I live in Lisbon.", []fact{{"user location", "Lisbon"}}},
		{"I live in, multiword", "I currently live in New York City with my wife", []fact{{"user location", "New York City"}}},
		{"I live in, particle", "I live in Rio de Janeiro", []fact{{"user location", "Rio de Janeiro"}}},
		{"I live in the UK", "I live in the UK", []fact{{"user location", "the UK"}}},
		{"I live in The Hague", "I live in The Hague", []fact{{"user location", "The Hague"}}},
		{"I live in a flat", "I live in a small flat", nil},
		{"I live in lower case", "i live in lisbon", nil},
		{"I'm from", "I'm from Brazil", []fact{{"user location", "Brazil"}}},
		{"I am originally from", "I am originally from São Paulo, Brazil", []fact{{"user location", "São Paulo"}}},
		{"I come from", "I come from Kenya", []fact{{"user location", "Kenya"}}},
		{"I'm from the team", "I'm from the support team", nil},
		{"I moved to", "I moved to Porto last month!", []fact{{"user location", "Porto"}}},
		{"I've just moved to", "I've just moved to Berlin", []fact{{"user location", "Berlin"}}},
		{"I moved to a new job", "I moved to a new job", nil},
		{"I'm based in", "I'm based in Toronto", []fact{{"user location", "Toronto"}}},
		{"from and live in: both", "I'm from Brazil but I live in Lisbon", []fact{{"user location", "Brazil"}, {"user location", "Lisbon"}}},
		// job and employer
		{"I work as", "I work as a nurse at the city clinic", []fact{{"user job", "nurse"}}},
		{"I work as, no article", "I work as head chef", []fact{{"user job", "head chef"}}},
		{"I'm a", "I'm a software engineer.", []fact{{"user job", "software engineer"}}},
		{"I am an", "I am an accountant in Leeds", []fact{{"user job", "accountant"}}},
		{"I'm a bit", "I'm a bit tired today", nil},
		{"I'm a big fan", "I'm a big fan of jazz", nil},
		{"job cut before a gerund", "I'm a software developer working on Go", []fact{{"user job", "software developer"}}},
		{"marketing manager", "I am a marketing manager", []fact{{"user job", "marketing manager"}}},
		{"I work as a team", "I work as a team", nil},
		{"I'm from Accounting", "I'm from Accounting", nil},
		{"I work at", "I work at Acme Corp", []fact{{"user employer", "Acme Corp"}}},
		{"I work for", "I work for Johnson and Johnson", []fact{{"user employer", "Johnson and Johnson"}}},
		{"I work at home", "I work at home most days", nil},
		// preferences
		{"I like", "I like jazz.", []fact{{"user preference:jazz", "likes jazz"}}},
		{"I really love", "I really love hiking in the mountains!", []fact{{"user preference:hiking in the mountains", "loves hiking in the mountains"}}},
		{"I prefer", "I prefer window seats", []fact{{"user preference:window seats", "prefers window seats"}}},
		{"I hate", "I hate cilantro", []fact{{"user preference:cilantro", "hates cilantro"}}},
		{"I don't like", "I don't like spicy food", []fact{{"user preference:spicy food", "dislikes spicy food"}}},
		{"I do not like", "I do not like mornings", []fact{{"user preference:mornings", "dislikes mornings"}}},
		{"I can't stand", "I can't stand loud music", []fact{{"user preference:loud music", "cannot stand loud music"}}},
		{"I enjoy, cut at because", "I enjoy chess because it calms me", []fact{{"user preference:chess", "enjoys chess"}}},
		{"I'd like is a request", "I'd like a refund", nil},
		{"I would like is a request", "I would like to cancel", nil},
		{"I love it", "I love it!", nil},
		{"I like that", "I like that", nil},
		{"I hate when", "I hate when that happens", nil},
		{"I love you", "I love you", nil},
		{"I like your answer", "I like your answer", nil},
		{"I hate to say it", "I hate to say it", nil},
		{"I like the idea", "I like the idea of a refund", nil},
		{"question is no fact", "Do I like jazz?", nil},
		{"tag question", "I live in Lisbon, right?", nil},
		// decisions
		{"we decided to", "OK, we decided to use Postgres.", []fact{{"we decision:use postgres", "use Postgres"}}},
		{"numbers with separators stay whole", "We agreed on 4,200 euros as the budget.", []fact{{"we decision:4,200 euros as the budget", "4,200 euros as the budget"}}},
		{"decimal numbers stay whole", "We decided to spend 1.5 million, then stop.", []fact{{"we decision:spend 1.5 million", "spend 1.5 million"}}},
		{"we've settled on", "We've settled on the blue logo", []fact{{"we decision:the blue logo", "the blue logo"}}},
		{"we agreed on, cut at because", "We agreed on weekly releases because it is simpler", []fact{{"we decision:weekly releases", "weekly releases"}}},
		{"we chose", "we chose plan B", []fact{{"we decision:plan b", "plan B"}}},
		{"let's go with", "Let's go with the annual plan!", []fact{{"we decision:the annual plan", "the annual plan"}}},
		{"we'll go with", "we'll go with option 2", []fact{{"we decision:option 2", "option 2"}}},
		{"we're going with", "We're going with Redis", []fact{{"we decision:redis", "Redis"}}},
		{"let's go with that", "let's go with that", nil},
		{"did we decide?", "Have we decided on the venue?", nil},
		// no facts
		{"empty", "", nil},
		{"whitespace", " \n\t ", nil},
		{"other language", "Je m'appelle Marie et j'habite à Paris.", nil},
		{"other language question", "¿Cuál es mi nombre?", nil},
		{"unrelated", "What is the weather tomorrow?", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Extract(context.Background(), human(tc.text))
			require.NoError(t, err)
			want := tc.want
			if want == nil {
				want = []fact{}
			}
			assert.Equal(t, want, facts(got), "text %q", tc.text)
			for _, c := range got {
				assert.Equal(t, []int{0}, c.Sources)
				assert.NotEmpty(t, c.Rule)
			}
		})
	}
}

func TestPatterns_RuleNames(t *testing.T) {
	p := newPatterns(t)
	for _, tc := range []struct{ text, rule string }{
		{"my name is Ana", "name/my-name-is"},
		{"I'm Ana", "name/i-am"},
		{"call me Ana", "name/call-me"},
		{"I live in Lisbon", "location/live-in"},
		{"I'm from Lisbon", "location/from"},
		{"I moved to Lisbon", "location/moved-to"},
		{"I'm based in Lisbon", "location/based-in"},
		{"I work as a nurse", "job/work-as"},
		{"I'm a nurse", "job/i-am-a"},
		{"I work at Acme", "employer/work-at"},
		{"I like tea", "preference/like"},
		{"I adore tea", "preference/love"},
		{"we settled on tea", "decision/decided"},
		{"we picked tea", "decision/chose"},
		{"let's go with tea", "decision/go-with"},
		{"we're going with tea", "decision/going-with"},
	} {
		got, err := p.Extract(context.Background(), human(tc.text))
		require.NoError(t, err)
		require.Len(t, got, 1, tc.text)
		assert.Equal(t, tc.rule, got[0].Rule, tc.text)
	}
}

func TestPatterns_Roles(t *testing.T) {
	p := newPatterns(t)
	msgs := []llms.ChatMessage{
		llms.SystemChatMessage{Content: "I'm a helpful assistant. My name is Bot."},
		llms.HumanChatMessage{Content: "I'm Ana. Which database?"},
		llms.AIChatMessage{Content: "I'm Claude, I live in Datacenter One. Let's go with Postgres."},
		llms.HumanChatMessage{Content: "   "},
		llms.HumanChatMessage{Content: "Great, we decided on Postgres then."},
	}
	got, err := p.Extract(context.Background(), msgs)
	require.NoError(t, err)
	// Facts about the user come from human messages only; decisions from
	// both sides, merged when they agree.
	assert.Equal(t, []fact{{"user name", "Ana"}, {"we decision:postgres", "Postgres"}}, facts(got))
	assert.Equal(t, []int{1}, got[0].Sources)
	assert.Equal(t, []int{2, 4}, got[1].Sources)
	assert.Equal(t, "decision/go-with", got[1].Rule)
}

func TestPatterns_OrderAndDeterminism(t *testing.T) {
	p := newPatterns(t)
	msgs := []llms.ChatMessage{
		llms.HumanChatMessage{Content: "I love tea. My name is Ana and I live in Lisbon."},
		llms.HumanChatMessage{Content: "I work at Acme; I'm a designer."},
	}
	first, err := p.Extract(context.Background(), msgs)
	require.NoError(t, err)
	assert.Equal(t, []fact{
		{"user preference:tea", "loves tea"},
		{"user name", "Ana"},
		{"user location", "Lisbon"},
		{"user employer", "Acme"},
		{"user job", "designer"},
	}, facts(first))
	for range 20 {
		again, err := p.Extract(context.Background(), msgs)
		require.NoError(t, err)
		assert.Equal(t, first, again)
	}
}

func TestPatterns_ValueLength(t *testing.T) {
	long := "I love " + strings.Repeat("very ", 40) + "long walks"
	p := newPatterns(t)
	got, err := p.Extract(context.Background(), human(long))
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.LessOrEqual(t, len([]rune(got[0].Value)), extract.DefaultMaxValueLength+len("loves "))
	assert.False(t, strings.HasSuffix(got[0].Value, " "))
	assert.True(t, strings.HasSuffix(got[0].Value, "very"), "cut at a word boundary: %q", got[0].Value)

	short := newPatterns(t, extract.WithMaxValueLength(10))
	got, err = short.Extract(context.Background(), human("We decided to migrate everything to Kubernetes"))
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "migrate", got[0].Value)
}

func TestPatterns_UserRules(t *testing.T) {
	pet := extract.Rule{
		Name:      "pet",
		Pattern:   regexp.MustCompile(`(?i)\bmy\s+(?P<kind>dog|cat)(?:'s|\s+is)\s+(?:called|named)\s+(?P<value>\w+)`),
		Attribute: "pet:${kind}",
		Value:     "${value} (a ${kind})",
	}
	budget := extract.Rule{
		Name:      "budget",
		Pattern:   regexp.MustCompile(`(?i)\bbudget\s+is\s+(?P<value>\$?\d[\d,]*)`),
		Subject:   "Project Alpha",
		Attribute: "budget",
		Roles:     []llms.ChatMessageType{llms.ChatMessageTypeAI},
		Filter: func(v string) (string, bool) {
			v = strings.ReplaceAll(v, ",", "")
			return v, v != "$0"
		},
	}
	t.Run("added to the built-in rules", func(t *testing.T) {
		p := newPatterns(t, extract.WithRules(pet, budget))
		got, err := p.Extract(context.Background(), []llms.ChatMessage{
			llms.HumanChatMessage{Content: "I'm Ana. My DOG is called Rex. The budget is $5,000."},
			llms.AIChatMessage{Content: "Noted: the budget is $5,000."},
		})
		require.NoError(t, err)
		assert.Equal(t, []fact{
			{"user name", "Ana"},
			{"user pet:dog", "Rex (a DOG)"},
			{"project_alpha budget", "$5000"},
		}, facts(got))
		assert.Equal(t, "pet", got[1].Rule)
		assert.Equal(t, []int{1}, got[2].Sources, "the budget rule reads AI messages only")
	})
	t.Run("filter rejects", func(t *testing.T) {
		p := newPatterns(t, extract.WithRules(budget))
		got, err := p.Extract(context.Background(), []llms.ChatMessage{llms.AIChatMessage{Content: "The budget is $0."}})
		require.NoError(t, err)
		assert.Empty(t, got)
	})
	t.Run("without the default rules", func(t *testing.T) {
		p := newPatterns(t, extract.WithoutDefaultRules(), extract.WithRules(pet))
		got, err := p.Extract(context.Background(), human("I'm Ana. My cat is named Tom."))
		require.NoError(t, err)
		assert.Equal(t, []fact{{"user pet:cat", "Tom (a cat)"}}, facts(got))
		require.Len(t, p.Rules(), 1)
		assert.Equal(t, "pet", p.Rules()[0].Name)
	})
}

func TestNewPatterns_InvalidOptions(t *testing.T) {
	re := regexp.MustCompile(`(?P<value>x)`)
	cases := []struct {
		name string
		opts []extract.PatternOption
		want string
	}{
		{"nil option", []extract.PatternOption{nil}, "option 1 of 1 is nil"},
		{"no name", []extract.PatternOption{extract.WithRules(extract.Rule{Pattern: re, Attribute: "a"})}, "WithRules: rule 1 has no name"},
		{"duplicate name", []extract.PatternOption{extract.WithRules(extract.Rule{Name: "name/i-am", Pattern: re, Attribute: "a"})}, `rule "name/i-am": the name is used twice`},
		{"no pattern", []extract.PatternOption{extract.WithRules(extract.Rule{Name: "r", Attribute: "a"})}, `rule "r" has no pattern`},
		{"no value group", []extract.PatternOption{extract.WithRules(extract.Rule{Name: "r", Pattern: regexp.MustCompile(`(x)`), Attribute: "a"})}, `rule "r": the pattern has no group named "value"`},
		{"no attribute", []extract.PatternOption{extract.WithRules(extract.Rule{Name: "r", Pattern: re, Attribute: " "})}, `rule "r" has no attribute`},
		{"blank subject", []extract.PatternOption{extract.WithRules(extract.Rule{Name: "r", Pattern: re, Attribute: "a", Subject: " \t"})}, `rule "r": the subject is blank`},
		{"max value length", []extract.PatternOption{extract.WithMaxValueLength(3)}, "WithMaxValueLength(3)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := extract.NewPatterns(tc.opts...)
			require.Error(t, err)
			assert.Nil(t, p)
			assert.True(t, errors.Is(err, extract.ErrInvalidOption))
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestPatterns_ContextAndNil(t *testing.T) {
	p := newPatterns(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := p.Extract(ctx, human("I'm Ana"))
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, got)

	got, err = p.Extract(context.Background(), []llms.ChatMessage{nil, llms.HumanChatMessage{Content: "I'm Ana"}})
	require.NoError(t, err)
	assert.Equal(t, []fact{{"user name", "Ana"}}, facts(got))
	assert.Equal(t, []int{1}, got[0].Sources)

	got, err = p.Extract(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestPatterns_Concurrent(t *testing.T) {
	p := newPatterns(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				got, err := p.Extract(context.Background(), human("I'm Ana and I live in Lisbon"))
				if !assert.NoError(t, err, "goroutine %d", i) {
					return
				}
				assert.Equal(t, []fact{{"user name", "Ana"}, {"user location", "Lisbon"}}, facts(got))
			}
		}()
	}
	wg.Wait()
}

func TestNormalize(t *testing.T) {
	s, a := extract.Normalize("  The  User ", " Preference:Green   Tea ")
	assert.Equal(t, "the_user", s)
	assert.Equal(t, "preference:green tea", a)
	assert.Equal(t, "user name", extract.Candidate{Subject: "User", Attribute: "NAME"}.Key())
}
