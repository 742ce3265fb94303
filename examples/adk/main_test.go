package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"
)

func TestRunRecallsThenForgets(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, run(&buf))
	out := buf.String()

	// Times are the events' own: any RFC 3339 time in UTC or with an offset.
	const ts = `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)`
	// Key passages of the output, in the order they must appear.
	want := []struct{ name, pattern string }{
		{"session 1 header", `== Session 1: the user settles something ==\n`},
		{"user settles", `\[session-1\] user: Our offsite is in Lisbon on 14 May\.\n`},
		{"nothing to preload yet", `  \(model received from memory: nothing\)\n`},
		{"agent notes it", `\[session-1\] assistant: Noted: the offsite is in Lisbon on 14 May\.\n`},
		{"session added", `Added session "session-1" to memory \(2 events\)\.\n`},

		{"session 2 header", `== Session 2: a new session recalls it ==\n`},
		{"user asks", `\[session-2\] user: Where is our offsite\?\n`},
		{"preloaded memory", `  \(model received from memory, in its system instruction:\n` +
			`     Time: ` + ts + `\n` +
			`     user: Our offsite is in Lisbon on 14 May\.\n` +
			`     Time: ` + ts + `\n` +
			`     assistant: Noted: the offsite is in Lisbon on 14 May\.\n` +
			`  \)\n`},
		{"recalled answer", `\[session-2\] assistant: Your offsite is in Lisbon on 14 May, as you told me in an earlier conversation\.\n`},
		{"search finds both turns", `SearchMemory\("Where is our offsite\?"\): 2 entries\n` +
			`  - user at ` + ts + `, session_id=session-1: Our offsite is in Lisbon on 14 May\.\n` +
			`  - assistant at ` + ts + `, session_id=session-1: Noted: the offsite is in Lisbon on 14 May\.\n`},

		{"forget header", `== Forgetting the user ==\n`},
		{"export before forgetting", `ExportUser\("offsite-planner", "ana"\): 5 identities\n` +
			`  - memory of session "session-1": 2 messages, 2 states\n` +
			`  - session "session-1" \(its events\): 2 messages, 0 states\n` +
			`  - session "session-1" \(its record\): 0 messages, 1 states\n` +
			`  - session "session-2" \(its events\): 2 messages, 0 states\n` +
			`  - session "session-2" \(its record\): 0 messages, 1 states\n`},
		{"forgotten", `ForgetUser\("offsite-planner", "ana"\) removed 5 identities\.\n`},
		{"sessions gone too", `Sessions left for "ana": 0\n`},

		{"session 3 header", `== Session 3: the same question, nothing to recall ==\n`},
		{"user asks again", `\[session-3\] user: Where is our offsite\?\n`},
		{"nothing preloaded", `  \(model received from memory: nothing\)\n`},
		{"agent does not know", `\[session-3\] assistant: I don't know where your offsite is: nothing about it was recalled\.\n`},
		{"search finds nothing", `SearchMemory\("Where is our offsite\?"\): 0 entries\n`},
	}
	rest := out
	for _, w := range want {
		loc := regexp.MustCompile(w.pattern).FindStringIndex(rest)
		if !assert.NotNil(t, loc, "%s: %q not found (in order) in output:\n%s", w.name, w.pattern, out) {
			continue
		}
		rest = rest[loc[1]:]
	}
	assert.Empty(t, rest, "nothing after the last search")
	assert.Equal(t, 1, strings.Count(out, "Lisbon on 14 May, as you told me"), "only session 2 recalls the offsite")
}

// The model's answer to the question comes from its request, not from
// its script: given another past conversation it answers with it.
func TestScriptedModelAnswersFromThePreloadedMemory(t *testing.T) {
	ask := func(t *testing.T, system string) string {
		t.Helper()
		var buf bytes.Buffer
		req := &model.LLMRequest{
			Contents: []*genai.Content{genai.NewContentFromText(question, genai.RoleUser)},
			Config:   &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText(system, genai.RoleUser)},
		}
		var answers []string
		for resp, err := range newScriptedModel(&buf).GenerateContent(context.Background(), req, false) {
			require.NoError(t, err)
			answers = append(answers, partsText(resp.Content))
		}
		require.Len(t, answers, 1)
		return answers[0]
	}
	assert.Equal(t, "Your offsite is in Porto on 2 June, as you told me in an earlier conversation.",
		ask(t, "Be brief.\n\n<PAST_CONVERSATIONS>\nuser: Our offsite is in Porto on 2 June.\n</PAST_CONVERSATIONS>"))
	assert.Equal(t, "I don't know where your offsite is: nothing about it was recalled.",
		ask(t, "Be brief."))
	// What the assistant said is not what the user settled.
	assert.Equal(t, "I don't know where your offsite is: nothing about it was recalled.",
		ask(t, "<PAST_CONVERSATIONS>\nassistant: the offsite is in Rome.\n</PAST_CONVERSATIONS>"))
}

func TestScriptedModelRefusesWhatIsNotInTheScript(t *testing.T) {
	req := &model.LLMRequest{Contents: []*genai.Content{genai.NewContentFromText("Book a hotel.", genai.RoleUser)}}
	var errs []error
	for _, err := range newScriptedModel(&bytes.Buffer{}).GenerateContent(context.Background(), req, false) {
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	assert.ErrorContains(t, errs[0], `no reply for "Book a hotel."`)
}
