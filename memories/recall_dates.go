package memories

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/memstack/memstack/memories/internal/recallindex"
)

// Dated recall: how much an exchange saved on the date a question names
// gains (see Recall, "Dates in the question"), as a share of the best
// hit's score.
const (
	// RecallDayBoost is added, times the best hit's score, to the score
	// of every exchange saved on the day the question names.
	RecallDayBoost = 1.0
	// RecallMonthBoost is added, times the best hit's score, to the score
	// of every exchange saved in the month the question names (when it
	// names a month without a day).
	RecallMonthBoost = 0.3
)

// queryDate is a date named in a question: a day, or a month (day 0).
type queryDate struct {
	year  int
	month time.Month
	day   int
}

// asDay is d as the recall engine reads it.
func (d queryDate) asDay() recallindex.Day {
	return recallindex.Day{Year: d.year, Month: d.month, Day: d.day}
}

// matches reports whether t falls on the day (or in the month) d names,
// in t's own location.
func (d queryDate) matches(t time.Time) bool { return d.asDay().Matches(t) }

var monthNames = map[string]time.Month{}

func init() {
	for m := time.January; m <= time.December; m++ {
		name := strings.ToLower(m.String())
		monthNames[name] = m
		monthNames[name[:3]] = m
	}
	monthNames["sept"] = time.September
}

const monthPattern = `(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?`

// The date forms a question may use, tried in order: "8 May 2023" (also
// "8th of May, 2023"), "May 8, 2023" (also "May 8th 2023"), "2023-05-08",
// and a month alone, "May 2023" (also "May, 2023").
var (
	reDayMonthYear = regexp.MustCompile(`(?i)\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?` + monthPattern + `,?\s*(\d{4})\b`)
	reMonthDayYear = regexp.MustCompile(`(?i)\b` + monthPattern + `\s+(\d{1,2})(?:st|nd|rd|th)?(?:,\s*|\s+)(\d{4})\b`)
	reISODate      = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
	reMonthYear    = regexp.MustCompile(`(?i)\b` + monthPattern + `,?\s+(\d{4})\b`)
)

// parseQueryDate finds the first date q names (see the patterns above) and
// returns it with q less the date's text. A day that does not exist
// ("31 June 2023") is read as its month.
func parseQueryDate(q string) (queryDate, string, bool) {
	if !hasYear(q) {
		return queryDate{}, "", false // every form names a year: skip the patterns
	}
	try := func(re *regexp.Regexp, year, month, day int) (queryDate, string, bool) {
		m := re.FindStringSubmatchIndex(q)
		if m == nil {
			return queryDate{}, "", false
		}
		group := func(g int) string { return q[m[2*g]:m[2*g+1]] }
		var d queryDate
		d.year, _ = strconv.Atoi(group(year))
		mon := group(month)
		if n, err := strconv.Atoi(mon); err == nil {
			d.month = time.Month(n)
		} else {
			d.month = monthNames[strings.ToLower(mon)]
		}
		if day > 0 {
			d.day, _ = strconv.Atoi(group(day))
		}
		if d.month < time.January || d.month > time.December {
			return queryDate{}, "", false
		}
		if d.day != 0 {
			t := time.Date(d.year, d.month, d.day, 0, 0, 0, 0, time.UTC)
			if t.Day() != d.day || t.Month() != d.month {
				return queryDate{}, "", false
			}
		}
		return d, q[:m[0]] + q[m[1]:], true
	}
	if d, rest, ok := try(reDayMonthYear, 3, 2, 1); ok {
		return d, rest, true
	}
	if d, rest, ok := try(reMonthDayYear, 3, 1, 2); ok {
		return d, rest, true
	}
	if d, rest, ok := try(reISODate, 1, 2, 3); ok {
		return d, rest, true
	}
	return try(reMonthYear, 2, 1, 0)
}

// hasYear reports whether q holds four digits in a row, as every date form
// parseQueryDate reads does.
func hasYear(q string) bool {
	run := 0
	for i := 0; i < len(q); i++ {
		if q[i] >= '0' && q[i] <= '9' {
			if run++; run == 4 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}
