package extract

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
)

// Shared pattern pieces. The cue of every built-in rule is matched without
// regard to case; where a value must be a proper noun (names after "I'm",
// places, employers) the value's case is checked by the rule's Filter or
// by a case-sensitive part of the pattern.
const (
	reIm    = `(?:\bi(?:'|’)m|\bi\s+am)`                            // I'm, I am
	reValue = `(?P<value>(?:\d[.,]\d|[^.;:!?,\n])+)`                // up to the end of the clause ("4,200" and "1.5" stay whole)
	reWord  = `[\p{L}][\p{L}'’-]*`                                  // a word of letters
	reCapW  = `\p{Lu}\p{Ll}[\p{L}'’-]*`                             // a capitalised word: Ana, O'Neil
	reName  = `(?P<value>` + reCapW + `(?:\s+` + reCapW + `){0,2})` // 1 to 3 capitalised words
)

// DefaultRules returns (a fresh copy of) the built-in English rule set:
//
//   - name (subject user): "my name is X" / "my name's X" (1 to 3 words,
//     any case), "I'm X" / "I am X" and "call me X" (1 to 3 capitalised
//     words; common adjectives, states, demonyms, weekdays and words such
//     as "Sure", "Back" or "Going" are not names, so "I'm tired", "I'm Not
//     sure" and "call me back" give nothing);
//   - location: "I live in X", "I'm from X" / "I come from X", "I moved to
//     X" / "I relocated to X", "I'm based in X"; X must be a proper noun
//     (capitalised words, joined by particles such as "of" or "de": "New
//     York", "Rio de Janeiro", "the UK"), so "I live in a flat" gives
//     nothing;
//   - job: "I work as (a|an) X" and "I'm a(n) X", X being up to four words
//     cut before a preposition ("I'm a nurse at the clinic" gives
//     "nurse"); "I'm a bit tired", "I'm a big fan of ..." give nothing;
//   - employer: "I work at X" / "I work for X", X a proper noun. It has its
//     own attribute so that an employer never supersedes a job;
//   - preference:<topic>: "I like / love / enjoy / prefer / hate / dislike /
//     don't like / can't stand X", with optional adverbs ("I really
//     like"); the value is "likes X", "loves X"... and the topic is X, so
//     "I hate X" later supersedes "I love X". Pronouns and clauses (it,
//     that, you, when...) are not topics; "I'd like" is a request, not a
//     preference, and is not matched;
//   - decision:<topic> (subject we, read in human and AI messages): "we
//     decided / settled / agreed on|to|that X", "we chose / picked / went
//     with X", "let's go with X", "we'll go with X", "we're going with X".
//     The topic is X itself: pattern rules cannot tell what a decision is
//     about, so decisions never supersede each other (the LLM extractor
//     can name topics).
//
// Other languages are not covered: their messages give no candidates.
func DefaultRules() []Rule {
	both := []llms.ChatMessageType{llms.ChatMessageTypeHuman, llms.ChatMessageTypeAI}
	rules := []Rule{
		{
			Name:      "name/my-name-is",
			Pattern:   regexp.MustCompile(`(?i)\bmy\s+name(?:\s+is|(?:'|’)s)\s+(?P<value>` + reWord + `(?:\s+` + reWord + `){0,2})`),
			Attribute: AttrName,
			Filter:    nameFilter(false),
		},
		{
			Name:      "name/i-am",
			Pattern:   regexp.MustCompile(`(?i:` + reIm + `)\s+` + reName),
			Attribute: AttrName,
			Filter:    nameFilter(true),
		},
		{
			Name:      "name/call-me",
			Pattern:   regexp.MustCompile(`(?i:\bcall\s+me)\s+` + reName),
			Attribute: AttrName,
			Filter:    nameFilter(true),
		},
		{
			Name:      "location/live-in",
			Pattern:   regexp.MustCompile(`(?i)\bi\s+(?:currently\s+|now\s+|still\s+|actually\s+)?live\s+in\s+` + reValue),
			Attribute: AttrLocation,
			Filter:    properNoun,
		},
		{
			Name:      "location/from",
			Pattern:   regexp.MustCompile(`(?i)(?:` + reIm + `|\bi\s+come)\s+(?:originally\s+)?from\s+` + reValue),
			Attribute: AttrLocation,
			Filter:    properNoun,
		},
		{
			Name:      "location/moved-to",
			Pattern:   regexp.MustCompile(`(?i)\bi(?:(?:'|’)ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)\s+to\s+` + reValue),
			Attribute: AttrLocation,
			Filter:    properNoun,
		},
		{
			Name:      "location/based-in",
			Pattern:   regexp.MustCompile(`(?i)` + reIm + `\s+(?:currently\s+|now\s+)?based\s+in\s+` + reValue),
			Attribute: AttrLocation,
			Filter:    properNoun,
		},
		{
			Name:      "job/work-as",
			Pattern:   regexp.MustCompile(`(?i)\bi\s+(?:currently\s+|now\s+|still\s+)?work\s+as\s+(?:an?\s+|the\s+)?` + reValue),
			Attribute: AttrJob,
			Filter:    jobFilter,
		},
		{
			Name:      "job/i-am-a",
			Pattern:   regexp.MustCompile(`(?i)` + reIm + `\s+(?:currently\s+|now\s+|still\s+)?an?\s+` + reValue),
			Attribute: AttrJob,
			Filter:    jobFilter,
		},
		{
			Name:      "employer/work-at",
			Pattern:   regexp.MustCompile(`(?i)\bi\s+(?:currently\s+|now\s+|still\s+)?work\s+(?:at|for)\s+` + reValue),
			Attribute: AttrEmployer,
			Filter:    properNoun,
		},
	}
	prefs := []struct{ name, cue, verb string }{
		{"like", `like`, "likes"},
		{"love", `(?:love|adore)`, "loves"},
		{"enjoy", `enjoy`, "enjoys"},
		{"prefer", `prefer`, "prefers"},
		{"hate", `(?:hate|detest)`, "hates"},
		{"dislike", `(?:dislike|(?:don(?:'|’)?t|do\s+not)\s+(?:really\s+)?like)`, "dislikes"},
		{"cannot-stand", `(?:can(?:'|’)?t|cannot|can\s+not)\s+stand`, "cannot stand"},
	}
	for _, p := range prefs {
		rules = append(rules, Rule{
			Name:      "preference/" + p.name,
			Pattern:   regexp.MustCompile(`(?i)\bi\s+(?:really\s+|absolutely\s+|also\s+|just\s+|totally\s+|truly\s+|do\s+|much\s+|generally\s+|usually\s+)?` + p.cue + `\s+` + reValue),
			Attribute: AttrPreference + ":${value}",
			Value:     p.verb + " ${value}",
			Filter:    topicFilter,
		})
	}
	rules = append(rules,
		Rule{
			Name:      "decision/decided",
			Pattern:   regexp.MustCompile(`(?i)\bwe(?:(?:'|’)ve|\s+have)?\s+(?:finally\s+|just\s+|already\s+|now\s+)?(?:decided|settled|agreed)\s+(?:on|upon|to|that)\s+` + reValue),
			Subject:   SubjectWe,
			Attribute: AttrDecision + ":${value}",
			Roles:     both,
			Filter:    topicFilter,
		},
		Rule{
			Name:      "decision/chose",
			Pattern:   regexp.MustCompile(`(?i)\bwe(?:(?:'|’)ve|\s+have)?\s+(?:finally\s+|just\s+|already\s+)?(?:chose|chosen|picked|selected|went\s+with|gone\s+with)\s+` + reValue),
			Subject:   SubjectWe,
			Attribute: AttrDecision + ":${value}",
			Roles:     both,
			Filter:    topicFilter,
		},
		Rule{
			Name:      "decision/go-with",
			Pattern:   regexp.MustCompile(`(?i)(?:\blet(?:'|’)s|\blet\s+us|\bwe(?:(?:'|’)ll|\s+will)|\bwe(?:(?:'|’)re|\s+are)\s+going\s+to)\s+go\s+with\s+` + reValue),
			Subject:   SubjectWe,
			Attribute: AttrDecision + ":${value}",
			Roles:     both,
			Filter:    topicFilter,
		},
		Rule{
			Name:      "decision/going-with",
			Pattern:   regexp.MustCompile(`(?i)\bwe(?:(?:'|’)re|\s+are)\s+going\s+with\s+` + reValue),
			Subject:   SubjectWe,
			Attribute: AttrDecision + ":${value}",
			Roles:     both,
			Filter:    topicFilter,
		},
	)
	return rules
}

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// notNames are capitalised words that follow "I'm" or "call me" without
// being names.
var notNames = set(
	// states, feelings, adjectives
	"sorry", "sure", "fine", "good", "great", "ok", "okay", "tired", "busy", "happy", "sad",
	"glad", "afraid", "excited", "curious", "confused", "lost", "hungry", "thirsty", "sick",
	"ill", "well", "ready", "done", "new", "old", "available", "interested", "worried",
	"bored", "stuck", "stressed", "exhausted", "fed", "alright", "awesome", "amazing",
	"certain", "unsure", "aware", "able", "unable", "late", "early", "free", "home", "alone",
	"single", "married", "pregnant", "retired", "unemployed", "vegan", "vegetarian",
	"right", "wrong", "serious", "honest", "frustrated", "annoyed", "angry", "upset",
	"grateful", "thankful", "impressed", "surprised", "disappointed", "pleased", "proud",
	"nervous", "scared", "anxious", "calm", "cold", "hot", "warm", "online", "offline",
	"human", "real", "fluent", "new", "back", "here", "there", "in", "out", "on", "off", "at",
	"over", "up", "down", "away", "about", "into", "with", "from", "by", "for", "to", "of",
	// adverbs and particles
	"not", "just", "so", "very", "really", "still", "also", "already", "always", "never",
	"currently", "now", "only", "too", "quite", "pretty", "kind", "sort", "kinda", "totally",
	"actually", "probably", "definitely", "almost", "literally", "the", "a", "an", "and",
	"but", "or", "all", "no", "yes", "that", "this", "it", "what", "how", "who", "where",
	"when", "why", "afraid", "maybe", "anytime", "asap", "later", "today", "tomorrow",
	"tonight", "yesterday", "soon", "again", "please", "thanks", "thank", "hi", "hello",
	"hey", "dear", "sir", "madam", "mister", "mr", "mrs", "ms", "dr", "doctor", "god",
	// weekdays and months
	"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
	"january", "february", "march", "april", "may", "june", "july", "august", "september",
	"october", "november", "december",
	// demonyms and languages
	"american", "canadian", "mexican", "brazilian", "argentinian", "british", "english",
	"scottish", "welsh", "irish", "french", "german", "spanish", "italian", "portuguese",
	"dutch", "belgian", "swiss", "austrian", "swedish", "norwegian", "danish", "finnish",
	"polish", "czech", "russian", "ukrainian", "greek", "turkish", "israeli", "arab",
	"arabic", "persian", "indian", "pakistani", "chinese", "japanese", "korean",
	"vietnamese", "thai", "filipino", "indonesian", "australian", "african", "nigerian",
	"kenyan", "egyptian", "european", "asian", "latino", "latina", "catholic", "christian",
	"muslim", "jewish", "buddhist", "hindu", "atheist",
)

// nameStop ends a name: "my name is ana and ..." keeps "ana".
var nameStop = set("and", "but", "or", "i", "i'm", "i’m", "im", "from", "by", "so", "btw", "here",
	"the", "a", "an", "to", "in", "at", "is", "was", "with", "nice", "thanks", "thank", "please",
	"what", "whats", "what's", "how", "hi", "hello", "hey", "not", "if", "you", "your", "my",
	"also", "too", "now", "though", "then", "and", "yes", "no", "ok", "okay")

// nameFilter keeps the name's words up to the first word that cannot be
// part of a name; with capital set every kept word must be capitalised.
// The first word must not be in notNames, nor a gerund ("Going").
func nameFilter(capital bool) func(string) (string, bool) {
	return func(v string) (string, bool) {
		var kept []string
		for _, w := range strings.Fields(v) {
			lw := strings.ToLower(w)
			if nameStop[lw] || capital && !startsUpper(w) {
				break
			}
			kept = append(kept, w)
		}
		if len(kept) == 0 {
			return "", false
		}
		first := strings.ToLower(kept[0])
		if notNames[first] || strings.HasSuffix(first, "ing") && utf8.RuneCountInString(first) >= 5 {
			return "", false
		}
		return strings.Join(kept, " "), true
	}
}

func startsUpper(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	return unicode.IsUpper(r)
}

// particles may join the capitalised words of a proper noun.
var particles = set("of", "de", "da", "do", "dos", "das", "del", "della", "di", "du", "la",
	"le", "les", "los", "las", "el", "al", "and", "upon", "on", "am", "im", "an", "der",
	"den", "van", "von", "y", "e", "sur", "en", "au", "aux", "&")

// notPlaces are capitalised words that start no place or employer worth
// keeping (sentence-initial words, pronouns).
var notPlaces = set("i", "a", "an", "my", "our", "your", "his", "her", "their", "this", "that",
	"it", "here", "there", "home", "work", "school", "bed", "town",
	// departments ("I'm from Accounting")
	"accounting", "marketing", "sales", "support", "finance", "hr", "it", "legal", "engineering",
	"operations", "management", "procurement", "purchasing", "billing", "security", "admin",
	"customer", "tech", "product", "design", "research", "team")

// properNoun keeps the leading proper noun of v: an optional lower-case
// "the", then capitalised words, possibly joined by particles ("Rio de
// Janeiro", "Trinidad and Tobago"). It rejects v if that leaves nothing.
func properNoun(v string) (string, bool) {
	words := strings.Fields(v)
	var kept []string
	i := 0
	if len(words) > 1 && words[0] == "the" {
		kept = append(kept, words[0])
		i = 1
	}
	start := len(kept)
	for ; i < len(words); i++ {
		w := words[i]
		switch {
		case startsUpper(w):
			if len(kept) == start && notPlaces[strings.ToLower(w)] {
				return "", false
			}
			kept = append(kept, w)
		case len(kept) > start && particles[strings.ToLower(w)] && i+1 < len(words) && startsUpper(words[i+1]):
			kept = append(kept, w)
		default:
			i = len(words)
		}
	}
	if len(kept) == start {
		return "", false
	}
	return strings.Join(kept, " "), true
}

// jobStop ends a job title: "nurse at the clinic" keeps "nurse".
var jobStop = set("at", "in", "for", "with", "from", "on", "by", "and", "but", "or", "since",
	"because", "who", "which", "that", "so", "here", "there", "now", "currently", "too", "as",
	"of", "to", "near", "during", "until", "when", "while", "if", "then", "also", "again",
	"myself", "these", "those", "this", "today", "anymore", "lately")

// notJobs are first words after "I'm a(n)" that start no job title.
var notJobs = set("bit", "little", "lot", "tad", "fan", "big", "huge", "massive", "bad",
	"good", "great", "quick", "fast", "slow", "new", "first", "second", "third", "last",
	"person", "human", "beginner", "novice", "newbie", "vegetarian", "vegan", "kind", "sort",
	"type", "total", "complete", "real", "nice", "pretty", "very", "really", "huge", "fan",
	"mother", "father", "mom", "mum", "dad", "parent", "wife", "husband", "man", "woman",
	"guy", "girl", "boy", "kid", "child", "adult", "fan", "believer", "morning", "night",
	"early", "late", "heavy", "light", "long", "short", "proud", "happy", "bot", "robot",
	"member", "part", "customer", "client", "user", "friend", "couple", "few", "means",
	"hurry", "rush", "mess", "fool", "idiot", "genius", "big", "small", "tiny", "fair",
	"true", "firm", "strong", "weak", "non", "native", "speaker", "citizen", "resident",
	"stranger", "visitor", "tourist", "guest", "team", "group", "pair", "whole", "result")

// jobFilter keeps up to four words of a job title, cut before a
// preposition, a clause word or a later gerund ("developer working on
// ..."), and rejects titles that start with a word
// of notJobs or contain no letters.
func jobFilter(v string) (string, bool) {
	var kept []string
	for _, w := range strings.Fields(v) {
		lw := strings.ToLower(w)
		if jobStop[lw] || len(kept) == 4 || len(kept) > 0 && strings.HasSuffix(lw, "ing") {
			break
		}
		kept = append(kept, w)
	}
	if len(kept) == 0 || notJobs[strings.ToLower(kept[0])] {
		return "", false
	}
	return strings.Join(kept, " "), true
}

// notTopics are first words of a value that is no topic: pronouns and
// clause words ("I love it", "I hate when ...", "let's go with that").
var notTopics = set("it", "that", "this", "them", "you", "those", "these", "him", "her",
	"me", "us", "what", "when", "how", "where", "why", "who", "which", "if", "whatever",
	"whenever", "everything", "nothing", "something", "anything", "yours", "one", "so",
	"too", "a", "an", "the", "not", "no", "yes", "whether", "doing", "having", "being",
	"about", "with", "because", "your", "disagree")

// notTopicPrefixes start values that are figures of speech, not
// preferences ("I hate to say it", "I like the idea").
var notTopicPrefixes = []string{"to say", "to admit", "to ask", "to bother", "to interrupt",
	"to tell", "to hear", "to think", "to be honest", "the fact", "the idea", "the way"}

// topicFilter rejects values that start with a pronoun, a clause word or
// a figure of speech, or are a single article.
func topicFilter(v string) (string, bool) {
	words := strings.Fields(v)
	if len(words) == 0 {
		return "", false
	}
	first := strings.ToLower(words[0])
	if notTopics[first] && !(len(words) > 1 && (first == "a" || first == "an" || first == "the")) {
		return "", false
	}
	lv := strings.ToLower(v)
	for _, p := range notTopicPrefixes {
		if lv == p || strings.HasPrefix(lv, p+" ") {
			return "", false
		}
	}
	return v, true
}
