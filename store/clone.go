package store

import "github.com/memstack/memstack/store/internal/kit"

func cloneRecords(rs []Record) []Record {
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = Record{Seq: r.Seq, Message: kit.CloneMessage(r.Message), Time: r.Time}
	}
	return out
}
