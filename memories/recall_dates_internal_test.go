package memories

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestParseQueryDate(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want queryDate
		rest string
		ok   bool
	}{
		{"What did Gina find on 1 February, 2023?", queryDate{2023, time.February, 1}, "What did Gina find on ?", true},
		{"What happened on 8th of May 2023", queryDate{2023, time.May, 8}, "What happened on ", true},
		{"Where was the picture shared on December 1, 2023 taken?", queryDate{2023, time.December, 1}, "Where was the picture shared on  taken?", true},
		{"shared on December 1,2023 taken", queryDate{2023, time.December, 1}, "shared on  taken", true},
		{"sept 3rd 2022 plans", queryDate{2022, time.September, 3}, " plans", true},
		{"the 2023-05-08 meeting", queryDate{2023, time.May, 8}, "the  meeting", true},
		{"What was John doing in August 2023?", queryDate{2023, time.August, 0}, "What was John doing in ?", true},
		{"in May, 2022 we moved", queryDate{2022, time.May, 0}, "in  we moved", true},
		{"31 June 2023", queryDate{2023, time.June, 0}, "31 ", true}, // no such day: its month
		{"2023-13-01", queryDate{}, "", false},
		{"May I ask about 2023?", queryDate{}, "", false},
		{"no date here", queryDate{}, "", false},
		{"", queryDate{}, "", false},
	} {
		t.Run(tc.q, func(t *testing.T) {
			got, rest, ok := parseQueryDate(tc.q)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
			if tc.ok {
				assert.Equal(t, tc.rest, rest)
			}
		})
	}
}

func TestQueryDateMatchesInTheTimesOwnZone(t *testing.T) {
	d := queryDate{2023, time.May, 8}
	tokyo := time.FixedZone("JST", 9*3600)
	assert.True(t, d.matches(time.Date(2023, 5, 8, 0, 30, 0, 0, tokyo)), "8 May in Tokyo, 7 May in UTC: the speaker's date")
	assert.False(t, d.matches(time.Date(2023, 5, 9, 0, 30, 0, 0, tokyo)))
	assert.False(t, d.matches(time.Time{}), "an undated exchange matches no date")
	assert.True(t, queryDate{2023, time.May, 0}.matches(time.Date(2023, 5, 31, 23, 0, 0, 0, time.UTC)))
	assert.False(t, queryDate{2023, time.May, 0}.matches(time.Date(2024, 5, 31, 23, 0, 0, 0, time.UTC)))
}
