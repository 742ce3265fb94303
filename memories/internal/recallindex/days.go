package recallindex

import "time"

// Day is a date a question names: a calendar day, or a whole month (Day
// 0). A unit is on it when its time, read in its own location, falls on
// that day (in that month).
type Day struct {
	Year  int
	Month time.Month
	Day   int
}

// Matches reports whether t falls on d (in d's month, for a month), in
// t's own location. The zero time falls on no day.
func (d Day) Matches(t time.Time) bool {
	if t.IsZero() {
		return false
	}
	y, m, day := t.Date()
	return y == d.Year && m == d.Month && (d.Day == 0 || day == d.Day)
}

// dayIndex finds the units saved on a day without a scan of the history:
// each unit's ID (a conversation's unit Seq, or a scope's doc ID) under
// the day its time falls on, in its own location, as Day.Matches reads
// it. Entries are only added: an ID whose unit is gone since stays until
// the index is rebuilt, so a reader checks each ID it gets (and may get
// one twice). It is guarded by its owner's lock.
type dayIndex struct {
	days map[int32][]int64
	n    int // entries, live or not
}

// dayKey is t's day, in t's location, as one number.
func dayKey(t time.Time) int32 {
	y, m, d := t.Date()
	return int32(y*10000 + int(m)*100 + d)
}

// add records id as a unit of t's day.
func (x *dayIndex) add(t time.Time, id int64) {
	if t.IsZero() {
		return
	}
	if x.days == nil {
		x.days = make(map[int32][]int64)
	}
	k := dayKey(t)
	x.days[k] = append(x.days[k], id)
	x.n++
}

// stale reports whether the index holds many more entries than live
// units (live of them), and is worth rebuilding.
func (x *dayIndex) stale(live int) bool { return x.n > 2*live+64 }

// reset empties the index.
func (x *dayIndex) reset() { *x = dayIndex{} }

// each calls f with the IDs recorded on d (on every day of its month, for
// a month): O(what the date holds), not O(history).
func (x *dayIndex) each(d Day, f func(id int64)) {
	first, last := d.Day, d.Day
	if d.Day == 0 {
		first, last = 1, 31
	}
	for day := first; day <= last; day++ {
		for _, id := range x.days[int32(d.Year*10000+int(d.Month)*100+day)] {
			f(id)
		}
	}
}

// keys returns d as a range of indexkit.DayKey numbers: the day, or the
// month's days.
func (d Day) keys() (from, to int32) {
	base := int32(d.Year*10000 + int(d.Month)*100)
	if d.Day == 0 {
		return base, base + 31
	}
	return base + int32(d.Day), base + int32(d.Day)
}
