package recallindex

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The day index answers a day with that day's units and a month with
// the month's, in each unit's own location, and forgets nothing it was
// given until reset; a unit with no time is on no day.
func TestDayIndex(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		paris = time.FixedZone("CEST", 2*3600)
	}
	var x dayIndex
	x.add(time.Date(2023, time.June, 3, 10, 0, 0, 0, time.UTC), 1)
	x.add(time.Date(2023, time.June, 3, 23, 30, 0, 0, time.UTC), 2) // 4 June in Paris, but read in UTC
	x.add(time.Date(2023, time.June, 4, 0, 30, 0, 0, paris), 3)     // 3 June in UTC, 4 June in its own zone
	x.add(time.Date(2023, time.June, 30, 9, 0, 0, 0, time.UTC), 4)
	x.add(time.Date(2023, time.July, 1, 9, 0, 0, 0, time.UTC), 5)
	x.add(time.Time{}, 6)
	got := func(d Day) []int64 {
		var ids []int64
		x.each(d, func(id int64) { ids = append(ids, id) })
		slices.Sort(ids)
		return ids
	}
	assert.Equal(t, []int64{1, 2}, got(Day{2023, time.June, 3}))
	assert.Equal(t, []int64{3}, got(Day{2023, time.June, 4}), "a time's own location")
	assert.Equal(t, []int64{1, 2, 3, 4}, got(Day{2023, time.June, 0}), "a month")
	assert.Empty(t, got(Day{2022, time.June, 3}))
	assert.Equal(t, 5, x.n, "no entry for the zero time")
	assert.False(t, x.stale(5))
	for i := range 100 {
		x.add(time.Date(2024, time.May, 1, 0, 0, 0, 0, time.UTC), int64(100+i))
	}
	assert.True(t, x.stale(10), "105 entries for 10 live units: worth rebuilding")
	assert.False(t, x.stale(60))
	x.reset()
	assert.Empty(t, got(Day{2023, time.June, 3}))
	assert.True(t, Day{2023, time.June, 0}.Matches(time.Date(2023, time.June, 30, 9, 0, 0, 0, time.UTC)))
	assert.False(t, Day{2023, time.June, 3}.Matches(time.Time{}))
}
